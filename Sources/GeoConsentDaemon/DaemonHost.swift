import GeoCore
import GeoDBus

/// The daemon as its front ends see it (FrontEnd.swift): the narrow host,
/// an object of its own, so that a front end reaches nothing else of the
/// daemon, and the daemon keeps its own methods to itself.
final class DaemonHost: FrontEndHost {
    private unowned let daemon: Daemon

    init(_ daemon: Daemon) { self.daemon = daemon }

    var loop: EventLoop { daemon.loop }
    var server: ObjectServer { daemon.server }
    var consent: ConsentQueries { daemon.core }
    var limits: Limits { daemon.config.limits }

    func resolveCaller(_ call: MethodCall, _ body: @escaping (Caller) -> Void) { daemon.withCaller(call, body) }

    func resolveCaller(connection: String, _ done: @escaping (Caller?) -> Void) {
        daemon.resolveForRead(connection, done)
    }

    func retain(_ caller: Caller) { daemon.watchProcessNow(of: caller) }

    func release(connection: String) { daemon.releaseProcessWatch(of: connection) }

    func feed(_ event: CoreEvent) { daemon.feed(event) }
    func hold(_ call: MethodCall) -> CallID { daemon.hold(call) }
    func holdWithoutCall() -> CallID { daemon.holdWithoutCall() }
    func abandon(_ id: CallID, _ error: DBusError) { daemon.abandon(id, error) }

    func register(_ purpose: CallBudgets.Purpose) -> Bool { daemon.outgoing.register(purpose) }

    func call(_ message: Message, purpose: CallBudgets.Purpose, uid: UInt32, callee: String, timeout: Double,
              _ done: @escaping (Result<Message, DBusError>) -> Void) -> CallBudgets.Refusal? {
        daemon.outgoing.call(message, purpose: purpose, uid: uid, callee: callee, timeout: timeout, done)
    }

    func noteAttack(_ connection: String, uid: UInt32, _ what: String) { daemon.attackLog.note(connection, uid: uid, what) }

    func setUpdateOptions(session: SessionID, _ options: UpdateOptions) {
        daemon.location.setUpdateOptions(session: session, options)
    }

    var locationInUse: Bool { daemon.location.inUse }
    var locationReceiverConnected: Bool { daemon.location.receiverConnected }
    var lastSources: [String: PositionSource] { daemon.location.lastSources }
    var locationSources: [PositionSource] { daemon.location.sourcesOn }
    var wifiEnabled: Bool { daemon.location.wifiEnabled }
}
