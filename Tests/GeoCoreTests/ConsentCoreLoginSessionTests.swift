import XCTest
@testable import GeoCore

extension Rig {
    /// logind placed `c`'s connection in login session `id`.
    @discardableResult
    func place(_ c: Caller, in id: String) -> [CoreEffect] { send(.loginSession(connection: c.connection, id: id)) }

    /// logind's word on login session `id` (nil: nothing known).
    @discardableResult
    func login(_ id: String, _ state: LoginSessionState?) -> [CoreEffect] { send(.loginSessionState(id: id, state)) }
}

/// "In use" (docs/dbus-api.md): while the user's login session is locked or
/// in the background, its sessions are paused: no fix, requests answered as
/// when location is off for the user, temporary grants end; stored decisions
/// stay, and updates resume when the user is back.
final class ConsentCoreLoginSessionTests: XCTestCase {
    typealias W = Who
    static let alice = "/org/freedesktop/login1/session/_31"
    static let bob = "/org/freedesktop/login1/session/_32"
    static let systemProgram = Caller(session: ":1.50", uid: 100, pid: 450, appID: "/usr/libexec/tracker")

    struct Row {
        var label: String
        var config: Config = Config()
        var records: [AppKey: ConsentRecord] = [:]
        var caller: Caller = W.maps1
        var reason: PauseReason = .locked
        var setUp: (Rig, Caller) -> Void
        /// What the pause must produce, in order.
        var pauseEffects: [CoreEffect]
        var updatesDuring: Bool
        /// What the return must produce, in order.
        var resumeEffects: [CoreEffect]
        var statusAfter: AuthorizationStatus
        var accuracyAfter: Accuracy?
    }

    static func startUpdates(_ rig: Rig, _ c: Caller) {
        XCTAssertNil(rig.call(c, .startUpdates(UpdateOptions())).error)
    }

    static let m = W.maps1.session
    static let rows: [Row] = [
        Row(label: "a one-time grant ends at the lock",
            setUp: { rig, c in rig.approveTap(c); startUpdates(rig, c) },
            pauseEffects: [.pauseFixes(session: m, .locked), .authorizationChanged(session: m, .restricted),
                           .grantEnded(session: m, byPause: true)],
            updatesDuring: false,
            resumeEffects: [.authorizationChanged(session: m, .notDetermined), .resumeFixes(session: m)],
            statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "a silent tap's grant ends when another user switches in",
            records: stored((W.maps1, .approvedFull)), reason: .inactive,
            setUp: { rig, c in XCTAssertEqual(rig.tap(c).status, .whenInUse) },
            pauseEffects: [.pauseFixes(session: m, .inactive), .authorizationChanged(session: m, .restricted),
                           .grantEnded(session: m, byPause: true)],
            updatesDuring: false,
            resumeEffects: [.authorizationChanged(session: m, .notDetermined), .resumeFixes(session: m)],
            statusAfter: .notDetermined, accuracyAfter: nil),
        Row(label: "a stored when-in-use decision pauses and resumes, updates kept",
            records: stored((W.maps1, .whenInUseFull)),
            setUp: { rig, c in startUpdates(rig, c) },
            pauseEffects: [.pauseFixes(session: m, .locked), .authorizationChanged(session: m, .restricted)],
            updatesDuring: true,
            resumeEffects: [.authorizationChanged(session: m, .whenInUse), .resumeFixes(session: m)],
            statusAfter: .whenInUse, accuracyAfter: .full),
        Row(label: "a stored decision with a request for less: the lower accuracy stays",
            records: stored((W.maps1, .whenInUseFull)), reason: .inactive,
            setUp: { rig, c in XCTAssertEqual(rig.tap(c, .reduced).status, .whenInUse); startUpdates(rig, c) },
            pauseEffects: [.pauseFixes(session: m, .inactive), .authorizationChanged(session: m, .restricted)],
            updatesDuring: true,
            resumeEffects: [.authorizationChanged(session: m, .whenInUse), .resumeFixes(session: m)],
            statusAfter: .whenInUse, accuracyAfter: .reduced),
        Row(label: "a denied app: restricted while paused, denied after",
            records: stored((W.maps1, .denied)),
            setUp: { rig, c in _ = rig.auth(c) },
            pauseEffects: [.pauseFixes(session: m, .locked), .authorizationChanged(session: m, .restricted)],
            updatesDuring: false,
            resumeEffects: [.authorizationChanged(session: m, .denied), .resumeFixes(session: m)],
            statusAfter: .denied, accuracyAfter: nil),
        Row(label: "config always (a system uid's program in the session) pauses too",
            config: config(apps: [systemProgram.appID: .always]), caller: systemProgram,
            setUp: { rig, c in XCTAssertEqual(rig.tap(c).status, .always); startUpdates(rig, c) },
            pauseEffects: [.pauseFixes(session: systemProgram.session, .locked),
                           .authorizationChanged(session: systemProgram.session, .restricted)],
            updatesDuring: true,
            resumeEffects: [.authorizationChanged(session: systemProgram.session, .always),
                            .resumeFixes(session: systemProgram.session)],
            statusAfter: .always, accuracyAfter: .full),
    ]

