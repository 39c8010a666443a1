import XCTest
import Foundation
import GeoConsentDaemon
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `Log.byCaller`: the lines callers can cause are bounded per uid and in all,
/// per window; what is held back is said once; root's callers are not counted.
/// The clock is injected (far from the real one, so no daemon line of this
/// process shares a window with these).
final class CallerLogBudgetTests: XCTestCase {
    /// What `body` wrote on stderr.
    private func stderrOf(_ body: () -> Void) throws -> [String] {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.file("stderr")
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        fflush(stderr)
        let saved = dup(2)
        dup2(fd, 2)
        body()
        dup2(saved, 2)
        close(saved)
        close(fd)
        let text = String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").map(String.init)
    }

    func testLinesPerUIDAndInAllAreBoundedAndWhatIsHeldBackIsSaidOnce() throws {
        let t0: UInt64 = 1 << 62, minute = UInt64(Log.callerWindow * 1e9)
        let lines = try stderrOf {
            for i in 0..<25 { Log.byCaller(uid: 1000, .info, "uid 1000 line \(i)", now: t0) }
            for i in 0..<5 { Log.byCaller(uid: 0, .info, "root line \(i)", now: t0 + 1) }
            for u in 0..<300 { Log.byCaller(uid: UInt32(2000 + u), .info, "uid \(2000 + u) line", now: t0 + 2) }
            Log.byCaller(uid: 1000, .info, "uid 1000 next window", now: t0 + minute)
        }
        XCTAssertEqual(lines.filter { $0.contains("uid 1000 line") }.count, Log.callerLinesPerUID)
        XCTAssertEqual(lines.filter { $0.contains("root line") }.count, 5, "root's callers are not counted")
        let others = lines.filter { $0.hasSuffix(" line") && $0.contains("uid 2") }.count
        XCTAssertEqual(others, Log.callerLinesTotal - Log.callerLinesPerUID, "the rest of the window's lines for all")
        let held = 25 - Log.callerLinesPerUID + 300 - others
        let notices = lines.filter { $0.contains("held back") }
        XCTAssertEqual(notices.count, 1, "\(lines.suffix(3))")
        XCTAssertTrue(notices.first?.contains("held back \(held) log lines that callers caused") ?? false, "\(notices)")
        XCTAssertEqual(lines.last.map { $0.hasSuffix("uid 1000 next window") }, true, "a new window: the uid's lines again")
    }

    func testCallerTextIsCut() {
        let long = String(repeating: "é", count: 3000)
        let cut = Log.field(long)
        XCTAssertLessThanOrEqual(cut.utf8.count, Log.maxFieldBytes + 32)
        XCTAssertTrue(cut.hasSuffix("…[\(long.utf8.count) bytes]"), cut.suffix(40).description)
        XCTAssertEqual(Log.field("short"), "\"short\"")
    }

    /// A quote in caller text cannot end the field early: the line's reader
    /// knows where the caller's words stop.
    func testCallerTextIsQuotedWithItsQuotesEscaped() {
        XCTAssertEqual(Log.field("maps\" (uid 1000"), "\"maps\\\" (uid 1000\"")
        XCTAssertEqual(Log.field("a\\b"), "\"a\\\\b\"")
        XCTAssertEqual(Log.field(""), "\"\"")
        // A combining mark after the quote makes one Character of the two; the quote is escaped all the same.
        XCTAssertEqual(Log.field("maps\"\u{301} (uid 1000"), "\"maps\\\"\u{301} (uid 1000\"")
    }
}
