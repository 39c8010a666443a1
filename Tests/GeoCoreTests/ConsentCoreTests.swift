import XCTest
@testable import GeoCore

/// The consent rules of docs/dbus-api.md ("Words", "Status", client methods, "Agent
/// interface") checked against the pure `ConsentCore`: events in, effects out.
/// Helpers live in ConsentCoreDSL.swift.
final class ConsentCoreTests: XCTestCase {
    typealias W = Who

    // MARK: - Sessions

    func testOnlyClientCallsStartASession() {
        let rig = Rig()
        XCTAssertEqual(rig.core.sessionCount, 0, "registering an agent starts no session")
        rig.manage(W.aliceCtl, .listConsents)
        rig.manage(W.aliceCtl, .listSessions)
        rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil))
        XCTAssertEqual(rig.core.sessionCount, 0, "consent-management calls start no session")

        let starters: [(String, AppRequest)] = [
            ("RequestOneTimeAuthorization", .requestOneTime(AuthOptions())),
            ("RequestWhenInUseAuthorization", .requestWhenInUse(AuthOptions())),
            ("GetAuthorization", .getAuthorization), ("StartUpdates", .startUpdates(UpdateOptions())),
            ("StopUpdates", .stopUpdates), ("Revoke", .revoke), ("RequestLocation", .requestLocation(LocationOptions())),
        ]
        for (label, request) in starters {
            let rig = Rig()
            rig.call(W.maps1, request)
            XCTAssertTrue(rig.core.hasSession(W.maps1.session), label)
            rig.leave(W.maps1)
            XCTAssertFalse(rig.core.hasSession(W.maps1.session), "\(label): the session ends with its name")
        }
    }

    func testSessionEndEndsItsTemporaryGrant() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        XCTAssertEqual(rig.leave(W.maps1), [.grantEnded(session: W.maps1.session)])
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        // A new connection of the app starts without a grant, though the tap would be silent now.
        XCTAssertEqual(rig.auth(W.maps2)?.status, .notDetermined)
        XCTAssertEqual(rig.core.openPromptCount, 0)
    }

    func testSessionWithoutGrantLeavesQuietly() {
        let rig = Rig()
        rig.call(W.maps1, .getAuthorization)
        XCTAssertEqual(rig.leave(W.maps1), [])
    }

    // MARK: - The button: first tap

    func testFirstTapAllowOnceGrantsAndPersistsApproval() {
        let rig = Rig()
        rig.now = 1_000
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(tap.effects.count, 1, "only the prompt: \(tap.effects)")
        XCTAssertTrue(tap.pending, "the reply waits for the decision")
        XCTAssertEqual(tap.confirm?.kind, .oneTime)
        XCTAssertEqual(rig.core.openPromptCount, 1)

        rig.now = 2_000
        let out = rig.answer(tap.promptID, "allow-once")
        XCTAssertEqual(out, [
            .saveConsents(urgent: true),
            .reply(tap.call, .status(.whenInUse)),
            .authorizationChanged(session: W.maps1.session, .whenInUse),
        ])
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .full,
                                                          decidedAt: 2_000, lastUsed: 2_000))
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        XCTAssertEqual(rig.core.openPromptCount, 0)
    }

    /// Repeated taps on a grant the session holds are answered and change
    /// nothing else; a tap for less still lowers the grant. (Since such a tap
    /// no longer writes its session, which is then not compared again: the
    /// effects must stay the same.)
    func testRepeatedTapsOnAHeldGrantAreAnsweredAndChangeNothing() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        for _ in 0..<3 {
            let again = rig.tap(W.maps1)
            XCTAssertEqual(again.effects, [.reply(again.call, .status(.whenInUse))])
        }
        let less = rig.tap(W.maps1, .reduced)
        XCTAssertEqual(less.reply, .status(.whenInUse))
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
        let same = rig.tap(W.maps1, .reduced)
        XCTAssertEqual(same.effects, [.reply(same.call, .status(.whenInUse))])
    }

    func testFirstTapReducedPersistsReducedApproval() {
        let rig = Rig()
        rig.approveTap(W.maps1, .reduced)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .reduced)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
    }

    func testConfirmCarriesTheRequestDetails() {
        let rig = Rig(config: config(promptTimeout: 17), agents: [W.agent, W.bobAgent])
        let tap = rig.tap(W.flatpak, .reduced, reason: "Show the weather here", appName: "Flat App", window: "x11:0x42")
        XCTAssertEqual(tap.effects, [.confirm(ConfirmRequest(
            agentName: W.agent.connection, agentPath: W.agentPath, requestID: tap.promptID ?? "?",
            appID: "org.example.Flat", kind: .oneTime, appName: "Flat App", reason: "Show the weather here",
            accuracy: .reduced, pid: 440, sandboxed: true, identity: .flatpak, identityProven: true,
            executable: "/app/bin/flat",
            parentWindow: "x11:0x42", timeout: 17, uid: W.flatpak.uid))])
        let ask = rig.ask(W.bobMaps, reason: "Route")
        XCTAssertEqual(ask.confirm?.kind, .whenInUse)
        XCTAssertEqual(ask.confirm?.agentName, W.bobAgent.connection, "uid 1001's app goes to uid 1001's agent")
        XCTAssertEqual(ask.confirm?.accuracy, .full, "accuracy defaults to full")
        XCTAssertEqual(ask.confirm?.sandboxed, false)
        XCTAssertNotEqual(ask.promptID, tap.promptID, "request ids are unique")
    }

    func testFirstTapWithoutAllowOnceChangesNothing() {
        var table = nonAnswers(for: .oneTime)
        table.insert(("deny", .decision(.deny)), at: 0)
        for (label, answer) in table {
            let rig = Rig()
            let tap = rig.tap(W.maps1)
            let out = rig.send(.agentAnswered(requestID: tap.promptID ?? "?", answer))
            XCTAssertEqual(out, [.reply(tap.call, .status(.notDetermined))], label)
            XCTAssertNil(rig.record(W.maps1), "\(label): nothing is stored")
            XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), label)
            XCTAssertEqual(rig.core.openPromptCount, 0, label)
            XCTAssertEqual(rig.tap(W.maps1).confirm?.kind, .oneTime, "\(label): the next tap asks again")
        }
    }

    func testTapWithoutAllowOnceReturnsTheStatusThatApplies() {
        // "nothing changes; the status that applies is returned": denied stays denied.
        for (label, answer) in [("deny", AgentAnswer.decision(.deny)), ("timeout", .noAnswer("timeout"))] {
            let rig = Rig(records: stored((W.maps1, .denied)))
            let tap = rig.tap(W.maps1)
            XCTAssertNotNil(tap.confirm, "\(label): the button offers a one-time grant even when denied")
            let out = rig.send(.agentAnswered(requestID: tap.promptID ?? "?", answer))
            XCTAssertEqual(out, [.reply(tap.call, .status(.denied))], label)
            XCTAssertEqual(rig.record(W.maps1), .denied, label)
        }
    }

    // MARK: - The button: later taps

    func testLaterTapInTheSameSessionIsSilent() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        rig.now += 1
        let again = rig.tap(W.maps1)
        XCTAssertEqual(again.effects, [.reply(again.call, .status(.whenInUse))])
    }

    func testTapInASecondSessionOfAnApprovedAppIsSilent() {
        let rig = Rig()
        rig.now = 1_000
        rig.approveTap(W.maps1)
        rig.leave(W.maps1)
        rig.now = 9_000
        let tap = rig.tap(W.maps2)
        XCTAssertTrue(tap.effects.confirms.isEmpty, "no prompt: \(tap.effects)")
        XCTAssertEqual(tap.status, .whenInUse)
        XCTAssertFalse(tap.effects.saves.contains(true), "no decision was made: \(tap.effects)")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full)
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, 9_000, "last-used: when the app last got a grant")
        XCTAssertEqual(rig.record(W.maps1)?.decidedAt, 1_000, "decided-at does not move on use")
        // It works while the first connection is still there too, and needs no agent.
        let rig2 = Rig()
        rig2.approveTap(W.maps1)
        rig2.leave(W.agent)
        let tap2 = rig2.tap(W.maps2)
        XCTAssertEqual(tap2.status, .whenInUse, "\(tap2.effects)")
        XCTAssertTrue(tap2.effects.confirms.isEmpty)
    }

    func testTemporaryGrantBelongsToOneSession() {
        let rig = Rig()
        rig.call(W.maps2, .getAuthorization)
        let out = rig.approveTap(W.maps1)
        XCTAssertNil(out.signals[W.maps2.session], "the other connection's status did not change: \(out)")
        XCTAssertEqual(rig.auth(W.maps2)?.status, .notDetermined)
        XCTAssertEqual(rig.call(W.maps2, .startUpdates(UpdateOptions())).error, .notAuthorized)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps2.session))
    }

    func testTapAskingMoreAccuracyThanConfirmedPromptsAgain() {
        // (label, caller of the second tap)
        for (label, second) in [("same session", W.maps1), ("new session", W.maps2)] {
            let rig = Rig()
            rig.approveTap(W.maps1, .reduced)
            let tap = rig.tap(second, .full)
            XCTAssertEqual(tap.confirm?.kind, .oneTime, "\(label): \(tap.effects)")
            XCTAssertEqual(tap.confirm?.accuracy, .full, label)
            XCTAssertTrue(tap.pending, label)
            rig.answer(tap.promptID, "allow-once")
            XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .full, label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: second.session), .full, label)
        }
    }

    func testFullConfirmationCoversAReducedTap() {
        let rig = Rig()
        rig.approveTap(W.maps1, .full)
        let tap = rig.tap(W.maps2, .reduced)
        XCTAssertTrue(tap.effects.confirms.isEmpty)
        XCTAssertEqual(tap.status, .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .reduced, "the grant has the accuracy asked for")
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .full, "a silent tap does not narrow the record")
    }

    func testRequestForLessLowersTheSessionGrant() {
        // (label, records, how the session got its full grant, the lowering call)
        typealias Setup = (Rig) -> Void
        let table: [(String, [AppKey: ConsentRecord], Setup, (Rig) -> Step)] = [
            ("temporary, tap reduced", [:], { $0.approveTap(W.maps1) }, { $0.tap(W.maps1, .reduced) }),
            ("temporary, ask reduced", [:], { $0.approveTap(W.maps1) }, { $0.ask(W.maps1, .reduced) }),
            ("stored, tap reduced", stored((W.maps1, .whenInUseFull)), { _ in }, { $0.tap(W.maps1, .reduced) }),
            ("stored, ask reduced", stored((W.maps1, .whenInUseFull)), { _ in }, { $0.ask(W.maps1, .reduced) }),
        ]
        for (label, records, setup, lower) in table {
            let rig = Rig(records: records)
            setup(rig)
            XCTAssertEqual(rig.auth(W.maps1)?.accuracy, .full, label)
            let s = lower(rig)
            XCTAssertEqual(s.effects.confirms.count, 0, "\(label): no prompt")
            XCTAssertEqual(s.status, .whenInUse, label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced, label)
            XCTAssertEqual(rig.auth(W.maps1)?.accuracy, .reduced, label)
            XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, records[W.maps1.app]?.decisionAccuracy,
                           "\(label): lowering a session does not touch the record")
            // Asking for full again is covered by what was stored or confirmed: silent.
            let up = rig.tap(W.maps1, .full)
            XCTAssertTrue(up.effects.confirms.isEmpty, "\(label): \(up.effects)")
            XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full, label)
        }
    }

    // MARK: - The button after Don't Allow

    func testButtonAfterDontAllowStillOffersAOneTimeGrant() {
        let rig = Rig(records: stored((W.maps1, .denied)))
        rig.call(W.maps2, .getAuthorization)
        XCTAssertEqual(rig.auth(W.maps1)?.status, .denied)
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(tap.confirm?.kind, .oneTime)
        rig.now = 7_000
        let out = rig.answer(tap.promptID, "allow-once")
        XCTAssertEqual(out.status(of: tap.call), .whenInUse)
        XCTAssertEqual(out.signals, [W.maps1.session: .whenInUse], "only the tapping session changes")
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .whenInUse)
        XCTAssertEqual(rig.core.status(for: W.maps2.session), .denied, "status 4 for that session only")
        let info = rig.auth(W.maps1)
        XCTAssertEqual(info?.temporary, true)
        XCTAssertEqual(info?.oneTimeApproved, true)
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(decision: .denied, oneTimeApproved: true,
                                                          oneTimeAccuracy: .full, decidedAt: 7_000, lastUsed: 7_000))
        // The standard prompt still says denied, with no prompt, even in the granted session's app.
        let ask = rig.ask(W.maps3)
        XCTAssertEqual(ask.effects, [.reply(ask.call, .status(.denied))])
        // A later tap in another session is silent.
        let tap2 = rig.tap(W.maps2)
        XCTAssertEqual(tap2.status, .whenInUse)
        XCTAssertTrue(tap2.effects.confirms.isEmpty)
    }

    func testDeniedAndOneTimeApprovedStandTogether() {
        // Approve first, then Don't Allow in the standard prompt: the approval stays.
        let rig = Rig()
        rig.now = 100
        rig.approveTap(W.maps1)
        rig.now = 200
        let (ask, out) = rig.decide(W.maps2, "deny")
        XCTAssertEqual(out.status(of: ask.call), .denied)
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(decision: .denied, oneTimeApproved: true,
                                                          oneTimeAccuracy: .full, decidedAt: 200, lastUsed: 100))
        XCTAssertNil(out.signals[W.maps1.session], "the tapping session keeps its temporary grant: \(out)")
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .whenInUse)
        XCTAssertEqual(rig.core.status(for: W.maps2.session), .denied)
        let tap = rig.tap(W.maps3)
        XCTAssertEqual(tap.status, .whenInUse, "one-time-approved still makes the button silent")
        XCTAssertTrue(tap.effects.confirms.isEmpty)
        let list = rig.manage(W.aliceCtl, .listConsents)
        XCTAssertEqual(list.reply, .consents([(W.maps1.app, rig.record(W.maps1)!)]))
    }

    // MARK: - The standard prompt

    func testStandardPromptAllowOnceIsTemporaryAndDoesNotSetOneTimeApproved() {
        let rig = Rig()
        let (ask, out) = rig.decide(W.maps1, "allow-once", .reduced)
        XCTAssertEqual(out.status(of: ask.call), .whenInUse)
        XCTAssertFalse(out.saves.contains(true), "nothing is decided for good: \(out)")
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved ?? false, false)
        XCTAssertNil(rig.record(W.maps1)?.decision)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced)
        let info = rig.auth(W.maps1)
        XCTAssertEqual(info?.temporary, true)
        XCTAssertEqual(info?.oneTimeApproved, false)
        // Another session: the button is not silent, the standard prompt asks again.
        let tap = rig.tap(W.maps2)
        XCTAssertEqual(tap.confirm?.kind, .oneTime)
        rig.answer(tap.promptID, "deny")
        XCTAssertEqual(rig.ask(W.maps3).confirm?.kind, .whenInUse)
    }

    func testStandardPromptAllowWhileUsingPersistsForEverySessionOfTheApp() {
        let rig = Rig(agents: [W.agent, W.bobAgent])
        for c in [W.maps2, W.weather, W.bobMaps] { rig.call(c, .getAuthorization) }
        rig.now = 3_000
        let (ask, out) = rig.decide(W.maps1, "allow-while-using")
        XCTAssertEqual(Array(out.prefix(2)), [.saveConsents(urgent: true), .reply(ask.call, .status(.whenInUse))])
        XCTAssertEqual(out.signals, [W.maps1.session: .whenInUse, W.maps2.session: .whenInUse],
                       "every session of the app (uid 1000, Maps) and no other: \(out)")
        XCTAssertEqual(out.count, 4, "\(out)")
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(decision: .whenInUse, decisionAccuracy: .full,
                                                          decidedAt: 3_000, lastUsed: 3_000))
        for c in [W.maps1, W.maps2, W.maps3] {
            let info = rig.auth(c)
            XCTAssertEqual(info?.status, .whenInUse, "\(c.session)")
            XCTAssertEqual(info?.temporary, false, "\(c.session)")
            XCTAssertEqual(info?.accuracy, .full, "\(c.session)")
        }
        XCTAssertEqual(rig.core.status(for: W.bobMaps.session), .notDetermined, "uid 1001's Maps is another app")
        XCTAssertEqual(rig.core.status(for: W.weather.session), .notDetermined)
    }

    func testStandardPromptAllowWhileUsingReducedStoresReduced() {
        let rig = Rig()
        rig.decide(W.maps1, "allow-while-using", .reduced)
        XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, .reduced)
        XCTAssertEqual(rig.auth(W.maps2)?.accuracy, .reduced)
        // More than what is stored prompts again, with either method.
        XCTAssertEqual(rig.ask(W.maps2, .full).confirm?.kind, .whenInUse)
        XCTAssertEqual(rig.tap(W.maps3, .full).confirm, nil, "one prompt per app at a time: the tap waits")
    }

    func testStandardPromptDontAllowPersistsDenied() {
        let rig = Rig()
        rig.call(W.maps2, .getAuthorization)
        rig.now = 4_000
        let (ask, out) = rig.decide(W.maps1, "deny")
        XCTAssertEqual(Array(out.prefix(2)), [.saveConsents(urgent: true), .reply(ask.call, .status(.denied))])
        XCTAssertEqual(out.signals, [W.maps1.session: .denied, W.maps2.session: .denied])
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(decision: .denied, decidedAt: 4_000))
        XCTAssertEqual(rig.auth(W.maps3)?.status, .denied)
        XCTAssertEqual(rig.call(W.maps1, .requestLocation(LocationOptions())).error, .notAuthorized)
    }

    func testStandardPromptWithoutAnAnswerReturnsZeroAndStoresNothing() {
        for (label, answer) in nonAnswers(for: .whenInUse) {
            let rig = Rig()
            let ask = rig.ask(W.maps1)
            let out = rig.send(.agentAnswered(requestID: ask.promptID ?? "?", answer))
            XCTAssertEqual(out, [.reply(ask.call, .status(.notDetermined))], label)
            XCTAssertNil(rig.record(W.maps1), label)
            XCTAssertEqual(rig.ask(W.maps1).confirm?.kind, .whenInUse, "\(label): asks again next time")
        }
    }

    func testStandardPromptAnswersWithoutPromptWhenDecided() {
        // (label, records, setup in the session, expected status)
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Void, AuthorizationStatus)] = [
            ("stored when-in-use", stored((W.maps1, .whenInUseFull)), { _ in }, .whenInUse),
            ("stored denied", stored((W.maps1, .denied)), { _ in }, .denied),
            ("stored denied + approved", stored((W.maps1, ConsentRecord(decision: .denied, oneTimeApproved: true,
                                                                        oneTimeAccuracy: .full))), { _ in }, .denied),
            ("grant in this session", [:], { $0.approveTap(W.maps1) }, .whenInUse),
        ]
        for (label, records, setup, want) in table {
            let rig = Rig(records: records)
            setup(rig)
            let ask = rig.ask(W.maps1)
            XCTAssertEqual(ask.effects.filter { if case .reply = $0 { return true } else { return false } },
                           [.reply(ask.call, .status(want))], label)
            XCTAssertTrue(ask.effects.confirms.isEmpty, label)
            XCTAssertFalse(ask.effects.saves.contains(true), label)
        }
    }

    // MARK: - Persisting before replying

    func testUrgentSaveComesBeforeTheReplyThatReportsADecision() {
        // (label, method, answer, expected status)
        let table: [(String, PromptKind, String, AuthorizationStatus)] = [
            ("button allow-once", .oneTime, "allow-once", .whenInUse),
            ("standard allow-while-using", .whenInUse, "allow-while-using", .whenInUse),
            ("standard deny", .whenInUse, "deny", .denied),
        ]
        for (label, kind, decision, want) in table {
            let rig = Rig()
            rig.call(W.maps2, .getAuthorization)
            let s = kind == .oneTime ? rig.tap(W.maps1) : rig.ask(W.maps1)
            let out = rig.answer(s.promptID, decision)
            XCTAssertEqual(out.status(of: s.call), want, label)
            guard let save = out.indexOfUrgentSave, let reply = out.index(ofReplyTo: s.call) else {
                XCTFail("\(label): save and reply expected: \(out)")
                continue
            }
            XCTAssertLessThan(save, reply, "\(label): saveConsents(urgent) before the reply: \(out)")
            for (i, e) in out.enumerated() {
                if case .authorizationChanged = e { XCTAssertGreaterThan(i, save, "\(label): signal after the save") }
            }
        }
    }

    // MARK: - Joined prompts

    func testSameKindRequestsOfOneAppShareOnePrompt() {
        // (label, method of both, answer, status both get, grants, urgent saves)
        let table: [(String, PromptKind, String, AuthorizationStatus, Accuracy?, Int)] = [
            ("button allow-once", .oneTime, "allow-once", .whenInUse, .full, 1),
            ("button deny", .oneTime, "deny", .notDetermined, nil, 0),
            ("standard allow-once", .whenInUse, "allow-once", .whenInUse, .full, 0),
            ("standard allow-while-using", .whenInUse, "allow-while-using", .whenInUse, .full, 1),
            ("standard deny", .whenInUse, "deny", .denied, nil, 1),
        ]
        for (label, kind, decision, want, grant, urgentSaves) in table {
            let rig = Rig()
            let first = kind == .oneTime ? rig.tap(W.maps1) : rig.ask(W.maps1)
            let second = kind == .oneTime ? rig.tap(W.maps2) : rig.ask(W.maps2)
            XCTAssertEqual(first.effects.confirms.count, 1, label)
            XCTAssertEqual(second.effects, [], "\(label): the second request waits on the open prompt")
            XCTAssertEqual(rig.core.openPromptCount, 1, label)
            let out = rig.answer(first.promptID, decision)
            XCTAssertEqual(out.status(of: first.call), want, label)
            XCTAssertEqual(out.status(of: second.call), want, label)
            XCTAssertEqual(out.confirms.count, 0, label)
            XCTAssertEqual(out.saves.filter { $0 }.count, urgentSaves, "\(label): one decision, one save: \(out)")
            XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), grant, label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), grant, label)
        }
    }

    func testJoinedRequestGetsTheAccuracyItAskedFor() {
        let rig = Rig()
        let full = rig.tap(W.maps1, .full)
        let reduced = rig.tap(W.maps2, .reduced)
        XCTAssertEqual(reduced.effects, [], "a reduced request joins a full prompt")
        rig.answer(full.promptID, "allow-once")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .reduced)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .full)
    }

    func testFullRequestBehindAReducedPromptIsAskedAfterwards() {
        // Reading: joining would grant more than the user saw; the core lets it wait and re-evaluates.
        let rig = Rig()
        let reduced = rig.tap(W.maps1, .reduced)
        let full = rig.tap(W.maps2, .full)
        XCTAssertEqual(full.effects, [], "one prompt per app at a time")
        let out = rig.answer(reduced.promptID, "allow-once")
        XCTAssertEqual(out.status(of: reduced.call), .whenInUse)
        XCTAssertFalse(out.answers(full.call), "reduced approval does not cover full: \(out)")
        XCTAssertEqual(out.confirms.map(\.accuracy), [.full])
        let out2 = rig.answer(out.confirms.first?.requestID, "allow-once")
        XCTAssertEqual(out2.status(of: full.call), .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full)
    }

    func testWhenInUseRequestQueuedBehindOneTimePromptIsEvaluatedAfresh() {
        // (label, answer to the button prompt)
        for decision in ["allow-once", "deny", "bogus"] {
            let rig = Rig()
            let tap = rig.tap(W.maps1)
            let ask = rig.ask(W.maps2)
            XCTAssertEqual(ask.effects, [], "\(decision): the other kind waits")
            XCTAssertEqual(rig.core.openPromptCount, 1)
            let out = rig.answer(tap.promptID, decision)
            XCTAssertNotNil(out.status(of: tap.call), decision)
            XCTAssertFalse(out.answers(ask.call), "\(decision): no grant in maps2, nothing stored: it asks")
            XCTAssertEqual(out.confirms.map(\.kind), [.whenInUse], "\(decision): \(out)")
            if let i = out.index(ofReplyTo: tap.call), let j = out.firstIndex(where: { if case .confirm = $0 { return true }; return false }) {
                XCTAssertLessThan(i, j, "\(decision): the first prompt's outcome comes before the next prompt")
            }
            let out2 = rig.answer(out.confirms.first?.requestID, "allow-while-using")
            XCTAssertEqual(out2.status(of: ask.call), .whenInUse, decision)
        }
    }

    func testOneTimeRequestQueuedBehindStandardPromptIsEvaluatedAfresh() {
        // (answer to the standard prompt, what the queued tap gets at once; nil: a new prompt)
        let table: [(String, AuthorizationStatus?)] = [
            ("allow-while-using", .whenInUse),   // rule 2: persisted when-in-use
            ("deny", nil),                       // the button works whatever the stored status
            ("allow-once", nil),                 // allow-once of the standard prompt is not one-time-approved
            ("timeout", nil),
        ]
        for (decision, want) in table {
            let rig = Rig()
            let ask = rig.ask(W.maps1)
            let tap = rig.tap(W.maps2)
            XCTAssertEqual(tap.effects, [], decision)
            let out = decision == "timeout" ? rig.noAnswer(ask.promptID) : rig.answer(ask.promptID, decision)
            XCTAssertNotNil(out.status(of: ask.call), decision)
            if let want {
                XCTAssertEqual(out.status(of: tap.call), want, "\(decision): \(out)")
                XCTAssertTrue(out.confirms.isEmpty, decision)
            } else {
                XCTAssertFalse(out.answers(tap.call), "\(decision): \(out)")
                XCTAssertEqual(out.confirms.map(\.kind), [.oneTime], decision)
            }
        }
    }

    func testRequestThatNeedsNoPromptDoesNotWaitOnAnOpenPrompt() {
        // Reading of "Prompts are joined": only requests that would open a prompt wait; one the
        // rules answer at once (whatever the open prompt's outcome) is answered at once.
        // (label, records, open prompt opened by maps1, request by maps2, immediate status)
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Step, (Rig) -> Step, AuthorizationStatus)] = [
            ("approved tap during a standard prompt", stored((W.maps1, .approvedReduced)),
             { $0.ask(W.maps1) }, { $0.tap(W.maps2, .reduced) }, .whenInUse),
            ("denied standard request during a button prompt", stored((W.maps1, .denied)),
             { $0.tap(W.maps1) }, { $0.ask(W.maps2) }, .denied),
            ("reduced tap during a full button prompt", stored((W.maps1, .approvedReduced)),
             { $0.tap(W.maps1, .full) }, { $0.tap(W.maps2, .reduced) }, .whenInUse),
        ]
        for (label, records, open, request, want) in table {
            let rig = Rig(records: records)
            let first = open(rig)
            XCTAssertNotNil(first.confirm, label)
            let s = request(rig)
            XCTAssertEqual(s.status, want, "\(label): \(s.effects)")
            XCTAssertTrue(s.effects.confirms.isEmpty, label)
            XCTAssertEqual(rig.core.openPromptCount, 1, label)
        }
    }

    func testQueuedSameKindRequestsJoinTheNextPrompt() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        let ask2 = rig.ask(W.maps2)
        let ask3 = rig.ask(W.maps3)
        XCTAssertEqual(ask2.effects + ask3.effects, [])
        let out = rig.answer(tap.promptID, "deny")
        XCTAssertEqual(out.confirms.count, 1, "one standard prompt for both: \(out)")
        let out2 = rig.answer(out.confirms.first?.requestID, "deny")
        XCTAssertEqual(out2.status(of: ask2.call), .denied)
        XCTAssertEqual(out2.status(of: ask3.call), .denied)
    }

    func testPromptsOfDifferentAppsAreSeparate() {
        let rig = Rig(agents: [W.agent, W.bobAgent])
        let a = rig.tap(W.maps1)
        let b = rig.tap(W.weather)
        let c = rig.tap(W.bobMaps)
        XCTAssertEqual([a, b, c].map { $0.effects.confirms.count }, [1, 1, 1])
        XCTAssertEqual(Set([a, b, c].compactMap(\.promptID)).count, 3)
        let out = rig.answer(b.promptID, "allow-once")
        XCTAssertEqual(out.status(of: b.call), .whenInUse)
        XCTAssertFalse(out.answers(a.call))
        XCTAssertFalse(out.answers(c.call))
        XCTAssertNil(rig.record(W.maps1))
    }

    func testPromptPendingForASessionAlreadyWaiting() {
        // (label, first call, second call in the same session)
        typealias Call = (Rig, Caller) -> Step
        let tap: Call = { $0.tap($1) }
        let ask: Call = { $0.ask($1) }
        for (label, first, second) in [("tap, tap", tap, tap), ("tap, ask", tap, ask), ("ask, ask", ask, ask), ("ask, tap", ask, tap)] {
            let rig = Rig()
            let one = first(rig, W.maps1)
            let two = second(rig, W.maps1)
            XCTAssertEqual(two.effects, [.fail(two.call, .promptPending)], label)
            let out = rig.answer(one.promptID, "deny")
            XCTAssertNotNil(out.status(of: one.call), label)
            XCTAssertFalse(out.answers(two.call), label)
        }
        // A session queued behind another kind's prompt waits too.
        let rig = Rig()
        rig.tap(W.maps1)
        rig.ask(W.maps2)
        let again = rig.tap(W.maps2)
        XCTAssertEqual(again.effects, [.fail(again.call, .promptPending)])
    }

    // MARK: - Leaving mid-prompt

    func testSessionEndMidPromptCancelsOnlyWhenTheLastWaiterLeaves() {
        let rig = Rig()
        let one = rig.tap(W.maps1)
        rig.tap(W.maps2)
        XCTAssertEqual(rig.leave(W.maps1), [], "maps2 still waits")
        XCTAssertEqual(rig.leave(W.maps2), [.cancel(agentName: W.agent.connection, agentPath: W.agentPath,
                                                    requestID: one.promptID ?? "?")])
        XCTAssertEqual(rig.core.openPromptCount, 0)
        XCTAssertNil(rig.record(W.maps1), "no consent stored")
    }

    func testLateAnswerAfterCancelIsIgnored() {
        for decision in ["allow-once", "allow-while-using", "deny"] {
            for kind in [PromptKind.oneTime, .whenInUse] {
                let label = "\(kind.rawValue) \(decision)"
                let rig = Rig()
                let s = kind == .oneTime ? rig.tap(W.maps1) : rig.ask(W.maps1)
                rig.leave(W.maps1)
                rig.call(W.maps2, .getAuthorization)
                XCTAssertEqual(rig.answer(s.promptID, decision), [], label)
                XCTAssertNil(rig.record(W.maps1), label)
                XCTAssertEqual(rig.core.status(for: W.maps2.session), .notDetermined, label)
                XCTAssertEqual(rig.tap(W.maps2).confirm?.kind, .oneTime, "\(label): a fresh prompt opens")
            }
        }
    }

    func testAnswerRepliesOnlyToWaitersStillThere() {
        let rig = Rig()
        let one = rig.tap(W.maps1)
        let two = rig.tap(W.maps2)
        rig.leave(W.maps1)
        let out = rig.answer(one.promptID, "allow-once")
        XCTAssertFalse(out.answers(one.call), "\(out)")
        XCTAssertNil(out.signals[W.maps1.session])
        XCTAssertEqual(out.status(of: two.call), .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, true, "the outcome still applies")
        XCTAssertFalse(rig.core.hasSession(W.maps1.session))
    }

    func testCancelledPromptLetsTheQueuedRequestAsk() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        let ask = rig.ask(W.maps2)
        let out = rig.leave(W.maps1)
        XCTAssertEqual(out.first, .cancel(agentName: W.agent.connection, agentPath: W.agentPath, requestID: tap.promptID ?? "?"))
        XCTAssertEqual(out.confirms.map(\.kind), [.whenInUse], "\(out)")
        XCTAssertFalse(out.answers(ask.call))
        // A queued waiter that leaves needs no Cancel.
        let rig2 = Rig()
        rig2.tap(W.maps1)
        rig2.ask(W.maps2)
        XCTAssertEqual(rig2.leave(W.maps2), [])
        XCTAssertEqual(rig2.core.openPromptCount, 1)
    }

    func testAgentLeavingMidPromptCountsAsNoAnswer() {
        // (label, how the agent goes)
        let table: [(String, (Rig) -> [CoreEffect])] = [
            ("agent leaves the bus", { $0.leave(W.agent) }),
            ("UnregisterAgent", { $0.manage(W.agent, .unregisterAgent(path: W.agentPath)).effects }),
        ]
        for (how, drop) in table {
            for kind in [PromptKind.oneTime, .whenInUse] {
                let label = "\(how), \(kind.rawValue)"
                let rig = Rig()
                let s = kind == .oneTime ? rig.tap(W.maps1) : rig.ask(W.maps1)
                rig.tap(W.maps2.connection(":1.90")) // joins or waits
                XCTAssertEqual(rig.core.openPromptCount, 1, label)
                let out = drop(rig)
                XCTAssertEqual(out.status(of: s.call), .notDetermined, "\(label): \(out)")
                XCTAssertTrue(out.saves.isEmpty, "\(label): nothing stored: \(out)")
                XCTAssertNil(rig.record(W.maps1), label)
                XCTAssertEqual(rig.core.openPromptCount, 0, label)
                XCTAssertNil(rig.core.agentName(forUID: 1000), label)
                let next = rig.tap(W.maps1)
                XCTAssertEqual(next.effects, [.fail(next.call, .noAgent)], "\(label): the session no longer waits")
                XCTAssertEqual(rig.answer(s.promptID, "allow-once"), [], "\(label): a late answer is ignored")
                XCTAssertNil(rig.record(W.maps1), label)
            }
        }
    }

    // MARK: - Agents

    func testNoAgent() {
        // (label, records, request)
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Step)] = [
            ("tap", [:], { $0.tap(W.maps1) }),
            ("ask", [:], { $0.ask(W.maps1) }),
            ("tap, stored denied", stored((W.maps1, .denied)), { $0.tap(W.maps1) }),
            ("tap for more than confirmed", stored((W.maps1, .approvedReduced)), { $0.tap(W.maps1, .full) }),
        ]
        for (label, records, request) in table {
            let rig = Rig(records: records, agents: [])
            let s = request(rig)
            XCTAssertEqual(s.effects, [.fail(s.call, .noAgent)], label)
            XCTAssertEqual(rig.core.openPromptCount, 0, label)
            // Not left waiting: with an agent, the next request prompts.
            rig.manage(W.agent, .registerAgent(path: W.agentPath))
            XCTAssertNotNil(request(rig).confirm, label)
        }
    }

    func testNoAgentNeededWhenNoPromptIs() {
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Step, AuthorizationStatus)] = [
            ("tap, approved", stored((W.maps1, .approvedFull)), { $0.tap(W.maps1) }, .whenInUse),
            ("tap, stored when-in-use", stored((W.maps1, .whenInUseFull)), { $0.tap(W.maps1) }, .whenInUse),
            ("ask, stored denied", stored((W.maps1, .denied)), { $0.ask(W.maps1) }, .denied),
        ]
        for (label, records, request, want) in table {
            let rig = Rig(records: records, agents: [])
            XCTAssertEqual(request(rig).status, want, label)
        }
    }

    func testAgentIsOnlyAskedAboutAppsOfItsOwnUID() {
        let rig = Rig(agents: [W.agent])
        let bob = rig.tap(W.bobMaps)
        XCTAssertEqual(bob.effects, [.fail(bob.call, .noAgent)], "a uid-1001 app with only a uid-1000 agent")
        let rootApp = Caller(session: ":1.50", uid: 0, pid: 500, appID: W.mapsID)
        let r = rig.ask(rootApp)
        XCTAssertEqual(r.effects, [.fail(r.call, .noAgent)])
        let rig2 = Rig(agents: [W.bobAgent])
        let alice = rig2.tap(W.maps1)
        XCTAssertEqual(alice.effects, [.fail(alice.call, .noAgent)])
        XCTAssertEqual(rig2.tap(W.bobMaps).confirm?.agentName, W.bobAgent.connection)
    }

    func testOneAgentPerUID() {
        let rig = Rig(agents: [W.agent])
        let second = rig.manage(W.agent2, .registerAgent(path: "/other"))
        XCTAssertEqual(second.effects, [.fail(second.call, .agentExists)])
        XCTAssertEqual(rig.core.agentName(forUID: 1000), W.agent.connection)
        let bob = rig.manage(W.bobAgent, .registerAgent(path: W.agentPath))
        XCTAssertEqual(bob.effects, [.reply(bob.call, .empty)], "another uid may have its own")
        // Dropped when its connection leaves the bus; then another may register.
        XCTAssertEqual(rig.leave(W.agent), [])
        XCTAssertNil(rig.core.agentName(forUID: 1000))
        let third = rig.manage(W.agent2, .registerAgent(path: "/other"))
        XCTAssertEqual(third.effects, [.reply(third.call, .empty)])
        XCTAssertEqual(rig.tap(W.maps1).confirm?.agentName, W.agent2.connection)
        XCTAssertEqual(rig.tap(W.maps1.connection(":1.99")).confirm, nil, "joined")
    }

    func testWhoMayRegisterAnAgent() {
        // (label, allow list, caller, allowed)
        let listed = Caller(session: ":1.60", uid: 120, pid: 600, appID: "org.gnome.Agent")
        let listedOfUser = Caller(session: ":1.63", uid: 1000, pid: 603, appID: "org.gnome.Agent")
        let sandboxedListed = Caller(session: ":1.61", uid: 1000, pid: 601, appID: "org.gnome.Agent", identity: .flatpak)
        let table: [(String, [String], Caller, Bool)] = [
            ("any unsandboxed app", [], W.agent, true),
            ("sandboxed", [], W.flatpak, false),
            ("root sandboxed", [], Caller(session: ":1.62", uid: 0, pid: 602, appID: "x", identity: .flatpak), false),
            ("listed, a system uid", ["org.gnome.Agent", "org.kde.Agent"], listed, true),
            ("listed, uid 1000: any program of it could show that id", ["org.gnome.Agent"], listedOfUser, false),
            ("not listed", ["org.gnome.Agent"], W.agent, false),
            ("listed but sandboxed", ["org.gnome.Agent"], sandboxedListed, false),
        ]
        for (label, allow, caller, allowed) in table {
            let rig = Rig(config: config(agentAllow: allow), agents: [])
            let s = rig.manage(caller, .registerAgent(path: W.agentPath))
            if allowed {
                XCTAssertEqual(s.effects, [.reply(s.call, .empty)], label)
                XCTAssertEqual(rig.core.agentName(forUID: caller.uid), caller.connection, label)
            } else {
                XCTAssertEqual(s.effects.count, 1, label)
                XCTAssertTrue(s.accessDenied, "\(label): \(s.effects)")
                XCTAssertNil(rig.core.agentName(forUID: caller.uid), label)
            }
        }
    }

    /// The agent's reply is read at the boundary: the three words exactly, anything else is no answer.
    func testAgentRepliesAreReadExactly() {
        for d in [AgentDecision.allowOnce, .allowWhileUsing, .deny] {
            XCTAssertEqual(AgentAnswer(reply: d.rawValue), .decision(d))
            XCTAssertEqual("\(AgentAnswer.decision(d))", d.rawValue, "logged as the agent spelled it")
        }
        XCTAssertEqual(AgentDecision.allowOnce.rawValue, "allow-once")
        XCTAssertEqual(AgentDecision.allowWhileUsing.rawValue, "allow-while-using")
        XCTAssertEqual(AgentDecision.deny.rawValue, "deny")
        for word in ["maybe", "", "Allow-Once", "DENY", " deny", "allow_once", "allow-once\n"] {
            XCTAssertEqual(AgentAnswer(reply: word), .noAnswer("unknown decision '\(word)'"), word)
        }
        XCTAssertEqual("\(AgentAnswer(reply: "maybe"))", "no answer (unknown decision 'maybe')")
    }

    // MARK: - Revoke

    func testRevokeEndsTheTemporaryGrant() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        let r = rig.call(W.maps1, .revoke)
        XCTAssertEqual(r.reply, .empty)
        XCTAssertEqual(r.effects.grantsEnded, [W.maps1.session])
        XCTAssertEqual(r.effects.signals, [W.maps1.session: .notDetermined])
        XCTAssertEqual(r.effects.count, 3, "\(r.effects)")
        if let reply = r.effects.index(ofReplyTo: r.call),
           let signal = r.effects.firstIndex(of: .authorizationChanged(session: W.maps1.session, .notDetermined)) {
            XCTAssertLessThan(reply, signal, "AuthorizationChanged follows the reply")
        }
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertFalse(rig.core.updatesOn(W.maps1.session))
        XCTAssertEqual(rig.call(W.maps1, .requestLocation(LocationOptions())).error, .notAuthorized)
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, true, "Revoke forgets nothing stored")
        // The button is silent again afterwards.
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(tap.status, .whenInUse)
        XCTAssertTrue(tap.effects.confirms.isEmpty)
    }

    func testRevokeSignalsOnlyWhenTheStatusChanges() {
        // (label, records, whether the session taps for a temporary grant first, status after Revoke, signal)
        let table: [(String, [AppKey: ConsentRecord], Bool, AuthorizationStatus, Bool)] = [
            ("stored when-in-use", stored((W.maps1, .whenInUseFull)), false, .whenInUse, false),
            ("stored when-in-use + temporary full", stored((W.maps1, .whenInUseReduced)), true, .whenInUse, false),
            ("stored denied + temporary", stored((W.maps1, .denied)), true, .denied, true),
            ("temporary only", [:], true, .notDetermined, true),
        ]
        for (label, records, tapFirst, after, signal) in table {
            let rig = Rig(records: records)
            if tapFirst { rig.approveTap(W.maps1) }
            rig.call(W.maps1, .startUpdates(UpdateOptions()))
            XCTAssertTrue(rig.core.updatesOn(W.maps1.session), label)
            let r = rig.call(W.maps1, .revoke)
            XCTAssertEqual(r.reply, .empty, label)
            XCTAssertEqual(r.effects.signals, signal ? [W.maps1.session: after] : [:], "\(label): \(r.effects)")
            XCTAssertTrue(r.effects.grantsEnded.contains(W.maps1.session), "\(label): updates end now")
            XCTAssertFalse(rig.core.updatesOn(W.maps1.session), label)
            XCTAssertEqual(rig.core.status(for: W.maps1.session), after, label)
        }
        // A stored when-in-use still applies afterwards.
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        rig.call(W.maps1, .revoke)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        let loc = rig.call(W.maps1, .requestLocation(LocationOptions()))
        XCTAssertEqual(loc.effects, [.locate(loc.call, session: W.maps1.session, LocationOptions())])
        XCTAssertEqual(rig.auth(W.maps1)?.temporary, false)
    }

    func testRevokeLeavesOtherSessionsAlone() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        rig.tap(W.maps2)
        let r = rig.call(W.maps1, .revoke)
        XCTAssertNil(r.effects.signals[W.maps2.session])
        XCTAssertFalse(r.effects.grantsEnded.contains(W.maps2.session))
        XCTAssertEqual(rig.core.status(for: W.maps2.session), .whenInUse)
    }

    // MARK: - ResetConsent

    func testResetConsentForgetsTheCallersOwnRecord() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull), (W.bobMaps, .whenInUseFull), (W.weather, .denied)))
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        rig.call(W.weather, .getAuthorization)
        let r = rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil))
        XCTAssertEqual(r.reply, .empty)
        XCTAssertNil(rig.record(W.maps1))
        XCTAssertEqual(rig.record(W.bobMaps), .whenInUseFull, "uid 1001's record stays")
        XCTAssertEqual(rig.record(W.weather), .denied)
        guard let save = r.effects.indexOfUrgentSave, let reply = r.effects.index(ofReplyTo: r.call) else {
            return XCTFail("\(r.effects)")
        }
        XCTAssertLessThan(save, reply, "the record is gone from disk before the reply")
        XCTAssertEqual(r.effects.signals, [W.maps1.session: .notDetermined], "live sessions whose status changed")
        XCTAssertEqual(r.effects.grantsEnded, [W.maps1.session])
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .notDetermined)
        XCTAssertEqual(rig.tap(W.maps1).confirm?.kind, .oneTime, "asks again")
    }

    func testResetConsentSignalsOnlySessionsWhoseStatusChanges() {
        // Reset of a denied app: sessions go 2 -> 0; of an approved-only app: status 0 stays 0.
        let rig = Rig(records: stored((W.maps1, .denied), (W.weather, .approvedFull)))
        rig.call(W.maps1, .getAuthorization)
        rig.call(W.maps2, .getAuthorization)
        rig.call(W.weather, .getAuthorization)
        let a = rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil))
        XCTAssertEqual(a.effects.signals, [W.maps1.session: .notDetermined, W.maps2.session: .notDetermined])
        let b = rig.manage(W.aliceCtl, .resetConsent(appID: W.weatherID, uid: nil))
        XCTAssertEqual(b.effects.signalCount, 0, "\(b.effects)")
        XCTAssertNil(rig.record(W.weather))
    }

    func testResetConsentByRoot() {
        // (label, uid option, which record goes)
        let rootApp = Caller(session: ":1.70", uid: 0, pid: 700, appID: W.mapsID)
        let table: [(String, UInt32?, AppKey, AppKey)] = [
            ("uid option", 1000, W.maps1.app, rootApp.app),
            ("uid option for 1001", 1001, W.bobMaps.app, W.maps1.app),
            ("no option: root's own", nil, rootApp.app, W.maps1.app),
        ]
        for (label, uid, gone, kept) in table {
            let rig = Rig(records: stored((W.maps1, .denied), (W.bobMaps, .denied), (rootApp, .denied)))
            let r = rig.manage(W.root, .resetConsent(appID: W.mapsID, uid: uid))
            XCTAssertEqual(r.reply, .empty, label)
            XCTAssertNil(rig.core.records[gone], label)
            XCTAssertNotNil(rig.core.records[kept], label)
            XCTAssertEqual(rig.core.records.count, 2, label)
        }
    }

    func testResetConsentAccessRules() {
        // (label, caller, app-id, uid option, allowed)
        let table: [(String, Caller, String, UInt32?, Bool)] = [
            ("non-root, other uid", W.aliceCtl, W.mapsID, 1001, false),
            ("non-root, own uid spelled out", W.aliceCtl, W.mapsID, 1000, true),
            ("sandboxed, another app", W.flatpak, W.mapsID, nil, false),
            ("sandboxed, own app", W.flatpak, W.flatpak.appID, nil, true),
            ("sandboxed, own app, other uid", W.flatpak, W.flatpak.appID, 1001, false),
            ("nonexistent record", W.aliceCtl, "org.example.Never", nil, true),
        ]
        for (label, caller, appID, uid, allowed) in table {
            let records = stored((W.maps1, .denied), (W.bobMaps, .denied), (W.flatpak, .denied))
            let rig = Rig(records: records)
            let r = rig.manage(caller, .resetConsent(appID: appID, uid: uid))
            if allowed {
                XCTAssertEqual(r.reply, .empty, "\(label): \(r.effects)")
                XCTAssertNil(r.error, label)
                XCTAssertNil(rig.core.records[AppKey(uid: uid ?? caller.uid, appID: appID)], label)
            } else {
                XCTAssertEqual(r.effects.count, 1, "\(label): \(r.effects)")
                XCTAssertTrue(r.accessDenied, "\(label): \(r.effects)")
                XCTAssertEqual(rig.core.records, records, "\(label): nothing forgotten")
            }
        }
    }

    // MARK: - Enabled

    func testOnlyRootMaySetEnabled() {
        for value in [false, true] {
            let rig = Rig()
            let r = rig.manage(W.aliceCtl, .setEnabled(value))
            XCTAssertEqual(r.effects.count, 1, "\(r.effects)")
            XCTAssertTrue(r.accessDenied, "\(r.effects)")
            XCTAssertTrue(rig.core.enabled)
        }
    }

    func testDisablingEndsEveryGrant() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull), (W.bobMaps, .denied)), agents: [W.agent, W.bobAgent])
        rig.call(W.maps1, .startUpdates(UpdateOptions()))      // stored grant, updates on
        rig.approveTap(W.weather)             // temporary grant
        rig.call(W.bobMaps, .getAuthorization) // denied, no grant
        rig.call(W.flatpak, .getAuthorization) // not-determined
        let r = rig.manage(W.root, .setEnabled(false))
        XCTAssertEqual(r.reply, .empty)
        XCTAssertFalse(rig.core.enabled)
        XCTAssertTrue(r.effects.contains(.saveEnabled))
        XCTAssertTrue(r.effects.contains(.enabledChanged(false)))
        XCTAssertEqual(r.effects.filter { $0 == .saveEnabled || $0 == .enabledChanged(false) }.count, 2)
        if let save = r.effects.firstIndex(of: .saveEnabled), let reply = r.effects.index(ofReplyTo: r.call) {
            XCTAssertLessThan(save, reply, "Enabled is kept across restarts before the reply")
        }
        XCTAssertEqual(r.effects.signals, [W.maps1.session: .restricted, W.weather.session: .restricted,
                                           W.bobMaps.session: .restricted, W.flatpak.session: .restricted])
        XCTAssertEqual(r.effects.grantsEnded, [W.maps1.session, W.weather.session])
        for c in [W.maps1, W.weather, W.bobMaps, W.flatpak] {
            XCTAssertEqual(rig.core.status(for: c.session), .restricted, "\(c.session)")
            XCTAssertNil(rig.core.grantedAccuracy(for: c.session), "\(c.session)")
        }
        XCTAssertFalse(rig.core.updatesOn(W.maps1.session))
        XCTAssertEqual(rig.record(W.maps1)?.decision, .whenInUse, "stored decisions are kept, just not applied")
        XCTAssertEqual(rig.record(W.maps1)?.decisionAccuracy, .full)
    }

    func testWhileDisabledEveryRequestIsRestrictedWithoutPrompt() {
        let rig = Rig(records: stored((W.maps2, .whenInUseFull), (W.weather, .approvedFull)), enabled: false)
        let table: [(String, (Rig) -> Step)] = [
            ("tap", { $0.tap(W.flatpak) }), ("ask", { $0.ask(W.flatpak) }),
            ("tap, stored when-in-use", { $0.tap(W.maps2) }),
            ("ask, stored when-in-use", { $0.ask(W.maps1) }),
            ("tap, approved", { $0.tap(W.weather) }),
        ]
        for (label, request) in table {
            let s = request(rig)
            XCTAssertEqual(s.effects, [.reply(s.call, .status(.restricted))], label)
        }
        XCTAssertEqual(rig.call(W.maps2, .startUpdates(UpdateOptions())).error, .notAuthorized)
        XCTAssertEqual(rig.call(W.maps2, .requestLocation(LocationOptions())).error, .notAuthorized)
        let info = rig.auth(W.maps2)
        XCTAssertEqual(info?.status, .restricted)
        XCTAssertNil(info?.accuracy)
        XCTAssertEqual(info?.temporary, false)
    }

    func testReenablingDoesNotBringBackTemporaryGrants() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull), (W.weather, .denied)))
        rig.call(W.maps1, .getAuthorization)
        rig.approveTap(W.weather)   // temporary over denied
        rig.manage(W.root, .setEnabled(false))
        let r = rig.manage(W.root, .setEnabled(true))
        XCTAssertEqual(r.reply, .empty)
        XCTAssertTrue(r.effects.contains(.saveEnabled))
        XCTAssertTrue(r.effects.contains(.enabledChanged(true)))
        XCTAssertEqual(r.effects.signals, [W.maps1.session: .whenInUse, W.weather.session: .denied])
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .whenInUse, "stored decisions apply again")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        XCTAssertEqual(rig.core.status(for: W.weather.session), .denied, "the temporary grant over denied is gone")
        XCTAssertNil(rig.core.grantedAccuracy(for: W.weather.session))
        XCTAssertEqual(r.effects.grantsEnded, [], "nobody had a grant while disabled")
    }

    func testReenablingDoesNotBringBackATemporaryGrantOfAnUndecidedApp() {
        let rig = Rig()
        rig.approveTap(W.weather)
        rig.manage(W.root, .setEnabled(false))
        let r = rig.manage(W.root, .setEnabled(true))
        XCTAssertEqual(r.effects.signals, [W.weather.session: .notDetermined])
        XCTAssertEqual(rig.core.status(for: W.weather.session), .notDetermined)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.weather.session))
        XCTAssertEqual(rig.call(W.weather, .startUpdates(UpdateOptions())).error, .notAuthorized)
        // The confirmation itself stays: the button is silent again.
        XCTAssertEqual(rig.tap(W.weather).status, .whenInUse)
    }

    func testPromptAnsweredWhileDisabledGrantsNothingAfterReenabling() {
        // A request made before Enabled went false is answered while location is off:
        // the client is told 1; turning location back on must not reveal a grant it never got.
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        let off = rig.manage(W.root, .setEnabled(false))
        // Switching off answers the waiting tap at once and withdraws its prompt.
        XCTAssertEqual(off.effects.status(of: tap.call), .restricted)
        XCTAssertTrue(off.effects.contains { if case .cancel = $0 { return true } else { return false } }, "\(off.effects)")
        let out = rig.answer(tap.promptID, "allow-once")
        XCTAssertEqual(out, [], "a late answer to a withdrawn prompt changes nothing")
        let r = rig.manage(W.root, .setEnabled(true))
        XCTAssertEqual(rig.core.status(for: W.maps1.session), .notDetermined, "\(r.effects)")
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
    }

    func testSettingEnabledToItsValueIsQuiet() {
        for value in [true, false] {
            let rig = Rig(enabled: value)
            rig.call(W.maps1, .getAuthorization)
            let r = rig.manage(W.root, .setEnabled(value))
            XCTAssertEqual(r.effects, [.reply(r.call, .empty)], "\(value)")
        }
    }

    // MARK: - Admin config

    func testConfigPolicies() {
        // (label, policy, stored record, expected status, accuracy)
        let table: [(String, AppPolicy, ConsentRecord?, AuthorizationStatus, Accuracy?)] = [
            ("restricted", .restricted, nil, .restricted, nil),
            ("restricted over when-in-use", .restricted, .whenInUseFull, .restricted, nil),
            ("always", .always, nil, .always, .full),
            ("always over denied", .always, .denied, .always, .full),
        ]
        for (label, policy, record, want, accuracy) in table {
            // uids 1000 and 1001 counted as system uids: config naming an executable applies to them.
            let rig = Rig(config: config(apps: [W.mapsID: policy], systemUIDMax: 1001),
                          records: record.map { stored((W.maps1, $0)) } ?? [:])
            // The last request asks for full again: a request for less lowers the grant (tested below).
            for s in [rig.tap(W.maps1, .reduced), rig.ask(W.maps1), rig.tap(W.maps1)] {
                XCTAssertEqual(s.effects, [.reply(s.call, .status(want))], "\(label): no prompt")
            }
            let info = rig.auth(W.maps1)
            XCTAssertEqual(info?.status, want, label)
            XCTAssertEqual(info?.accuracy, accuracy, "\(label): always means full")
            XCTAssertEqual(info?.temporary, false, label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), accuracy, label)
            let start = rig.call(W.maps1, .startUpdates(UpdateOptions()))
            XCTAssertEqual(start.error == nil, accuracy != nil, "\(label): \(start.effects)")
            // Other apps, and the same app-id is judged per app-id for every uid.
            XCTAssertEqual(rig.tap(W.weather).confirm?.kind, .oneTime, label)
            XCTAssertEqual(rig.auth(W.bobMaps)?.status, want, "\(label): the config names app-ids")
        }
    }

    func testRequestForLessLowersAnAlwaysGrantToo() {
        // "Every grant has one [accuracy] ... A request for less than the session holds lowers
        // the session's grant ... Config `always` means `full`." Rule 1 still returns 3.
        let rig = Rig(config: config(apps: [W.mapsID: .always], systemUIDMax: 1000))
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), nil)
        let s = rig.tap(W.maps1, .reduced)
        XCTAssertEqual(s.effects, [.reply(s.call, .status(.always))])
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .reduced, "the session asked for reduced fixes")
        XCTAssertEqual(rig.auth(W.maps1)?.accuracy, .reduced)
        let w = rig.ask(W.maps2, .reduced)
        XCTAssertEqual(w.status, .always)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .reduced)
    }

    func testDisabledWinsOverConfigAlways() {
        let rig = Rig(config: config(apps: [W.mapsID: .always], systemUIDMax: 1000), enabled: false)
        XCTAssertEqual(rig.tap(W.maps1).status, .restricted)
    }

    // MARK: - GetAuthorization

    func testGetAuthorizationDetails() {
        // (label, records, setup, status, temporary, accuracy, one-time-approved)
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Void, AuthorizationStatus, Bool, Accuracy?, Bool)] = [
            ("nothing", [:], { _ in }, .notDetermined, false, nil, false),
            ("approved, no grant in this session", stored((W.maps1, .approvedFull)), { _ in }, .notDetermined, false, nil, true),
            ("temporary full", [:], { $0.approveTap(W.maps1) }, .whenInUse, true, .full, true),
            ("temporary reduced", [:], { $0.approveTap(W.maps1, .reduced) }, .whenInUse, true, .reduced, true),
            ("temporary from standard allow-once", [:], { $0.decide(W.maps1, "allow-once") }, .whenInUse, true, .full, false),
            ("stored full", stored((W.maps1, .whenInUseFull)), { _ in }, .whenInUse, false, .full, false),
            ("stored reduced", stored((W.maps1, .whenInUseReduced)), { _ in }, .whenInUse, false, .reduced, false),
            ("stored and temporary", stored((W.maps1, .whenInUseReduced)),
             { $0.approveTap(W.maps1, .full) }, .whenInUse, false, .full, true),
            ("denied", stored((W.maps1, .denied)), { _ in }, .denied, false, nil, false),
            ("denied + temporary", stored((W.maps1, .denied)), { $0.approveTap(W.maps1) }, .whenInUse, true, .full, true),
            ("after Revoke", [:], { $0.approveTap(W.maps1); $0.call(W.maps1, .revoke) }, .notDetermined, false, nil, true),
        ]
        for (label, records, setup, status, temporary, accuracy, approved) in table {
            let rig = Rig(records: records)
            setup(rig)
            let s = rig.call(W.maps1, .getAuthorization)
            var expected = AuthorizationInfo(status: status, temporary: temporary, accuracy: accuracy, appID: W.mapsID,
                                             oneTimeApproved: approved)
            expected.agentRegistered = true   // the rig's agent of uid 1000
            XCTAssertEqual(s.effects.withoutLazySaves, [.reply(s.call, .authorization(expected))], label)
        }
        // No agent of the uid: said, so that `geoconsentctl status` can say what to do.
        let alone = Rig(agents: [])
        let s = alone.call(W.maps1, .getAuthorization)
        XCTAssertEqual(s.effects, [.reply(s.call, .authorization(AuthorizationInfo(
            status: .notDetermined, temporary: false, accuracy: nil, appID: W.mapsID, oneTimeApproved: false)))])
    }

    // MARK: - Listing

    func testListConsentsShowsOwnUIDAndRootSeesAll() {
        let rootApp = Caller(session: ":1.70", uid: 0, pid: 700, appID: "/usr/bin/locate-me")
        let records = stored((W.maps1, .whenInUseFull), (W.weather, .denied), (W.bobMaps, .approvedReduced),
                             (rootApp, .approvedFull))
        let rig = Rig(records: records)
        // (caller, expected apps in order)
        let table: [(Caller, [AppKey])] = [
            (W.aliceCtl, [W.maps1.app, W.weather.app]),
            (W.bobCtl, [W.bobMaps.app]),
            (W.root, [rootApp.app, W.maps1.app, W.weather.app, W.bobMaps.app]),
            (Caller(session: ":1.80", uid: 2000, pid: 800, appID: "x"), []),
        ]
        for (caller, apps) in table {
            let r = rig.manage(caller, .listConsents)
            guard case .consents(let got)? = r.reply else { XCTFail("\(r.effects)"); continue }
            // The order of the list is not part of the contract: compare by app.
            XCTAssertEqual(got.map(\.0).sorted(), apps.sorted(), "uid \(caller.uid)")
            for (app, record) in got { XCTAssertEqual(record, records[app], "\(app)") }
        }
    }

    func testListSessionsShowsOwnUIDAndRootSeesAll() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull), (W.bobMaps, .denied)))
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        rig.call(W.weather, .getAuthorization)
        rig.call(W.bobMaps, .getAuthorization)
        let alice = [SessionInfo(name: W.maps1.session.description, uid: 1000, appID: W.mapsID, status: .whenInUse, updates: true,
                                 receiving: true, accuracy: .full),
                     SessionInfo(name: W.weather.session.description, uid: 1000, appID: W.weatherID, status: .notDetermined, updates: false)]
        let bob = [SessionInfo(name: W.bobMaps.session.description, uid: 1001, appID: W.mapsID, status: .denied, updates: false)]
        let table: [(Caller, [SessionInfo])] = [(W.aliceCtl, alice), (W.bobCtl, bob), (W.root, alice + bob)]
        for (caller, want) in table {
            let r = rig.manage(caller, .listSessions)
            guard case .sessions(let got)? = r.reply else { XCTFail("\(r.effects)"); continue }
            XCTAssertEqual(Set(got.map(\.name)), Set(want.map(\.name)), "uid \(caller.uid)")
            for w in want { XCTAssertEqual(got.first { $0.name == w.name }, w, "uid \(caller.uid)") }
        }
        rig.call(W.maps1, .stopUpdates)
        guard case .sessions(let after)? = rig.manage(W.aliceCtl, .listSessions).reply else { return XCTFail() }
        XCTAssertEqual(after.first { $0.name == W.maps1.session.description }?.updates, false)
    }

    // MARK: - Location gate

    func testLocationCallsNeedAGrant() {
        // (label, records, setup, granted)
        let table: [(String, [AppKey: ConsentRecord], (Rig) -> Void, Bool)] = [
            ("nothing", [:], { _ in }, false),
            ("approved elsewhere, no grant here", stored((W.maps1, .approvedFull)), { _ in }, false),
            ("denied", stored((W.maps1, .denied)), { _ in }, false),
            ("temporary", [:], { $0.approveTap(W.maps1) }, true),
            ("stored", stored((W.maps1, .whenInUseReduced)), { _ in }, true),
            ("revoked", [:], { $0.approveTap(W.maps1); $0.call(W.maps1, .revoke) }, false),
        ]
        for (label, records, setup, granted) in table {
            let rig = Rig(records: records)
            setup(rig)
            // The options travel with the request to the effect that carries it out.
            let updates = UpdateOptions(distanceFilter: 25, minInterval: 2)
            let once = LocationOptions(maxAge: 0, timeout: 7)
            let start = rig.call(W.maps1, .startUpdates(updates))
            let locate = rig.call(W.maps1, .requestLocation(once))
            if granted {
                XCTAssertEqual(start.effects.withoutLazySaves, [.startUpdates(start.call, session: W.maps1.session, updates)], label)
                XCTAssertEqual(locate.effects, [.locate(locate.call, session: W.maps1.session, once)], label)
                XCTAssertTrue(rig.core.updatesOn(W.maps1.session), label)
            } else {
                XCTAssertEqual(start.effects, [.fail(start.call, .notAuthorized)], label)
                XCTAssertEqual(locate.effects, [.fail(locate.call, .notAuthorized)], label)
                XCTAssertFalse(rig.core.updatesOn(W.maps1.session), label)
            }
            let stop = rig.call(W.maps1, .stopUpdates)
            XCTAssertEqual(stop.effects, [.stopUpdates(stop.call, session: W.maps1.session)], label)
            XCTAssertFalse(rig.core.updatesOn(W.maps1.session), label)
        }
    }

    // MARK: - Times

    func testTimesComeFromTheInjectedClock() {
        let rig = Rig()
        rig.now = 1_111
        rig.approveTap(W.maps1)
        XCTAssertEqual(rig.record(W.maps1), ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .full,
                                                          decidedAt: 1_111, lastUsed: 1_111))
        rig.now = 2_222
        rig.tap(W.maps2)   // silent grant: used, not decided
        XCTAssertEqual(rig.record(W.maps1)?.decidedAt, 1_111)
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, 2_222)
        rig.now = 3_333
        rig.tap(W.maps2)   // already held: no new grant
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, 2_222)
        rig.now = 4_444
        let s = rig.ask(W.maps3)
        rig.now = 5_555
        rig.answer(s.promptID, "deny")
        XCTAssertEqual(rig.record(W.maps1)?.decidedAt, 5_555, "decided-at: when the answer came")
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, 2_222, "Don't Allow is no grant")
        rig.now = 6_666
        let w = rig.ask(W.weather)
        rig.now = 7_777
        rig.answer(w.promptID, "allow-while-using")
        XCTAssertEqual(rig.record(W.weather), ConsentRecord(decision: .whenInUse, decisionAccuracy: .full,
                                                            decidedAt: 7_777, lastUsed: 7_777))
        rig.now = 8_888
        rig.manage(W.aliceCtl, .listConsents)
        XCTAssertEqual(rig.record(W.weather)?.decidedAt, 7_777, "reading changes nothing")
    }

    func testStandardAllowOnceUpdatesLastUsedOfAnExistingRecord() {
        let rig = Rig(records: stored((W.maps1, .approvedReduced)))
        rig.now = 9_999
        let (ask, out) = rig.decide(W.maps1, "allow-once", .full)
        XCTAssertEqual(out.status(of: ask.call), .whenInUse)
        XCTAssertEqual(rig.record(W.maps1)?.lastUsed, 9_999)
        XCTAssertEqual(rig.record(W.maps1)?.decidedAt, 5, "no decision")
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeAccuracy, .reduced, "does not touch one-time-approved")
        XCTAssertFalse(out.saves.contains(true), "\(out)")
    }
}
