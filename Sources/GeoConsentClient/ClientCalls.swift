import GeoDBus
import GeoCore
import GeoConsentAPI

// The client and management methods of docs/dbus-api.md, typed. Each encodes its
// options and decodes its reply with the shapes GeoConsentAPI declares.
extension GeoConsentClient {
    private static func status(_ r: [DBusValue]) throws -> AuthorizationStatus {
        guard let s = StatusReply.decode(r) else { throw DBusError.failed("unexpected reply \(r)") }
        return s
    }

    /// The button tap (`RequestOneTimeAuthorization`). Waits as long as the user
    /// takes (`timeout` seconds, default a day); `.whenInUse` is a grant for this session.
    public func requestOneTimeAuthorization(_ options: AuthOptions = AuthOptions(),
                                            timeout: Double = 86_400) async throws -> AuthorizationStatus {
        try Self.status(await call("RequestOneTimeAuthorization", [OptionDictionary.encode(options)], timeout: timeout))
    }

    /// The standard prompt (Allow Once / Allow While Using / Don't Allow).
    public func requestWhenInUseAuthorization(_ options: AuthOptions = AuthOptions(),
                                              timeout: Double = 86_400) async throws -> AuthorizationStatus {
        try Self.status(await call("RequestWhenInUseAuthorization", [OptionDictionary.encode(options)], timeout: timeout))
    }

    /// This session's status and grant (`GetAuthorization`).
    public func authorization() async throws -> AuthorizationInfo {
        let r = try await call("GetAuthorization")
        guard let info = AuthorizationReply.decode(r) else { throw DBusError.failed("unexpected reply \(r)") }
        return info
    }

    /// One fix: a cached one younger than `maxAge` seconds, else the next within `timeout`.
    public func requestLocation(maxAge: Double = 5, timeout: Double = 30) async throws -> Location {
        let r = try await call("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: maxAge, timeout: timeout))],
                               timeout: timeout + 5)
        guard let loc = LocationBody.decode(r) else { throw DBusError.failed("unexpected reply \(r)") }
        return loc
    }

    /// Fixes from now on arrive in `events`: after moving `distanceFilter` metres
    /// and `minInterval` seconds at the least.
    public func startUpdates(distanceFilter: Double = 0, minInterval: Double = 0) async throws {
        _ = try await call("StartUpdates", [OptionDictionary.encode(UpdateOptions(distanceFilter: distanceFilter,
                                                                                  minInterval: minInterval))])
    }

    /// No more fixes in `events` (the grant stays).
    public func stopUpdates() async throws { _ = try await call("StopUpdates") }

    /// Ends this session's temporary grant and its updates now.
    public func revoke() async throws { _ = try await call("Revoke") }

    /// The daemon's properties (`Version`, `Enabled`, `GpsdConnected`, `InUse`).
    public func status() async throws -> DaemonStatus {
        let r = try await call("GetAll", [.string(GeoConsentAPI.interfaceName)], interface: ObjectServer.properties)
        return DaemonProperties.decode(r.first?.vardictValue ?? [:])
    }

    /// Switches location on or off for everyone (root, or a user polkit authorizes).
    public func setEnabled(_ value: Bool) async throws {
        _ = try await call("Set", [.string(GeoConsentAPI.interfaceName), .string(DaemonProperties.enabled),
                                   .variant(.bool(value))],
                           interface: ObjectServer.properties)
    }

    /// Switches Wi-Fi positioning on or off for everyone (root, or a user
    /// polkit authorizes; it must be configured).
    public func setWiFiEnabled(_ value: Bool) async throws {
        _ = try await call("Set", [.string(GeoConsentAPI.interfaceName), .string(DaemonProperties.wifiEnabled),
                                   .variant(.bool(value))],
                           interface: ObjectServer.properties)
    }

    /// The stored consents of the caller's uid (root: of every uid).
    public func listConsents() async throws -> [StoredConsent] {
        ConsentListReply.decode(try await call("ListConsents")) ?? []
    }

    /// Forgets an app's consent; root may name another user's with `uid`.
    public func resetConsent(appID: String, uid: UInt32? = nil) async throws {
        _ = try await call("ResetConsent", [.string(appID), OptionDictionary.encodeReset(uid: uid)])
    }

    /// The user's own decision about an app (`SetConsent`): less is stored at
    /// once, more is asked of the uid's consent agent first, so the reply may
    /// take as long as the user does (`timeout` seconds, default a day); the
    /// app's status after.
    public func setConsent(appID: String, decision: UserDecision? = nil, accuracy: Accuracy? = nil,
                           uid: UInt32? = nil, timeout: Double = 86_400) async throws -> AuthorizationStatus {
        try Self.status(await call("SetConsent", [.string(appID),
                                                  OptionDictionary.encodeSetConsent(decision: decision, accuracy: accuracy, uid: uid)],
                                   timeout: timeout))
    }

    /// Location on or off for the apps of the caller's user (root: of `uid`):
    /// off at once; on by root or the user's agent at once, else after that
    /// agent's yes (the reply waits for it, `timeout` seconds).
    public func setUserLocation(_ on: Bool, uid: UInt32? = nil, timeout: Double = 86_400) async throws {
        _ = try await call("SetUserLocation", [.bool(on), OptionDictionary.encodeReset(uid: uid)], timeout: timeout)
    }

    /// Whether location is on for the apps of the caller's user (root: of `uid`).
    public func userLocation(uid: UInt32? = nil) async throws -> Bool {
        let r = try await call("GetUserLocation", [OptionDictionary.encodeReset(uid: uid)])
        guard let on = r.first?.boolValue else { throw DBusError.failed("unexpected reply \(r)") }
        return on
    }

    /// The live sessions of the caller's uid (root: of every uid), with their
    /// pauses; from a daemon without `ListSessionDetails`, without them.
    public func listSessions() async throws -> [SessionInfo] {
        do {
            return SessionDetailsReply.decode(try await call("ListSessionDetails")) ?? []
        } catch let e as DBusError where e.name == DBusError.unknownMethodName {
            return SessionListReply.decode(try await call("ListSessions")) ?? []
        }
    }
}
