import XCTest
@testable import GeoCore

/// Rule 3's silent taps with an agent that can tell the app in front
/// (`CheckFocus`) and that is told of each silent grant (`Notice`), and the
/// indicator's Stop (`EndGrants`).
final class ConsentCoreSilentTapTests: XCTestCase {
    typealias W = Who

    /// A rig whose uid-1000 agent registered with `features`, and Maps approved once.
    private func approvedRig(_ features: AgentFeatures) -> Rig {
        let rig = Rig(agents: [])
        let s = rig.manage(W.agent, .registerAgent(path: W.agentPath, features: features))
        XCTAssertEqual(s.effects, [.reply(s.call, .empty)])
        rig.approveTap(W.maps1)
        rig.leave(W.maps1)
        return rig
    }

    private func focusCheck(_ effects: [CoreEffect]) -> FocusCheckRequest? {
        for e in effects { if case .checkFocus(let r) = e { return r } }
        return nil
    }

    private func notices(_ effects: [CoreEffect]) -> [NoticeRequest] {
        effects.compactMap { if case .notice(let n) = $0 { return n } else { return nil } }
    }

    func testAnAgentOfTheEarlierContractIsNeitherAskedNorTold() {
        let rig = approvedRig([])
        let s = rig.tap(W.maps2)
        XCTAssertEqual(s.status, .whenInUse)
        XCTAssertNil(focusCheck(s.effects))
        XCTAssertTrue(notices(s.effects).isEmpty)
    }

    func testTheAppInFrontWithAPressIsSilentAndToldOnce() {
        let rig = approvedRig([.focus, .notices])
        let s = rig.tap(W.maps2, appName: "Maps")
        let check = try! XCTUnwrap(focusCheck(s.effects))
        XCTAssertEqual(check.pid, W.maps2.pid)
        XCTAssertEqual(check.agentName, W.agent.connection)
        XCTAssertNil(s.status, "the tap waits for the agent's answer")
        let out = rig.send(.focusAnswered(requestID: check.requestID, .answered(focused: .yes, press: .yes)))
        XCTAssertEqual(out.status(of: s.call), .whenInUse)
        XCTAssertTrue(out.confirms.isEmpty, "no prompt")
        let n = notices(out)
        XCTAssertEqual(n.count, 1)
        XCTAssertEqual(n.first?.witness, .pressed)
        XCTAssertEqual(n.first?.always, false)
        XCTAssertEqual(n.first?.about.appID, W.mapsID)
        XCTAssertEqual(n.first?.about.appName, "Maps")

        // A second silent tap within the minute: granted, not told again.
        rig.now += 30_000_000
        let again = rig.tap(W.maps3)
        let out2 = rig.send(.focusAnswered(requestID: focusCheck(again.effects)!.requestID,
                                           .answered(focused: .yes, press: .unknown)))
        XCTAssertEqual(out2.status(of: again.call), .whenInUse)
        XCTAssertTrue(notices(out2).isEmpty, "one notice per app per minute")

        // A minute after the first: told again, and where presses cannot be seen it says so.
        rig.leave(W.maps3)
        rig.now += 31_000_000
        let third = rig.tap(W.maps3.connection(":1.13"))
        let out3 = rig.send(.focusAnswered(requestID: focusCheck(third.effects)!.requestID,
                                           .answered(focused: .yes, press: .unknown)))
        XCTAssertEqual(notices(out3).map(\.witness), [.inFront])

        // Allowed anew in a prompt (here after a tap from behind): the next silent grant is told at once.
        rig.now += 1_000_000
        let behind = rig.tap(W.maps1.connection(":1.14"))
        let asked = rig.send(.focusAnswered(requestID: focusCheck(behind.effects)!.requestID,
                                            .answered(focused: .no, press: .unknown)))
        rig.answer(asked.confirms.first?.requestID, "allow-once")
        let after = rig.tap(W.maps1.connection(":1.15"))
        let out4 = rig.send(.focusAnswered(requestID: focusCheck(after.effects)!.requestID, .answered(focused: .yes, press: .yes)))
        XCTAssertEqual(notices(out4).map(\.witness), [.pressed])
    }

