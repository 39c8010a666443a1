import Glibc
import GeoConsentClient
import GeoCore

/// Minimal JSON output (no Foundation: the tool starts fast and stays small).
indirect enum JSON {
    case string(String), number(Double), int(Int64), uint(UInt64), bool(Bool), null
    case array([JSON])
    case object([(String, JSON)])

    var text: String {
        switch self {
        case .string(let s): return JSON.quote(s)
        case .number(let d): return d.isFinite ? "\(d)" : "null"
        case .int(let i): return "\(i)"
        case .uint(let u): return "\(u)"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let a): return "[" + a.map(\.text).joined(separator: ",") + "]"
        case .object(let o): return "{" + o.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String { JSONValue.quoted(s) }

    /// A D-Bus value as JSON (variants unwrapped, a{sv} as objects).
    init(_ v: DBusValue) {
        switch v.unwrapped {
        case .byte(let x): self = .uint(UInt64(x))
        case .bool(let b): self = .bool(b)
        case .int16(let x): self = .int(Int64(x))
        case .uint16(let x): self = .uint(UInt64(x))
        case .int32(let x): self = .int(Int64(x))
        case .uint32(let x): self = .uint(UInt64(x))
        case .int64(let x): self = .int(x)
        case .uint64(let x): self = .uint(x)
        case .double(let d): self = .number(d)
        case .string(let s), .objectPath(let s), .signature(let s): self = .string(s)
        case .unixFD(let fd): self = .int(Int64(fd))
        case .array(_, let items): self = .array(items.map(JSON.init))
        case .structure(let f): self = .array(f.map(JSON.init))
        case .dict(_, _, let entries):
            self = .object(entries.map { (JSON.keyText($0.key), JSON($0.value)) })
        case .variant(let inner): self = JSON(inner)
        }
    }

    private static func keyText(_ v: DBusValue) -> String {
        if let s = v.stringValue { return s }
        return JSON(v).text
    }
}

/// Wall-clock microseconds as ISO 8601 UTC ("never" for 0).
func formatTime(_ micros: UInt64) -> String {
    guard micros > 0 else { return tr("never") }
    var t = time_t(micros / 1_000_000)
    var tm = tm()
    gmtime_r(&t, &tm)
    var buf = [CChar](repeating: 0, count: 32)
    strftime(&buf, buf.count, "%Y-%m-%dT%H:%M:%SZ", &tm)
    return String(cString: buf)
}

/// Prints `rows` as right-aligned "Label: value" lines, as timedatectl does.
func printFields(_ rows: [(String, String)]) {
    let width = rows.map(\.0.count).max() ?? 0
    for (k, v) in rows {
        print(String(repeating: " ", count: width - k.count) + k + ": " + v)
    }
}

/// Prints a table with a header row, columns padded to their widest cell.
func printTable(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
    for r in all {
        let line = r.indices.map { i in i == r.count - 1 ? r[i] : r[i] + String(repeating: " ", count: widths[i] - r[i].count) }
        print(line.joined(separator: "  "))
    }
}

func eprint(_ s: String) {
    var line = s + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
