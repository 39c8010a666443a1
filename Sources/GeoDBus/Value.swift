/// A D-Bus value, typed. Every basic type, arrays, dicts, structs and variants.
///
/// Arrays and dicts carry their element signature so that an empty one still
/// has a type on the wire.
public indirect enum DBusValue: Equatable, Sendable {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    case unixFD(Int32)
    /// An array whose elements have the single complete type `element`.
    case array(element: String, [DBusValue])
    /// A dict (`a{KV}`): an array of dict entries.
    case dict(key: String, value: String, [DictEntry])
    case structure([DBusValue])
    case variant(DBusValue)

    /// One entry of a dict.
    public struct DictEntry: Equatable, Sendable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value's complete D-Bus type signature.
    public var signature: String {
        switch self {
        case .byte: return "y"
        case .bool: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .array(let element, _): return "a" + element
        case .dict(let k, let v, _): return "a{" + k + v + "}"
        case .structure(let fields): return "(" + fields.map(\.signature).joined() + ")"
        case .variant: return "v"
        }
    }

    /// True for arrays, dictionaries, structs and variants; false for basic types.
    public var isContainer: Bool {
        switch self {
        case .array, .dict, .structure, .variant: return true
        default: return false
        }
    }
}

// MARK: - Convenience constructors and accessors

extension DBusValue {
    /// An `a{sv}` dict from Swift pairs, sorted by key so output is stable.
    public static func vardict(_ entries: [String: DBusValue]) -> DBusValue {
        .dict(key: "s", value: "v",
              entries.keys.sorted().map { DictEntry(.string($0), .variant(entries[$0]!)) })
    }

    /// An `as` array.
    public static func strings(_ items: [String]) -> DBusValue {
        .array(element: "s", items.map { .string($0) })
    }

    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): return s
        default: return nil
        }
    }
    public var uint32Value: UInt32? { if case .uint32(let v) = self { return v } else { return nil } }
    public var uint64Value: UInt64? { if case .uint64(let v) = self { return v } else { return nil } }
    public var int32Value: Int32? { if case .int32(let v) = self { return v } else { return nil } }
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    public var doubleValue: Double? { if case .double(let v) = self { return v } else { return nil } }
    /// The value inside a variant (or the value itself if it is not one).
    public var unwrapped: DBusValue { if case .variant(let v) = self { return v.unwrapped } else { return self } }
    public var arrayValue: [DBusValue]? {
        if case .array(_, let items) = self { return items } else { return nil }
    }
    public var structFields: [DBusValue]? {
        if case .structure(let f) = self { return f } else { return nil }
    }

    /// An `a{sv}` as a Swift dictionary of the variants' contents; nil if this is not `a{sv}`.
    public var vardictValue: [String: DBusValue]? {
        guard case .dict("s", "v", let entries) = self else { return nil }
        var out: [String: DBusValue] = [:]
        for e in entries {
            guard case .string(let k) = e.key, case .variant(let v) = e.value else { return nil }
            out[k] = v
        }
        return out
    }
}
