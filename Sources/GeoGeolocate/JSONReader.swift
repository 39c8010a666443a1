import GeoCore

/// A small JSON reader for the geolocate server's replies: no Foundation in
/// the processes that read them, and bounds on what a reply may make the
/// reader do (its size is capped before it gets here; its nesting here).
extension JSONValue {
    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 32

    /// Parses one JSON text (RFC 8259), surrounded by blanks at most.
    public static func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        var reader = Reader(bytes: bytes)
        reader.skipBlanks()
        let value = try reader.value(depth: 0)
        reader.skipBlanks()
        guard reader.atEnd else { throw reader.error("text after the value") }
        return value
    }
}

/// Why a text is not the JSON it should be.
public struct JSONError: Error, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public var description: String { "not JSON at byte \(offset): \(reason)" }
}

private struct Reader {
    let bytes: [UInt8]
    var i = 0

    var atEnd: Bool { i >= bytes.count }

    func error(_ reason: String) -> JSONError { JSONError(offset: i, reason: reason) }

    mutating func skipBlanks() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard i < bytes.count else { throw error("ends early") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try word("true"); return .bool(true)
        case UInt8(ascii: "f"): try word("false"); return .bool(false)
        case UInt8(ascii: "n"): try word("null"); return .null
        default: return .number(try number())
        }
    }

    mutating func word(_ w: String) throws(JSONError) {
        for b in w.utf8 {
            guard i < bytes.count, bytes[i] == b else { throw error("expected \(w)") }
            i += 1
        }
    }

    mutating func object(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= JSONValue.maxDepth else { throw error("nested deeper than \(JSONValue.maxDepth)") }
        i += 1
        var out: [String: JSONValue] = [:]
        skipBlanks()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(out) }
        while true {
            skipBlanks()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try string()
            skipBlanks()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':'") }
            i += 1
            skipBlanks()
            out[key] = try value(depth: depth)
            skipBlanks()
            guard i < bytes.count else { throw error("ends inside an object") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard bytes[i] == UInt8(ascii: "}") else { throw error("expected ',' or '}'") }
            i += 1
            return .object(out)
        }
    }

    mutating func array(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= JSONValue.maxDepth else { throw error("nested deeper than \(JSONValue.maxDepth)") }
        i += 1
        var out: [JSONValue] = []
        skipBlanks()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(out) }
        while true {
            skipBlanks()
            out.append(try value(depth: depth))
            skipBlanks()
            guard i < bytes.count else { throw error("ends inside an array") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard bytes[i] == UInt8(ascii: "]") else { throw error("expected ',' or ']'") }
            i += 1
            return .array(out)
        }
    }

    mutating func string() throws(JSONError) -> String {
        i += 1
        var scalars = String.UnicodeScalarView()
        var run: [UInt8] = []
        func flush() {
            if !run.isEmpty { scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars) }
            run.removeAll(keepingCapacity: true)
        }
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                flush()
                return String(scalars)
            }
            if b < 0x20 { throw error("a control character in a string") }
            if b != UInt8(ascii: "\\") {
                run.append(b)
                i += 1
                continue
            }
            flush()
            i += 1
            guard i < bytes.count else { break }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800..<0xDC00).contains(code), i + 1 < bytes.count,
                   bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") {
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("a lone surrogate") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(code) else { throw error("a lone surrogate") }
                scalars.append(u)
            default:
                throw error("a bad escape")
            }
        }
        throw error("ends inside a string")
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw error("ends inside \\u") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            case 0x41...0x46: d = UInt32(b - 0x41 + 10)
            default: throw error("a bad \\u escape")
            }
            v = v * 16 + d
            i += 1
        }
        return v
    }

    mutating func number() throws(JSONError) -> Double {
        let start = i
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        var digits = 0
        while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1; digits += 1 }
        guard digits > 0 else { throw error("expected a value") }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            var fraction = 0
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1; fraction += 1 }
            guard fraction > 0 else { throw error("a number without fraction digits") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            var exponent = 0
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1; exponent += 1 }
            guard exponent > 0 else { throw error("a number without exponent digits") }
        }
        guard i - start <= 64, let v = Double(String(decoding: bytes[start..<i], as: UTF8.self)), v.isFinite else {
            throw error("a number out of range")
        }
        return v
    }
}
