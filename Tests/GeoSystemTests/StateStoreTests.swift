import Foundation
import XCTest
import GeoCore
@testable import GeoSystem

final class StateStoreTests: XCTestCase {
    private let header = "# geoconsent consents v1\n"

    private func sample() -> [AppKey: ConsentRecord] {
        [
            AppKey(uid: 1000, appID: "org.example.Maps"):
                ConsentRecord(decision: .whenInUse, decisionAccuracy: .full, decidedAt: 1_700_000_000_000_000,
                              lastUsed: 1_700_000_100_000_000),
            AppKey(uid: 1000, appID: "/usr/bin/odd\tname\nwith %41 percent\r\u{1}\u{7F}"):
                ConsentRecord(decision: .denied, decisionAccuracy: .reduced, oneTimeApproved: true,
                              oneTimeAccuracy: .reduced, decidedAt: 1, lastUsed: UInt64.max),
            AppKey(uid: 0, appID: "/opt/Ünïcödé app/bin/地図 🗺"):
                ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .full),
            AppKey(uid: UInt32.max, appID: "  spaces  "): ConsentRecord(),
            AppKey(uid: 1001, appID: ""): ConsentRecord(decision: .whenInUse, decisionAccuracy: .reduced),
        ]
    }

    func testRoundTripOddAppIDs() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        let records = sample()
        try store.saveConsents(records)
        let loaded = store.loadConsents()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.records, records)
        // Byte-exact app-ids survive (Swift String equality is canonical, so compare bytes too).
        for key in records.keys {
            let match = loaded.records.keys.first { $0 == key }
            XCTAssertEqual(match.map { Array($0.appID.utf8) }, Array(key.appID.utf8))
        }
        // Stable: saving again gives the same bytes.
        let first = dir.read("consents")
        try store.saveConsents(loaded.records)
        XCTAssertEqual(dir.read("consents"), first)
    }

    func testFileLooksAsDocumented() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        try store.saveConsents([
            AppKey(uid: 1000, appID: "b\t%"): ConsentRecord(decision: .denied, oneTimeApproved: true,
                                                           oneTimeAccuracy: .reduced, decidedAt: 5, lastUsed: 6),
            AppKey(uid: 1000, appID: "a"): ConsentRecord(decision: .whenInUse, decisionAccuracy: .full,
                                                        decidedAt: 7, lastUsed: 0),
            AppKey(uid: 7, appID: "z"): ConsentRecord(),
        ])
        XCTAssertEqual(dir.read("consents"), header +
            "7\tz\t-\t-\t0\t-\t0\t0\n" +
            "1000\ta\twhen-in-use\tfull\t0\t-\t7\t0\n" +
            "1000\tb%09%25\tdenied\t-\t1\treduced\t5\t6\n")
    }

    func testALapsedRecordHasTenFieldsAndRoundTrips() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        var r = ConsentRecord(decidedAt: 9, lastUsed: 4)
        r.lapsed = "when-in-use;one-time-approved"
        r.lapsedAt = 9
        var denied = ConsentRecord(decision: .denied, decidedAt: 1, lastUsed: 2)
        denied.lapsed = "one-time-approved"
        denied.lapsedAt = 1
        let records = [AppKey(uid: 1000, appID: "a"): r,
                       AppKey(uid: 1000, appID: "b"): denied]
        try store.saveConsents(records)
        XCTAssertEqual(dir.read("consents"), header +
            "1000\ta\t-\t-\t0\t-\t9\t4\twhen-in-use;one-time-approved\t9\n" +
            "1000\tb\tdenied\t-\t0\t-\t1\t2\tone-time-approved\t1\n")
        let loaded = store.loadConsents()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.records, records)
    }

    func testEmptyRecordsWriteHeaderOnly() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        try store.saveConsents([:])
        XCTAssertEqual(dir.read("consents"), header)
        let loaded = store.loadConsents()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.records, [:])
    }

    func testMissingFilesGiveDefaults() {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.sub("does/not/exist"))
        let c = store.loadConsents()
        XCTAssertEqual(c.records, [:])
        XCTAssertNil(c.problem)
        let e = store.loadEnabled()
        XCTAssertTrue(e.enabled)
        XCTAssertNil(e.problem)
    }

    func testSaveCreatesPrivateDirectoryAndFiles() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.sub("a/state"))
        try store.saveConsents(sample())
        try store.saveEnabled(false)
        XCTAssertEqual(dir.mode("a/state"), 0o700)
        XCTAssertEqual(dir.mode("a/state/consents"), 0o600)
        XCTAssertEqual(dir.mode("a/state/enabled"), 0o600)
        // No temporary files are left behind.
        XCTAssertEqual(dir.list("a/state"), ["consents", "enabled"])
        // Overwrites keep the mode and leave nothing behind either.
        try store.saveConsents([:])
        try store.saveEnabled(true)
        XCTAssertEqual(dir.list("a/state"), ["consents", "enabled"])
        XCTAssertEqual(dir.mode("a/state/consents"), 0o600)
    }

    func testCorruptConsentsAreKeptAsideAndMostPrivateValueUsed() {
        let good = "1000\tapp\twhen-in-use\tfull\t0\t-\t1\t2\n"
        let cases: [(name: String, text: String)] = [
            ("empty", ""),
            ("no header", good),
            ("wrong version", "# geoconsent consents v2\n" + good),
            ("truncated", header + String(good.dropLast(3))),
            ("too few fields", header + "1000\tapp\twhen-in-use\tfull\t0\t-\t1\n"),
            ("too many fields", header + "1000\tapp\twhen-in-use\tfull\t0\t-\t1\t2\t3\n"),
            ("eleven fields", header + "1000\tapp\t-\t-\t0\t-\t1\t2\twhen-in-use\t3\t4\n"),
            ("empty lapsed", header + "1000\tapp\t-\t-\t0\t-\t1\t2\t\t3\n"),
            ("unknown lapsed word", header + "1000\tapp\t-\t-\t0\t-\t1\t2\tforever\t3\n"),
            ("bad lapsed-at", header + "1000\tapp\t-\t-\t0\t-\t1\t2\twhen-in-use\tx\n"),
            ("denial cannot lapse", header + "1000\tapp\t-\t-\t0\t-\t1\t2\tdenied\t3\n"),
            ("empty lapsed part", header + "1000\tapp\t-\t-\t0\t-\t1\t2\twhen-in-use;;one-time-approved\t3\n"),
            ("lapsed yet granting", header + "1000\tapp\twhen-in-use\tfull\t0\t-\t1\t2\twhen-in-use\t3\n"),
            ("blank line", header + good + "\n"),
            ("bad uid", header + "x\tapp\t-\t-\t0\t-\t0\t0\n"),
            ("uid too big", header + "4294967296\tapp\t-\t-\t0\t-\t0\t0\n"),
            ("negative uid", header + "-1\tapp\t-\t-\t0\t-\t0\t0\n"),
            ("leading zero", header + "01\tapp\t-\t-\t0\t-\t0\t0\n"),
            ("bad decision", header + "1\tapp\tallow\t-\t0\t-\t0\t0\n"),
            ("empty decision", header + "1\tapp\t\t-\t0\t-\t0\t0\n"),
            ("bad accuracy", header + "1\tapp\t-\tFULL\t0\t-\t0\t0\n"),
            ("bad bool", header + "1\tapp\t-\t-\ttrue\t-\t0\t0\n"),
            ("bad one-time accuracy", header + "1\tapp\t-\t-\t1\texact\t0\t0\n"),
            ("bad time", header + "1\tapp\t-\t-\t0\t-\t1.5\t0\n"),
            ("time overflow", header + "1\tapp\t-\t-\t0\t-\t0\t18446744073709551616\n"),
            ("bad escape", header + "1\tap%4\t-\t-\t0\t-\t0\t0\n"),
            ("bad escape hex", header + "1\tap%G1\t-\t-\t0\t-\t0\t0\n"),
            ("escape makes bad utf8", header + "1\tap%FF\t-\t-\t0\t-\t0\t0\n"),
            ("raw control char", header + "1\tap\u{1}p\t-\t-\t0\t-\t0\t0\n"),
            ("duplicate", header + good + good),
            ("CRLF", header.replacingOccurrences(of: "\n", with: "\r\n") + good),
        ]
        for c in cases {
            let dir = TestDirectory()
            dir.write("consents", c.text)
            let store = StateStore(directory: dir.path)
            let result = store.loadConsents()
            XCTAssertEqual(result.records, [:], c.name)
            guard let problem = result.problem else { XCTFail("no problem reported: \(c.name)"); continue }
            let files = dir.list()
            XCTAssertEqual(files.count, 1, c.name)
            guard let aside = files.first else { continue }
            XCTAssertTrue(aside.hasPrefix("consents.corrupt-"), "\(c.name): \(aside)")
            XCTAssertNotNil(UInt64(aside.dropFirst("consents.corrupt-".count)), aside)
            XCTAssertEqual(dir.read(aside), c.text, "the damaged file is kept as it was: \(c.name)")
            XCTAssertTrue(problem.contains(dir.sub("consents")), problem)
            XCTAssertTrue(problem.contains(dir.sub(aside)), problem)
            XCTAssertFalse(problem.contains("\n"), problem)
            // After quarantine the next load starts fresh without a problem.
            XCTAssertNil(store.loadConsents().problem, c.name)
        }
    }

    /// The example in docs/state-format.md is a valid file, in the order the store writes.
    func testDocumentedExample() throws {
        let docPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/state-format.md").standardized.path
        let doc = try String(contentsOfFile: docPath, encoding: .utf8)
        let afterExample = try XCTUnwrap(doc.range(of: "Example:\n\n```\n"))
        let end = try XCTUnwrap(doc.range(of: "```", range: afterExample.upperBound..<doc.endIndex))
        let example = String(doc[afterExample.upperBound..<end.lowerBound])
        let dir = TestDirectory()
        dir.write("consents", example)
        let store = StateStore(directory: dir.path)
        let loaded = store.loadConsents()
        XCTAssertNil(loaded.problem)
        XCTAssertEqual(loaded.records.count, 3)
        XCTAssertEqual(loaded.records[AppKey(uid: 1000, appID: "/home/ann/bin/my\ttool")]?.oneTimeAccuracy, .reduced)
        try store.saveConsents(loaded.records)
        XCTAssertEqual(dir.read("consents"), example)
    }

    func testGoodHandWrittenFileLoads() {
        let dir = TestDirectory()
        dir.write("consents", header + "1000\tap%0ap%25\twhen-in-use\treduced\t1\tfull\t10\t20\n")
        let result = StateStore(directory: dir.path).loadConsents()
        XCTAssertNil(result.problem)
        XCTAssertEqual(result.records, [
            AppKey(uid: 1000, appID: "ap\np%"): ConsentRecord(decision: .whenInUse, decisionAccuracy: .reduced,
                                                             oneTimeApproved: true, oneTimeAccuracy: .full,
                                                             decidedAt: 10, lastUsed: 20),
        ])
    }

    func testUnreadableConsentsIsMovedAside() throws {
        let dir = TestDirectory()
        // A directory where the file should be cannot be read as a file.
        try FileManager.default.createDirectory(atPath: dir.sub("consents"), withIntermediateDirectories: false)
        let result = StateStore(directory: dir.path).loadConsents()
        XCTAssertEqual(result.records, [:])
        XCTAssertNotNil(result.problem)
        XCTAssertEqual(dir.list().count, 1)
        XCTAssertTrue(dir.list()[0].hasPrefix("consents.corrupt-"))
    }

    func testEnabledRoundTrip() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        try store.saveEnabled(false)
        XCTAssertEqual(dir.read("enabled"), "# geoconsent state v1\nenabled=false\n")
        XCTAssertEqual(store.loadEnabled().enabled, false)
        XCTAssertNil(store.loadEnabled().problem)
        try store.saveEnabled(true)
        XCTAssertEqual(dir.read("enabled"), "# geoconsent state v1\nenabled=true\n")
        XCTAssertEqual(store.loadEnabled().enabled, true)
        XCTAssertNil(store.loadEnabled().problem)
    }

    /// `wifi`, root's Wi-Fi switch: on when missing, kept as written, and off
    /// (the private value) when damaged, which is moved aside.
    func testWiFiSwitchRoundTripAndDamage() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        XCTAssertEqual(store.loadWiFiEnabled().enabled, true, "no file: the admin's wifi-url decides")
        try store.saveWiFiEnabled(false)
        XCTAssertEqual(dir.read("wifi"), "# geoconsent state v1\nwifi=false\n")
        XCTAssertEqual(store.loadWiFiEnabled().enabled, false)
        try store.saveWiFiEnabled(true)
        XCTAssertEqual(store.loadWiFiEnabled().enabled, true)
        dir.write("wifi", "# geoconsent state v1\nenabled=true\n")
        let damaged = store.loadWiFiEnabled()
        XCTAssertEqual(damaged.enabled, false)
        XCTAssertTrue(damaged.problem?.contains("Wi-Fi positioning stays off") ?? false, "\(damaged)")
        XCTAssertTrue(dir.list().contains { $0.hasPrefix("wifi.corrupt-") }, "\(dir.list())")
    }

    func testEnabledVariants() {
        let h = "# geoconsent state v1\n"
        let cases: [(text: String, enabled: Bool, corrupt: Bool)] = [
            (h + "enabled=true\n", true, false),
            (h + "enabled=false\n", false, false),
            ("", false, true),
            ("enabled=true\n", false, true),            // no header
            (h + "enabled=true", false, true),          // truncated
            (h, false, true),                           // no value
            (h + "enabled=yes\n", false, true),
            (h + "enabled = true\n", false, true),
            (h + "Enabled=true\n", false, true),
            (h + "enabled=true\nenabled=false\n", false, true),
            (h + "enabled=true\n\n", false, true),
            ("# geoconsent state v2\nenabled=true\n", false, true),
            (h + "enabled=tru", false, true),
        ]
        for c in cases {
            let dir = TestDirectory()
            dir.write("enabled", c.text)
            let result = StateStore(directory: dir.path).loadEnabled()
            XCTAssertEqual(result.enabled, c.enabled, c.text.debugDescription)
            XCTAssertEqual(result.problem != nil, c.corrupt, c.text.debugDescription)
            if c.corrupt {
                XCTAssertEqual(dir.list().count, 1)
                XCTAssertTrue(dir.list().first?.hasPrefix("enabled.corrupt-") ?? false, "\(dir.list())")
                XCTAssertTrue(result.problem?.contains(dir.sub("enabled")) ?? false)
            } else {
                XCTAssertEqual(dir.list(), ["enabled"])
            }
        }
    }

    func testSaveFailsClearlyWhenDirectoryCannotBeMade() throws {
        let dir = TestDirectory()
        dir.write("file", "x")
        let store = StateStore(directory: dir.sub("file/state"))
        XCTAssertThrowsError(try store.saveEnabled(true)) { e in
            XCTAssertTrue(e is SystemError, "\(e)")
            XCTAssertTrue("\(e)".contains(dir.sub("file")), "\(e)")
        }
    }
}
