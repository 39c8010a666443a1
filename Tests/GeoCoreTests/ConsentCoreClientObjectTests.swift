import XCTest
@testable import GeoCore

/// Client objects (GeoClue `Client`): each is a session and a grant of its own,
/// named after its connection, ended by `sessionEnded` or by its connection
/// leaving; `Start` is the standard prompt followed by updates, or a refusal
/// that says why.
final class ConsentCoreClientObjectTests: XCTestCase {
    typealias W = Who

    /// Maps' connection :1.10, client objects 1 and 2; Weather's client 3.
    static let client1 = W.maps1.clientSession(1)
    static let client2 = W.maps1.clientSession(2)
    static let weather3 = W.weather.clientSession(3)
    static let filters = UpdateOptions(distanceFilter: 50, minInterval: 2)

    @discardableResult
    private func start(_ rig: Rig, _ c: Caller, _ a: Accuracy = .full, desktopID: String = "maps") -> Step {
        rig.call(c, .start(AuthOptions(accuracy: a, appName: desktopID, promptTimeout: Rig.clientPromptTimeout), Self.filters))
    }

    func testClientSessionNames() {
        XCTAssertEqual(Self.client1.session, .clientObject(connection: ":1.10", kind: .testObjects, number: 1))
        XCTAssertEqual(Self.client1.session.description, ":1.10/geoclue/1", "as logs name it")
        XCTAssertEqual(Self.client1.connection, ":1.10")
        XCTAssertEqual(Self.client1.app, W.maps1.app, "the app of its connection")
        XCTAssertEqual(W.maps1.session, .connection(W.maps1.connection))
        XCTAssertEqual(Self.client1.session.busName, nil, "a client object's session is its front end's")
        XCTAssertEqual(W.maps1.session.busName, ":1.10")
        XCTAssertEqual([Self.client1.session, W.maps1.session, W.maps1.clientSession(2).session].sorted(),
                       [W.maps1.session, Self.client1.session, W.maps1.clientSession(2).session],
                       "a connection's own session first, then its client objects by number")
    }

    /// Every way `Start` can end, from the state before it and the agent's answer.
    func testStartOutcomes() {
        enum Outcome: Equatable {
            case updates(Accuracy)
            case refused(String)
        }
        struct Case {
            var label: String
            var records: [AppKey: ConsentRecord] = [:]
            var enabled = true
            var config = Config()
            var agents = [W.agent]
            var accuracy = Accuracy.full
            /// The agent's answer; nil: no prompt expected.
            var answer: AgentAnswer?
            var outcome: Outcome
            var stored: StoredDecision?
        }
        let cases: [Case] = [
            Case(label: "allow once", answer: .decision(.allowOnce), outcome: .updates(.full)),
            Case(label: "allow while using", answer: .decision(.allowWhileUsing), outcome: .updates(.full),
                 stored: .whenInUse),
            Case(label: "reduced, allowed", accuracy: .reduced, answer: .decision(.allowOnce), outcome: .updates(.reduced)),
            Case(label: "don't allow", answer: .decision(.deny), outcome: .refused("denied"), stored: .denied),
            Case(label: "prompt timed out", answer: .noAnswer("timeout"), outcome: .refused("not answered")),
            Case(label: "agent error", answer: .noAnswer("org.freedesktop.DBus.Error.Failed"),
                 outcome: .refused("not answered")),
            Case(label: "stored when-in-use answers silently", records: stored((W.maps1, .whenInUseFull)),
                 outcome: .updates(.full), stored: .whenInUse),
            Case(label: "a stored reduced grant gives reduced fixes", records: stored((W.maps1, .whenInUseReduced)),
                 accuracy: .reduced, outcome: .updates(.reduced), stored: .whenInUse),
            Case(label: "stored reduced, full asked: prompts", records: stored((W.maps1, .whenInUseReduced)),
                 answer: .decision(.allowOnce), outcome: .updates(.full), stored: .whenInUse),
            Case(label: "stored denied refuses silently", records: stored((W.maps1, .denied)),
                 outcome: .refused("denied"), stored: .denied),
            Case(label: "a one-time approval of the button is not a decision",
                 records: stored((W.maps1, .approvedFull)), answer: .decision(.deny), outcome: .refused("denied"),
                 stored: .denied),
            Case(label: "location switched off", enabled: false, outcome: .refused("switched off")),
            Case(label: "restricted by config", config: config(apps: [W.mapsID: .restricted]),
                 outcome: .refused("policy = restricted")),
            Case(label: "always by config needs a system uid", config: config(apps: [W.mapsID: .always], systemUIDMax: 1000),
                 outcome: .updates(.full)),
            Case(label: "no agent", agents: [], outcome: .refused("No consent agent")),
        ]
        for c in cases {
            let rig = Rig(config: c.config, records: c.records, enabled: c.enabled, agents: c.agents)
            let s = start(rig, Self.client1, c.accuracy)
            var out = s.effects
            if let answer = c.answer {
                guard let confirm = s.confirm else { XCTFail("\(c.label): no prompt: \(s.effects)"); continue }
                XCTAssertEqual(confirm.kind, .whenInUse, c.label)
                XCTAssertEqual(confirm.appID, W.mapsID, "\(c.label): the app of the connection")
                XCTAssertEqual(confirm.appName, "maps", "\(c.label): the desktop id for display")
                out = rig.send(.agentAnswered(requestID: confirm.requestID, answer))
            } else {
                XCTAssertEqual(s.effects.confirms, [], "\(c.label): no prompt")
            }
            switch c.outcome {
            case .updates(let acc):
                XCTAssertTrue(out.contains(.startUpdates(s.call, session: Self.client1.session, Self.filters)), "\(c.label): \(out)")
                XCTAssertEqual(rig.core.grantedAccuracy(for: Self.client1.session), acc, c.label)
                XCTAssertTrue(rig.core.updatesOn(Self.client1.session), c.label)
            case .refused(let why):
                guard case .accessDenied(let m)? = out.failure(of: s.call) else {
                    XCTFail("\(c.label): not refused: \(out)")
                    continue
                }
                XCTAssertTrue(m.contains(why), "\(c.label): \(m)")
                XCTAssertNil(rig.core.grantedAccuracy(for: Self.client1.session), c.label)
            }
            XCTAssertEqual(out.reply(to: s.call), nil, "\(c.label): Start gets no status reply")
            XCTAssertEqual(rig.core.records[W.maps1.app]?.decision, c.stored, c.label)
        }
    }

