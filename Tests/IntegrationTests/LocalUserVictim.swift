import XCTest
import Foundation
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension LocalUserRig {
    /// Runs `attack` while the victim taps: waits for two rounds before it and
    /// three after it, then checks every round of the victim succeeded and the
    /// daemon still runs. `attack` gets the victim (to check it is served while
    /// the attack holds something) and returns a line for the report. Prints
    /// `hostile: local-user LABEL: victim N rounds, tap p50 …, max …; …`.
    @discardableResult
    func whileVictimTaps(_ label: String, silentTaps: Bool = false, file: StaticString = #filePath, line: UInt = #line,
                         _ attack: (Victim) throws -> String) throws -> VictimReport {
        let victim = try startVictim(silentTaps: silentTaps)
        var attacked = "(attack not run)"
        var report: VictimReport?
        defer {
            let r = report ?? victim.finish()
            Hostile.report("local-user \(label)", "victim \(r.latencies), failed rounds \(r.failedRounds.count); \(attacked)")
        }
        XCTAssertTrue(victim.waitForRounds(2, timeout: 60),
                      "the victim was not served before the attack: \(victim.rounds)\ndaemon:\n\(daemon.log())",
                      file: file, line: line)
        let before = victim.rounds.count
        attacked = try attack(victim)
        let during = victim.rounds.count
        XCTAssertTrue(victim.waitForRounds(during + 3, timeout: 60),
                      "the victim was not served after the attack (\(victim.rounds.count - during) rounds)\ndaemon:\n\(daemon.log())",
                      file: file, line: line)
        XCTAssertTrue(daemon.process.isRunning, "the daemon exited:\n\(daemon.log())", file: file, line: line)
        let r = victim.finish()
        report = r
        XCTAssertTrue(r.failedRounds.isEmpty, "victim rounds failed: \(r.failedRounds)", file: file, line: line)
        XCTAssertGreaterThanOrEqual(r.rounds.count, before + 3, file: file, line: line)
        XCTAssertEqual(r.summary["taps-failed"], "0", file: file, line: line)
        XCTAssertEqual(r.summary["fixes-failed"], "0", file: file, line: line)
        return r
    }
}

/// The victim of `LocalUserRig`: one round after another (tap answered by its
/// own agent, then a fix), each on a fresh connection, until `finish()`.
final class Victim {
    let agent: ChildProcess
    let process: ChildProcess
    let logPath: String

    init(agent: ChildProcess, process: ChildProcess, logPath: String) {
        self.agent = agent
        self.process = process
        self.logPath = logPath
    }

    /// The `round …` lines printed so far.
    var rounds: [String] { lines().filter { $0.hasPrefix("round ") } }

    /// Waits until at least `n` rounds are done; false on timeout or if the victim died.
    @discardableResult
    func waitForRounds(_ n: Int, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while rounds.count < n {
            if Date() > deadline || !process.isRunning { return false }
            usleep(20_000)
        }
        return true
    }

    /// Stops the victim (SIGTERM: it ends its round and prints its summary) and its agent.
    func finish() -> VictimReport {
        process.signal(SIGTERM)
        if process.waitForExit(timeout: 40) == nil { process.stop() }
        agent.stop()
        return VictimReport(lines: lines())
    }

    private func lines() -> [String] {
        guard let data = FileManager.default.contents(atPath: logPath) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// What the victim saw: its rounds and its summary line.
struct VictimReport {
    var rounds: [String]
    var failedRounds: [String]
    var summary: [String: String]

    init(lines: [String]) {
        rounds = lines.filter { $0.hasPrefix("round ") }
        failedRounds = rounds.filter { !($0.contains(" tap=ok ") && $0.contains(" fix=ok ")) }
        summary = [:]
        if let s = lines.last(where: { $0.hasPrefix("summary ") }) {
            for field in s.split(separator: " ").dropFirst() {
                let kv = field.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { summary[String(kv[0])] = String(kv[1]) }
            }
        }
    }

    /// "N rounds, tap p50 X ms, max Y ms" for the report lines.
    var latencies: String {
        "\(rounds.count) rounds, tap p50 \(summary["tap-p50-ms"] ?? "?") ms, max \(summary["tap-max-ms"] ?? "?") ms"
    }
}