    func testATapFromBehindOrWithoutAPressPrompts() {
        for (answer, doubt) in [(FocusAnswer.answered(focused: .no, press: .unknown), TapDoubt.behind),
                                (.answered(focused: .no, press: .yes), .behind),
                                (.answered(focused: .yes, press: .no), .noPress), (.noAnswer("timeout"), .unchecked)] {
            let rig = approvedRig([.focus, .notices])
            let s = rig.tap(W.maps2)
            let out = rig.send(.focusAnswered(requestID: focusCheck(s.effects)!.requestID, answer))
            XCTAssertEqual(out.confirms.first?.kind, .oneTime, "\(answer): prompted as a first tap")
            XCTAssertEqual(out.confirms.first?.tapDoubt, doubt, "the prompt says why")
            XCTAssertNil(out.status(of: s.call), "\(answer): waits on the prompt")
            XCTAssertTrue(notices(out).isEmpty)
            let granted = rig.answer(out.confirms.first?.requestID, "allow-once")
            XCTAssertEqual(granted.status(of: s.call), .whenInUse, "\(answer): the user's Allow Once still grants")
        }
    }

    func testWhereTheDesktopCannotTellTheNoticeMustShow() {
        let rig = approvedRig([.focus, .notices])
        let s = rig.tap(W.maps2)
        let out = rig.send(.focusAnswered(requestID: focusCheck(s.effects)!.requestID, .answered(focused: .unknown, press: .unknown)))
        XCTAssertEqual(out.status(of: s.call), .whenInUse)
        XCTAssertEqual(notices(out).map(\.always), [true])
        XCTAssertEqual(notices(out).map(\.witness), [.unknown])

        // An agent with notices but no focus check: silent, and always shown.
        let told = approvedRig([.notices])
        let t = told.tap(W.maps2)
        XCTAssertEqual(t.status, .whenInUse)
        XCTAssertEqual(notices(t.effects).map(\.always), [true])
    }

    func testAnAnswerForALeftSessionOrAStaleIdChangesNothing() {
        let rig = approvedRig([.focus])
        let s = rig.tap(W.maps2)
        let id = focusCheck(s.effects)!.requestID
        rig.leave(W.maps2)
        let out = rig.send(.focusAnswered(requestID: id, .answered(focused: .yes, press: .yes)))
        XCTAssertTrue(out.isEmpty, "\(out)")
        XCTAssertTrue(rig.send(.focusAnswered(requestID: "focus-999", .answered(focused: .yes, press: .yes))).isEmpty)
    }

    func testATapWhileTheCheckIsOpenIsPending() {
        let rig = approvedRig([.focus])
        _ = rig.tap(W.maps2)
        let second = rig.tap(W.maps2)
        XCTAssertEqual(second.error, .promptPending)
    }

    func testLocationSwitchedOffWhileTheCheckWaitsGrantsNothing() {
        let rig = approvedRig([.focus, .notices])
        let s = rig.tap(W.maps2)
        let off = rig.manage(W.root, .setEnabled(false))
        XCTAssertEqual(off.effects.status(of: s.call), .restricted, "answered when location goes off")
        let out = rig.send(.focusAnswered(requestID: focusCheck(s.effects)!.requestID, .answered(focused: .yes, press: .yes)))
        XCTAssertTrue(out.isEmpty, "the late answer grants nothing: \(out)")
    }

