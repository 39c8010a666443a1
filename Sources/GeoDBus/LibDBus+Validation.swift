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
    /// The most containers libdbus lets a message body nest, counting arrays,
    /// structs, dict entries and variants alike (twice DBUS_MAXIMUM_TYPE_RECURSION_DEPTH).
    /// A signature caps arrays, structs and dict entries at 32 each, but a variant
    /// starts a new signature, and even one signature can add up past 64 (17
    /// structs around 24 dicts): only this total stops both. libdbus checks it
    /// when it reads a message, not when it builds one: a message past it is
    /// appended and sent without complaint, and the bus then drops the sender as
    /// corrupt ("Variants cannot be used to create a hugely recursive tree of
    /// values"). Measured with libdbus 1.14.10: 64 levels pass, 65 do not
    /// (NestingDepthTests pins it against a real bus).
    static let maxTotalDepth = 64

    /// Throws if libdbus would refuse to marshal this value.
    /// `checkType`: also check that this value's whole type is a valid, not
    /// too deeply nested signature. Done once at the top and again inside each
    /// variant (whose contents carry their own signature), not at every level:
    /// building and checking signatures node by node made marshalling a location
    /// dictionary cost more than the rest of a call.
    /// `levels`: how many more containers libdbus lets this value open, counted
    /// down from `maxTotalDepth` for an argument.
    func validateForWire(checkType: Bool = true, levels: Int = maxTotalDepth) throws {
        switch self {
        case .string(let s):
            if s.containsNul { throw DBusError.invalidArgs("string contains NUL") }
        case .objectPath(let p):
            if !DBusValidate.objectPath(p) { throw DBusError.invalidArgs("invalid object path") }
        case .signature(let s):
            if !DBusValidate.signature(s) { throw DBusError.invalidArgs("invalid signature") }
        case .array(let element, let items):
            guard DBusValidate.singleSignature(element) else { throw DBusError.invalidArgs("invalid array element type") }
            // libdbus walks into an array only if it has elements and they are not of a
            // fixed-size basic type (those it checks as one block): only then do they count.
            if levels < 1, !items.isEmpty, !Self.isFixedSize(element) { throw Self.tooDeep }
            for i in items {
                guard i.signature == element else { throw DBusError.invalidArgs("array element of the wrong type") }
                try i.validateForWire(checkType: false, levels: levels - 1)
            }
            if checkType { try checkWholeType() }
        case .dict(let k, let v, let entries):
            guard DBusValidate.singleSignature("a{" + k + v + "}") else { throw DBusError.invalidArgs("invalid dict type") }
            // Two levels: the array, then each dict entry.
            if levels < 2, !entries.isEmpty { throw Self.tooDeep }
            for e in entries {
                guard e.key.signature == k, e.value.signature == v else { throw DBusError.invalidArgs("dict entry of the wrong type") }
                try e.key.validateForWire(checkType: false, levels: levels - 2)
                try e.value.validateForWire(checkType: false, levels: levels - 2)
            }
        case .structure(let fields):
            if fields.isEmpty { throw DBusError.invalidArgs("empty struct") }
            if levels < 1 { throw Self.tooDeep }
            for f in fields { try f.validateForWire(checkType: false, levels: levels - 1) }
            if checkType { try checkWholeType() }
        case .variant(let inner):
            if levels < 1 { throw Self.tooDeep }
            // A basic type is always a valid single complete type: only a container
            // inside a variant needs its whole signature checked (nesting depth).
            try inner.validateForWire(checkType: inner.isContainer, levels: levels - 1)
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

    private static let tooDeep = DBusError.invalidArgs("value nested more than \(maxTotalDepth) containers deep (variants count)")

    /// The fixed-size basic types (libdbus's dbus_type_is_fixed): y b n q i u x t d h.
    private static func isFixedSize(_ signature: String) -> Bool {
        let u = signature.utf8
        guard u.count == 1, let c = u.first else { return false }
        return "ybnqiuxtdh".utf8.contains(c)
    }
}
