// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Marshalling: DBusValue to and from a message's arguments.
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

extension Message {
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
        try append(values, nestingLimit: DBusValue.maxTotalDepth)
    }

    /// `append` with another limit on total nesting. libdbus enforces its own only
    /// when it reads a message, so tests pass `.max` to build what the bus refuses.
    func append(_ values: [DBusValue], nestingLimit: Int) throws {
        for v in values { try v.validateForWire(levels: nestingLimit) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for v in values {
            guard encode(v, into: &iter) else { throw DBusError.failed("out of memory appending arguments") }
        }
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
