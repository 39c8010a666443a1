// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Messages: building calls, signals, replies and errors, and reading their header.
// Their arguments are marshalled in LibDBus+Marshal.swift. Everything above this
// family speaks DBusValue, Message and Connection; nothing else imports CDBus.
import CDBus

/// The kind of a D-Bus message.
public enum MessageType: Int32, Sendable {
    case invalid = 0, methodCall = 1, methodReturn = 2, error = 3, signal = 4
}

/// Where the reply to a method call goes: the caller's unique name and the
/// call's serial.
public struct ReplyAddress: Equatable, Sendable {
    public var sender: String
    public var serial: UInt32
    public var noReplyExpected: Bool
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

    /// A signal built in one pass (`WireEncoder`) and handed to libdbus whole:
    /// far cheaper than appending its arguments one by one (see WireEncoder).
    /// libdbus checks the bytes as it checks a message read from the bus; nil
    /// if they fail, or for arguments the encoder does not write: the caller
    /// then builds the signal with `signal(path:interface:member:destination:)`.
    public static func signal(wire path: String, interface: String, member: String, destination: String?,
                              _ args: [DBusValue]) -> Message? {
        guard let bytes = WireEncoder.signal(path: path, interface: interface, member: member,
                                             destination: destination, args) else { return nil }
        let loaded: OpaquePointer? = bytes.withUnsafeBufferPointer { b in
            b.baseAddress!.withMemoryRebound(to: CChar.self, capacity: b.count) {
                dbus_message_demarshal($0, Int32(b.count), nil)
            }
        }
        guard let loaded else { return nil }
        defer { dbus_message_unref(loaded) }
        // The bytes carry a placeholder serial (0 is not allowed on the wire); a
        // copy has none, so the connection numbers it when it is sent.
        return dbus_message_copy(loaded).map { Message(adopting: $0) }
    }

    /// The message in the wire format, as libdbus marshals it (tests compare with it).
    public func marshalled() -> [UInt8]? {
        var out: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &out, &length) != 0, let out else { return nil }
        defer { dbus_free(out) }
        return out.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { Array(UnsafeBufferPointer(start: $0, count: Int(length))) }
    }

    /// Where replies to this call go: all a call that is answered later needs
    /// to keep of it, rather than the message itself.
    public var replyAddress: ReplyAddress {
        ReplyAddress(sender: sender ?? "", serial: dbus_message_get_serial(raw), noReplyExpected: noReplyExpected)
    }

    /// A method return to the call at `address`, built as
    /// dbus_message_new_method_return builds it from the call: destination, reply
    /// serial, and no reply expected to the reply.
    public static func methodReturn(to address: ReplyAddress) -> Message? {
        guard let m = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN) else { return nil }
        let msg = Message(adopting: m)
        return msg.address(to: address) ? msg : nil
    }

    /// A method return with `values` and no address yet: a template for
    /// `methodReturn(to:copying:)`, marshalled once for any number of replies.
    public static func methodReturnTemplate(_ values: [DBusValue]) throws -> Message {
        guard let m = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN) else { throw DBusError.failed("out of memory") }
        let msg = Message(adopting: m)
        try msg.append(values)
        return msg
    }

    /// A method return to the call at `address` with the body of `template`
    /// (from `methodReturnTemplate`), copied as it is marshalled already.
    public static func methodReturn(to address: ReplyAddress, copying template: Message) -> Message? {
        guard let m = dbus_message_copy(template.raw) else { return nil }
        let msg = Message(adopting: m)
        return msg.address(to: address) ? msg : nil
    }

    /// An error reply to the call at `address`, as dbus_message_new_error makes it:
    /// the error name (`Failed` when libdbus would reject it) and the text as its
    /// one string argument.
    public static func error(_ error: DBusError, to address: ReplyAddress) -> Message? {
        let name = DBusValidate.errorName(error.name) ? error.name : DBusError.failedName
        guard let m = dbus_message_new(DBUS_MESSAGE_TYPE_ERROR) else { return nil }
        let msg = Message(adopting: m)
        guard dbus_message_set_error_name(m, name) != 0, msg.address(to: address),
              (try? msg.append([.string(error.message.replacingNulls())])) != nil else { return nil }
        return msg
    }

    private func address(to a: ReplyAddress) -> Bool {
        dbus_message_set_no_reply(raw, 1)
        guard dbus_message_set_reply_serial(raw, a.serial) != 0 else { return false }
        return a.sender.isEmpty || dbus_message_set_destination(raw, a.sender) != 0
    }

    /// Whether Unix file descriptors came with the message. libdbus keeps them
    /// open as long as the message lives.
    public var containsUnixFDs: Bool { dbus_message_contains_unix_fds(raw) != 0 }

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
    /// Sets who sent it: what the bus does for a message it routes (`MemoryBus`).
    public func setSender(_ name: String) { _ = dbus_message_set_sender(raw, name) }
    /// Sets its serial: what sending does (`MemoryBus`); a reply names it.
    public func setSerial(_ serial: UInt32) { dbus_message_set_serial(raw, serial) }
    /// The serial libdbus gave the message when it was sent (0 before).
    public var serialNumber: UInt32 { dbus_message_get_serial(raw) }
    /// For a reply or error: the serial of the call it answers (0 otherwise).
    public var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }

    /// A copy with the same header and (already marshalled) body, no serial yet:
    /// one signal body can go to many destinations without marshalling it again.
    public func copy() -> Message? {
        dbus_message_copy(raw).map { Message(adopting: $0) }
    }


    /// For an error message: its name and first string argument.
    public var asError: DBusError? {
        guard type == .error else { return nil }
        let text = arguments().first?.stringValue ?? ""
        return DBusError(errorName ?? DBusError.failedName, text)
    }
}
