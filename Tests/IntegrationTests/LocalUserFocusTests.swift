import XCTest
import Foundation
import GeoDBus
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A local user (uid 65534) whose agent registered with the `focus` feature
/// and never answers `CheckFocus`, so that every silent tap of its own would
/// wait on it, taps its approved app from many connections at once. The
/// daemon holds one such call per uid (the bus counts a call until it is
/// answered), so the attacker's taps fall back to its prompt at once
/// (fail closed), and the victim (another uid, whose agent does answer
/// `CheckFocus`) keeps getting its silent taps and fixes throughout.
final class LocalUserFocusTests: XCTestCase {
    var rig: LocalUserRig!
    private let attacker = LocalUserRig.attacker

    override func setUpWithError() throws {
        rig = try LocalUserRig(config: "")
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    private func lines(_ log: String, _ prefix: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: rig.work.file(log)) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix(prefix) }.map(String.init)
    }

    func testAnAgentHoldingCheckFocusStallsNeitherItsOwnTapsNorAnotherUsersSilentTaps() throws {
        let agent = try rig.startAgent(attacker, answer: "allow-once", log: "attacker-agent.log",
                                       extra: ["--features", "focus,notices", "--focus", "hold"])
        defer { agent.stop() }
        let report = try rig.whileVictimTaps("CheckFocus never answered", silentTaps: true) { _ in
            // The attacker's app is approved once (its agent allows), then tapped from 24 connections at once.
            let first = try rig.run(attacker, ["tap"], log: "attacker-first-tap.log", timeout: 30)
            XCTAssertTrue(first.output.contains("RequestOneTimeAuthorization") && first.output.contains("status 4"), first.output)
            let r = try rig.run(attacker, ["taps", "--calls", "24"], log: "focus-taps.log", timeout: 90)
            XCTAssertEqual(r.status, 0)
            let replies = AttackReply.parse(r.output.split(separator: "\n").map(String.init))
            XCTAssertEqual(replies.count, 24, "every tap is answered: \(r.output.suffix(400))")
            XCTAssertTrue(replies.allSatisfy { $0.error == nil && $0.line.hasSuffix("status 4") },
                          "each is asked and allowed: \(replies.map(\.line).prefix(4))")
            let held = lines("attacker-agent.log", "focus ").count
            XCTAssertEqual(held, 1, "the attacker's agent was asked once: one CheckFocus at a time per uid, the held one stops the rest")
            // They fell back to the prompt (joined: taps of one app wait on its one open prompt).
            XCTAssertGreaterThanOrEqual(lines("attacker-agent.log", "confirm ").count, 2, "they fell back to the prompt")
            return "attacker: 24 taps answered (max \(replies.maxMS) ms), \(held) CheckFocus held"
        }
        // The victim's taps after its first were silent, each checked with its own agent and told once a minute.
        let victimChecks = lines("victim-agent.log", "focus ").count
        XCTAssertGreaterThanOrEqual(victimChecks, report.rounds.count - 1, "the victim's silent taps were checked")
        XCTAssertEqual(lines("victim-agent.log", "confirm ").count, 1, "only the victim's first tap prompted")
        XCTAssertGreaterThanOrEqual(lines("victim-agent.log", "notice ").count, 1)
        XCTAssertTrue(rig.daemon.process.isRunning)
    }
}
