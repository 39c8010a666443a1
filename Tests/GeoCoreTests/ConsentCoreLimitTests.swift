import XCTest
@testable import GeoCore

/// The per-user limits (`Config.limits`, docs/dbus-api.md "Limits"): each is
/// reached by one uid, answered as documented, and leaves another uid and root
/// served exactly as before.
final class ConsentCoreLimitTests: XCTestCase {
    typealias W = Who

    /// Uid 1000's app `appID`, connection number `n`.
    private func alice(_ n: Int, app appID: String = W.mapsID) -> Caller {
        Caller(session: .connection(":1.\(1000 + n)"), uid: 1000, pid: UInt32(5000 + n), appID: appID, executable: "/usr/bin/x")
    }

    private func limits(_ edit: (inout Limits) -> Void) -> Config {
        var c = Config()
        edit(&c.limits)
        return c
    }

    func testSessionsPerUserFailsTheNextConnectionAndFreesWithALeave() {
        let rig = Rig(config: limits { $0.sessionsPerUser = 3 }, agents: [W.agent, W.bobAgent])
        for i in 0..<3 { XCTAssertNil(rig.call(alice(i), .getAuthorization).error) }
        let over = rig.call(alice(3), .getAuthorization)
        guard case .limitsExceeded(let m)? = over.error else { return XCTFail("\(over.effects)") }
        XCTAssertTrue(m.contains("sessions-per-user"), m)
        XCTAssertFalse(rig.core.hasSession(alice(3).session), "no session was made for the refused call")
        // Another uid and root are not affected; a known session keeps calling.
        XCTAssertNil(rig.call(W.bobMaps, .getAuthorization).error)
        XCTAssertNil(rig.call(W.root, .getAuthorization).error)
        XCTAssertNil(rig.call(alice(0), .getAuthorization).error)
        // A session that leaves makes room.
        rig.leave(alice(1))
        XCTAssertNil(rig.call(alice(3), .getAuthorization).error)
        XCTAssertEqual(rig.core.sessionCount, 5)
    }

    func testPromptsPerUserAnswersAtOnceAsAPromptThatCannotBeShown() {
        let rig = Rig(config: limits { $0.promptsPerUser = 2 }, agents: [W.agent, W.bobAgent])
        let a = rig.tap(alice(0, app: "app.a"))
        let b = rig.tap(alice(1, app: "app.b"))
        XCTAssertTrue(a.pending && b.pending)
        XCTAssertEqual(rig.core.openPromptCount, 2)
        // A third app of the same uid: no prompt, the status that applies, now.
        let c = rig.tap(alice(2, app: "app.c"))
        XCTAssertEqual(c.status, .notDetermined)
        XCTAssertEqual(c.effects.confirms, [])
        // Joining an open prompt needs no new one.
        let a2 = rig.tap(alice(3, app: "app.a"))
        XCTAssertTrue(a2.pending)
        // Bob's prompt opens; when one of Alice's is answered, hers can open again.
        XCTAssertNotNil(rig.tap(W.bobMaps).confirm)
        let done = rig.answer(a.promptID, "allow-once")
        XCTAssertEqual(done.status(of: a.call), .whenInUse)
        XCTAssertEqual(done.status(of: a2.call), .whenInUse)
        XCTAssertNotNil(rig.tap(alice(4, app: "app.c")).confirm)
    }

    func testOpenPromptsInAllStayBelowTheBusLimitAndRootIsBoundToo() {
        var config = Config()
        config.limits.promptsPerUser = Limits.openPrompts
        let users = (0..<Limits.openPrompts).map { i in
            Caller(session: .connection(":2.\(i)"), uid: UInt32(2000 + i), pid: UInt32(9000 + i), appID: "app", executable: "/usr/bin/app")
        }
        let agents = users.map { u in Caller(session: .connection(":3.\(u.uid)"), uid: u.uid, pid: u.pid + 1000, appID: "/usr/bin/agent") }
        let rig = Rig(config: config, agents: agents + [W.root])
        for u in users { XCTAssertNotNil(rig.tap(u).confirm) }
        XCTAssertEqual(rig.core.openPromptCount, Limits.openPrompts)
        let rootTap = rig.tap(W.root)
        XCTAssertEqual(rootTap.status, .notDetermined)
        XCTAssertEqual(rootTap.effects.confirms, [], "no agent call beyond \(Limits.openPrompts) in flight")
    }

