import XCTest
@testable import GeoCore

/// `AuthorizationChanged` is derived from what each event wrote, not reported by
/// the rules: every path that changes a grant is played here with a `Ledger`
/// watching, which fails as soon as a session's status changes unannounced.
/// Below them, the tables that note the writes.
final class ConsentCoreAnnouncementTests: XCTestCase {
    typealias W = Who

    struct Path {
        let label: String
        var records: [AppKey: ConsentRecord] = [:]
        var config = Config()
        var agents = [Who.agent]
        /// The sessions that watch (they call `GetAuthorization` first).
        let watch: [Caller]
        let play: (Rig) -> Void
        /// What the watched sessions were told in the end.
        let expect: [(Caller, AuthorizationStatus)]
        /// How many `AuthorizationChanged` the watched sessions got while `play` ran.
        let signals: Int
    }

    static let maps = [W.maps1, W.maps2, W.maps3]

    /// Taps in `c` and returns the prompt it opened (nil: it did not prompt).
    static func prompt(_ rig: Rig, _ c: Caller, _ kind: PromptKind) -> String? {
        (kind == .oneTime ? rig.tap(c) : rig.ask(c)).promptID
    }

    static let paths: [Path] = [
        Path(label: "silent tap after the user confirmed the button", records: stored((W.maps1, .approvedFull)),
             watch: maps, play: { rig in rig.tap(W.maps1) },
             expect: [(W.maps1, .whenInUse), (W.maps2, .notDetermined), (W.maps3, .notDetermined)], signals: 1),
        Path(label: "a storm of silent taps over the app's sessions", records: stored((W.maps1, .approvedFull)),
             watch: maps + [W.weather], play: { rig in
                 for _ in 0..<3 { for c in maps { rig.tap(c, .reduced); rig.tap(c) } }
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .whenInUse), (W.weather, .notDetermined)],
             signals: 3),
        Path(label: "the button's prompt answered allow-once for several waiting sessions", watch: maps + [W.weather],
             play: { rig in
                 let id = prompt(rig, W.maps1, .oneTime)
                 XCTAssertTrue(rig.tap(W.maps2).pending, "joins the open prompt")
                 rig.answer(id, "allow-once")
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .notDetermined), (W.weather, .notDetermined)],
             signals: 2),
        Path(label: "the standard prompt answered allow-once for several waiting sessions", watch: maps,
             play: { rig in
                 let id = prompt(rig, W.maps1, .whenInUse)
                 XCTAssertTrue(rig.ask(W.maps2).pending, "joins the open prompt")
                 rig.answer(id, "allow-once")
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .notDetermined)], signals: 2),
        Path(label: "allow-while-using reaches every session of the app", watch: maps + [W.weather, W.bobMaps],
             play: { rig in rig.decide(W.maps1, "allow-while-using") },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .whenInUse),
                      (W.weather, .notDetermined), (W.bobMaps, .notDetermined)],
             signals: 3),
        Path(label: "deny reaches every session of the app", watch: maps + [W.weather],
             play: { rig in rig.decide(W.maps1, "deny") },
             expect: [(W.maps1, .denied), (W.maps2, .denied), (W.maps3, .denied), (W.weather, .notDetermined)],
             signals: 3),
        Path(label: "a request waiting behind another prompt, granted when it is asked afresh", watch: maps,
             play: { rig in
                 let first = prompt(rig, W.maps1, .oneTime)
                 let queued = rig.ask(W.maps2)
                 XCTAssertTrue(queued.pending, "waits for the button's prompt")
                 let out = rig.answer(first, "allow-once")
                 rig.answer(out.confirms.first?.requestID, "allow-while-using")
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .whenInUse)], signals: 3),
        Path(label: "the agent leaves mid-prompt", watch: maps,
             play: { rig in
                 _ = prompt(rig, W.maps1, .whenInUse)
                 rig.leave(W.agent)
             },
             expect: [(W.maps1, .notDetermined), (W.maps2, .notDetermined), (W.maps3, .notDetermined)], signals: 0),
        Path(label: "ResetConsent of a stored decision", records: stored((W.maps1, .whenInUseFull), (W.weather, .denied)),
             watch: maps + [W.weather], play: { rig in rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil)) },
             expect: [(W.maps1, .notDetermined), (W.maps2, .notDetermined), (W.maps3, .notDetermined), (W.weather, .denied)],
             signals: 3),
        Path(label: "ResetConsent ends temporary grants", watch: maps,
             play: { rig in
                 rig.approveTap(W.maps1)
                 rig.tap(W.maps2)
                 rig.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil))
             },
             expect: [(W.maps1, .notDetermined), (W.maps2, .notDetermined), (W.maps3, .notDetermined)], signals: 4),
        Path(label: "SetEnabled false, then true",
             records: stored((W.maps1, .whenInUseFull), (W.weather, .denied)),
             agents: [W.agent, W.bobAgent], watch: [W.maps1, W.maps2, W.weather, W.bobMaps],
             play: { rig in
                 rig.approveTap(W.bobMaps)
                 XCTAssertTrue(rig.tap(W.weather).pending, "a prompt open while location is switched off")
                 rig.manage(W.root, .setEnabled(false))
                 rig.manage(W.root, .setEnabled(true))
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.weather, .denied), (W.bobMaps, .notDetermined)],
             signals: 1 + 4 + 4),
        Path(label: "Revoke ends a temporary grant", records: stored((W.maps1, .approvedFull)), watch: maps,
             play: { rig in
                 rig.tap(W.maps1)
                 rig.tap(W.maps2)
                 rig.call(W.maps1, .revoke)
             },
             expect: [(W.maps1, .notDetermined), (W.maps2, .whenInUse), (W.maps3, .notDetermined)], signals: 3),
        Path(label: "Revoke under a stored decision", records: stored((W.maps1, .whenInUseFull)), watch: maps,
             play: { rig in
                 rig.ask(W.maps1, .reduced)
                 rig.call(W.maps1, .revoke)
             },
             expect: [(W.maps1, .whenInUse), (W.maps2, .whenInUse), (W.maps3, .whenInUse)], signals: 0),
        Path(label: "policy always, a request for less", config: config(apps: [Who.mapsID: .always], systemUIDMax: 1000), watch: maps,
             play: { rig in
                 rig.tap(W.maps1, .reduced)
                 rig.ask(W.maps2, .reduced)
                 rig.call(W.maps1, .revoke)
             },
             expect: [(W.maps1, .always), (W.maps2, .always), (W.maps3, .always)], signals: 0),
        Path(label: "a granted session leaves", records: stored((W.maps1, .approvedFull)), watch: maps,
             play: { rig in
                 rig.tap(W.maps1)
                 rig.tap(W.maps2)
                 rig.leave(W.maps1)
             },
             expect: [(W.maps2, .whenInUse), (W.maps3, .notDetermined)], signals: 2),
    ]

    func testEveryGrantChangeIsAnnounced() {
        for path in Self.paths {
            let rig = Rig(config: path.config, records: path.records, agents: path.agents)
            let ledger = Ledger(rig, watching: path.watch)
            path.play(rig)
            XCTAssertEqual(ledger.problems, [], path.label)
            for (c, st) in path.expect {
                XCTAssertEqual(ledger.status(c), st, "\(path.label): \(c.session)")
            }
            XCTAssertEqual(ledger.signals, path.signals, path.label)
        }
    }

    /// The ledger itself: with the core's signals withheld from it, every path
    /// that changes a status shows up as a problem.
    func testTheLedgerCatchesALostAuthorizationChanged() {
        for path in Self.paths where path.signals > 0 {
            let rig = Rig(config: path.config, records: path.records, agents: path.agents)
            let ledger = Ledger(rig, watching: path.watch)
            rig.observer = { event, effects in
                ledger.check(event, effects.filter { if case .authorizationChanged = $0 { return false } else { return true } })
            }
            path.play(rig)
            XCTAssertFalse(ledger.problems.isEmpty, path.label)
            XCTAssertEqual(ledger.signals, 0, path.label)
        }
    }

    // MARK: - The tables

    func testRecordTableNotesEveryChangeButLastUse() {
        let maps = W.maps1.app, weather = W.weather.app
        var t = ConsentCore.RecordTable(stored((W.maps1, .approvedFull)))
        t[maps]?.lastUsed = 99
        XCTAssertEqual(t.changed, [], "last-used changes no status: a silent tap must not walk the app's sessions")
        XCTAssertEqual(t[maps]?.lastUsed, 99)
        t[maps] = t[maps]
        XCTAssertEqual(t.changed, [], "the same record again")
        t[maps]?.decision = .whenInUse
        XCTAssertEqual(t.changed, [maps])
        t.forgetChanges()
        t[maps]?.oneTimeAccuracy = .reduced
        XCTAssertEqual(t.changed, [maps], "any field but last-used")
        t.forgetChanges()
        t[weather] = ConsentRecord(lastUsed: 5)
        XCTAssertEqual(t.changed, [weather], "a new record")
        t.forgetChanges()
        XCTAssertNil(t.removeValue(forKey: W.bobMaps.app))
        XCTAssertEqual(t.changed, [], "removing nothing")
        XCTAssertNotNil(t.removeValue(forKey: maps))
        XCTAssertEqual(t.changed, [maps])
        XCTAssertEqual(Set(t.all.keys), [weather])
    }

    func testSessionTableNotesEveryWriteAndKeepsItsIndex() {
        func session(_ c: Caller) -> ConsentCore.Session {
            ConsentCore.Session(caller: c, lastStatus: .notDetermined, lastGranted: false)
        }
        var t = ConsentCore.SessionTable()
        for c in [W.maps1, W.maps2, W.weather] { t.add(session(c)) }
        XCTAssertEqual(t.changed, [], "a new session's status is taken when it is made")
        XCTAssertEqual(t.names(of: W.maps1.app), [W.maps1.session, W.maps2.session])
        t[W.maps2.session]?.updates = true
        t[W.weather.session]?.waiting = .queued
        XCTAssertEqual(t.changed, [W.maps2.session, W.weather.session])
        t[W.maps3.session]?.tempGrant = .full
        XCTAssertNil(t[W.maps3.session], "writing a missing session adds nothing")
        XCTAssertEqual(t.changed, [W.maps2.session, W.weather.session])
        t.forgetChanges()
        XCTAssertEqual(t.changed, [])
        XCTAssertEqual(t.remove(W.maps1.session)?.caller, W.maps1)
        XCTAssertNil(t.remove(W.maps1.session))
        XCTAssertEqual(t.names(of: W.maps1.app), [W.maps2.session])
        _ = t.remove(W.maps2.session)
        _ = t.remove(W.weather.session)
        XCTAssertEqual(t.count, 0)
        XCTAssertEqual(t.names(of: W.maps1.app), [])
    }
}
