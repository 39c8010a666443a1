import XCTest
@testable import GeoCore

extension Rig {
    /// The process of `c`'s first call exited while its connection lives on.
    @discardableResult
    func processExited(_ c: Caller) -> [CoreEffect] { send(.processExited(c.connection)) }
}

/// The tapping process (docs/dbus-api.md, "Words": Session): when the process a
/// session's first call came from exits while another process holds its
/// connection, the session's temporary grant ends and it gets none again;
/// stored decisions and config stay in force.
final class ConsentCoreProcessExitTests: XCTestCase {
    typealias W = Who

    /// A system-uid program config names `always`: a grant no process exit ends.
    static let daemonProgram = Caller(session: ":1.50", uid: 100, pid: 450, appID: "/usr/libexec/tracker")

    struct Row {
        var label: String
        var config: Config = Config()
        var records: [AppKey: ConsentRecord] = [:]
        var caller: Caller = W.maps1
        /// Brings the session to the state the row is about.
        var setUp: (Rig, Caller) -> Void
        /// What the exit must produce, in order.
        var effects: [CoreEffect]
        var statusAfter: AuthorizationStatus
        var accuracyAfter: Accuracy?
    }

    static let rows: [Row] = [
        Row(label: "temporary grant from allow-once, updates on",
            setUp: { rig, c in
                rig.approveTap(c)
                rig.call(c, .startUpdates(UpdateOptions()))
            },
            effects: [.authorizationChanged(session: W.maps1.session, .notDetermined), .grantEnded(session: W.maps1.session)],
            statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "temporary grant from a silent tap",
            records: stored((W.maps1, .approvedFull)),
            setUp: { rig, c in XCTAssertEqual(rig.tap(c).status, .whenInUse) },
            effects: [.authorizationChanged(session: W.maps1.session, .notDetermined), .grantEnded(session: W.maps1.session)],
            statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "temporary grant from the standard prompt's allow-once",
            setUp: { rig, c in rig.decide(c, "allow-once") },
            effects: [.authorizationChanged(session: W.maps1.session, .notDetermined), .grantEnded(session: W.maps1.session)],
            statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "a tap on a denied app: back to denied",
            records: stored((W.maps1, .denied)),
            setUp: { rig, c in rig.approveTap(c) },
            effects: [.authorizationChanged(session: W.maps1.session, .denied), .grantEnded(session: W.maps1.session)],
            statusAfter: .denied, accuracyAfter: nil),
        Row(label: "a stored when-in-use decision stays, and so does a request for less",
            records: stored((W.maps1, .whenInUseFull)),
            setUp: { rig, c in
                XCTAssertEqual(rig.tap(c, .reduced).status, .whenInUse)
                rig.call(c, .startUpdates(UpdateOptions()))
            },
            effects: [], statusAfter: .whenInUse, accuracyAfter: .reduced),
        Row(label: "a stored decision under a temporary grant of more accuracy: the stored one stays",
            records: stored((W.maps1, .whenInUseReduced)),
            setUp: { rig, c in rig.approveTap(c, .full) },
            effects: [], statusAfter: .whenInUse, accuracyAfter: .reduced),
        Row(label: "config always (a system uid's program) stays",
            config: config(apps: [daemonProgram.appID: .always]), caller: daemonProgram,
            setUp: { rig, c in XCTAssertEqual(rig.tap(c).status, .always) },
            effects: [], statusAfter: .always, accuracyAfter: .full),
        Row(label: "no grant: nothing to end",
            setUp: { rig, c in _ = rig.auth(c) },
            effects: [], statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "a revoked grant: nothing to end",
            setUp: { rig, c in
                rig.approveTap(c)
                rig.call(c, .revoke)
            },
            effects: [], statusAfter: .notDetermined, accuracyAfter: nil),
    ]

