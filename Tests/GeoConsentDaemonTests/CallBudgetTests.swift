import XCTest
@testable import GeoConsentDaemon

/// The budgets of the daemon's outgoing calls (CallBudgets.swift,
/// docs/dbus-api.md "Limits"): what other uids hold never takes away a uid's
/// guaranteed prompts, a withdrawn or timed-out call stops counting against
/// the total for all users, and a refusal says whose slots stopped it.
final class CallBudgetTests: XCTestCase {
    typealias B = CallBudgets

    /// Six uids whose silent agents hold 8 Confirms each, every one of them
    /// given up on (withdrawn, or timed out): the 48 of all users are not
    /// spent by them, and another uid opens its 4 prompts and more.
    func testGivenUpCallsOfColludingUidsDoNotSpendTheTotal() {
        var b = B()
        for uid in UInt32(5)...10 {
            for _ in 0..<8 {
                XCTAssertNil(b.refusal(.consentAgent, uid: uid))
                b.sent(.consentAgent, uid: uid)
                b.stoppedWaiting(.consentAgent)   // withdrawn: the daemon waits for it no more
            }
            XCTAssertEqual(b.refusal(.consentAgent, uid: uid)?.byOthers, false, "its own share is spent")
        }
        XCTAssertEqual(b.all, 48, "the bus still counts them")
        XCTAssertEqual(b.held(.consentAgent), 0)
        for n in 0..<8 {
            XCTAssertNil(b.refusal(.consentAgent, uid: 1000), "the victim's prompt \(n + 1)")
            b.sent(.consentAgent, uid: 1000)
        }
    }

    /// While other uids' calls really wait (their agents are still within
    /// their timeout), the total holds for a uid past its guaranteed 4 only,
    /// and the refusal names who holds it.
    func testEveryUidKeepsItsGuaranteedPromptsWhileTheTotalIsSpent() {
        var b = B()
        for uid in UInt32(5)...10 { for _ in 0..<8 { b.sent(.consentAgent, uid: uid) } }
        XCTAssertEqual(b.held(.consentAgent), 48)
        for n in 0..<4 {
            XCTAssertNil(b.refusal(.consentAgent, uid: 1000), "guaranteed prompt \(n + 1)")
            b.sent(.consentAgent, uid: 1000)
        }
        guard let r = b.refusal(.consentAgent, uid: 1000) else { return XCTFail("a fifth goes past the total") }
        XCTAssertTrue(r.byOthers, "not the victim's agent's fault")
        XCTAssertTrue(r.description.contains("held by uid 5 (8), uid 6 (8), uid 7 (8), uid 8 (8), …"), r.description)
        XCTAssertFalse(r.description.contains("uid 1000 already"), r.description)
    }

    /// The same for AuthorizeApp (a purpose the GeoClue facade registers),
    /// whose total is 16: two uids once spent it.
    func testAuthorizeAppKeepsItsGuaranteeToo() {
        var b = B()
        XCTAssertTrue(b.register(GeoClueFacade.agentPrompt))
        for uid in UInt32(5)...6 { for _ in 0..<8 { b.sent(GeoClueFacade.agentPrompt, uid: uid) } }
        for _ in 0..<4 {
            XCTAssertNil(b.refusal(GeoClueFacade.agentPrompt, uid: 1000))
            b.sent(GeoClueFacade.agentPrompt, uid: 1000)
        }
        XCTAssertEqual(b.refusal(GeoClueFacade.agentPrompt, uid: 1000)?.byOthers, true)
    }

    /// A uid holds at most `perUIDAll` slots in all purposes together, so it
    /// takes `hardLimit / perUIDAll` uids to hold the bus's share: below that,
    /// every other uid still gets its guaranteed calls.
    func testTheHardLimitTakesTenUids() {
        var b = B()
        let all: [B.Purpose] = [.consentAgent, .logind, GeoClueFacade.agentRead, GeoClueFacade.agentPrompt]
        for p in all { XCTAssertTrue(b.register(p)) }
        for uid in UInt32(5)...13 {   // nine uids, each as much as it may hold
            for p in all {
                while b.refusal(p, uid: uid) == nil {
                    b.sent(p, uid: uid)
                    b.stoppedWaiting(p)
                }
            }
            XCTAssertEqual(b.held(uid: uid), B.perUIDAll)
            XCTAssertEqual(b.refusal(.logind, uid: uid)?.byOthers, false)
        }
        XCTAssertEqual(b.all, 9 * B.perUIDAll)
        for p in all { XCTAssertNil(b.refusal(p, uid: 1000), "\(p) for a uid of its own") }
        for _ in 0..<4 { b.sent(.consentAgent, uid: 1000) }
        XCTAssertNil(b.refusal(.consentAgent, uid: 1001))
        // A tenth uid takes the rest: then the refusal names the holders.
        var b2 = b
        for _ in 0..<(B.hardLimit - b2.all) { b2.sent(.consentAgent, uid: 14) }
        XCTAssertEqual(b2.refusal(.consentAgent, uid: 1001)?.byOthers, true)
        XCTAssertTrue(b2.refusal(.consentAgent, uid: 1001)?.description.contains("held by") == true)
        XCTAssertGreaterThanOrEqual(B.hardLimit / B.perUIDAll, 10)
    }

    /// A slot the bus freed is the uid's again.
    func testAFreedSlotComesBack() {
        var b = B()
        for _ in 0..<8 { b.sent(.consentAgent, uid: 7) }
        XCTAssertNotNil(b.refusal(.consentAgent, uid: 7))
        b.stoppedWaiting(.consentAgent)
        b.freed(.consentAgent, uid: 7)
        XCTAssertNil(b.refusal(.consentAgent, uid: 7))
        XCTAssertEqual(b.held(.consentAgent, uid: 7), 7)
        XCTAssertEqual(b.held(uid: 7), 7)
    }

    /// A front end registers the purposes of its calls; a call of a purpose
    /// nobody registered is refused, and no registration may take the
    /// purposes' totals past the hard limit.
    func testPurposesAreRegisteredWithinTheHardLimit() {
        var b = B()
        let other = B.Purpose("other agent", .init(perUID: 2, total: 8, guaranteed: 1))
        XCTAssertEqual(b.refusal(other, uid: 1000)?.description, "no budget is registered for other agent calls")
        XCTAssertTrue(b.register(other))
        XCTAssertNil(b.refusal(other, uid: 1000))
        let greedy = B.Purpose("greedy", .init(perUID: 8, total: B.hardLimit, guaranteed: 4))
        XCTAssertFalse(b.register(greedy), "the totals would pass the bus's share")
        XCTAssertNotNil(b.refusal(greedy, uid: 1000))
    }
}
