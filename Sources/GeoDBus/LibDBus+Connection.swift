// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Connections: connecting to a bus, names, match rules, sending, closing.
// Pending calls are in LibDBus+PendingCall.swift, the event-loop glue in
// LibDBus+LoopGlue.swift.
import CDBus

/// Turns a set `DBusError` into our value type and frees it.
private func take(_ err: inout CDBus.DBusError) -> DBusError {
    let name = err.name.map { String(cString: $0) } ?? DBusError.failedName
    let message = err.message.map { String(cString: $0) } ?? ""
    dbus_error_free(&err)
    return DBusError(name, message)
}

/// This machine's D-Bus machine id, as libdbus reads it (/etc/machine-id,
/// /var/lib/dbus/machine-id); nil when there is none.
func localMachineID() -> String? {
    guard let p = dbus_get_local_machine_id() else { return nil }
    defer { dbus_free(p) }
    return String(cString: p)
}

// MARK: - Connections

/// Which bus to connect to.
public enum BusAddress: Sendable, CustomStringConvertible {
    case system
    case session
    case address(String)

    /// Parses the command line's `system|session|ADDRESS`.
    public init(argument: String) {
        switch argument {
        case "system": self = .system
        case "session": self = .session
        default: self = .address(argument)
        }
    }

    public var description: String {
        switch self {
        case .system: return "system bus"
        case .session: return "session bus"
        case .address(let a): return a
        }
    }
}

/// The outcome of `RequestName`.
public enum RequestNameResult: Sendable {
    case primaryOwner, alreadyOwner, taken
}

/// A private connection to a message bus, driven by an `EventLoop`.
public final class Connection {
    let raw: OpaquePointer
    // Internal, not private: the LoopGlue and PendingCall extensions use them.
    weak var loop: EventLoop?
    var watches: [OpaquePointer: EventLoop.Token] = [:]
    var timeouts: [OpaquePointer: EventLoop.Token] = [:]
    var liveTimeouts: Set<OpaquePointer> = []
    var drainScheduled = false
    let state = ConnectionState()
    var closed: Bool { state.closedByUs }

    /// Called for every incoming message that is not a reply to one of our calls.
    /// Return true when handled.
    public var onMessage: ((Message) -> Bool)?

    /// Called once when the bus connection is lost.
    public var onDisconnect: (() -> Void)?

    /// Connects and registers with the bus (blocking: done once at start-up).
    public init(bus: BusAddress) throws {
        var err = cdbus_error_init()
        let c: OpaquePointer?
        switch bus {
        case .system: c = dbus_bus_get_private(DBUS_BUS_SYSTEM, &err)
        case .session: c = dbus_bus_get_private(DBUS_BUS_SESSION, &err)
        case .address(let a):
            c = dbus_connection_open_private(a, &err)
            if let c, dbus_bus_register(c, &err) == 0 {
                dbus_connection_close(c)
                dbus_connection_unref(c)
                throw take(&err)
            }
        }
        guard let c else { throw take(&err) }
        raw = c
        // Without this libdbus calls _exit() when the bus goes away.
        dbus_connection_set_exit_on_disconnect(c, 0)
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = dbus_connection_add_filter(c, { _, msg, data in
            let conn = Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue()
            guard let msg else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            return conn.filter(msg)
        }, me, nil)
    }

    deinit { close() }

    /// This connection's unique name on the bus (`:1.42`).
    public var uniqueName: String {
        dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
    }

    public var isConnected: Bool { !closed && dbus_connection_get_is_connected(raw) != 0 }

    /// Asks for a well-known name without queueing (blocking: start-up only).
    public func requestName(_ name: String) throws -> RequestNameResult {
        var err = cdbus_error_init()
        let r = dbus_bus_request_name(raw, name, UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE), &err)
        if r < 0 { throw take(&err) }
        switch r {
        case Int32(DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER): return .primaryOwner
        case Int32(DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER): return .alreadyOwner
        default: return .taken
        }
    }

    /// Adds a match rule (blocking: start-up only).
    public func addMatch(_ rule: String) throws {
        var err = cdbus_error_init()
        dbus_bus_add_match(raw, rule, &err)
        if dbus_error_is_set(&err) != 0 { throw take(&err) }
    }

    /// Sends `messages` (method calls) at once and waits for every reply, in
    /// order: one round trip for all, where `callBlocking` each would take one
    /// each (start-up only: a cold start waits for it, docs/performance.md).
    /// The bus handles one connection's calls in the order sent, so a match rule
    /// added first is in place for a question asked after it.
    public func callsBlocking(_ messages: [Message], timeout: Double) -> [Result<Message, DBusError>] {
        let ms = Connection.millis(timeout)
        let pending: [OpaquePointer?] = messages.map { m in
            var p: OpaquePointer?
            guard !closed, dbus_connection_send_with_reply(raw, m.raw, &p, ms) != 0 else { return nil }
            return p
        }
        return pending.map { p in
            guard let p else { return .failure(DBusError(DBusError.disconnectedName, "not connected")) }
            defer { dbus_pending_call_unref(p) }
            dbus_pending_call_block(p)
            guard let reply = dbus_pending_call_steal_reply(p) else {
                return .failure(DBusError(DBusError.noReplyName, "no reply"))
            }
            let msg = Message(adopting: reply)
            return msg.asError.map { .failure($0) } ?? .success(msg)
        }
    }

    /// Adds match rules, all in one round trip (start-up only); throws the first refusal.
    public func addMatches(_ rules: [String]) throws {
        let calls = try rules.map { try BusDriver.call("AddMatch", [.string($0)]) }
        for case .failure(let e) in callsBlocking(calls, timeout: 25) { throw e }
    }

    /// Queues a message; the loop writes it out.
    @discardableResult
    public func send(_ message: Message) -> Bool {
        guard !closed else { return false }
        return dbus_connection_send(raw, message.raw, nil) != 0
    }

    /// Sends a call and waits for the reply (for command-line tools).
    public func callBlocking(_ message: Message, timeout: Double) throws -> Message {
        var err = cdbus_error_init()
        let ms = Connection.millis(timeout)
        guard let reply = dbus_connection_send_with_reply_and_block(raw, message.raw, ms, &err) else {
            throw take(&err)
        }
        return Message(adopting: reply)
    }

    /// A timeout in seconds as libdbus's milliseconds (clamped to what an Int32 holds).
    static func millis(_ seconds: Double) -> Int32 {
        Int32(clamping: Int64(max(0, min(seconds, 2_000_000)) * 1000))
    }

    /// Writes out everything queued (blocking; for tools that exit right after).
    public func flush() { if !closed { dbus_connection_flush(raw) } }

    private func filter(_ raw: OpaquePointer) -> DBusHandlerResult {
        let msg = Message(adopting: dbus_message_ref(raw))
        if msg.type == .signal, msg.interface == "org.freedesktop.DBus.Local", msg.member == "Disconnected" {
            loop?.later { [weak self] in self?.onDisconnect?() }
            return DBUS_HANDLER_RESULT_HANDLED
        }
        return (onMessage?(msg) ?? false) ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }

    /// Closes the connection and detaches it from the loop.
    public func close() {
        guard !closed else { return }
        state.closedByUs = true
        // Clear the callbacks first: closing may call them, and they point at self.
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_close(raw)
        _ = dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        _ = dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        for t in watches.values { loop?.unwatch(t) }
        for t in timeouts.values { loop?.cancelTimer(t) }
        watches.removeAll()
        timeouts.removeAll()
        dbus_connection_unref(raw)
    }
}