    func testWaitingPerUserFailsTheNextTapWithLimitsExceeded() {
        let rig = Rig(config: limits { $0.waitingPerUser = 3 }, agents: [W.agent, W.bobAgent])
        let first = rig.tap(alice(0))
        for i in 1..<3 { XCTAssertTrue(rig.tap(alice(i)).pending) }
        let over = rig.tap(alice(3))
        guard case .limitsExceeded(let m)? = over.error else { return XCTFail("\(over.effects)") }
        XCTAssertTrue(m.contains("waiting-per-user"), m)
        XCTAssertTrue(rig.tap(W.bobMaps).pending, "another uid still gets its prompt")
        // The prompt's answer frees the waiting slots.
        rig.answer(first.promptID, "deny")
        XCTAssertNotNil(rig.tap(alice(3)).confirm)
    }

    func testConsentsPerUserRefusesANewAppButNotAKnownOne() {
        var records: [AppKey: ConsentRecord] = [:]
        for i in 0..<3 {
            records[AppKey(uid: 1000, appID: "app.\(i)")] = ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .full)
        }
        let rig = Rig(config: limits { $0.consentsPerUser = 3 }, records: records, agents: [W.agent, W.bobAgent])
        let over = rig.tap(alice(0, app: "app.new"))
        guard case .limitsExceeded(let m)? = over.error else { return XCTFail("\(over.effects)") }
        XCTAssertTrue(m.contains("consents-per-user"), m)
        XCTAssertEqual(over.effects.confirms, [])
        // A known app of the same uid is granted silently as before; Bob is not limited.
        XCTAssertEqual(rig.tap(alice(1, app: "app.0")).status, .whenInUse)
        XCTAssertNotNil(rig.tap(W.bobMaps).confirm)
        // Resetting one frees a place.
        rig.manage(W.aliceCtl, .resetConsent(appID: "app.1", uid: nil))
        XCTAssertNotNil(rig.tap(alice(2, app: "app.new")).confirm)
    }

    func testAnswerAtTheConsentLimitGrantsWithoutStoring() {
        let rig = Rig(config: limits { $0.consentsPerUser = 1 })
        let a = rig.tap(alice(0, app: "app.a"))
        let b = rig.tap(alice(1, app: "app.b"))
        rig.answer(a.promptID, "allow-once")
        let done = rig.answer(b.promptID, "allow-once")
        XCTAssertEqual(done.status(of: b.call), .whenInUse, "the tap is granted for its session")
        XCTAssertEqual(rig.core.records.count, 1, "but no second record is stored past the limit")
        XCTAssertEqual(done.saves, [])
    }

    func testLocationRequestsPerSessionAreBounded() {
        let core = LocationCore(linger: 10, gridSize: 5000, receiverName: "gpsd", requestsPerSession: 2)
        let grants: (SessionID) -> Accuracy? = { _ in .full }
        var failures: [LocationFailure] = []
        for call in 1...3 as ClosedRange<CallID> {
            for e in core.handle(.locate(call, session: ":1.1", LocationOptions()), now: 1, grants: grants) {
                if case .fail(call, let f) = e { failures.append(f) }
            }
        }
        XCTAssertEqual(failures, [.tooManyRequests(2)])
        let other = core.handle(.locate(9, session: ":1.2", LocationOptions()), now: 1, grants: grants)
        XCTAssertFalse(other.contains { if case .fail = $0 { return true } else { return false } }, "\(other)")
    }
}
