import Glibc
import GeoCore

/// journald-friendly logging: one line per message on stderr with an sd-daemon
/// priority prefix (`<3>` error … `<7>` debug), which journald turns into the priority.
public enum Log {
    public enum Level: Int32 {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
    }

    /// Messages above this level are dropped (`GEOCONSENT_DEBUG=1` enables debug).
    public static var maxLevel: Level = getenv("GEOCONSENT_DEBUG") != nil ? .debug : .info

    /// The longest message written; the rest is cut (and marked), so that no
    /// text a client chose can make a line grow without bound.
    public static let maxMessageBytes = 8192

    public static func write(_ level: Level, _ message: String) {
        guard level.rawValue <= maxLevel.rawValue else { return }
        // One write(2) per line so concurrent writers never interleave mid-line.
        // Control, format and bidirectional characters are escaped (a newline in an
        // app's path must not start a forged log line), then the line is bounded.
        var text = DisplayText.escaped(message)
        if text.utf8.count > maxMessageBytes {
            text = String(decoding: text.utf8.prefix(maxMessageBytes), as: UTF8.self) + " [cut]"
        }
        var line = "<\(level.rawValue)>" + text
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    public static func error(_ m: String) { write(.error, m) }
    public static func warning(_ m: String) { write(.warning, m) }
    public static func notice(_ m: String) { write(.notice, m) }
    public static func info(_ m: String) { write(.info, m) }
    public static func debug(_ m: @autoclosure () -> String) {
        if maxLevel == .debug { write(.debug, m()) }
    }
}
