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
/// Apps: copies of `busctl` at different paths are different app-ids (the
/// daemon names an unsandboxed app by its executable), so each copy is one app
/// whose decisions the test drives: tap (one-time approval), standard prompt
/// (allow-while-using or deny), ResetConsent (by root, from the test).
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

    /// What a record says, as far as decisions go.
    struct Decision: Equatable, CustomStringConvertible {
        var decision = ""          // "", when-in-use, denied
        var oneTime = false
        var description: String { "(\(decision.isEmpty ? "-" : decision), one-time \(oneTime ? "yes" : "no"))" }
    }

    enum Op: CustomStringConvertible {
        case tap, standard(String), reset
        var description: String {
            switch self {
            case .tap: return "tap"
            case .standard(let d): return "standard->\(d)"
            case .reset: return "reset"
            }
        }
        /// The record after this op is applied to `d`.
        func apply(_ d: Decision) -> Decision {
            switch self {
            case .tap: return Decision(decision: d.decision, oneTime: true)
            case .standard(let answer):
                return Decision(decision: answer == "allow-while-using" ? "when-in-use" : "denied", oneTime: d.oneTime)
            case .reset: return Decision()
            }
        }
    }

    final class App {
        let exe: String
        var model = Decision()             // what the daemon must hold: every acknowledged op applied
        var inFlight: (op: Op, started: Double)?
        var process: ChildProcess?
        var resetCall: BusPeer.PendingCall?
        init(exe: String) { self.exe = exe }
    }

    func startDaemon() throws -> DaemonInstance {
        let d = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsdPort, stateDir: stateDir.path)
        daemon = d
        return d
    }

    func records(_ root: BusPeer) throws -> [String: Decision] {
        var out: [String: Decision] = [:]
        for c in try root.hostileConsents() where c.uid == getuid() {
            out[c.appID] = Decision(decision: c.record["decision"]?.stringValue ?? "?",
                                    oneTime: c.record["one-time-approved"]?.boolValue ?? false)
        }
        return out
    }

    /// The next op that changes `d` (so that every op is a write).
    func nextOp(_ d: Decision, _ rng: inout SeededRNG) -> Op {
        if !d.decision.isEmpty { return .reset }
        if !d.oneTime { return .tap }
        return rng.chance(0.5) ? .standard(rng.chance(0.5) ? "allow-while-using" : "deny") : .reset
    }

    func testKill9DuringConsentWritesLosesNothingAndNeverCorrupts() throws {
        let seed = Hostile.seed()
        var rng = SeededRNG(seed: seed)
        let target = Hostile.count(small: 30, full: 1_000)
        let busctl = TestPaths.findExecutable("busctl") ?? "/usr/bin/busctl"
        let apps: [App] = try (0..<6).map { i in
            let dir = appsDir.file("app\(i)")
            mkdir(dir, 0o755)
            let exe = dir + "/busctl"
            try FileManager.default.copyItem(atPath: busctl, toPath: exe)
            return App(exe: exe)
        }
        var planned: [String: String] = [:]   // app-id -> answer to its standard prompt
        let root = try peers.connect(bus.address)

        var acked = 0, unackedApplied = 0, unackedLost = 0, kills = 0, killedMidOp = 0, answerKills = 0
        var opsByKind: [String: Int] = [:]
        var restartTimes: [Double] = []
        var problems: [String] = []
        var tempLeftovers = 0, tempSeen = 0
        let t0 = secondsNow()

        while acked < target && problems.isEmpty {
            // Start (or restart) on the same state directory and check what survived.
            let tStart = secondsNow()
            let d = try startDaemon()
            restartTimes.append(secondsNow() - tStart)
            let log = d.log()
            if log.contains("unusable") || log.contains("corrupt") {
                problems.append("after kill \(kills): the daemon reported a damaged file:\n\(log)")
                break
            }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: stateDir.path)) ?? []
            if names.contains(where: { $0.contains(".corrupt-") }) { problems.append("a file was moved aside: \(names)") }
            tempLeftovers = names.filter { $0.contains(".tmp-") }.count
            if tempLeftovers > 0 { problems.append("after kill \(kills): the restarted daemon left temp files: \(names)") }
            let stored = try records(root)
            for a in apps {
                let actual = stored[a.exe] ?? Decision()
                var allowed = [a.model]
                if let f = a.inFlight { allowed.append(f.op.apply(a.model)) }
                if !allowed.contains(actual) {
                    problems.append("\(a.exe): holds \(actual), expected \(allowed.map(\.description).joined(separator: " or ")) "
                                    + "(in flight at the kill: \(a.inFlight.map { "\($0.op)" } ?? "nothing"))")
                } else if a.inFlight != nil {
                    if actual == a.model { unackedLost += 1 } else { unackedApplied += 1 }
                }
                a.model = actual
                a.inFlight = nil
            }
            if !problems.isEmpty { break }

            // A consent agent for this uid on the new daemon.
            let agent = HostileAgent(peer: try peers.connect(bus.address)) { c in
                c.kind == "one-time" ? .answer("allow-once") : .answer(planned[c.appID] ?? "deny")
            }
            XCTAssertNoThrow(try agent.register().get())

            // Decisions from every app until the kill, at a random moment: half the runs
            // 5-60 ms in, the other half 0-3 ms after the agent's k-th answer, when the
            // daemon is about to write (or writing) the decision.
            var killAt = secondsNow() + Double(rng.int(5...60)) / 1000
            let killAfterAnswer: Int? = rng.chance(0.5) ? rng.int(1...6) : nil
            if killAfterAnswer != nil { killAt = secondsNow() + 2 }
            func launch(_ a: App) throws {
                let op = nextOp(a.model, &rng)
                a.inFlight = (op, secondsNow())
                opsByKind["\(op)".components(separatedBy: "->")[0], default: 0] += 1
                switch op {
                case .reset:
                    a.resetCall = root.geoAsync("ResetConsent", [.string(a.exe), .vardict([:])], timeout: 10)
                case .tap, .standard:
                    var member = "RequestOneTimeAuthorization"
                    if case .standard(let answer) = op {
                        planned[a.exe] = answer
                        member = "RequestWhenInUseAuthorization"
                    }
                    a.process = try ChildProcess(executable: a.exe,
                                                 arguments: ["--address=\(bus.address)", "--timeout=10", "call",
                                                             GeoConsentAPI.busName, GeoConsentAPI.objectPath,
                                                             GeoConsentAPI.interfaceName, member, "a{sv}", "0"],
                                                 logPath: "/dev/null", captureStdout: true)
                }
            }
            /// Whether the op's reply came, as expected; nil while it is still running.
            func finished(_ a: App, wait: Double) -> Bool? {
                guard let f = a.inFlight else { return nil }
                switch f.op {
                case .reset:
                    guard let c = a.resetCall else { return false }
                    if !c.isDone { peers.pump(timeout: wait) { c.isDone } }
                    guard let r = c.result else { return nil }
                    a.resetCall = nil
                    return (try? r.get()) != nil
                case .tap, .standard(_):
                    guard let p = a.process else { return false }
                    if p.waitForExit(timeout: wait) == nil { return nil }
                    let out = p.readAllStdout(timeout: 1).trimmingCharacters(in: .whitespacesAndNewlines)
                    a.process = nil
                    let want: String
                    if case .standard(let answer) = f.op { want = answer == "deny" ? "u 2" : "u 4" } else { want = "u 4" }
                    if !out.isEmpty && out != want { problems.append("\(a.exe) \(f.op): replied '\(out)', expected '\(want)'") }
                    return out == want
                }
            }
            for a in apps { try launch(a) }
            var armed = false
            while secondsNow() < killAt {
                peers.pump(timeout: 0.001) { false }
                if let k = killAfterAnswer, !armed, agent.confirms.count >= k {
                    armed = true
                    killAt = secondsNow() + Double(rng.int(0...3000)) / 1e6
                    answerKills += 1
                }
                for a in apps {
                    guard let ok = finished(a, wait: 0) else { continue }
                    if ok {
                        acked += 1
                        a.model = a.inFlight!.op.apply(a.model)
                    }
                    a.inFlight = nil
                    if secondsNow() < killAt { try launch(a) }
                }
            }
            d.kill9()
            kills += 1
            // Replies already sent still arrive (busctl prints them); those decisions must be on disk.
            for a in apps where a.inFlight != nil {
                guard let ok = finished(a, wait: 10) else {
                    problems.append("\(a.exe): no outcome 10 s after the kill")
                    continue
                }
                if ok {
                    acked += 1
                    a.model = a.inFlight!.op.apply(a.model)
                    a.inFlight = nil
                } else {
                    killedMidOp += 1   // stays in flight: either outcome is fine
                }
            }
            tempSeen += ((try? FileManager.default.contentsOfDirectory(atPath: stateDir.path)) ?? [])
                .filter { $0.contains(".tmp-") }.count
            // The file on disk parses, whatever moment the kill hit.
            let copyDir = try TempDir()
            if FileManager.default.fileExists(atPath: stateDir.file("consents")) {
                try FileManager.default.copyItem(atPath: stateDir.file("consents"), toPath: copyDir.file("consents"))
                let loaded = StateStore(directory: copyDir.path).loadConsents()
                if let p = loaded.problem { problems.append("after kill \(kills): \(p)") }
            }
            agent.peer.connection.close()
        }
        daemon = nil

        // The last state, checked once more by a fresh daemon.
        let d = try startDaemon()
        XCTAssertFalse(d.log().contains("unusable"), d.log())
        let final = try records(root)
        for a in apps {
            let actual = final[a.exe] ?? Decision()
            var allowed = [a.model]
            if let f = a.inFlight { allowed.append(f.op.apply(a.model)) }
            XCTAssertTrue(allowed.contains(actual), "\(a.exe): \(actual) not in \(allowed)")
            if a.inFlight != nil { if actual == a.model { unackedLost += 1 } else { unackedApplied += 1 } }
        }
        let elapsed = secondsNow() - t0
        XCTAssertTrue(problems.isEmpty, problems.prefix(3).joined(separator: "\n"))
        XCTAssertGreaterThanOrEqual(acked, target)
        let ops = opsByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Hostile.report("crash-kill9", "seed \(seed), mode \(Hostile.mode): tried \(kills) SIGKILLs at random moments "
            + "(\(kills - answerKills) 5-60 ms into a run, \(answerKills) 0-3 ms after an agent's answer) while \(apps.count) apps (busctl copies) made decisions (\(ops)) in "
            + "\(String(format: "%.1f", elapsed)) s")
        Hostile.report("crash-kill9", "saw \(acked) acknowledged decisions all on disk after each restart, "
            + "\(killedMidOp) ops cut by a kill (\(unackedApplied) of them found applied, \(unackedLost) not), "
            + "0 unparsable files, 0 damage reports, \(tempSeen) temp files of interrupted writes found after the kills, "
            + "\(tempLeftovers) left after the restarts (removed at start-up), "
            + "restart to name owned p50 \(Hostile.ms(percentile(restartTimes, 50)))")
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
        XCTAssertEqual(try p.hostileConsents().count, 0)
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
