import Glibc
import GeoDBus
import GeoCore
import GeoConsentAPI

/// A fix as the daemon sends it (docs/dbus-api.md "Location dictionary"): the position
/// (values the receiver did not report are nil) and the accuracy it was granted at.
public struct Location: Equatable, Sendable {
    public var fix: Fix
    /// `full`, or `reduced` (snapped to a grid cell).
    public var accuracy: Accuracy
    /// The dictionary as received, for keys newer than this library.
    public var raw: DBusValue

    public var latitude: Double { fix.latitude }
    public var longitude: Double { fix.longitude }
    /// Receiver time of the fix, microseconds since the Unix epoch.
    public var timestamp: UInt64? { fix.timestamp }

    /// Decodes a location dictionary; nil when latitude or longitude is missing.
    public init?(_ value: DBusValue) {
        guard let (fix, accuracy) = LocationDictionary.decode(value) else { return nil }
        self.fix = fix
        self.accuracy = accuracy
        raw = value
    }
}

/// What the daemon tells this session on its own (unicast signals).
public enum ClientEvent: Sendable {
    case locationUpdated(Location)
    case authorizationChanged(AuthorizationStatus)
    case locationError(name: String, message: String)
    /// The bus connection is gone: the session and its grant have ended.
    case disconnected
}

/// The daemon's global properties.
public struct DaemonStatus: Equatable, Sendable {
    public var version: String
    public var enabled: Bool
    public var gpsdConnected: Bool
    public var inUse: Bool
}

/// One stored consent, as `ListConsents` returns it.
public struct StoredConsent: Equatable, Sendable {
    public var uid: UInt32
    public var appID: String
    public var record: ConsentRecord
}

/// A connection to geoconsentd: one session. Typed async calls for the client
/// half of docs/dbus-api.md. The grant this session gets lasts until `close()` (or
/// until the process exits): that is the point of a one-time grant.
///
/// The connection runs its own event loop on a thread of its own; every
/// libdbus call happens there, and results come back through continuations.
public final class GeoConsentClient: @unchecked Sendable {
    private let loop = EventLoop()
    private var connection: Connection!
    private var thread = pthread_t()
    private var continuation: AsyncStream<ClientEvent>.Continuation?

    // Calls waiting for replies, so none is left hanging when the loop ends
    // (bus gone, or `close()`): guarded by `lock`, touched from both threads.
    private var lock = pthread_mutex_t()
    private var stopped = false
    private var waiting: [UInt64: CheckedContinuation<[DBusValue], Error>] = [:]
    private var nextCall: UInt64 = 0

    /// Events for this session: fixes after `startUpdates`, status changes, errors.
    public let events: AsyncStream<ClientEvent>

