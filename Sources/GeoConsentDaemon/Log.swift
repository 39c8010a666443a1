import Glibc
import GeoCore
import GeoDBus

/// journald-friendly logging: one line per message on stderr with an sd-daemon
/// priority prefix (`<3>` error … `<7>` debug), which journald turns into the
/// priority; on a terminal, the text alone.
public enum Log {
    public enum Level: Int32 {
        case error = 3, warning = 4, notice = 5, info = 6, debug = 7
    }

    /// The `<N>` prefixes are for journald (and any log a pipe or file
    /// collects); a person reading a terminal gets the text alone.
    static let priorityPrefixes = isatty(2) == 0

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
        var line = priorityPrefixes ? "<\(level.rawValue)>" + text : text
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    // MARK: Lines a caller can cause

    /// The longest caller-chosen text (an app id, a path, a desktop id) put in a line.
    public static let maxFieldBytes = DisplayText.maxFieldBytes
    /// Lines a caller's uid can cause per window, and all callers together.
    public static let callerLinesPerUID = 20
    public static let callerLinesTotal = 200
    /// Seconds of one window.
    public static let callerWindow: Double = 60

    private static var windowStart: UInt64 = 0
    private static var linesOf: [UInt32?: Int] = [:]
    private static var linesInWindow = 0
    private static var heldBack = 0
    private static var heldBackUIDs: Set<UInt32?> = []

    /// Caller-chosen text for a log line: quoted and cut (`DisplayText.quotedField`).
    /// A line puts it last, after what the daemon proved of the caller.
    public static func field(_ s: String) -> String { DisplayText.quotedField(s) }

    /// A line that a caller of `uid` (nil: not known) can cause as often as it
    /// calls: at most `callerLinesPerUID` of a uid and `callerLinesTotal` of
    /// all uids in each `callerWindow`, so the journal stays bounded whatever
    /// callers do. What is held back is counted, and said in one line before
    /// the first line of a later window. Root's callers are not counted (root
    /// can write to the journal itself).
    public static func byCaller(uid: UInt32?, _ level: Level, _ message: @autoclosure () -> String,
                                now: UInt64 = EventLoop.monotonicNanos()) {
        guard level.rawValue <= maxLevel.rawValue else { return }
        if uid == 0 { return write(level, message()) }
        if now &- windowStart >= UInt64(callerWindow * 1e9) {
            if heldBack > 0 {
                let uids = heldBackUIDs.map { $0.map(String.init) ?? "unknown" }.sorted().prefix(8).joined(separator: ", ")
                write(.notice, "held back \(heldBack) log lines that callers caused in \(Int(callerWindow)) s " +
                      "(uids \(uids)\(heldBackUIDs.count > 8 ? ", …" : ""))")
            }
            windowStart = now
            linesOf = [:]
            linesInWindow = 0
            heldBack = 0
            heldBackUIDs = []
        }
        let n = linesOf[uid, default: 0]
        guard n < callerLinesPerUID, linesInWindow < callerLinesTotal else {
            heldBack += 1
            if heldBackUIDs.count < 64 { heldBackUIDs.insert(uid) }
            return
        }
        linesOf[uid] = n + 1
        linesInWindow += 1
        write(level, message())
    }

    public static func error(_ m: String) { write(.error, m) }
    public static func warning(_ m: String) { write(.warning, m) }
    public static func notice(_ m: String) { write(.notice, m) }
    public static func info(_ m: String) { write(.info, m) }
    public static func debug(_ m: @autoclosure () -> String) {
        if maxLevel == .debug { write(.debug, m()) }
    }
}
