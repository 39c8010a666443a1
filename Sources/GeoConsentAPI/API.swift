import GeoDBus

/// The geoconsent D-Bus API (docs/dbus-api.md), declared once. The daemon binds its
/// handlers to these tables; `geoconsentctl` calls and implements them; the
/// committed introspection XML is generated from them.
public enum GeoConsentAPI {
    public static let busName = "org.geoconsent.GeoConsent1"
    public static let objectPath = "/org/geoconsent/GeoConsent1"
    public static let interfaceName = "org.geoconsent.GeoConsent1"
    public static let agentInterfaceName = "org.geoconsent.GeoConsent1.Agent"
    public static let errorPrefix = "org.geoconsent.GeoConsent1.Error."

    public enum ErrorName {
        public static let notAuthorized = errorPrefix + "NotAuthorized"
        public static let noAgent = errorPrefix + "NoAgent"
        public static let agentExists = errorPrefix + "AgentExists"
        public static let promptPending = errorPrefix + "PromptPending"
        public static let gpsUnavailable = errorPrefix + "GpsUnavailable"
        /// No source has a position: the receiver and Wi-Fi positioning both failed (docs/dbus-api.md "Sources").
        public static let positionUnavailable = errorPrefix + "PositionUnavailable"
        public static let timeout = errorPrefix + "Timeout"
        /// The user's login session is locked or not in the foreground (docs/dbus-api.md "In use").
        public static let sessionInactive = errorPrefix + "SessionInactive"
    }

    /// `org.geoconsent.GeoConsent1`: what apps, the command line and panels call.
    public static let interface = InterfaceDescription(
        name: interfaceName,
        methods: [
            .init(name: "RequestOneTimeAuthorization", inArgs: [Arg("options", "a{sv}")], outArgs: [Arg("status", "u")]),
            .init(name: "RequestWhenInUseAuthorization", inArgs: [Arg("options", "a{sv}")], outArgs: [Arg("status", "u")]),
            .init(name: "GetAuthorization", inArgs: [], outArgs: [Arg("status", "u"), Arg("details", "a{sv}")]),
            .init(name: "RequestLocation", inArgs: [Arg("options", "a{sv}")], outArgs: [Arg("location", "a{sv}")]),
            .init(name: "StartUpdates", inArgs: [Arg("options", "a{sv}")], outArgs: []),
            .init(name: "StopUpdates", inArgs: [], outArgs: []),
            .init(name: "Revoke", inArgs: [], outArgs: []),
            .init(name: "RegisterAgent", inArgs: [Arg("path", "o")], outArgs: []),
            .init(name: "RegisterAgentWithOptions", inArgs: [Arg("path", "o"), Arg("options", "a{sv}")], outArgs: []),
            .init(name: "UnregisterAgent", inArgs: [Arg("path", "o")], outArgs: []),
            .init(name: "EndGrants", inArgs: [Arg("app_id", "s"), Arg("options", "a{sv}")], outArgs: []),
            .init(name: "ListConsents", inArgs: [], outArgs: [Arg("consents", "a(usa{sv})")]),
            .init(name: "ResetConsent", inArgs: [Arg("app_id", "s"), Arg("options", "a{sv}")], outArgs: []),
            .init(name: "SetConsent", inArgs: [Arg("app_id", "s"), Arg("options", "a{sv}")], outArgs: [Arg("status", "u")]),
            .init(name: "SetUserLocation", inArgs: [Arg("enabled", "b"), Arg("options", "a{sv}")], outArgs: []),
            .init(name: "GetUserLocation", inArgs: [Arg("options", "a{sv}")], outArgs: [Arg("enabled", "b")]),
            .init(name: "ListSessions", inArgs: [], outArgs: [Arg("sessions", "a(susub)")]),
            .init(name: "ListSessionDetails", inArgs: [], outArgs: [Arg("sessions", "a(sa{sv})")]),
            .init(name: "WatchSessions", inArgs: [], outArgs: []),
        ],
        signals: [
            .init(name: "LocationUpdated", args: [Arg("location", "a{sv}")]),
            .init(name: "AuthorizationChanged", args: [Arg("status", "u")]),
            .init(name: "LocationError", args: [Arg("error_name", "s"), Arg("message", "s")]),
            .init(name: "SessionsChanged", args: []),
        ],
        properties: [
            .init(name: "Version", signature: "s", access: .read, emitsChanged: .const),
            .init(name: "Enabled", signature: "b", access: .readwrite, emitsChanged: .yes),
            .init(name: "Sources", signature: "as", access: .read, emitsChanged: .yes),
            .init(name: "WiFiEnabled", signature: "b", access: .readwrite, emitsChanged: .yes),
            .init(name: "GpsdConnected", signature: "b", access: .read, emitsChanged: .yes),
            .init(name: "InUse", signature: "b", access: .read, emitsChanged: .yes),
        ])

    /// `org.geoconsent.GeoConsent1.Agent`: implemented by consent agents, called by the daemon.
    public static let agent = InterfaceDescription(
        name: agentInterfaceName,
        methods: [
            .init(name: "Confirm",
                  inArgs: [Arg("request_id", "s"), Arg("app_id", "s"), Arg("kind", "s"), Arg("details", "a{sv}")],
                  outArgs: [Arg("decision", "s")]),
            .init(name: "Cancel", inArgs: [Arg("request_id", "s")], outArgs: []),
            .init(name: "Notice", inArgs: [Arg("app_id", "s"), Arg("kind", "s"), Arg("details", "a{sv}")], outArgs: []),
            .init(name: "CheckFocus", inArgs: [Arg("pid", "u"), Arg("details", "a{sv}")], outArgs: [Arg("answer", "a{sv}")]),
        ],
        signals: [],
        properties: [])

    /// The XML committed as `interfaces/org.geoconsent.GeoConsent1.xml`, installed to
    /// /usr/share/dbus-1/interfaces, and printed by `geoconsentd --introspect`.
    public static var introspectionXML: String {
        Introspection.xml(interfaces: [interface, agent])
    }
}