    /// Connects to `bus` (blocking until connected or failed).
    public init(bus: BusAddress = .system) throws {
        pthread_mutex_init(&lock, nil)
        var cont: AsyncStream<ClientEvent>.Continuation?
        events = AsyncStream(bufferingPolicy: .bufferingNewest(1024)) { cont = $0 }
        continuation = cont
        connection = try Connection(bus: bus)
        loop.enablePosting()
        connection.attach(to: loop)
        connection.onMessage = { [weak self] m in self?.signal(m) ?? false }
        connection.onDisconnect = { [weak self] in
            self?.continuation?.yield(.disconnected)
            self?.continuation?.finish()
            self?.loop.stop()
        }
        // The loop runs on its own thread from here on; nothing else touches `connection`.
        let me = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { arg in
            let client = Unmanaged<GeoConsentClient>.fromOpaque(arg!).takeRetainedValue()
            client.loop.run()
            client.failWaitingCalls()
            return nil
        }, me)
    }

    /// The loop has ended: no reply can come any more.
    private func failWaitingCalls() {
        pthread_mutex_lock(&lock)
        stopped = true
        let orphans = waiting
        waiting.removeAll()
        pthread_mutex_unlock(&lock)
        for k in orphans.values { k.resume(throwing: DBusError(DBusError.disconnectedName, "the bus connection is closed")) }
    }

    private func finish(_ id: UInt64, _ result: Result<[DBusValue], Error>) {
        pthread_mutex_lock(&lock)
        let k = waiting.removeValue(forKey: id)
        pthread_mutex_unlock(&lock)
        k?.resume(with: result)
    }

    /// Ends the session (and so its grant).
    public func close() {
        loop.post { [self] in
            connection.close()
            continuation?.finish()
            loop.stop()
        }
        pthread_join(thread, nil)
    }

    private func signal(_ m: Message) -> Bool {
        guard m.type == .signal, m.interface == GeoConsentAPI.interfaceName, m.path == GeoConsentAPI.objectPath else {
            return false
        }
        let args = m.arguments()
        switch m.member {
        case "LocationUpdated":
            if let loc = args.first.flatMap(Location.init) { continuation?.yield(.locationUpdated(loc)) }
        case "AuthorizationChanged":
            if let s = args.first?.uint32Value.flatMap(AuthorizationStatus.init) { continuation?.yield(.authorizationChanged(s)) }
        case "LocationError":
            continuation?.yield(.locationError(name: args.first?.stringValue ?? "", message: args.dropFirst().first?.stringValue ?? ""))
        default:
            return false
        }
        return true
    }

    /// Calls a method on the daemon's object and returns its out-values.
    public func call(_ member: String, _ args: [DBusValue] = [], interface: String = GeoConsentAPI.interfaceName,
                     timeout: Double = 30) async throws -> [DBusValue] {
        let message = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                             interface: interface, member: member)
        try message.append(args)
        return try await withCheckedThrowingContinuation { (k: CheckedContinuation<[DBusValue], Error>) in
            pthread_mutex_lock(&lock)
            guard !stopped else {
                pthread_mutex_unlock(&lock)
                return k.resume(throwing: DBusError(DBusError.disconnectedName, "the bus connection is closed"))
            }
            nextCall += 1
            let id = nextCall
            waiting[id] = k
            pthread_mutex_unlock(&lock)
            loop.post { [self] in
                connection.call(message, timeout: timeout) { result in
                    self.finish(id, result.map { $0.arguments() }.mapError { $0 as Error })
                }
            }
        }
    }

    private static func options(_ o: AuthOptions) -> DBusValue {
        var d: [String: DBusValue] = ["accuracy": .string(o.accuracy.rawValue)]
        if !o.reason.isEmpty { d["reason"] = .string(o.reason) }
        if !o.appName.isEmpty { d["app-name"] = .string(o.appName) }
        if !o.parentWindow.isEmpty { d["parent-window"] = .string(o.parentWindow) }
        return .vardict(d)
    }

    private static func status(_ r: [DBusValue]) throws -> AuthorizationStatus {
        guard let s = r.first?.uint32Value.flatMap(AuthorizationStatus.init) else {
            throw DBusError.failed("unexpected reply \(r)")
        }
        return s
    }

    /// The button tap. Waits as long as the user takes (`timeout`, default a day).
    public func requestOneTimeAuthorization(_ options: AuthOptions = AuthOptions(),
                                            timeout: Double = 86_400) async throws -> AuthorizationStatus {
        try Self.status(await call("RequestOneTimeAuthorization", [Self.options(options)], timeout: timeout))
    }

    /// The standard prompt (Allow Once / Allow While Using / Don't Allow).
    public func requestWhenInUseAuthorization(_ options: AuthOptions = AuthOptions(),
                                              timeout: Double = 86_400) async throws -> AuthorizationStatus {
        try Self.status(await call("RequestWhenInUseAuthorization", [Self.options(options)], timeout: timeout))
    }

    /// `GetAuthorization`.
    public func authorization() async throws -> AuthorizationInfo {
        let r = try await call("GetAuthorization")
        let s = try Self.status(r)
        let d = r.dropFirst().first?.vardictValue ?? [:]
        return AuthorizationInfo(status: s, temporary: d["temporary"]?.boolValue ?? false,
                                 accuracy: Accuracy(rawValue: d["accuracy"]?.stringValue ?? ""),
                                 appID: d["app-id"]?.stringValue ?? "",
                                 oneTimeApproved: d["one-time-approved"]?.boolValue ?? false)
    }

    /// One fix: a cached one younger than `maxAge` seconds, else the next within `timeout`.
    public func requestLocation(maxAge: Double = 5, timeout: Double = 30) async throws -> Location {
        let r = try await call("RequestLocation", [.vardict(["max-age": .double(maxAge), "timeout": .double(timeout)])],
                               timeout: timeout + 5)
        guard let loc = r.first.flatMap(Location.init) else { throw DBusError.failed("unexpected reply \(r)") }
        return loc
    }

    /// Fixes from now on arrive in `events`.
    public func startUpdates(distanceFilter: Double = 0, minInterval: Double = 0) async throws {
        _ = try await call("StartUpdates", [.vardict(["distance-filter": .double(distanceFilter),
                                                      "min-interval": .double(minInterval)])])
    }

    public func stopUpdates() async throws { _ = try await call("StopUpdates") }

    /// Ends this session's temporary grant and its updates now.
    public func revoke() async throws { _ = try await call("Revoke") }

    public func status() async throws -> DaemonStatus {
        let r = try await call("GetAll", [.string(GeoConsentAPI.interfaceName)], interface: "org.freedesktop.DBus.Properties")
        let p = r.first?.vardictValue ?? [:]
        return DaemonStatus(version: p["Version"]?.stringValue ?? "", enabled: p["Enabled"]?.boolValue ?? false,
                            gpsdConnected: p["GpsdConnected"]?.boolValue ?? false, inUse: p["InUse"]?.boolValue ?? false)
    }

    /// Switches location on or off for everyone (root only).
    public func setEnabled(_ value: Bool) async throws {
        _ = try await call("Set", [.string(GeoConsentAPI.interfaceName), .string("Enabled"), .variant(.bool(value))],
                           interface: "org.freedesktop.DBus.Properties")
    }

    public func listConsents() async throws -> [StoredConsent] {
        let r = try await call("ListConsents")
        return (r.first?.arrayValue ?? []).compactMap { e in
            guard let f = e.structFields, f.count == 3, let uid = f[0].uint32Value, let app = f[1].stringValue,
                  let d = f[2].vardictValue else { return nil }
            return StoredConsent(uid: uid, appID: app, record: RecordEncoding.decode(d))
        }
    }

    public func resetConsent(appID: String, uid: UInt32? = nil) async throws {
        var o: [String: DBusValue] = [:]
        if let uid { o["uid"] = .uint32(uid) }
        _ = try await call("ResetConsent", [.string(appID), .vardict(o)])
    }

    public func listSessions() async throws -> [SessionInfo] {
        let r = try await call("ListSessions")
        return (r.first?.arrayValue ?? []).compactMap { e in
            guard let f = e.structFields, f.count == 5, let name = f[0].stringValue, let uid = f[1].uint32Value,
                  let app = f[2].stringValue, let st = f[3].uint32Value.flatMap(AuthorizationStatus.init),
                  let updates = f[4].boolValue else { return nil }
            return SessionInfo(name: name, uid: uid, appID: app, status: st, updates: updates)
        }
    }
}
