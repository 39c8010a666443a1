// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Asynchronous method calls: a libdbus pending call and the lifetime of its completion.
import CDBus

/// The completion of one pending call. libdbus calls it from the pending call's
/// notify function, except when the connection drops: then libdbus finalizes
/// the pending call without notifying (its synthesized error reply no longer
/// matches a pending call), so the free function completes it instead, with
/// `Disconnected`, on the loop. (Calls still pending when we close the
/// connection ourselves are dropped silently, as before: their owner is leaving.)
final class PendingCompletion {
    private var completion: ((Result<Message, DBusError>) -> Void)?
    private weak var loop: EventLoop?
    private let state: ConnectionState
    init(_ completion: @escaping (Result<Message, DBusError>) -> Void, loop: EventLoop?, state: ConnectionState) {
        self.completion = completion
        self.loop = loop
        self.state = state
    }
    func complete(_ result: Result<Message, DBusError>) {
        guard let c = completion else { return }
        completion = nil
        c(result)
    }
    /// The pending call is being freed: if it never completed, it never will.
    func finalize() {
        guard let c = completion else { return }
        completion = nil
        if state.closedByUs { return }
        loop?.later { c(.failure(DBusError(DBusError.disconnectedName, "the connection was closed before a reply came"))) }
    }
}

/// Shared with the pending calls of a connection, which may outlive it.
final class ConnectionState {
    var closedByUs = false
}

extension Connection {
    /// Sends a call and runs `completion` on the loop with the reply, an error
    /// reply, or a `NoReply` error after `timeout` seconds.
    public func call(_ message: Message, timeout: Double, completion: @escaping (Result<Message, DBusError>) -> Void) {
        var pending: OpaquePointer?
        let ms = Connection.millis(timeout)
        guard !closed, dbus_connection_send_with_reply(raw, message.raw, &pending, ms) != 0, let pending else {
            loop?.later { completion(.failure(DBusError(DBusError.disconnectedName, "not connected"))) }
            return
        }
        // The box is retained once here and released only by the free function,
        // which libdbus calls when it frees the pending call: after the notify
        // (reply, error reply or timeout), or with no notify at all when the
        // connection drops. So `finalize` is where an unanswered call still gets
        // completed. The connection holds the pending call until then; our own
        // reference goes right away (the unref below).
        let box = Unmanaged.passRetained(PendingCompletion(completion, loop: loop, state: state)).toOpaque()
        _ = dbus_pending_call_set_notify(pending, { p, data in
            guard let p, let data else { return }
            let completion = Unmanaged<PendingCompletion>.fromOpaque(data).takeUnretainedValue()
            guard let reply = dbus_pending_call_steal_reply(p) else {
                var e = DBusError(DBusError.noReplyName, "no reply")
                e.isLocalTimeout = true
                completion.complete(.failure(e))
                return
            }
            let msg = Message(adopting: reply)
            if var e = msg.asError {
                e.isLocalTimeout = e.name == DBusError.noReplyName && msg.sender == nil
                completion.complete(.failure(e))
            } else {
                completion.complete(.success(msg))
            }
        }, box, { data in
            guard let data else { return }
            let completion = Unmanaged<PendingCompletion>.fromOpaque(data)
            completion.takeUnretainedValue().finalize()
            completion.release()
        })
        dbus_pending_call_unref(pending)
    }
}
