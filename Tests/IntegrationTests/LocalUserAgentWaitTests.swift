import XCTest
import Foundation
import GeoDBus
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `agent-wait` under attack (docs/dbus-api.md, "Limits"): a user whose login
/// session began a moment ago (a logind stand-in says so) queues 32 taps that
/// wait for its agent, then cycles connect, GeoClue `AddAgent`, leave as fast
/// as the daemon answers. Each queued request once armed a timer of its own,
/// never cancelled, and each GeoClue agent's arrival queued them all again
/// with a timer each: 35,000 timers in 16 s, scanned on every turn, the daemon
/// at 93 % CPU and another uid's taps up to 300 ms late. Now the requests share
/// one wake-up, a GeoClue agent (which cannot answer them) leaves them alone,
/// and the loop keeps its timers in a heap. A victim of another uid taps
/// throughout; the daemon's CPU over the cycling is reported with and without
/// the waiting taps, and the taps end in `NoAgent` when the wait is over.
final class LocalUserAgentWaitTests: XCTestCase {
    var rig: LocalUserRig!
    private var peers: PeerLoop!
    private var logind: LogindMock!
    private let attacker = LocalUserRig.attacker
    static let session = "a1"

    override func setUpWithError() throws {
        rig = try LocalUserRig(config: "[daemon]\nagent-wait = 10\n", geoclue: true, logind: true)
        peers = PeerLoop()
        logind = try LogindMock(address: rig.bus.address, peer: try peers.connect(rig.bus.address), loop: peers,
                                logPath: rig.work.file("logind.log"))
        try logind.addSession(Self.session, uid: attacker.uid)
        // logind places a process by its cgroup; the stand-in by its owner: the attacker's
        // processes are in its session, everyone else's in none.
        try logind.placeByOwner(uid: attacker.uid, in: Self.session)
    }

    override func tearDown() {
        logind?.stop()
        rig?.stop()
        rig = nil
    }

    /// `geoclue-agent-loop --fresh` for `seconds` as the attacker: its summary
    /// line, and the daemon's CPU seconds meanwhile.
    private func agentLoop(seconds: Int, log: String) throws -> (summary: String, cpu: Double) {
        let pid = rig.daemon.process.pid
        let before = Hostile.cpuSeconds(pid)
        let out = try rig.run(attacker, ["geoclue-agent-loop", "--seconds", "\(seconds)", "--fresh"], log: log,
                              timeout: Double(seconds) + 30).output
        let cpu = Hostile.cpuSeconds(pid) - before
        let summary = out.split(separator: "\n").first { $0.hasPrefix("summary ") }.map(String.init) ?? "(no summary)"
        XCTAssertTrue(summary.contains(" ok="), out + tailOf(rig.work.file(log)))
        return (summary, cpu)
    }

    func testQueuedTapsAndCycledGeoClueAgentsCostOneWakeUp() throws {
        try rig.whileVictimTaps("32 taps waiting for an agent, AddAgent cycled") { _ in
            // The session begins now (said before the daemon first reads it): its taps wait for an agent for 10 s.
            let began = Date()
            try logind.setBegan(Self.session, wall: UInt64(began.timeIntervalSince1970 * 1e6),
                                monotonic: EventLoop.monotonicNanos() / 1000)
            let idle = try agentLoop(seconds: 3, log: "loop-idle.log")
            let taps = try rig.start(attacker, ["taps", "--calls", "32", "--wait", "60"], log: "taps.log", captureStdout: true)
            defer { taps.stop() }
            XCTAssertEqual(taps.readStdoutLine(timeout: 20), "sent 32", tailOf(rig.work.file("taps.log")))
            let busy = try agentLoop(seconds: 3, log: "loop-waiting.log")

            // Still waiting through the cycling (a GeoClue agent cannot answer them), then NoAgent once the wait is over.
            var lines: [String] = []
            while lines.filter({ $0.hasPrefix("reply ") }).count < 32, let l = taps.readStdoutLine(timeout: 40) {
                lines.append(l)
            }
            let replies = lines.filter { $0.hasPrefix("reply ") }
            let waited = Date().timeIntervalSince(began)
            XCTAssertEqual(replies.count, 32, "the taps were answered: \(lines.suffix(4))\n\(rig.daemon.log().suffix(2000))")
            XCTAssertTrue(replies.allSatisfy { $0.contains("org.geoconsent.GeoConsent1.Error.NoAgent") }, "\(replies.prefix(3))")
            XCTAssertGreaterThanOrEqual(waited, 9.5, "answered when the 10 s were over, not before")
            return String(format: "daemon CPU over 3 s of AddAgent cycling: %.2f s with no waiting tap (%@), " +
                          "%.2f s with 32 waiting (%@); the taps got NoAgent after %.1f s",
                          idle.cpu, idle.summary, busy.cpu, busy.summary, waited)
        }
    }
}
