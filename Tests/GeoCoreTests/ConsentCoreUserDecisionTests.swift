import XCTest
@testable import GeoCore

/// The user's decisions in a settings window (`SetConsent`, docs/dbus-api.md):
/// less is stored at once; more is asked of the uid's agent first, and only
/// the answer that gives it counts. Any program of the user may call it, so
/// no call alone gives an app more than it had.
final class ConsentCoreUserDecisionTests: XCTestCase {
    typealias W = Who

    private func set(_ rig: Rig, _ app: Caller, _ d: UserDecision?, _ a: Accuracy? = nil, by caller: Caller = W.aliceCtl,
                     uid: UInt32? = nil) -> Step {
        rig.manage(caller, .setConsent(appID: app.appID, uid: uid, decision: d, accuracy: a))
    }

    func testNeverStoresADenialForgetsTheButtonAndEndsTheGrantNow() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        XCTAssertEqual(rig.auth(W.maps1)?.status, .whenInUse)
        let s = set(rig, W.maps1, .never)
        XCTAssertEqual(s.status, .denied)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .denied)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, false, "the button is asked again")
        XCTAssertEqual(s.effects.signals[W.maps1.session], .denied, "the app hears it at once")
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), "its grant ended")
        XCTAssertEqual(rig.auth(W.maps1)?.status, .denied)
        XCTAssertTrue(s.effects.saves.contains(true), "stored before the reply")
        XCTAssertNil(s.confirm, "less needs no prompt")
        XCTAssertEqual(rig.tap(W.maps2).confirm?.kind, .oneTime, "the next tap prompts")
    }

    func testAskForgetsTheRecord() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        let s = set(rig, W.maps1, .ask)
        XCTAssertEqual(s.status, .notDetermined)
        XCTAssertNil(rig.record(W.maps1))
        XCTAssertEqual(rig.ask(W.maps1).confirm?.kind, .whenInUse, "the app is asked again")
    }

    func testPreciseOffLowersTheRecordAndTheGrantsHeldNow() {
        let rig = Rig()
        rig.decide(W.maps1, "allow-while-using")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        let s = set(rig, W.maps1, nil, .reduced)
        XCTAssertEqual(s.status, .whenInUse)
        XCTAssertNil(s.confirm)
        XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, .reduced)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
    }

    func testWhileUsingIsAskedOfTheAgentAndOnlyItsYesStoresIt() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        let s = set(rig, W.maps1, .whileUsing)
        XCTAssertTrue(s.pending, "the settings window waits for the user's answer")
        let c = try! XCTUnwrap(s.confirm)
        XCTAssertEqual(c.kind, .whenInUse)
        XCTAssertEqual(c.appID, W.mapsID)
        XCTAssertEqual(c.askedBy, W.aliceCtl.appID, "the prompt says which program asked")
        XCTAssertNil(c.identity, "no call of the app's own: nothing said of its identity")
        XCTAssertFalse(c.identityProven)
        XCTAssertEqual(c.accuracy, .full)

        let no = rig.answer(c.requestID, "deny")
        XCTAssertEqual(no.status(of: s.call), .notDetermined, "Don't Allow there stores nothing")
        XCTAssertEqual(rig.record(W.maps1), .approvedFull)
        let once = set(rig, W.maps1, .whileUsing)
        XCTAssertEqual(rig.answer(once.promptID, "allow-once").status(of: once.call), .notDetermined,
                       "Allow Once is no answer to While Using")

        let again = set(rig, W.maps1, .whileUsing)
        let yes = rig.answer(again.promptID, "allow-while-using-reduced")
        XCTAssertEqual(yes.status(of: again.call), .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, .reduced, "the user's Precise switch counts")
    }

    func testPreciseOnIsAskedWithThePromptOfWhatIsStored() {
        let rig = Rig(records: stored((W.maps1, .approvedReduced), (W.weather, .whenInUseReduced)))
        let button = set(rig, W.maps1, nil, .full)
        XCTAssertEqual(button.confirm?.kind, .oneTime, "the button's approval, at full accuracy")
        XCTAssertEqual(rig.answer(button.promptID, "allow-once").status(of: button.call), .notDetermined)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .full)
        let lasting = set(rig, W.weather, nil, .full)
        XCTAssertEqual(lasting.confirm?.kind, .whenInUse)
        rig.answer(lasting.promptID, "allow-while-using")
        XCTAssertEqual(rig.record(W.weather)?.decisionAccuracy, .full)
    }

    /// The app's own request does not join a prompt a settings window asked
    /// for (its answers are read for the window): it waits, and is answered
    /// afresh when that prompt ends; the app leaving does not withdraw it.
    func testAnAppsOwnRequestWaitsBehindTheSettingsPrompt() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        let s = set(rig, W.maps1, .whileUsing)
        let own = rig.ask(W.maps2)
        XCTAssertTrue(own.pending)
        XCTAssertNil(own.confirm, "one prompt at a time for the app")
        XCTAssertTrue(rig.leave(W.maps2).cancels.isEmpty, "the settings window still waits on it")
        let again = rig.ask(W.maps3)
        let yes = rig.answer(s.promptID, "allow-while-using")
        XCTAssertEqual(yes.status(of: s.call), .whenInUse)
        XCTAssertEqual(yes.status(of: again.call), .whenInUse, "the app's own request, answered from what is stored now")
    }

    /// Less now wins over more asked before: Never while a While Using prompt
    /// is open withdraws it, and a yes given there afterwards changes nothing.
    func testLessWithdrawsAnOpenPromptForMore() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        let more = set(rig, W.maps1, .whileUsing)
        let never = set(rig, W.maps1, .never)
        XCTAssertEqual(never.status, .denied)
        XCTAssertEqual(never.effects.status(of: more.call), .denied, "the waiting window is answered")
        XCTAssertEqual(never.effects.cancels, [more.promptID!])
        rig.answer(more.promptID, "allow-while-using")
        XCTAssertEqual(rig.record(W.maps1)?.decision, .denied)
        let reset = set(rig, W.maps1, .whileUsing)
        let r = rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil))
        XCTAssertEqual(r.effects.cancels, [reset.promptID!], "a reset withdraws it too")
    }

    /// Never stores a record: within the uid's limit of stored decisions.
    func testNeverIsWithinTheLimitOfStoredDecisions() {
        var c = Config()
        c.limits.consentsPerUser = 1
        let rig = Rig(config: c, records: stored((W.maps1, .approvedFull)))
        _ = rig.auth(W.weather)
        guard case .limitsExceeded? = set(rig, W.weather, .never).error else { return XCTFail("beyond consents-per-user") }
        XCTAssertEqual(set(rig, W.maps1, .never).status, .denied, "an existing record may change")
    }

    func testTheAgentLeavingOrLocationOffAnswersTheWaitingWindow() {
        let rig = Rig(records: stored((W.maps1, .approvedFull), (W.weather, .approvedFull)))
        let s = set(rig, W.maps1, .whileUsing)
        let gone = rig.leave(W.agent)
        XCTAssertEqual(gone.status(of: s.call), .notDetermined)
        rig.manage(W.agent, .registerAgent(path: W.agentPath))
        let t = set(rig, W.weather, .whileUsing)
        let off = rig.manage(W.root, .setEnabled(false))
        XCTAssertEqual(off.effects.status(of: t.call), .restricted)
        XCTAssertEqual(off.effects.cancels, [t.promptID!])
    }

    func testRefusals() {
        let rig = Rig(records: stored((W.maps1, .approvedFull), (W.bobMaps, .approvedFull)), agents: [])
        XCTAssertEqual(set(rig, W.maps1, .whileUsing).error, .noAgent)
        XCTAssertTrue(set(rig, W.bobMaps, .never, uid: 1001).accessDenied, "another user's app")
        XCTAssertTrue(set(rig, W.maps1, .never, by: W.flatpak).accessDenied, "a sandbox decides for nobody")
        guard case .invalidArgs? = set(rig, W.weather, .never).error else { return XCTFail("an app it knows nothing of") }
        XCTAssertEqual(set(rig, W.bobMaps, .never, by: W.root, uid: 1001).status, .denied, "root may")
        XCTAssertEqual(rig.core.records[W.bobMaps.app]?.decision, .denied)
        rig.manage(W.agent, .registerAgent(path: W.agentPath))
        let open = set(rig, W.maps1, .whileUsing)
        XCTAssertEqual(set(rig, W.maps1, .whileUsing).error, .promptPending)
        rig.answer(open.promptID, "deny")
    }
}

