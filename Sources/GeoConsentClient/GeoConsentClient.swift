import Glibc
import GeoDBus
import GeoConsentAPI

/// A connection to geoconsentd: one session. Typed async calls for the client
/// half of docs/dbus-api.md (`ClientCalls.swift`), the session's signals as
/// `events`, and a consent agent for apps that are one (`ClientAgent.swift`).
/// The grant this session gets lasts until `close()` (or until the process
/// exits): that is the point of a one-time grant.
///
/// The connection runs its own event loop on a thread of its own; every
/// libdbus call happens there, and results come back through continuations.
public final class GeoConsentClient: @unchecked Sendable {
    let loop = EventLoop()
    /// Touched on the loop's thread only, once `init` has started it.
    var connection: Connection!
    /// Serves the agent objects; made on the loop's thread when the first agent registers.
    var server: ObjectServer?
    /// The registered agents' endpoints by object path (loop thread only).
    var agents: [String: AgentEndpoint] = [:]
    /// A match for geoconsentd's NameOwnerChanged is in place (retrying agents).
    var watchingDaemon = false
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

    /// Connects to `bus` (blocking until connected or failed); throws `DBusError`.
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
            self?.ended()
            self?.loop.stop()
        }
        // The loop runs on its own thread from here on; nothing else touches `connection`.
        let me = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { arg in
            let client = Unmanaged<GeoConsentClient>.fromOpaque(arg!).takeRetainedValue()
            client.loop.run()
            client.ended()
            client.failWaitingCalls()
            return nil
        }, me)
    }

    /// Ends the session (and so its grant).
    public func close() {
        loop.post { [self] in
            connection.close()
            ended()
            loop.stop()
        }
        pthread_join(thread, nil)
    }

    /// The session is over: its streams end (on the loop's thread, or after the loop).
    private func ended() {
        continuation?.finish()
        for endpoint in agents.values { endpoint.finish() }
        agents.removeAll()
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

    /// The daemon's signals to this session, as `events`.
    func signal(_ m: Message) -> Bool {
        if BusDriver.isSignal(m, "NameOwnerChanged") {
            let a = m.arguments()
            if a.count == 3, a[0].stringValue == GeoConsentAPI.busName { daemonOwnerChanged(to: a[2].stringValue ?? "") }
            return true
        }
        guard m.type == .signal, m.interface == GeoConsentAPI.interfaceName, m.path == GeoConsentAPI.objectPath else {
            return false
        }
        let args = m.arguments()
        switch m.member {
        case LocationUpdatedSignal.member:
            if let loc = LocationBody.decode(args) { continuation?.yield(.locationUpdated(loc)) }
        case AuthorizationChangedSignal.member:
            if let s = AuthorizationChangedSignal.decode(args) { continuation?.yield(.authorizationChanged(s)) }
        case LocationErrorSignal.member:
            if let e = LocationErrorSignal.decode(args) { continuation?.yield(.locationError(name: e.name, message: e.message)) }
        default:
            return false
        }
        return true
    }

    /// Calls a method on the daemon's object and returns its out-values; a
    /// failure throws the `DBusError` the daemon (or the bus) answered with.
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
}

/// What the daemon tells this session on its own (unicast signals).
public enum ClientEvent: Sendable {
    /// A fix, after `startUpdates`.
    case locationUpdated(Location)
    /// This session's status changed (a grant given or ended).
    case authorizationChanged(AuthorizationStatus)
    /// Updates cannot be served for now (`GpsUnavailable`, …): the error's name and message.
    case locationError(name: String, message: String)
    /// The bus connection is gone: the session and its grant have ended.
    case disconnected
}