    func testEndGrantsStopsTheAppsGrantsAndUpdatesOnly() {
        let rig = approvedRig([])
        XCTAssertEqual(rig.tap(W.maps2).status, .whenInUse)
        rig.call(W.maps2, .startUpdates(UpdateOptions()))
        XCTAssertEqual(rig.tap(W.weather).confirm?.kind, .oneTime)   // another app, not touched
        let s = rig.manage(W.aliceCtl, .endGrants(appID: W.mapsID, uid: nil))
        XCTAssertEqual(s.reply, .empty)
        XCTAssertTrue(s.effects.contains(.grantEnded(session: W.maps2.session, byPause: false)))
        XCTAssertTrue(s.effects.contains(.authorizationChanged(session: W.maps2.session, .notDetermined)))
        XCTAssertEqual(rig.core.status(for: W.maps2.session), .notDetermined)
        XCTAssertFalse(rig.core.updatesOn(W.maps2.session))
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, true, "the stored confirmation stays")
        XCTAssertTrue(rig.core.grantNotes.contains { $0.description.contains("the user stopped it") })
        // Another user's app: root only; a sandbox never.
        XCTAssertTrue(rig.manage(W.bobCtl, .endGrants(appID: W.mapsID, uid: 1000)).accessDenied)
        XCTAssertTrue(rig.manage(W.flatpak, .endGrants(appID: W.mapsID, uid: nil)).accessDenied)
        XCTAssertEqual(rig.manage(W.root, .endGrants(appID: W.mapsID, uid: 1000)).reply, .empty)
    }

    func testOnceAUidsTapsWereCheckedTheyAreNotSilentWhileNoAgentCanCheckThem() {
        let rig = approvedRig([.focus, .notices])
        rig.manage(W.agent, .unregisterAgent(path: W.agentPath))
        XCTAssertEqual(rig.tap(W.maps2).error, .noAgent, "asked as a first tap, and nobody can ask: fail closed")
        // A headless agent of the uid (no features): its prompt asks.
        rig.manage(W.agent2, .registerAgent(path: W.agentPath))
        let s = rig.tap(W.maps3)
        XCTAssertEqual(s.confirm?.kind, .oneTime)
        // Another uid that never had a focus agent keeps the rule as it was.
        let bob = Rig(agents: [W.bobAgent])
        bob.approveTap(W.bobMaps)
        bob.leave(W.bobMaps)
        XCTAssertEqual(bob.tap(W.bobMaps.connection(":1.31")).status, .whenInUse)
    }

    func testAnAgentRegisteringAgainWithOtherFeaturesStillOwnsItsPrompts() {
        let rig = Rig(agents: [])
        rig.manage(W.agent, .registerAgent(path: W.agentPath, features: [.focus]))
        let s = rig.tap(W.maps1)
        XCTAssertNotNil(s.confirm)
        rig.manage(W.agent, .registerAgent(path: W.agentPath))   // the same agent, features dropped
        let out = rig.manage(W.agent, .unregisterAgent(path: W.agentPath))
        XCTAssertEqual(out.effects.status(of: s.call), .notDetermined, "its open prompt ends with it")
    }

    func testTheStopAndLocationOffAnswerATapWaitingForItsCheck() {
        let rig = approvedRig([.focus])
        let s = rig.tap(W.maps2)
        let id = focusCheck(s.effects)!.requestID
        let stop = rig.manage(W.aliceCtl, .endGrants(appID: W.mapsID, uid: nil))
        XCTAssertEqual(stop.effects.status(of: s.call), .notDetermined, "not granted after the Stop")
        XCTAssertTrue(rig.send(.focusAnswered(requestID: id, .answered(focused: .yes, press: .yes))).isEmpty)

        let t = rig.tap(W.maps3)
        XCTAssertNotNil(focusCheck(t.effects))
        let off = rig.manage(W.aliceCtl, .setUserLocation(on: false, uid: nil))
        XCTAssertEqual(off.effects.status(of: t.call), .restricted)
    }

    func testFeatureWordsOfALaterContractAreIgnored() {
        XCTAssertEqual(AgentFeatures(words: ["focus", "telepathy", "notices"]), [.focus, .notices])
        XCTAssertEqual(AgentFeatures(words: []), [])
    }
}
