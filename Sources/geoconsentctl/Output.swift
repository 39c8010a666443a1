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
/// Columns a text takes on a terminal: East Asian wide and fullwidth
/// characters (Hangul, CJK, fullwidth forms) take two, combining marks none,
/// so Korean labels line up as English ones do.
func displayWidth(_ text: String) -> Int {
    var width = 0
    for u in text.unicodeScalars {
        switch u.value {
        case 0x0300...0x036F, 0x200B...0x200F, 0xFE00...0xFE0F: continue   // combining, zero width
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x20000...0x3FFFD:
            width += 2
        default: width += 1
        }
    }
    return width
}

func printFields(_ rows: [(String, String)]) {
    let width = rows.map { displayWidth($0.0) }.max() ?? 0
    for (k, v) in rows {
        print(String(repeating: " ", count: width - displayWidth(k)) + k + ": " + v)
    }
}

/// Prints a table with a header row, columns padded to their widest cell.
func printTable(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { i in all.map { displayWidth($0[i]) }.max() ?? 0 }
    for r in all {
        let line = r.indices.map { i in
            i == r.count - 1 ? r[i] : r[i] + String(repeating: " ", count: widths[i] - displayWidth(r[i]))
        }
        print(line.joined(separator: "  "))
    }
}

func eprint(_ s: String) {
    var line = s + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
