import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoConsentClient
import GeoTestSupport

/// An agent built on the client library that never answers: each prompt times
/// out and is withdrawn (`Cancel`), and the library then answers its `Confirm`
/// with an error. The daemon counts every `Confirm` it waits on against the
/// uid's budget (8, docs/dbus-api.md "Limits") until it is answered, the bus
/// too, so a withdrawn prompt left unanswered for good would soon end every
/// later prompt of the uid at once, unasked.
final class AgentWithdrawnPromptTests: XCTestCase {
    func testWithdrawnPromptsAreAnsweredSoTheUidsPromptsKeepComing() async throws {
        let stack = try Stack(config: "[daemon]\nprompt-timeout = 0.3\n")
        defer { stack.stop() }
        let agent = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { agent.close() }
        let requests = try await agent.registerAgent(at: "/org/example/SilentAgent")
        let seen = Counter()
        let watcher = Task {
            for await r in requests { if case .confirm = r { seen.add() } }
        }
        defer { watcher.cancel() }
        let taps = 12
        for i in 0..<taps {
            let app = try GeoConsentClient(bus: .address(stack.bus.address))
            let status = try await app.requestOneTimeAuthorization(AuthOptions(reason: "tap \(i)"))
            XCTAssertEqual(status, .notDetermined, "an unanswered prompt changes nothing")
            app.close()
        }
        // Every tap reached the agent: none ended unasked for want of budget.
        for _ in 0..<100 where seen.value < taps { try await Task.sleep(nanoseconds: 20_000_000) }
        XCTAssertEqual(seen.value, taps, stack.daemon.log())
        XCTAssertFalse(stack.daemon.log().contains("does not answer Confirm"), stack.daemon.log())
    }
}

/// A count shared with a task.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}
