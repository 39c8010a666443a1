import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The agent slot of a uid, as the shipped terminal agent (`geoconsentctl
/// agent`) uses it. After a restart of geoconsentd every agent must register
/// again and any program of the uid may win that race; the shipped agent does
/// not give up: it waits for the slot while another agent holds it, and
/// registers again whenever geoconsentd comes back.
final class AgentSlotTests: StackTestCase {
    private func startCtlAgent(_ logs: TempDir) throws -> ChildProcess {
        try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                         arguments: ["--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                         logPath: logs.file("agent.log"), captureStdout: true)
    }

    /// Reads the agent's output until a line contains `text`.
    private func waitForLine(_ agent: ChildProcess, _ text: String, timeout: Double = 15,
                             file: StaticString = #filePath, line: UInt = #line) {
        let deadline = secondsNow() + timeout
        var seen: [String] = []
        while secondsNow() < deadline {
            // The squatting agent lives in this thread: keep its loop going meanwhile.
            stack.peers.settle(0.02)
            guard let l = agent.readStdoutLine(timeout: 0.05) else { continue }
            seen.append(l)
            if l.contains(text) { return }
        }
        XCTFail("no line with \"\(text)\" from geoconsentctl agent; saw: \(seen)", file: file, line: line)
    }

    /// A tap from a fresh connection, which the terminal agent answers (allow-once).
    private func assertTapGranted(_ what: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let p = try? stack.peer() else { return XCTFail("no connection", file: file, line: line) }
        // Forget the one-time approval so that the agent is asked each time.
        let selfAppID = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "?"
        _ = p.geo("ResetConsent", [.string(selfAppID), .vardict([:])])
        let tap = p.geoAsync("RequestOneTimeAuthorization", [.vardict([:])], timeout: 20)
        XCTAssertTrue(stack.peers.pump(timeout: 20) { tap.isDone }, "\(what): the tap was not answered", file: file, line: line)
        XCTAssertEqual(try tap.result?.get().first, .uint32(4), "\(what): \(String(describing: tap.result))", file: file, line: line)
    }

    func testTheTerminalAgentWaitsForTheSlotAndRegistersAgainAfterARestart() throws {
        // Another program of the same uid took the slot first.
        let squatter = TestAgent(peer: try stack.peer(), behaviour: .answer("deny"))
        XCTAssertNoThrow(try squatter.register().get())
        let logs = try TempDir()
        let agent = try startCtlAgent(logs)
        defer { agent.stop() }
        waitForLine(agent, "Not the consent agent for now")
        XCTAssertTrue(agent.isRunning, "geoconsentctl agent gave up on AgentExists")

        // The squatter leaves: the terminal agent takes the slot.
        squatter.peer.connection.close()
        waitForLine(agent, "Consent agent registered for uid")
        assertTapGranted("after the slot freed up")

        // geoconsentd restarts (its agents are forgotten): the agent registers again.
        try stack.restartDaemon()
        waitForLine(agent, "Consent agent registered for uid")
        assertTapGranted("after the restart")
        XCTAssertTrue(agent.isRunning)
    }
}
