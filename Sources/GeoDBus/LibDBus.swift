// The only file that calls libdbus-1. Everything above it speaks DBusValue,
// Message and Connection; nothing else imports CDBus.
import CDBus
import Glibc

// MARK: - Type codes
// DBUS_TYPE_* are `((int) 'x')` macros Swift cannot import; the shim re-exports them.
private let tByte = cdbus_type_byte, tBool = cdbus_type_boolean
private let tInt16 = cdbus_type_int16, tUInt16 = cdbus_type_uint16
private let tInt32 = cdbus_type_int32, tUInt32 = cdbus_type_uint32
private let tInt64 = cdbus_type_int64, tUInt64 = cdbus_type_uint64
private let tDouble = cdbus_type_double, tString = cdbus_type_string
private let tPath = cdbus_type_object_path, tSig = cdbus_type_signature
private let tFD = cdbus_type_unix_fd, tArray = cdbus_type_array
private let tVariant = cdbus_type_variant, tStruct = cdbus_type_struct
private let tDictEntry = cdbus_type_dict_entry, tInvalid = cdbus_type_invalid

/// Turns a set `DBusError` into our value type and frees it.
private func take(_ err: inout CDBus.DBusError) -> DBusError {
    let name = err.name.map { String(cString: $0) } ?? DBusError.failedName
    let message = err.message.map { String(cString: $0) } ?? ""
    dbus_error_free(&err)
    return DBusError(name, message)
}

// MARK: - Validation

/// Checks names and values before they reach libdbus, whose own checks print a
/// warning and fail (or abort, with DBUS_FATAL_WARNINGS) instead of returning an error.
public enum DBusValidate {
    public static func objectPath(_ s: String) -> Bool { validate(s, dbus_validate_path) }
    public static func busName(_ s: String) -> Bool { validate(s, dbus_validate_bus_name) }
    public static func interface(_ s: String) -> Bool { validate(s, dbus_validate_interface) }
    public static func member(_ s: String) -> Bool { validate(s, dbus_validate_member) }
    public static func errorName(_ s: String) -> Bool { validate(s, dbus_validate_error_name) }
    /// A valid signature of exactly one complete type.
    public static func singleSignature(_ s: String) -> Bool { validate(s, dbus_signature_validate_single) }
    public static func signature(_ s: String) -> Bool { validate(s, dbus_signature_validate) }
    private static func validate(_ s: String,
                                 _ f: (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t) -> Bool {
        !s.containsNul && s.withCString { f($0, nil) != 0 }
    }
}

// MARK: - Messages

/// The kind of a D-Bus message.
public enum MessageType: Int32, Sendable {
    case invalid = 0, methodCall = 1, methodReturn = 2, error = 3, signal = 4
}

/// An owned reference to a libdbus message.
public final class Message {
    let raw: OpaquePointer

    /// Takes over one reference to `raw`.
    init(adopting raw: OpaquePointer) { self.raw = raw }
    deinit { dbus_message_unref(raw) }

    /// A method call. Throws `InvalidArgs` for names libdbus would reject.
    public static func methodCall(destination: String?, path: String, interface: String?, member: String) throws -> Message {
        guard DBusValidate.objectPath(path), DBusValidate.member(member),
              destination.map(DBusValidate.busName) ?? true,
              interface.map(DBusValidate.interface) ?? true else {
            throw DBusError.invalidArgs("invalid destination, path, interface or member")
        }
        guard let m = dbus_message_new_method_call(destination, path, interface, member) else {
            throw DBusError.failed("out of memory")
        }
        return Message(adopting: m)
    }

    /// A signal. Set `destination` for a unicast signal.
    public static func signal(path: String, interface: String, member: String, destination: String? = nil) throws -> Message {
        guard DBusValidate.objectPath(path), DBusValidate.interface(interface), DBusValidate.member(member) else {
            throw DBusError.invalidArgs("invalid path, interface or member")
        }
        guard let m = dbus_message_new_signal(path, interface, member) else { throw DBusError.failed("out of memory") }
        let msg = Message(adopting: m)
        if let destination { _ = dbus_message_set_destination(m, destination) }
        return msg
    }

    /// A method return for this call.
    public func makeReturn() -> Message? {
        dbus_message_new_method_return(raw).map { Message(adopting: $0) }
    }