    func testStartPromptIsCappedBelowTheClientsTimeout() {
        for (configured, expected) in [(60.0, 20.0), (10, 10)] {
            let rig = Rig(config: config(promptTimeout: configured))
            XCTAssertEqual(start(rig, Self.client1).confirm?.timeout, expected)
            XCTAssertEqual(rig.ask(W.weather).confirm?.timeout, configured, "our own API keeps the configured timeout")
        }
    }

    func testEachClientObjectIsItsOwnGrant() {
        let rig = Rig()
        let s = start(rig, Self.client1)
        rig.answer(s.promptID, "allow-once")
        XCTAssertEqual(rig.core.grantedAccuracy(for: Self.client1.session), .full)
        // Another client object of the same connection asks again; the connection itself has nothing.
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertNotNil(start(rig, Self.client2).confirm, "Allow Once covers only its own client object")
    }

    func testAllowOnceLivesUntilTheClientObjectsSessionEnds() {
        let rig = Rig()
        let s = start(rig, Self.client1)
        rig.answer(s.promptID, "allow-once")
        XCTAssertEqual(rig.send(.sessionEnded(Self.client1.session)), [.grantEnded(session: Self.client1.session)])
        XCTAssertFalse(rig.core.hasSession(Self.client1.session))
        XCTAssertNotNil(start(rig, Self.client1).confirm, "Start after Stop asks again")
    }

    func testStoredDecisionOutlivesTheClientObject() {
        let rig = Rig()
        let s = start(rig, Self.client1)
        rig.answer(s.promptID, "allow-while-using")
        rig.send(.sessionEnded(Self.client1.session))
        rig.now += 1_000_000
        let again = start(rig, Self.client1)
        XCTAssertEqual(again.effects, [.saveConsents(urgent: false),   // last-used
                                       .startUpdates(again.call, session: Self.client1.session, Self.filters)])
    }

    func testConnectionLeavingEndsAllItsClientObjects() {
        let rig = Rig()
        for c in [Self.client1, Self.client2, Self.weather3] {
            rig.answer(start(rig, c).promptID, "allow-once")
        }
        rig.approveTap(W.maps1)
        XCTAssertEqual(rig.core.sessionCount, 4)
        let out = rig.leave(W.maps1)
        XCTAssertEqual(out.grantsEnded, [Self.client1.session, Self.client2.session, W.maps1.session])
        XCTAssertEqual(rig.core.sessionCount, 1)
        XCTAssertEqual(rig.core.grantedAccuracy(for: Self.weather3.session), .full, "another connection's client is untouched")
    }

    func testClientObjectEndingWhileItsStartWaitsWithdrawsThePrompt() {
        let rig = Rig()
        let s = start(rig, Self.client1)
        let id = s.promptID
        XCTAssertEqual(rig.send(.sessionEnded(Self.client1.session)).cancels, [id!])
        XCTAssertEqual(rig.core.openPromptCount, 0)
        XCTAssertEqual(rig.answer(id, "allow-once"), [], "a late answer reaches nobody")

        // Its connection leaving does the same.
        let t = start(rig, Self.client2)
        XCTAssertEqual(rig.leave(W.maps1).cancels, [t.promptID!])
    }

    func testClientObjectsJoinTheAppsOpenPrompt() {
        let rig = Rig()
        let a = start(rig, Self.client1)
        let b = start(rig, Self.client2)
        XCTAssertTrue(b.pending)
        XCTAssertEqual(b.effects.confirms, [], "one prompt for the app")
        let out = rig.answer(a.promptID, "allow-once")
        XCTAssertEqual(Set(out.compactMap { if case .startUpdates(let id, _, _) = $0 { return id } else { return nil } }),
                       [a.call, b.call])
    }

    func testSwitchingLocationOffRefusesAWaitingStartAndEndsRunningOnes() {
        let rig = Rig()
        rig.answer(start(rig, Self.client1).promptID, "allow-once")
        let waiting = start(rig, Self.weather3)
        let out = rig.manage(W.root, .setEnabled(false)).effects
        guard case .accessDenied(let m)? = out.failure(of: waiting.call) else { return XCTFail("\(out)") }
        XCTAssertTrue(m.contains("switched off"), m)
        XCTAssertTrue(out.grantsEnded.contains(Self.client1.session), "\(out)")
        XCTAssertFalse(rig.core.updatesOn(Self.client1.session))
    }

    func testClientObjectsCountAsSessionsOfTheirUser() {
        var c = Config()
        c.limits.sessionsPerUser = 2
        let rig = Rig(config: c)
        XCTAssertNotNil(start(rig, Self.client1).confirm)
        rig.call(W.maps2, .getAuthorization)
        guard case .limitsExceeded? = start(rig, Self.client2).error else { return XCTFail("a third session of uid 1000") }
    }
}
