import XCTest
@testable import GeoCore

/// The first tap after login (docs/dbus-api.md, "Agent interface", `agent-wait`):
/// the user's agent starts with the session, maybe after the first app; a
/// request that needs a prompt within `agent-wait` seconds of the caller's
/// login session beginning waits for the agent instead of `NoAgent` at once.
final class ConsentCoreAgentWaitTests: XCTestCase {
    typealias W = Who
    static let place = "/org/freedesktop/login1/session/_9"

    /// A core with no agent, Maps placed in a login session that began `ago` seconds before now.
    private func rig(began ago: Double, agentWait: Double = 20) -> Rig {
        var config = Config()
        config.agentWait = agentWait
        let rig = Rig(config: config, agents: [])
        rig.send(.loginSessionBegan(id: Self.place, at: rig.now - UInt64(ago * 1e6)))
        rig.place(W.maps1, in: Self.place)
        rig.login(Self.place, .inUse)
        return rig
    }

    func testAFreshSessionsTapWaitsForTheAgentAndReachesThePrompt() {
        let rig = rig(began: 2)
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(tap.effects, [.wakeUp(after: 18)], "no NoAgent: it waits until 20 s after the login")
        XCTAssertTrue(tap.pending)
        let registered = rig.manage(W.agent, .registerAgent(path: W.agentPath))
        XCTAssertEqual(registered.effects.first, .reply(registered.call, .empty))
        let confirm = registered.effects.confirms.first
        XCTAssertEqual(confirm?.appID, W.mapsID, "the agent is asked as soon as it is there: \(registered.effects)")
        let out = rig.answer(confirm?.requestID, "allow-once")
        XCTAssertEqual(out.status(of: tap.call), .whenInUse)
        // Its wake-up comes later and finds nothing to do.
        rig.now += 20_000_000
        XCTAssertEqual(rig.send(.wokeUp), [])
    }

    func testWithoutAnAgentInTimeTheWaitEndsInNoAgent() {
        let rig = rig(began: 5)
        let tap = rig.tap(W.maps1)
        let ask = rig.ask(W.maps2.connection(":1.77"))   // another connection, not placed: no wait
        XCTAssertEqual(ask.error, .noAgent)
        rig.now += 15_000_000
        let out = rig.send(.wokeUp)
        XCTAssertEqual(out, [.fail(tap.call, .noAgent)])
    }

    func testAnOldSessionOrAnUnplacedCallerOrNoWaitAnswersAtOnce() {
        XCTAssertEqual(rig(began: 30).tap(W.maps1).error, .noAgent, "the session began 30 s ago")
        XCTAssertEqual(rig(began: 1, agentWait: 0).tap(W.maps1).error, .noAgent, "agent-wait = 0")
        XCTAssertEqual(rig(began: 1).tap(W.weather).error, .noAgent, "logind placed it nowhere")
    }

    func testAWaitingCallerThatLeavesIsForgotten() {
        let rig = rig(began: 1)
        rig.tap(W.maps1)
        rig.leave(W.maps1)
        let registered = rig.manage(W.agent, .registerAgent(path: W.agentPath))
        XCTAssertEqual(registered.effects, [.reply(registered.call, .empty)], "nobody is asked for a caller that left")
    }

    func testTheWaitCountsAmongTheUsersWaitingRequests() {
        var config = Config()
        config.limits.waitingPerUser = 1
        config.agentWait = 20
        let rig = Rig(config: config, agents: [])
        rig.send(.loginSessionBegan(id: Self.place, at: rig.now))
        for c in [W.maps1, W.weather] { rig.place(c, in: Self.place) }
        XCTAssertTrue(rig.tap(W.maps1).pending)
        XCTAssertEqual(rig.tap(W.weather).error, .noAgent, "beyond waiting-per-user: answered at once")
    }
}