    /// An error reply for this call.
    public func makeError(_ error: DBusError) -> Message? {
        let name = DBusValidate.errorName(error.name) ? error.name : DBusError.failedName
        let text = error.message.replacingNulls()
        return dbus_message_new_error(raw, name, text).map { Message(adopting: $0) }
    }

    public var type: MessageType { MessageType(rawValue: dbus_message_get_type(raw)) ?? .invalid }
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var path: String? { dbus_message_get_path(raw).map { String(cString: $0) } }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    public var signature: String { dbus_message_get_signature(raw).map { String(cString: $0) } ?? "" }
    public var noReplyExpected: Bool {
        get { dbus_message_get_no_reply(raw) != 0 }
        set { dbus_message_set_no_reply(raw, newValue ? 1 : 0) }
    }
    public func setDestination(_ name: String) { _ = dbus_message_set_destination(raw, name) }

    /// A copy with the same header and (already marshalled) body, no serial yet:
    /// one signal body can go to many destinations without marshalling it again.
    public func copy() -> Message? {
        dbus_message_copy(raw).map { Message(adopting: $0) }
    }

    /// The message's arguments, decoded.
    public func arguments() -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var out: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != tInvalid {
            out.append(decode(&iter))
            dbus_message_iter_next(&iter)
        }
        return out
    }

    /// Appends arguments. Throws `InvalidArgs` for a value libdbus would reject.
    public func append(_ values: [DBusValue]) throws {
        for v in values { try v.validateForWire() }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for v in values {
            guard encode(v, into: &iter) else { throw DBusError.failed("out of memory appending arguments") }
        }
    }

    /// For an error message: its name and first string argument.
    public var asError: DBusError? {
        guard type == .error else { return nil }
        let text = arguments().first?.stringValue ?? ""
        return DBusError(errorName ?? DBusError.failedName, text)
    }
}

extension String {
    /// libdbus strings are C strings: a NUL would silently cut them.
    func replacingNulls() -> String { containsNul ? replacingOccurrences0() : self }

