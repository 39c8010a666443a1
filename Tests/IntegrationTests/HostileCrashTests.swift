import XCTest
import Foundation
import GeoDBus
import GeoCore
import GeoSystem
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Crash safety. The daemon is killed with SIGKILL at random
/// moments while several apps make consent decisions; after every kill the
/// state file parses, the restarted daemon reports no damage, and it holds
/// every decision whose reply was sent. (A damaged file being kept aside and
/// the daemon failing closed is `ConsentBusTests.testCorruptStateFailsClosed`;
/// the torn-file case below adds the shape a non-atomic write would leave.)
///
/// The apps, their decisions and the kills: `ConsentKillRun`.
final class HostileCrashTests: XCTestCase {
    var bus: TestBus!
    var stateDir: TempDir!
    var appsDir: TempDir!
    var gpsdPort: UInt16 = 0
    var daemon: DaemonInstance?
    let peers = PeerLoop()

    override func setUpWithError() throws {
        bus = try TestBus()
        stateDir = try TempDir()
        appsDir = try TempDir()
        gpsdPort = try FreePort.pick()   // no gpsd: nothing here needs a fix
    }

    override func tearDown() {
        daemon?.stop()
        daemon = nil
        bus?.stop()
        bus = nil
        stateDir = nil
        appsDir = nil
    }

    func startDaemon() throws -> DaemonInstance {
        let d = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsdPort, stateDir: stateDir.path)
        daemon = d
        return d
    }

    func testKill9DuringConsentWritesLosesNothingAndNeverCorrupts() throws {
        let run = try ConsentKillRun(seed: Hostile.seed(), busAddress: bus.address, stateDir: stateDir, appsDir: appsDir,
                                     peers: peers)
        let target = Hostile.count(small: 30, full: 1_000)
        var restartTimes: [Double] = []
        let t0 = secondsNow()
        while run.acked < target && run.problems.isEmpty {
            // Start (or restart) on the same state directory and check what survived.
            let tStart = secondsNow()
            let d = try startDaemon()
            restartTimes.append(secondsNow() - tStart)
            try run.checkWhatSurvived(d)
            if !run.problems.isEmpty { break }
            try run.decideUntilKilled(d)
        }
        daemon = nil

        // The last state, checked once more by a fresh daemon.
        let d = try startDaemon()
        XCTAssertFalse(d.log().contains("unusable"), d.log())
        try run.checkFinalRecords()
        let elapsed = secondsNow() - t0
        XCTAssertTrue(run.problems.isEmpty, run.problems.prefix(3).joined(separator: "\n"))
        XCTAssertGreaterThanOrEqual(run.acked, target)
        run.report(elapsed: elapsed, restartTimes: restartTimes)
    }

    /// Found by this suite: a kill between creating `.consents.tmp-PID-*` and renaming
    /// it left the temporary file (a full copy of the records) behind for good, one
    /// more per crash. A start-up now removes those of writers that are gone, and
    /// keeps those of a live process (it may be writing).
    func testStaleTemporaryFilesOfDeadWritersAreRemovedAtStartUp() throws {
        let gone = try ChildProcess(executable: "/bin/true", arguments: [], logPath: "/dev/null")
        XCTAssertNotNil(gone.waitForExit(timeout: 5))
        let live = getpid()
        let stale = [".consents.tmp-\(gone.pid)-abc", ".enabled.tmp-\(gone.pid)-def"]
        let kept = [".consents.tmp-\(live)-ghi", "consents.corrupt-1", "notes.txt"]
        for name in stale + kept { try "# geoconsent consents v1\n".write(toFile: stateDir.file(name), atomically: false, encoding: .utf8) }
        let d = try startDaemon()
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: stateDir.path))
        XCTAssertTrue(names.isDisjoint(with: stale), "\(names)")
        XCTAssertTrue(names.isSuperset(of: kept), "\(names)")
        XCTAssertFalse(d.log().contains("unusable"))
        Hostile.report("crash-stale-temp-files", "tried 2 temp files of a dead writer and 1 of a live process; saw "
            + "\(stale.filter { !names.contains($0) }.count) removed at start-up, \(kept.filter { names.contains($0) }.count) of 3 other files kept")
    }

    /// A torn write (what a non-atomic writer would leave after a power cut):
    /// both files cut in the middle of a line. Kept aside byte for byte, and the
    /// daemon fails closed. (Garbage files: ConsentBusTests.testCorruptStateFailsClosed.)
    func testTornStateFilesAreKeptAsideAndTheDaemonFailsClosed() throws {
        let tornConsents = "# geoconsent consents v1\n0\t/usr/bin/app\twhen-in-use\tfull\t1\tfull\t1700000000000000\t17000"
        let tornEnabled = "# geoconsent state v1\nenabled=tr"
        try tornConsents.write(toFile: stateDir.file("consents"), atomically: false, encoding: .utf8)
        try tornEnabled.write(toFile: stateDir.file("enabled"), atomically: false, encoding: .utf8)
        let d = try startDaemon()
        let p = try peers.connect(bus.address)
        XCTAssertEqual(p.property("Enabled"), .bool(false))
        XCTAssertEqual(try p.consents().count, 0)
        XCTAssertEqual(try p.tap().get(), 1, "restricted")
        let names = try FileManager.default.contentsOfDirectory(atPath: stateDir.path)
        let aside = names.filter { $0.contains(".corrupt-") }.sorted()
        XCTAssertEqual(aside.count, 2, "\(names)")
        for f in aside {
            let text = try String(contentsOfFile: stateDir.file(f), encoding: .utf8)
            XCTAssertEqual(text, f.hasPrefix("consents") ? tornConsents : tornEnabled)
        }
        let lines = d.log().split(separator: "\n").filter { $0.contains("unusable") }
        XCTAssertEqual(lines.count, 2, d.log())
        Hostile.report("crash-torn-file", "tried torn consents and enabled files (cut mid-line); saw both kept aside "
            + "(\(aside.joined(separator: ", "))), \(lines.count) log lines, Enabled false, 0 records, a tap restricted")
    }
}
