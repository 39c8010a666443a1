/// The one sanitizer for text the daemon reports about a caller (app ids,
/// executable paths, client-supplied display names) and for log lines.
///
/// Why: a program's path or name is chosen by whoever created it. A newline or a
/// right-to-left override (U+202E) in it can make a prompt, a log line or a
/// terminal show something else than the bytes say ("…/spaM.emonG.gro" read
/// backwards as "org.Gnome.Maps"). Such characters are written out as visible
/// escapes instead, so what a person reads is what the daemon resolved.
public enum DisplayText {
    /// True for a scalar that must never reach a display as itself: C0 controls
    /// (U+0000–001F), DEL (U+007F), C1 controls (U+0080–009F), the bidirectional
    /// marks, embeddings, overrides and isolates (U+061C, U+200E/F, U+202A–E,
    /// U+2066–9), the line and paragraph separators (U+2028/9), and every other
    /// format character (Unicode category Cf: zero-width joiners, U+FEFF, tags…).
    public static func isUnsafe(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        case 0x20...0x7E: return false   // printable ASCII: the common case, no table lookup
        default: return u.properties.generalCategory == .format
        }
    }

    /// True when `s` holds no character `isUnsafe` refuses.
    public static func isSafe(_ s: String) -> Bool {
        !s.unicodeScalars.contains(where: isUnsafe)
    }

    /// `s` with each unsafe scalar written as `\uXXXX` (four upper-case hex digits;
    /// `\UXXXXXXXX` above U+FFFF): U+202E becomes the six characters `\u202E`, a
    /// newline `\u000A`. Everything else, backslashes included, is kept as it is,
    /// so ordinary ids and paths are unchanged; the escape is for display and
    /// is not meant to be undone. Returns `s` itself when nothing needs escaping.
    public static func escaped(_ s: String) -> String {
        guard !isSafe(s) else { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            guard isUnsafe(u) else {
                out.append(u)
                continue
            }
            let hex = String(u.value, radix: 16, uppercase: true)
            let width = u.value > 0xFFFF ? 8 : 4
            let text = (u.value > 0xFFFF ? "\\U" : "\\u") + String(repeating: "0", count: width - hex.count) + hex
            out.append(contentsOf: text.unicodeScalars)
        }
        return String(out)
    }

    /// The longest caller-chosen text put in a log line, in bytes.
    public static let maxFieldBytes = 256

    /// Caller-chosen text (an app id, a path, a desktop id) for a log line:
    /// in double quotes, a quote or backslash in it escaped (so the closing
    /// quote is the text's end), cut at `maxFieldBytes` and marked with its
    /// full length. Lines put it last, after what the daemon proved (uid,
    /// identity kind, session), so that it cannot make a line read as about
    /// another user. Control and bidirectional characters are escaped when
    /// the line is written.
    public static func quotedField(_ s: String) -> String {
        let bytes = s.utf8
        var out: [UInt8] = [0x22]
        out.reserveCapacity(min(bytes.count, maxFieldBytes) + 8)
        // Byte by byte: a quote or a backslash is ASCII, never inside a longer
        // UTF-8 sequence, so each one is escaped even where a combining mark
        // follows it (as Characters, `"` and U+0301 are one, not a quote).
        for b in bytes.prefix(maxFieldBytes) {
            if b == 0x22 || b == 0x5C { out.append(0x5C) }
            out.append(b)
        }
        out.append(0x22)
        // A character cut in two at the limit is decoded as U+FFFD.
        let field = String(decoding: out, as: UTF8.self)
        return bytes.count > maxFieldBytes ? field + "…[\(bytes.count) bytes]" : field
    }
}