    /// True if the string holds a NUL byte. memchr over the contiguous UTF-8 of a
    /// native string: the generic `utf8.contains(0)` was a visible share of every
    /// marshalled location fix (callgrind).
    var containsNul: Bool {
        utf8.withContiguousStorageIfAvailable { b in
            guard let base = b.baseAddress else { return false }
            return memchr(base, 0, b.count) != nil
        } ?? utf8.contains(0)
    }
    private func replacingOccurrences0() -> String {
        String(decoding: utf8.map { $0 == 0 ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
    }
}

extension DBusValue {
    /// Throws if libdbus would refuse to marshal this value.
    /// `checkType`: also check that this value's whole type is a valid, not
    /// too deeply nested signature. Done once at the top and again inside each
    /// variant (whose contents carry their own signature), not at every level:
    /// building and checking signatures node by node made marshalling a location
    /// dictionary cost more than the rest of a call.
    func validateForWire(checkType: Bool = true) throws {
        switch self {
        case .string(let s):
            if s.containsNul { throw DBusError.invalidArgs("string contains NUL") }
        case .objectPath(let p):
            if !DBusValidate.objectPath(p) { throw DBusError.invalidArgs("invalid object path") }
        case .signature(let s):
            if !DBusValidate.signature(s) { throw DBusError.invalidArgs("invalid signature") }
        case .array(let element, let items):
            guard DBusValidate.singleSignature(element) else { throw DBusError.invalidArgs("invalid array element type") }
            for i in items {
                guard i.signature == element else { throw DBusError.invalidArgs("array element of the wrong type") }
                try i.validateForWire(checkType: false)
            }
            if checkType { try checkWholeType() }
        case .dict(let k, let v, let entries):
            guard DBusValidate.singleSignature("a{" + k + v + "}") else { throw DBusError.invalidArgs("invalid dict type") }
            for e in entries {
                guard e.key.signature == k, e.value.signature == v else { throw DBusError.invalidArgs("dict entry of the wrong type") }
                try e.key.validateForWire(checkType: false)
                try e.value.validateForWire(checkType: false)
            }
        case .structure(let fields):
            if fields.isEmpty { throw DBusError.invalidArgs("empty struct") }
            for f in fields { try f.validateForWire(checkType: false) }
            if checkType { try checkWholeType() }
        case .variant(let inner):
            // A basic type is always a valid single complete type: only a container
            // inside a variant needs its whole signature checked (nesting depth).
            try inner.validateForWire(checkType: inner.isContainer)
        default:
            // Basic types and "v" are always valid single complete types.
            break
        }
    }

    /// An array's or struct's whole type, nesting depth included (a dict's, "a{KV}",
    /// is checked where its entries are).
    private func checkWholeType() throws {
        if !DBusValidate.singleSignature(signature) { throw DBusError.invalidArgs("invalid or too deeply nested type") }
    }
}

private func readBasic<T>(_ iter: inout DBusMessageIter, _ initial: T) -> T {
    var v = initial
    withUnsafeMutablePointer(to: &v) { dbus_message_iter_get_basic(&iter, UnsafeMutableRawPointer($0)) }
    return v
}

private func readString(_ iter: inout DBusMessageIter) -> String {
    let p: UnsafePointer<CChar>? = readBasic(&iter, nil)
    return p.map { String(cString: $0) } ?? ""
}

/// Decodes the value at `iter`. libdbus has already validated the message,
/// so types and nesting are sound here.
private func decode(_ iter: inout DBusMessageIter) -> DBusValue {
    let t = dbus_message_iter_get_arg_type(&iter)
    switch t {
    case tByte: return .byte(readBasic(&iter, UInt8(0)))
    case tBool: return .bool(readBasic(&iter, dbus_bool_t(0)) != 0)
    case tInt16: return .int16(readBasic(&iter, Int16(0)))
    case tUInt16: return .uint16(readBasic(&iter, UInt16(0)))
    case tInt32: return .int32(readBasic(&iter, Int32(0)))
    case tUInt32: return .uint32(readBasic(&iter, UInt32(0)))
    case tInt64: return .int64(readBasic(&iter, Int64(0)))
    case tUInt64: return .uint64(readBasic(&iter, UInt64(0)))
    case tDouble: return .double(readBasic(&iter, Double(0)))
    case tString: return .string(readString(&iter))
    case tPath: return .objectPath(readString(&iter))
    case tSig: return .signature(readString(&iter))
    case tFD:
        // libdbus hands us a duplicate we own; nothing in the API takes fds, so close it.
        let fd = readBasic(&iter, Int32(-1))
        if fd >= 0 { close(fd) }
        return .unixFD(-1)
    case tVariant:
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        return .variant(decode(&sub))
    case tStruct, tDictEntry:
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        var fields: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != tInvalid {
            fields.append(decode(&sub))
            dbus_message_iter_next(&sub)
        }
        return .structure(fields)
    case tArray:
        // The array's whole signature, "a" + element, read as bytes (every call with
        // an options dictionary comes through here).
        let sigPointer = dbus_message_iter_get_signature(&iter)
        defer { dbus_free(sigPointer) }
        let full = sigPointer.map { UnsafeBufferPointer(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self),
                                                          count: strlen($0)) } ?? UnsafeBufferPointer(start: nil, count: 0)
        let element = String(decoding: full.dropFirst(), as: UTF8.self)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        if dbus_message_iter_get_element_type(&iter) == tDictEntry {
            // "a{KV}": K is one basic type code, V the rest.
            let inner = full.count >= 4 ? full[2..<(full.count - 1)] : full[0..<0]
            let k = String(decoding: inner.prefix(1), as: UTF8.self), v = String(decoding: inner.dropFirst(), as: UTF8.self)
            var entries: [DBusValue.DictEntry] = []
            while dbus_message_iter_get_arg_type(&sub) != tInvalid {
                if case .structure(let kv) = decode(&sub), kv.count == 2 {
                    entries.append(.init(kv[0], kv[1]))
                }
                dbus_message_iter_next(&sub)
            }
            return .dict(key: k, value: v, entries)
        }
        var items: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != tInvalid {
            items.append(decode(&sub))
            dbus_message_iter_next(&sub)
        }
        return .array(element: element, items)
    default:
        return .structure([])
    }
}

private func appendBasic<T>(_ iter: inout DBusMessageIter, _ type: Int32, _ value: T) -> Bool {
    var v = value
    return withUnsafePointer(to: &v) { dbus_message_iter_append_basic(&iter, type, UnsafeRawPointer($0)) != 0 }
}

private func appendString(_ iter: inout DBusMessageIter, _ type: Int32, _ s: String) -> Bool {
    s.withCString { p in appendBasic(&iter, type, Optional(p)) }
}

private func container(_ iter: inout DBusMessageIter, _ type: Int32, _ signature: String?,
                       _ body: (inout DBusMessageIter) -> Bool) -> Bool {
    var sub = DBusMessageIter()
    let opened: dbus_bool_t
    if let signature {
        opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) }
    } else {
        opened = dbus_message_iter_open_container(&iter, type, nil, &sub)
    }
    guard opened != 0 else { return false }
    guard body(&sub) else {
        dbus_message_iter_abandon_container(&iter, &sub)
        return false
    }
    return dbus_message_iter_close_container(&iter, &sub) != 0
}