    func testTheExitEndsOnlyTheTemporaryGrant() {
        for row in Self.rows {
            let rig = Rig(config: row.config, records: row.records)
            let ledger = Ledger(rig, watching: [row.caller, W.maps2])
            row.setUp(rig, row.caller)
            let before = rig.core.records
            XCTAssertEqual(rig.processExited(row.caller), row.effects, row.label)
            XCTAssertEqual(rig.core.status(for: row.caller.session), row.statusAfter, row.label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: row.caller.session), row.accuracyAfter, row.label)
            XCTAssertEqual(rig.core.records, before, "\(row.label): stored decisions stay as they were")
            XCTAssertTrue(rig.core.hasSession(row.caller.session), "\(row.label): the session lives on with its connection")
            if row.accuracyAfter == nil {
                XCTAssertFalse(rig.core.updatesOn(row.caller.session), "\(row.label): updates stop with the grant")
            }
            XCTAssertEqual(rig.processExited(row.caller), [], "\(row.label): a second report changes nothing")
            XCTAssertEqual(ledger.problems, [], row.label)
        }
    }

    /// Every way a session could get a temporary grant after its process exited.
    func testNoTemporaryGrantAfterTheExit() {
        typealias Play = (Rig) -> (call: CallID, effects: [CoreEffect])
        let cases: [(String, [AppKey: ConsentRecord], Play, AuthorizationStatus)] = [
            ("silent tap", stored((W.maps1, .approvedFull)), { rig in
                let s = rig.tap(W.maps1)
                return (s.call, s.effects)
            }, .notDetermined),
            ("tap, agent allow-once", [:], { rig in
                let s = rig.tap(W.maps1)
                return (s.call, rig.answer(s.promptID, "allow-once"))
            }, .notDetermined),
            ("standard prompt, agent allow-once", [:], { rig in
                let s = rig.ask(W.maps1)
                return (s.call, rig.answer(s.promptID, "allow-once"))
            }, .notDetermined),
            ("silent tap on a denied app", stored((W.maps1, ConsentRecord(decision: .denied, oneTimeApproved: true,
                                                                           oneTimeAccuracy: .full))), { rig in
                let s = rig.tap(W.maps1)
                return (s.call, s.effects)
            }, .denied),
        ]
        for (label, records, play, expected) in cases {
            let rig = Rig(records: records)
            let ledger = Ledger(rig, watching: [W.maps1])
            rig.processExited(W.maps1)
            let (call, effects) = play(rig)
            XCTAssertEqual(effects.status(of: call), expected, label)
            XCTAssertEqual(effects.signalCount, 0, label)
            XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), label)
            XCTAssertEqual(rig.call(W.maps1, .requestLocation(LocationOptions())).error, .notAuthorized, label)
            XCTAssertEqual(rig.call(W.maps1, .startUpdates(UpdateOptions())).error, .notAuthorized, label)
            XCTAssertEqual(ledger.problems, [], label)
        }
    }

    func testAPromptOpenAtTheExitGrantsNothingWhenAnswered() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        XCTAssertTrue(tap.pending)
        XCTAssertEqual(rig.processExited(W.maps1), [], "no grant yet: nothing to end")
        let out = rig.answer(tap.promptID, "allow-once")
        XCTAssertEqual(out.status(of: tap.call), .notDetermined)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertEqual(rig.record(W.maps1)?.oneTimeApproved, true, "the user's answer is stored: it is the app's")
        // Another connection of the app that joined the prompt gets its grant.
        let rig2 = Rig()
        let t1 = rig2.tap(W.maps1), t2 = rig2.tap(W.maps2)
        XCTAssertTrue(t2.pending)
        rig2.processExited(W.maps1)
        let out2 = rig2.answer(t1.promptID, "allow-once")
        XCTAssertEqual(out2.status(of: t1.call), .notDetermined)
        XCTAssertEqual(out2.status(of: t2.call), .whenInUse)
    }

    func testAStoredDecisionStillAppliesAfterTheExit() {
        let rig = Rig()
        rig.processExited(W.maps1)
        let (ask, out) = rig.decide(W.maps1, "allow-while-using")
        XCTAssertEqual(out.status(of: ask.call), .whenInUse, "allow-while-using is stored for the app")
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        XCTAssertNil(rig.call(W.maps1, .startUpdates(UpdateOptions())).error)
    }

    func testOtherSessionsAreUntouched() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        for c in [W.maps1, W.maps2, W.bobMaps] { rig.tap(c) }
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.bobMaps.session), nil, "bob's Maps is another app, without an approval")
        let out = rig.processExited(W.maps1)
        XCTAssertEqual(out.grantsEnded, [W.maps1.session])
        XCTAssertEqual(Set(out.signals.keys), [W.maps1.session])
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full, "another connection of the app keeps its grant")
    }

    func testAReportHoldsUntilTheNameLeaves() {
        let rig = Rig()
        XCTAssertEqual(rig.processExited(W.maps1), [], "no session yet: nothing to end")
        XCTAssertFalse(rig.core.hasSession(W.maps1.session), "a report starts no session")
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(rig.answer(tap.promptID, "allow-once").status(of: tap.call), .notDetermined,
                       "a session the connection starts later gets no temporary grant either")
        XCTAssertEqual(rig.leave(W.maps1), [])
        // What the core kept about the connection went with its name (the approval is stored: a silent tap).
        XCTAssertEqual(rig.tap(W.maps1).status, .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
    }

    // MARK: - Client objects (GeoClue), sessions of the connection

    static let client1 = W.maps1.clientSession(1)
    static let client2 = W.maps1.clientSession(2)

    private func start(_ rig: Rig, _ c: Caller) -> Step {
        rig.call(c, .start(AuthOptions(appName: "maps"), UpdateOptions()))
    }

    func testTheConnectionsClientObjectsLoseTheirTemporaryGrantsToo() {
        let rig = Rig()
        let s = start(rig, Self.client1)
        let out = rig.answer(s.promptID, "allow-once")
        XCTAssertEqual(out.first { if case .startUpdates = $0 { return true } else { return false } },
                       .startUpdates(s.call, session: Self.client1.session, UpdateOptions()))
        rig.approveTap(W.maps1)
        let bob = W.bobMaps.clientSession(1)
        let exit = rig.processExited(W.maps1)
        XCTAssertEqual(exit.grantsEnded, [W.maps1.session, Self.client1.session])
        XCTAssertEqual(exit.signals, [W.maps1.session: .notDetermined, Self.client1.session: .notDetermined])
        XCTAssertFalse(rig.core.updatesOn(Self.client1.session))
        XCTAssertNil(rig.core.grantedAccuracy(for: Self.client1.session))
        XCTAssertFalse(rig.core.hasSession(bob.session))

        // A client object made after the exit gets no temporary grant: its Start is refused.
        let later = start(rig, Self.client2)
        let answered = rig.answer(later.promptID, "allow-once")
        guard case .accessDenied? = answered.failure(of: later.call) else {
            return XCTFail("Start after the exit: \(answered)")
        }
        // A stored decision still serves it.
        let (_, _) = rig.decide(W.maps1, "allow-while-using")
        let again = start(rig, Self.client2.connection(":1.10/geoclue/3"))
        XCTAssertNotNil(again.effects.first { if case .startUpdates = $0 { return true } else { return false } },
                        "when-in-use is the app's: \(again.effects)")
    }

    func testTheSessionStillEndsWithItsName() {
        let rig = Rig()
        rig.approveTap(W.maps1)
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        rig.processExited(W.maps1)
        XCTAssertEqual(rig.leave(W.maps1), [], "the grant and updates ended already")
        XCTAssertFalse(rig.core.hasSession(W.maps1.session))
        XCTAssertEqual(rig.core.sessionCount, 0)
    }
}
