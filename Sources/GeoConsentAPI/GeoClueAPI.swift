import GeoDBus

/// The GeoClue2 D-Bus API (docs/geoclue.md), declared once, as GeoClue 2.6
/// publishes it: the daemon's facade binds its handlers to these tables, the
/// committed `interfaces/org.freedesktop.GeoClue2.xml` is generated from them,
/// and a test holds them to GeoClue's own XML (same members and signatures).
public enum GeoClueAPI {
    public static let busName = "org.freedesktop.GeoClue2"
    public static let managerPath = "/org/freedesktop/GeoClue2/Manager"
    public static let managerInterfaceName = "org.freedesktop.GeoClue2.Manager"
    public static let clientInterfaceName = "org.freedesktop.GeoClue2.Client"
    public static let locationInterfaceName = "org.freedesktop.GeoClue2.Location"
    public static let agentInterfaceName = "org.freedesktop.GeoClue2.Agent"
    /// Where a GeoClue agent serves `agent`, on its own connection.
    public static let agentPath = "/org/freedesktop/GeoClue2/Agent"
    /// The parent of every client object.
    public static let clientsPath = "/org/freedesktop/GeoClue2/Client"

    /// Client objects are numbered from 1, for all callers together.
    public static func clientPath(_ number: UInt32) -> String { clientsPath + "/" + String(number) }

    /// A client's location objects are numbered from 0, per client.
    public static func locationPath(client: UInt32, _ number: UInt32) -> String {
        clientPath(client) + "/Location/" + String(number)
    }

    /// The client number of a client object's path; nil for any other path.
    public static func clientNumber(of path: String) -> UInt32? {
        guard path.hasPrefix(clientsPath + "/") else { return nil }
        let rest = path.dropFirst(clientsPath.count + 1)
        guard !rest.isEmpty, rest.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return UInt32(rest)
    }

    /// "No location yet": the `Location` property before the first fix, and the
    /// `old` argument of the first `LocationUpdated`.
    public static let noLocation = "/"

    /// `org.freedesktop.GeoClue2.Manager` at `managerPath`.
    public static let manager = InterfaceDescription(
        name: managerInterfaceName,
        methods: [
            .init(name: "GetClient", inArgs: [], outArgs: [Arg("client", "o")]),
            .init(name: "CreateClient", inArgs: [], outArgs: [Arg("client", "o")]),
            .init(name: "DeleteClient", inArgs: [Arg("client", "o")], outArgs: []),
            .init(name: "AddAgent", inArgs: [Arg("id", "s")], outArgs: []),
        ],
        signals: [],
        properties: [
            .init(name: ManagerProperty.inUse, signature: "b", access: .read, emitsChanged: .yes),
            .init(name: ManagerProperty.availableAccuracyLevel, signature: "u", access: .read, emitsChanged: .yes),
        ])

    /// `org.freedesktop.GeoClue2.Client`, one object per client.
    public static let client = InterfaceDescription(
        name: clientInterfaceName,
        methods: [
            .init(name: "Start", inArgs: [], outArgs: []),
            .init(name: "Stop", inArgs: [], outArgs: []),
        ],
        signals: [
            .init(name: GeoClueLocationUpdated.member, args: [Arg("old", "o"), Arg("new", "o")]),
        ],
        properties: [
            .init(name: ClientProperty.location, signature: "o", access: .read, emitsChanged: .yes),
            .init(name: ClientProperty.distanceThreshold, signature: "u", access: .readwrite, emitsChanged: .yes),
            .init(name: ClientProperty.timeThreshold, signature: "u", access: .readwrite, emitsChanged: .yes),
            .init(name: ClientProperty.desktopID, signature: "s", access: .readwrite, emitsChanged: .yes),
            .init(name: ClientProperty.requestedAccuracyLevel, signature: "u", access: .readwrite, emitsChanged: .yes),
            .init(name: ClientProperty.active, signature: "b", access: .read, emitsChanged: .yes),
        ])

    /// `org.freedesktop.GeoClue2.Location`: one object per delivered fix, never
    /// changed once made (so it never sends `PropertiesChanged`).
    public static let location = InterfaceDescription(
        name: locationInterfaceName,
        methods: [],
        signals: [],
        properties: LocationProperties.names.map { name in
            .init(name: name, signature: LocationProperties.signature(of: name), access: .read, emitsChanged: .const)
        })

    /// `org.freedesktop.GeoClue2.Agent`: served by GeoClue agents (GNOME Shell,
    /// Phosh) on their own connections, registered with `Manager.AddAgent`.
    public static let agent = InterfaceDescription(
        name: agentInterfaceName,
        methods: [
            .init(name: "AuthorizeApp", inArgs: [Arg("desktop_id", "s"), Arg("req_accuracy_level", "u")],
                  outArgs: [Arg("authorized", "b"), Arg("allowed_accuracy_level", "u")]),
        ],
        signals: [],
        properties: [
            .init(name: "MaxAccuracyLevel", signature: "u", access: .read, emitsChanged: .yes),
        ])

    /// The XML committed as `interfaces/org.freedesktop.GeoClue2.xml`, printed by
    /// `geoconsentd --geoclue --introspect`.
    public static var introspectionXML: String {
        Introspection.xml(interfaces: [manager, client, location, agent])
    }
}

/// The Manager's property names.
public enum ManagerProperty {
    /// `b`: some client is started (and so the GPS is in use): for panel icons.
    public static let inUse = "InUse"
    /// `u`: the best accuracy level there is (`GeoClueAccuracyLevel`).
    public static let availableAccuracyLevel = "AvailableAccuracyLevel"
}

/// A client object's property names.
public enum ClientProperty {
    /// `o`: the latest location object, `/` until the first fix.
    public static let location = "Location"
    /// `u`, metres.
    public static let distanceThreshold = "DistanceThreshold"
    /// `u`, seconds.
    public static let timeThreshold = "TimeThreshold"
    /// `s`: the name the app gives itself (display only).
    public static let desktopID = "DesktopId"
    /// `u`: a `GeoClueAccuracyLevel`, default city.
    public static let requestedAccuracyLevel = "RequestedAccuracyLevel"
    /// `b`: started and receiving fixes.
    public static let active = "Active"
}