/// Appends a value already checked by `validateForWire`.
private func encode(_ value: DBusValue, into iter: inout DBusMessageIter) -> Bool {
    switch value {
    case .byte(let v): return appendBasic(&iter, tByte, v)
    case .bool(let v): return appendBasic(&iter, tBool, dbus_bool_t(v ? 1 : 0))
    case .int16(let v): return appendBasic(&iter, tInt16, v)
    case .uint16(let v): return appendBasic(&iter, tUInt16, v)
    case .int32(let v): return appendBasic(&iter, tInt32, v)
    case .uint32(let v): return appendBasic(&iter, tUInt32, v)
    case .int64(let v): return appendBasic(&iter, tInt64, v)
    case .uint64(let v): return appendBasic(&iter, tUInt64, v)
    case .double(let v): return appendBasic(&iter, tDouble, v)
    case .string(let s): return appendString(&iter, tString, s)
    case .objectPath(let s): return appendString(&iter, tPath, s)
    case .signature(let s): return appendString(&iter, tSig, s)
    case .unixFD(let fd): return appendBasic(&iter, tFD, fd)
    case .variant(let inner):
        return container(&iter, tVariant, inner.signature) { encode(inner, into: &$0) }
    case .structure(let fields):
        return container(&iter, tStruct, nil) { sub in fields.allSatisfy { encode($0, into: &sub) } }
    case .array(let element, let items):
        return container(&iter, tArray, element) { sub in items.allSatisfy { encode($0, into: &sub) } }
    case .dict(let k, let v, let entries):
        return container(&iter, tArray, "{" + k + v + "}") { sub in
            entries.allSatisfy { e in
                container(&sub, tDictEntry, nil) { entry in
                    encode(e.key, into: &entry) && encode(e.value, into: &entry)
                }
            }
        }
    }
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

/// The completion of one pending call. libdbus calls it from the pending call's
/// notify function, except when the connection drops: then libdbus finalizes
/// the pending call without notifying (its synthesized error reply no longer
/// matches a pending call), so the free function completes it instead, with
/// `Disconnected`, on the loop. (Calls still pending when we close the
/// connection ourselves are dropped silently, as before: their owner is leaving.)
private final class PendingCompletion {
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
private final class ConnectionState {
    var closedByUs = false
}

/// A private connection to a message bus, driven by an `EventLoop`.
public final class Connection {
    let raw: OpaquePointer
    private weak var loop: EventLoop?
    private var watches: [OpaquePointer: EventLoop.Token] = [:]
    private var timeouts: [OpaquePointer: EventLoop.Token] = [:]
    private var liveTimeouts: Set<OpaquePointer> = []
    private var drainScheduled = false
    private let state = ConnectionState()
    private var closed: Bool { state.closedByUs }

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

    /// Queues a message; the loop writes it out.
    @discardableResult
    public func send(_ message: Message) -> Bool {
        guard !closed else { return false }
        return dbus_connection_send(raw, message.raw, nil) != 0
    }

    /// Sends a call and runs `completion` on the loop with the reply, an error
    /// reply, or a `NoReply` error after `timeout` seconds.
    public func call(_ message: Message, timeout: Double, completion: @escaping (Result<Message, DBusError>) -> Void) {
        var pending: OpaquePointer?
        let ms = Connection.millis(timeout)
        guard !closed, dbus_connection_send_with_reply(raw, message.raw, &pending, ms) != 0, let pending else {
            loop?.later { completion(.failure(DBusError(DBusError.disconnectedName, "not connected"))) }
            return
        }
        let box = Unmanaged.passRetained(PendingCompletion(completion, loop: loop, state: state)).toOpaque()
        _ = dbus_pending_call_set_notify(pending, { p, data in
            guard let p, let data else { return }
            let completion = Unmanaged<PendingCompletion>.fromOpaque(data).takeUnretainedValue()
            guard let reply = dbus_pending_call_steal_reply(p) else {
                completion.complete(.failure(DBusError(DBusError.noReplyName, "no reply")))
                return
            }
            let msg = Message(adopting: reply)
            if let e = msg.asError { completion.complete(.failure(e)) } else { completion.complete(.success(msg)) }
        }, box, { data in
            guard let data else { return }
            let completion = Unmanaged<PendingCompletion>.fromOpaque(data)
            completion.takeUnretainedValue().finalize()
            completion.release()
        })
        dbus_pending_call_unref(pending)
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
    private static func millis(_ seconds: Double) -> Int32 {
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

    // MARK: Event loop integration

    /// Hands libdbus's watches, timeouts and dispatching to `loop`.
    public func attach(to loop: EventLoop) {
        self.loop = loop
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = dbus_connection_set_watch_functions(raw, { w, d in
            Connection.from(d).addWatch(w!)
            return 1
        }, { w, d in
            Connection.from(d).removeWatch(w!)
        }, { w, d in
            Connection.from(d).updateWatch(w!)
        }, me, nil)
        _ = dbus_connection_set_timeout_functions(raw, { t, d in
            let c = Connection.from(d)
            c.liveTimeouts.insert(t!)
            c.armTimeout(t!)
            return 1
        }, { t, d in
            let c = Connection.from(d)
            c.liveTimeouts.remove(t!)
            c.disarmTimeout(t!)
        }, { t, d in
            let c = Connection.from(d)
            c.disarmTimeout(t!)
            c.armTimeout(t!)
        }, me, nil)
        // Never dispatch inline from this callback: libdbus holds its lock here.
        dbus_connection_set_dispatch_status_function(raw, { _, status, d in
            if status == DBUS_DISPATCH_DATA_REMAINS { Connection.from(d).scheduleDrain() }
        }, me, nil)
        scheduleDrain()
    }

    private static func from(_ d: UnsafeMutableRawPointer?) -> Connection {
        Unmanaged<Connection>.fromOpaque(d!).takeUnretainedValue()
    }

    private func scheduleDrain() {
        guard !drainScheduled, let loop else { return }
        drainScheduled = true
        loop.later { [weak self] in self?.drain() }
    }

    private func drain() {
        drainScheduled = false
        guard !closed else { return }
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    private func events(of w: OpaquePointer) -> EventLoop.Events {
        guard dbus_watch_get_enabled(w) != 0 else { return [] }
        let flags = dbus_watch_get_flags(w)
        var e: EventLoop.Events = []
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { e.insert(.readable) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { e.insert(.writable) }
        return e
    }

    private func addWatch(_ w: OpaquePointer) {
        guard let loop else { return }
        let token = loop.watch(fd: dbus_watch_get_unix_fd(w), events: events(of: w)) { [weak self] ready in
            var flags: UInt32 = 0
            if ready.readable { flags |= DBUS_WATCH_READABLE.rawValue }
            if ready.writable { flags |= DBUS_WATCH_WRITABLE.rawValue }
            if ready.hangup { flags |= DBUS_WATCH_HANGUP.rawValue }
            if ready.error { flags |= DBUS_WATCH_ERROR.rawValue }
            _ = dbus_watch_handle(w, flags)
            self?.scheduleDrain()
        }
        watches[w] = token
    }

    private func removeWatch(_ w: OpaquePointer) {
        if let t = watches.removeValue(forKey: w) { loop?.unwatch(t) }
    }

    private func updateWatch(_ w: OpaquePointer) {
        if let t = watches[w] { loop?.update(t, events: events(of: w)) }
    }

    private func armTimeout(_ t: OpaquePointer) {
        guard let loop, dbus_timeout_get_enabled(t) != 0 else { return }
        let seconds = Double(dbus_timeout_get_interval(t)) / 1000
        timeouts[t] = loop.schedule(after: seconds) { [weak self] in
            guard let self, self.timeouts.removeValue(forKey: t) != nil else { return }
            _ = dbus_timeout_handle(t)
            // libdbus timeouts repeat until removed: re-arm one it still holds.
            if !self.closed, self.liveTimeouts.contains(t), self.timeouts[t] == nil { self.armTimeout(t) }
            self.scheduleDrain()
        }
    }

    private func disarmTimeout(_ t: OpaquePointer) {
        if let token = timeouts.removeValue(forKey: t) { loop?.cancelTimer(token) }
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
