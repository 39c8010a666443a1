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
        XCTAssertEqual(tap.effects, [.wakeUp(at: rig.now + 18_000_000)], "no NoAgent: it waits until 20 s after the login")
        XCTAssertTrue(tap.pending)
        let registered = rig.manage(W.agent, .registerAgent(path: W.agentPath))
        XCTAssertEqual(registered.effects.first, .reply(registered.call, .empty))
        let confirm = registered.effects.confirms.first
        XCTAssertEqual(confirm?.appID, W.mapsID, "the agent is asked as soon as it is there: \(registered.effects)")
        XCTAssertTrue(registered.effects.contains(.wakeUp(at: nil)), "nothing waits for an agent: the wake-up is cancelled")
        let out = rig.answer(confirm?.requestID, "allow-once")
        XCTAssertEqual(out.status(of: tap.call), .whenInUse)
        // A wake-up that fired all the same finds nothing to do.
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

    // MARK: One wake-up, however many wait

    /// A uid's session began a moment ago: 32 apps tap (each on a connection of
    /// its own) and wait for its agent. The daemon is asked for one wake-up,
    /// not one per request; it moves only when the earliest deadline does,
    /// and is cancelled when the last waiting request leaves.
    func testManyWaitingRequestsShareOneWakeUp() {
        let rig = rig(began: 2)
        var wakeUps: [CoreEffect] = []
        rig.observer = { _, effects in wakeUps += effects.filter { if case .wakeUp = $0 { return true } else { return false } } }
        let callers = (0..<32).map { W.maps1.connection(":1.\(300 + $0)") }
        for c in callers {
            rig.place(c, in: Self.place)
            XCTAssertTrue(rig.tap(c).pending)
        }
        XCTAssertEqual(wakeUps, [.wakeUp(at: rig.now + 18_000_000)], "one wake-up for 32 waiting requests")
        for c in callers.dropLast() { rig.leave(c) }
        XCTAssertEqual(wakeUps.count, 1, "still one: the last request waits until the same time")
        rig.leave(callers.last!)
        XCTAssertEqual(wakeUps.last, .wakeUp(at: nil), "nothing waits: the wake-up is cancelled")
        XCTAssertEqual(wakeUps.count, 2)
    }

    /// Requests of two login sessions: the wake-up is at the earlier deadline,
    /// and moves to the later one when the earlier request is answered.
    func testTheWakeUpMovesToTheNextDeadline() {
        let rig = rig(began: 15)   // Maps waits until 5 s from now
        let later = "/org/freedesktop/login1/session/_10"
        rig.send(.loginSessionBegan(id: later, at: rig.now - 2_000_000))   // until 18 s from now
        let weather = W.weather
        rig.place(weather, in: later)
        rig.login(later, .inUse)
        let t0 = rig.now
        XCTAssertEqual(rig.tap(W.maps1).effects, [.wakeUp(at: t0 + 5_000_000)])
        XCTAssertEqual(rig.tap(weather).effects, [], "a later deadline does not move it")
        rig.now += 5_000_000
        let out = rig.send(.wokeUp)
        XCTAssertTrue(out.contains { if case .fail(_, .noAgent) = $0 { return true } else { return false } }, "\(out)")
        XCTAssertEqual(out.last, .wakeUp(at: t0 + 18_000_000), "armed again for the request still waiting: \(out)")
    }

    /// A wake-up that fires a moment early answers nothing and is armed again
    /// for the same deadline (it is never lost).
    func testAnEarlyWakeUpIsArmedAgain() {
        let rig = rig(began: 2)
        let deadline = rig.now + 18_000_000
        rig.tap(W.maps1)
        rig.now = deadline - 1_000
        XCTAssertEqual(rig.send(.wokeUp), [.wakeUp(at: deadline)])
    }

    /// A GeoClue agent can answer only client objects' `Start`: its arrival
    /// does not evaluate again requests of our own API that wait for an agent
    /// of ours (that only queued them again, and a caller cycling AddAgent
    /// made the daemon do it as often as it liked).
    func testAGeoClueAgentThatCannotAnswerLeavesTheWaitingRequestsAlone() {
        let rig = rig(began: 2)
        let taps = (0..<8).map { i -> Step in
            let c = W.maps1.connection(":1.\(400 + i)")
            rig.place(c, in: Self.place)
            return rig.tap(c)
        }
        // The login start moves later: a tap evaluated again now would get a
        // new deadline, and the wake-up would move with it.
        XCTAssertEqual(rig.send(.loginSessionBegan(id: Self.place, at: rig.now)), [])
        let shell = Caller(session: ":1.900", uid: W.maps1.uid, pid: 900, appID: "/usr/bin/gnome-shell",
                           executable: "/usr/bin/gnome-shell")
        for i in 0..<50 {
            let g = shell.connection(":1.\(900 + i)")
            let added = rig.manage(g, .addExternalAgent(maxAccuracy: .full, label: "GeoClue agent"))
            XCTAssertEqual(added.effects, [.reply(added.call, .empty)], "nothing evaluated again, no wake-up: \(added.effects)")
            XCTAssertEqual(rig.leave(g), [])
        }
        XCTAssertTrue(taps.allSatisfy(\.pending))
        // Our own agent answers them.
        let registered = rig.manage(W.agent, .registerAgent(path: W.agentPath))
        XCTAssertEqual(registered.effects.confirms.count, 1, "one prompt for the app: \(registered.effects)")
    }
}
