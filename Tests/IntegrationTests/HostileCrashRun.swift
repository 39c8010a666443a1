import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoSystem
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Six apps making consent decisions while the daemon is killed with SIGKILL
/// and restarted on the same state directory, for `HostileCrashTests`.
///
/// Apps: copies of `busctl` at different paths are different app-ids (the
/// daemon names an unsandboxed app by its executable), so each copy is one app
/// whose decisions the run drives: tap (one-time approval), standard prompt
/// (allow-while-using or deny), ResetConsent (by root, from the test). Each
/// app's `model` is what the daemon must hold: every acknowledged op applied.
final class ConsentKillRun {
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

        /// The records `actual` may be: the model, or the model with the op in flight applied.
        var allowed: [Decision] {
            var allowed = [model]
            if let f = inFlight { allowed.append(f.op.apply(model)) }
            return allowed
        }
    }

    let seed: UInt64
    let apps: [App]
    private var rng: SeededRNG
    private let busAddress: String
    private let stateDir: TempDir
    private let peers: PeerLoop
    /// Root's connection: ListConsents and ResetConsent.
    private let root: BusPeer
    /// app-id -> answer to its standard prompt.
    private var planned: [String: String] = [:]

    private(set) var acked = 0, unackedApplied = 0, unackedLost = 0, kills = 0, killedMidOp = 0, answerKills = 0
    private(set) var opsByKind: [String: Int] = [:]
    private(set) var problems: [String] = []
    private(set) var tempLeftovers = 0, tempSeen = 0

    init(seed: UInt64, busAddress: String, stateDir: TempDir, appsDir: TempDir, peers: PeerLoop) throws {
        self.seed = seed
        rng = SeededRNG(seed: seed)
        self.busAddress = busAddress
        self.stateDir = stateDir
        self.peers = peers
        let busctl = TestPaths.findExecutable("busctl") ?? "/usr/bin/busctl"
        apps = try (0..<6).map { i in
            let dir = appsDir.file("app\(i)")
            mkdir(dir, 0o755)
            let exe = dir + "/busctl"
            try FileManager.default.copyItem(atPath: busctl, toPath: exe)
            return App(exe: exe)
        }
        root = try peers.connect(busAddress)
    }

    /// This uid's records, by app-id.
    func records() throws -> [String: Decision] {
        var out: [String: Decision] = [:]
        for c in try root.consents() where c.uid == getuid() {
            out[c.appID] = Decision(decision: c.record.decision?.rawValue ?? "", oneTime: c.record.oneTimeApproved)
        }
        return out
    }

    /// Counts an op cut by a kill as found applied or lost, from what the daemon holds.
    private func countCut(_ a: App, _ actual: Decision) {
        if a.inFlight != nil { if actual == a.model { unackedLost += 1 } else { unackedApplied += 1 } }
    }

    /// After a (re)start `d`: no damage reported, nothing moved aside or left
    /// half-written, and every app's record is its model or its model with the
    /// op in flight at the kill applied. Adds to `problems`.
    func checkWhatSurvived(_ d: DaemonInstance) throws {
        let log = d.log()
        if log.contains("unusable") || log.contains("corrupt") {
            problems.append("after kill \(kills): the daemon reported a damaged file:\n\(log)")
            return
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: stateDir.path)) ?? []
        if names.contains(where: { $0.contains(".corrupt-") }) { problems.append("a file was moved aside: \(names)") }
        tempLeftovers = names.filter { $0.contains(".tmp-") }.count
        if tempLeftovers > 0 { problems.append("after kill \(kills): the restarted daemon left temp files: \(names)") }
        let stored = try records()
        for a in apps {
            let actual = stored[a.exe] ?? Decision()
            if !a.allowed.contains(actual) {
                problems.append("\(a.exe): holds \(actual), expected \(a.allowed.map(\.description).joined(separator: " or ")) "
                                + "(in flight at the kill: \(a.inFlight.map { "\($0.op)" } ?? "nothing"))")
            } else {
                countCut(a, actual)
            }
            a.model = actual
            a.inFlight = nil
        }
    }

    /// The last state, as a fresh daemon holds it: every app's record allowed.
    func checkFinalRecords() throws {
        let final = try records()
        for a in apps {
            let actual = final[a.exe] ?? Decision()
            XCTAssertTrue(a.allowed.contains(actual), "\(a.exe): \(actual) not in \(a.allowed)")
            countCut(a, actual)
        }
    }

    /// The next op that changes `d` (so that every op is a write).
    private func nextOp(_ d: Decision) -> Op {
        if !d.decision.isEmpty { return .reset }
        if !d.oneTime { return .tap }
        return rng.chance(0.5) ? .standard(rng.chance(0.5) ? "allow-while-using" : "deny") : .reset
    }

    private func launch(_ a: App) throws {
        let op = nextOp(a.model)
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
                                         arguments: ["--address=\(busAddress)", "--timeout=10", "call",
                                                     GeoConsentAPI.busName, GeoConsentAPI.objectPath,
                                                     GeoConsentAPI.interfaceName, member, "a{sv}", "0"],
                                         logPath: "/dev/null", captureStdout: true)
        }
    }

    /// Whether the op's reply came, as expected; nil while it is still running.
    private func finished(_ a: App, wait: Double) -> Bool? {
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

    /// Decisions from every app until `d` is killed, at a random moment: half the
    /// runs 5-60 ms in, the other half 0-3 ms after the agent's k-th answer, when
    /// the daemon is about to write (or writing) the decision. Then collects the
    /// replies already sent and checks the file on disk parses.
    func decideUntilKilled(_ d: DaemonInstance) throws {
        // A consent agent for this uid on the new daemon.
        let agent = HostileAgent(peer: try peers.connect(busAddress)) { [unowned self] c in
            c.kind == .oneTime ? .answer("allow-once") : .answer(self.planned[c.appID] ?? "deny")
        }
        XCTAssertNoThrow(try agent.register().get())

        var killAt = secondsNow() + Double(rng.int(5...60)) / 1000
        let killAfterAnswer: Int? = rng.chance(0.5) ? rng.int(1...6) : nil
        if killAfterAnswer != nil { killAt = secondsNow() + 2 }
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
        try collectAfterKill()
        agent.peer.connection.close()
    }

    private func collectAfterKill() throws {
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
    }

    /// The run's `crash-kill9` lines.
    func report(elapsed: Double, restartTimes: [Double]) {
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
}