    func testPauseAndReturn() {
        for row in Self.rows {
            let rig = Rig(config: row.config, records: row.records)
            let c = row.caller
            XCTAssertEqual(rig.place(c, in: Self.alice), [], row.label)
            XCTAssertEqual(rig.login(Self.alice, .inUse), [], "\(row.label): in use is how it was")
            row.setUp(rig, c)
            let before = rig.core.records
            XCTAssertEqual(rig.login(Self.alice, .paused(row.reason)), row.pauseEffects, row.label)
            XCTAssertEqual(rig.core.status(for: c.session), .restricted, row.label)
            XCTAssertNil(rig.core.grantedAccuracy(for: c.session), "\(row.label): no fix while paused")
            XCTAssertEqual(rig.core.pause(of: c.session), row.reason, row.label)
            XCTAssertEqual(rig.core.updatesOn(c.session), row.updatesDuring, row.label)
            XCTAssertEqual(rig.login(Self.alice, .paused(row.reason)), [], "\(row.label): the same word again changes nothing")
            XCTAssertEqual(rig.login(Self.alice, .inUse), row.resumeEffects, row.label)
            XCTAssertEqual(rig.core.status(for: c.session), row.statusAfter, row.label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: c.session), row.accuracyAfter, row.label)
            XCTAssertEqual(rig.core.updatesOn(c.session), row.updatesDuring, "\(row.label): updates resume by themselves")
            XCTAssertEqual(rig.core.records, before, "\(row.label): stored decisions stay as they were")
        }
    }

    /// Requests while paused, as when location is off for the user; the stored decisions are not touched.
    func testRequestsWhilePaused() {
        typealias Play = (Rig) -> Step
        let cases: [(String, [AppKey: ConsentRecord], Play, (Step) -> Void)] = [
            ("tap: restricted, no prompt", [:], { $0.tap(W.maps1) }, { s in
                XCTAssertEqual(s.status, .restricted); XCTAssertNil(s.confirm)
            }),
            ("silent tap of an approved app: restricted, no grant", stored((W.maps1, .approvedFull)), { $0.tap(W.maps1) }, { s in
                XCTAssertEqual(s.status, .restricted)
            }),
            ("standard prompt: restricted, nothing stored", [:], { $0.ask(W.maps1) }, { s in
                XCTAssertEqual(s.status, .restricted); XCTAssertNil(s.confirm)
            }),
            ("RequestLocation with a stored grant: SessionInactive saying why", stored((W.maps1, .whenInUseFull)),
             { $0.call(W.maps1, .requestLocation(LocationOptions())) }, { s in
                XCTAssertEqual(s.error, .sessionPaused(.locked))
                XCTAssertEqual(s.error?.message, PauseReason.locked.message)
            }),
            ("RequestLocation without a grant: NotAuthorized", [:],
             { $0.call(W.maps1, .requestLocation(LocationOptions())) }, { s in XCTAssertEqual(s.error, .notAuthorized) }),
            ("StartUpdates with a stored grant: accepted, the location side holds it paused",
             stored((W.maps1, .whenInUseFull)), { $0.call(W.maps1, .startUpdates(UpdateOptions())) }, { s in
                XCTAssertNil(s.error)
                XCTAssertTrue(s.effects.contains(.startUpdates(s.call, session: W.maps1.session, UpdateOptions())))
            }),
            ("GetAuthorization: restricted, accuracy none", stored((W.maps1, .whenInUseFull)),
             { $0.call(W.maps1, .getAuthorization) }, { s in
                var expected = AuthorizationInfo(status: .restricted, temporary: false, accuracy: nil,
                                                 appID: W.mapsID, oneTimeApproved: false)
                expected.agentRegistered = true
                XCTAssertEqual(s.reply, .authorization(expected))
            }),
        ]
        for (label, records, play, check) in cases {
            let rig = Rig(records: records)
            rig.place(W.maps1, in: Self.alice)
            rig.login(Self.alice, .paused(.locked))
            let step = play(rig)
            XCTAssertEqual(step.effects.first, .pauseFixes(session: W.maps1.session, .locked),
                           "\(label): a session that begins paused says so before anything else")
            check(step)
            XCTAssertEqual(rig.core.records, records, label)
            XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), label)
        }
    }

    func testAPromptOpenAtThePauseIsAnsweredAndWithdrawn() {
        let rig = Rig()
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .inUse)
        let tap = rig.tap(W.maps1)
        XCTAssertTrue(tap.pending)
        let out = rig.login(Self.alice, .paused(.locked))
        XCTAssertEqual(out.status(of: tap.call), .restricted)
        XCTAssertEqual(out.cancels, [tap.promptID!])
        XCTAssertEqual(rig.answer(tap.promptID, "allow-once"), [], "a late answer reaches nobody")
        XCTAssertNil(rig.record(W.maps1), "and stores nothing")
        XCTAssertEqual(rig.core.openPromptCount, 0)
    }

    func testAPromptOthersWaitOnStaysOpen() {
        let rig = Rig()
        rig.place(W.maps1, in: Self.alice)
        rig.place(W.maps2, in: Self.bob)   // the same uid's app in a login session of its own
        for id in [Self.alice, Self.bob] { rig.login(id, .inUse) }
        let t1 = rig.tap(W.maps1), t2 = rig.tap(W.maps2)
        XCTAssertTrue(t2.pending)
        let out = rig.login(Self.alice, .paused(.inactive))
        XCTAssertEqual(out.status(of: t1.call), .restricted)
        XCTAssertEqual(out.cancels, [], "maps2 still waits on the prompt")
        let answer = rig.answer(t1.promptID, "allow-once")
        XCTAssertEqual(answer.status(of: t2.call), .whenInUse)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full)
    }

    func testAnotherUsersSessionIsUnaffected() {
        let rig = Rig(records: stored((W.maps1, .approvedFull), (W.bobMaps, .approvedFull)))
        rig.place(W.maps1, in: Self.alice)
        rig.place(W.bobMaps, in: Self.bob)
        for id in [Self.alice, Self.bob] { rig.login(id, .inUse) }
        for c in [W.maps1, W.bobMaps] { XCTAssertEqual(rig.tap(c).status, .whenInUse) }
        let out = rig.login(Self.alice, .paused(.inactive))
        XCTAssertEqual(out.grantsEnded, [W.maps1.session])
        XCTAssertEqual(Set(out.signals.keys), [W.maps1.session])
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.bobMaps.session), .full)
        XCTAssertEqual(rig.tap(W.bobMaps).status, .whenInUse)
    }

    func testUnknownBehavesAsToday() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        // Placed, but nothing known of the login session; and a connection never placed.
        rig.place(W.maps1, in: Self.alice)
        XCTAssertEqual(rig.tap(W.maps1).status, .whenInUse)
        XCTAssertEqual(rig.tap(W.maps2).status, .whenInUse)
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps1.session), .full)
        rig.login(Self.alice, .paused(.locked))
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertEqual(rig.core.grantedAccuracy(for: W.maps2.session), .full, "a connection never placed does not pause")
        // logind left: nothing known any more, so no pause.
        let out = rig.login(Self.alice, nil)
        XCTAssertEqual(out, [.authorizationChanged(session: W.maps1.session, .notDetermined), .resumeFixes(session: W.maps1.session)])
        XCTAssertEqual(rig.tap(W.maps1).status, .whenInUse)
    }

    func testPlacedInAPausedSessionLate() {
        // A connection placed after its first call (logind answered late): its temporary grant ends then.
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        rig.login(Self.alice, .paused(.locked))
        XCTAssertEqual(rig.tap(W.maps1).status, .whenInUse)
        let out = rig.place(W.maps1, in: Self.alice)
        XCTAssertEqual(out, [.pauseFixes(session: W.maps1.session, .locked),
                             .authorizationChanged(session: W.maps1.session, .restricted),
                             .grantEnded(session: W.maps1.session, byPause: true)])
    }

    /// A stored decision's grant outlasts the pause; one that something else
    /// ends while the user is away (here the consent reset) did not end by the
    /// pause: `byPause` false, so a GeoClue client is not started again at the
    /// return, and the journal says why it ended.
    func testAGrantEndedDuringThePauseDidNotEndByIt() {
        let rig = Rig(records: stored((W.maps1, .whenInUseReduced)))
        _ = rig.place(W.maps1, in: Self.alice)
        _ = rig.login(Self.alice, .inUse)
        XCTAssertEqual(rig.auth(W.maps1)?.status, .whenInUse)
        XCTAssertNil(rig.call(W.maps1, .startUpdates(UpdateOptions())).error)
        XCTAssertEqual(rig.login(Self.alice, .paused(.locked)).grantsEnded, [], "a stored decision's grant stays")
        let out = rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil)).effects
        XCTAssertTrue(out.contains(.grantEnded(session: W.maps1.session, byPause: false)), "\(out)")
        XCTAssertEqual(rig.core.grantNotes.map(\.description),
                       ["grant ended: uid 1000, executable, session :1.10, its consent was reset: app \"org.example.Maps\""])
    }

    func testClientObjectsPauseWithTheirConnection() {
        let client = W.maps1.clientSession(1)
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .inUse)
        XCTAssertNil(rig.call(client, .start(AuthOptions(), UpdateOptions())).error)
        let out = rig.login(Self.alice, .paused(.locked))
        XCTAssertTrue(out.contains(.pauseFixes(session: client.session, .locked)), "\(out)")
        XCTAssertTrue(rig.core.updatesOn(client.session))
        XCTAssertTrue(rig.login(Self.alice, .inUse).contains(.resumeFixes(session: client.session)))
        // A Start while paused without a stored grant is refused, saying why.
        let other = W.weather.clientSession(1)
        rig.place(W.weather, in: Self.alice)
        rig.login(Self.alice, .paused(.locked))
        XCTAssertEqual(rig.call(other, .start(AuthOptions(), UpdateOptions())).error, .accessDenied(PauseReason.locked.message))
    }

    func testAStartWaitingOnAPromptAtTheLockStartsPaused() {
        // Reduced is stored; a client object asks for full: a prompt. The lock
        // answers its Start with the grant that is stored, paused from the start.
        let client = W.maps1.clientSession(1)
        let rig = Rig(records: stored((W.maps1, .whenInUseReduced)))
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .inUse)
        let start = rig.call(client, .start(AuthOptions(accuracy: .full), UpdateOptions()))
        XCTAssertTrue(start.pending)
        let out = rig.login(Self.alice, .paused(.locked))
        let pauseAt = out.firstIndex(of: .pauseFixes(session: client.session, .locked))
        let startAt = out.firstIndex(of: .startUpdates(start.call, session: client.session, UpdateOptions()))
        XCTAssertNotNil(pauseAt, "\(out)")
        XCTAssertNotNil(startAt, "\(out)")
        if let p = pauseAt, let s = startAt { XCTAssertLessThan(p, s, "paused before its updates start: \(out)") }
        XCTAssertEqual(out.cancels.count, 1, "the prompt nobody else waits on is withdrawn")
    }

    func testListSessionsShowsThePause() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .paused(.inactive))
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        _ = rig.auth(W.weather)
        let list = rig.manage(W.aliceCtl, .listSessions).reply
        XCTAssertEqual(list, .sessions([
            SessionInfo(name: W.maps1.session.description, uid: 1000, appID: W.mapsID, status: .restricted, updates: true, paused: .inactive),
            SessionInfo(name: W.weather.session.description, uid: 1000, appID: W.weatherID, status: .notDetermined, updates: false),
        ]))
    }

    func testTheLocationSideForgetsAPausedSessionThatEnds() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .paused(.locked))
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        XCTAssertEqual(rig.leave(W.maps1), [.grantEnded(session: W.maps1.session), .resumeFixes(session: W.maps1.session)])
        // The placement went with the name: a new connection of that name would be placed afresh.
        XCTAssertEqual(rig.tap(W.maps1).status, .whenInUse)
    }

    func testLockThenSwitchSaysTheNewReason() {
        let rig = Rig(records: stored((W.maps1, .whenInUseFull)))
        rig.place(W.maps1, in: Self.alice)
        rig.login(Self.alice, .inUse)
        rig.call(W.maps1, .startUpdates(UpdateOptions()))
        rig.login(Self.alice, .paused(.locked))
        XCTAssertEqual(rig.login(Self.alice, .paused(.inactive)), [.pauseFixes(session: W.maps1.session, .inactive)])
    }

    func testStateFromLogindsProperties() {
        XCTAssertEqual(LoginSessionState(active: true, locked: false), .inUse)
        XCTAssertEqual(LoginSessionState(active: true, locked: true), .paused(.locked))
        XCTAssertEqual(LoginSessionState(active: false, locked: false), .paused(.inactive))
        XCTAssertEqual(LoginSessionState(active: false, locked: true), .paused(.locked))
    }
}
