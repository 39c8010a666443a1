// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Validation: names, strings and values checked before they reach libdbus.
import CDBus
import Glibc

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