/// The user's own switch (`SetUserLocation`): off at once for every app of the
/// uid; on again by root or the uid's agent at once, else only after that
/// agent's yes.
final class ConsentCoreUserLocationTests: XCTestCase {
    typealias W = Who

    func testOffAtOnceForEveryAppOfTheUserOnlyAndOnThroughTheAgent() {
        let rig = Rig(records: stored((W.weather, .whenInUseFull), (W.bobMaps, .whenInUseFull)))
        rig.approveTap(W.maps1)
        XCTAssertEqual(rig.auth(W.weather)?.status, .whenInUse)
        XCTAssertEqual(rig.auth(W.bobMaps)?.status, .whenInUse)
        let off = rig.manage(W.aliceCtl, .setUserLocation(on: false, uid: nil))
        XCTAssertEqual(off.reply, .empty)
        XCTAssertEqual(off.effects.signals[W.maps1.session], .restricted)
        XCTAssertEqual(off.effects.signals[W.weather.session], .restricted)
        XCTAssertTrue(off.effects.contains(.saveUsersOff))
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), "its one-time grant ended")
        XCTAssertEqual(rig.auth(W.bobMaps)?.status, .whenInUse, "another user's apps are not touched")
        XCTAssertEqual(rig.auth(W.weather)?.userLocation, false)
        XCTAssertEqual(rig.tap(W.maps2).status, .restricted, "no prompt while off")
        XCTAssertEqual(rig.manage(W.aliceCtl, .getUserLocation(uid: nil)).reply, .flag(false))

        // On: a program of the user asks; the agent says no, then yes.
        let ask = rig.manage(W.aliceCtl, .setUserLocation(on: true, uid: nil))
        let c = try! XCTUnwrap(ask.confirm)
        XCTAssertEqual(c.kind, .locationOn)
        XCTAssertEqual(c.appID, "")
        XCTAssertEqual(c.askedBy, W.aliceCtl.appID)
        XCTAssertTrue(ask.pending)
        XCTAssertEqual(rig.manage(W.aliceCtl, .setUserLocation(on: true, uid: nil)).error, .promptPending)
        XCTAssertEqual(rig.answer(c.requestID, "deny").reply(to: ask.call), .empty)
        XCTAssertTrue(rig.core.usersOff.isOff(1000), "Keep Off")
        let again = rig.manage(W.aliceCtl, .setUserLocation(on: true, uid: nil))
        let yes = rig.answer(again.promptID, "allow-once")
        XCTAssertEqual(yes.reply(to: again.call), .empty)
        XCTAssertFalse(rig.core.usersOff.isOff(1000))
        XCTAssertEqual(yes.signals[W.weather.session], .whenInUse, "the stored decision applies again")
    }

    func testRootAndTheUsersAgentSwitchOnAtOnceAndOthersAreRefused() {
        let rig = Rig()
        rig.manage(W.aliceCtl, .setUserLocation(on: false, uid: nil))
        XCTAssertTrue(rig.manage(W.bobCtl, .setUserLocation(on: true, uid: 1000)).accessDenied)
        XCTAssertTrue(rig.manage(W.flatpak, .setUserLocation(on: false, uid: nil)).accessDenied, "a sandbox switches nothing")
        let byAgent = rig.manage(W.agent, .setUserLocation(on: true, uid: nil))
        XCTAssertNil(byAgent.confirm, "the uid's agent is the trusted prompt's program")
        XCTAssertFalse(rig.core.usersOff.isOff(1000))
        rig.manage(W.aliceCtl, .setUserLocation(on: false, uid: nil))
        XCTAssertNil(rig.manage(W.root, .setUserLocation(on: true, uid: 1000)).confirm, "the administrator, for another user")
        XCTAssertFalse(rig.core.usersOff.isOff(1000))
        let rootsOwn = Rig(agents: [Caller(session: ":1.9", uid: 0, pid: 9, appID: "/usr/bin/root-agent")])
        rootsOwn.manage(W.root, .setUserLocation(on: false, uid: nil))
        XCTAssertEqual(rootsOwn.manage(W.root, .setUserLocation(on: true, uid: nil)).confirm?.kind, .locationOn,
                       "root's own apps: asked like anyone's")
        let noAgent = Rig(agents: [])
        noAgent.manage(W.aliceCtl, .setUserLocation(on: false, uid: nil))
        XCTAssertEqual(noAgent.manage(W.aliceCtl, .setUserLocation(on: true, uid: nil)).error, .noAgent)
    }

    /// `Enabled` from a caller polkit authorized (the daemon asked it first) is
    /// the administrator's; from anyone else it is refused.
    func testEnabledFromAPolkitAuthorizedUser() {
        let rig = Rig()
        XCTAssertTrue(rig.manage(W.aliceCtl, .setEnabled(false)).accessDenied)
        XCTAssertEqual(rig.manage(W.aliceCtl, .setEnabled(false, authorized: true)).reply, .empty)
        XCTAssertFalse(rig.core.enabled)
    }

    /// `WiFiEnabled` follows the same rule: whoever may switch location on and
    /// off may switch Wi-Fi positioning (polkit asked first), nobody else.
    func testWiFiSwitchFromAPolkitAuthorizedUser() {
        var config = Config()
        config.sources.wifiURL = "https://example.invalid/v1/geolocate"
        let rig = Rig(config: config)
        let refused = rig.manage(W.aliceCtl, .setWiFiEnabled(false))
        XCTAssertTrue(refused.accessDenied)
        XCTAssertFalse(refused.effects.contains { if case .wifiSwitched = $0 { return true } else { return false } })
        let authorized = rig.manage(W.aliceCtl, .setWiFiEnabled(false, authorized: true))
        XCTAssertEqual(authorized.reply, .empty)
        XCTAssertTrue(authorized.effects.contains { if case .wifiSwitched(false) = $0 { return true } else { return false } })
    }

    /// A damaged file's users are unknown: every user off but root, until each switches on.
    func testAfterADamagedFileEveryUserButRootIsOff() {
        var users = UsersOff.everyone
        XCTAssertTrue(users.isOff(1000))
        XCTAssertFalse(users.isOff(0))
        XCTAssertTrue(users.set(1000, off: false))
        XCTAssertFalse(users.isOff(1000))
        XCTAssertTrue(users.isOff(1001))
        XCTAssertFalse(users.set(1000, off: false))
    }
}
