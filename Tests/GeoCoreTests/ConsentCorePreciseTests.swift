import XCTest
@testable import GeoCore

/// The user's Precise switch (docs/dbus-api.md, "Agent interface"): an agent
/// may answer a request for full accuracy with `allow-once-reduced` or
/// `allow-while-using-reduced`, and the grant, the stored record and
/// `GetAuthorization` follow that answer; a later request for full accuracy
/// prompts again. Agents of the earlier contract answer with the plain words.
final class ConsentCorePreciseTests: XCTestCase {
    typealias W = Who

    func testTheReplyWords() {
        XCTAssertEqual(AgentAnswer(reply: "allow-once-reduced"), .capped(.allowOnce, .reduced))
        XCTAssertEqual(AgentAnswer(reply: "allow-while-using-reduced"), .capped(.allowWhileUsing, .reduced))
        XCTAssertEqual(AgentAnswer(reply: "allow-once"), .decision(.allowOnce), "the earlier contract's word")
        for word in ["deny-reduced", "allow-once-full", "allow-once-REDUCED", "-reduced", "reduced", "allow-once-reduced "] {
            guard case .noAnswer = AgentAnswer(reply: word) else { return XCTFail("\(word) is no decision") }
        }
    }

    func testAllowOnceWithPreciseOffGrantsAndStoresReduced() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(tap.confirm?.accuracy, .full, "the agent may offer the switch")
        let out = rig.answer(tap.promptID, "allow-once-reduced")
        XCTAssertEqual(out.status(of: tap.call), .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, true)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .reduced)
        XCTAssertEqual(rig.auth(W.maps1)?.accuracy, .reduced)
        XCTAssertEqual(rig.auth(W.maps1)?.temporary, true)

        // Another connection's tap for reduced is silent; for full it prompts again.
        let silent = rig.tap(W.maps2, .reduced)
        XCTAssertEqual(silent.status, .whenInUse)
        XCTAssertNil(silent.confirm)
        let again = rig.tap(W.maps2)
        XCTAssertEqual(again.confirm?.kind, .oneTime, "full accuracy was not confirmed: \(again.effects)")
        let full = rig.answer(again.promptID, "allow-once")
        XCTAssertEqual(full.status(of: again.call), .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .full, "the user confirmed full now")
    }

    func testTheSameSessionAskingForFullAgainIsPrompted() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        rig.answer(tap.promptID, "allow-once-reduced")
        let again = rig.tap(W.maps1)
        XCTAssertEqual(again.confirm?.kind, .oneTime, "a reduced grant does not cover full: \(again.effects)")
        let denied = rig.answer(again.promptID, "deny")
        XCTAssertEqual(denied.status(of: again.call), .whenInUse, "the reduced grant still holds")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
    }

    func testAllowWhileUsingWithPreciseOffStoresReduced() {
        let rig = Rig()
        let (s, out) = rig.decide(W.maps1, "allow-while-using-reduced")
        XCTAssertEqual(out.status(of: s.call), .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, .reduced)
        XCTAssertEqual(rig.auth(W.maps1)?.accuracy, .reduced)
        XCTAssertEqual(rig.auth(W.maps1)?.temporary, false)
        XCTAssertEqual(rig.ask(W.maps2, .reduced).status, .whenInUse, "reduced is covered")
        XCTAssertEqual(rig.ask(W.maps3).confirm?.kind, .whenInUse, "full is not: the user is asked again")
    }

    func testAReducedAnswerToAReducedRequestIsThePlainDecision() {
        let rig = Rig()
        let tap = rig.tap(W.maps1, .reduced)
        rig.answer(tap.promptID, "allow-once-reduced")
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .reduced)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
    }

    /// The prompt says what the app id rests on, and whether that proves it.
    func testConfirmCarriesTheIdentityAndWhetherItIsProven() {
        let rig = Rig(agents: [W.agent, Caller(session: ":1.9", uid: 0, pid: 9, appID: "/usr/bin/root-agent")])
        XCTAssertEqual(rig.tap(W.maps1).confirm.map { [$0.identity?.rawValue ?? "-", "\($0.identityProven)"] },
                       ["executable", "false"], "a user's program shows a path of its choosing")
        XCTAssertEqual(rig.tap(W.flatpak).confirm.map { [$0.identity?.rawValue ?? "-", "\($0.identityProven)"] },
                       ["flatpak", "true"])
        let unverified = Caller(session: ":1.41", uid: 1000, pid: 441, appID: "org.mozilla.firefox",
                                identity: .unverifiedFlatpak)
        XCTAssertEqual(rig.tap(unverified).confirm.map { [$0.identity?.rawValue ?? "-", "\($0.identityProven)"] },
                       ["flatpak-unverified", "false"], "a hand-written .flatpak-info proves nothing")
        let unit = Caller(session: ":1.42", uid: 1000, pid: 442, appID: "org.gnome.Maps", identity: .systemdUnit)
        XCTAssertEqual(rig.tap(unit).confirm.map { [$0.identity?.rawValue ?? "-", "\($0.identityProven)"] },
                       ["systemd-unit", "false"])
        let system = Caller(session: ":1.43", uid: 0, pid: 443, appID: "/usr/sbin/locator")
        XCTAssertEqual(rig.tap(system).confirm.map { [$0.identity?.rawValue ?? "-", "\($0.identityProven)"] },
                       ["executable", "true"], "what root installed and started")
    }
}
