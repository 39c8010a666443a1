import XCTest
@testable import GeoCore

/// The grant journal (docs/dbus-api.md, "Journal"): one line when a session's
/// grant begins and one when it ends, with the app, its uid, its identity kind
/// and why it ended; nothing else, and no coordinate.
final class ConsentCoreGrantJournalTests: XCTestCase {
    typealias W = Who

    private func lines(_ rig: Rig) -> [String] { rig.core.grantNotes.map(\.description) }

    func testAOneTimeGrantBeginsAndEndsWhenTheAppLeaves() {
        let rig = Rig()
        let tap = rig.tap(W.maps1)
        XCTAssertEqual(lines(rig), [], "asking is no grant")
        rig.answer(tap.promptID, "allow-once")
        XCTAssertEqual(lines(rig), ["grant began: uid 1000, executable, session :1.10, one-time, full: app \"org.example.Maps\""])
        rig.tap(W.maps1)
        XCTAssertEqual(lines(rig), [], "a grant that holds is not said again")
        rig.leave(W.maps1)
        XCTAssertEqual(lines(rig), ["grant ended: uid 1000, executable, session :1.10, the app left the bus: app \"org.example.Maps\""])
        rig.leave(W.maps2)
        XCTAssertEqual(lines(rig), [], "a session without a grant ends without a line")
    }

    func testEachCauseOfAnEndIsSaid() {
        typealias Case = (label: String, end: (Rig) -> Void, why: String)
        let place = "/org/freedesktop/login1/session/_7"
        let cases: [Case] = [
            ("Revoke", { $0.call(W.maps1, .revoke) }, "the app revoked it"),
            ("process", { $0.send(.processExited(W.maps1.connection)) }, "the process that asked exited"),
            ("reset", { $0.manage(W.aliceCtl, .resetConsent(appID: W.mapsID, uid: nil)) }, "its consent was reset"),
            ("off", { $0.manage(W.root, .setEnabled(false)) }, "location was switched off"),
            ("lock", { $0.login(place, .paused(.locked)) }, "the user's session was locked"),
            ("switch", { $0.login(place, .paused(.inactive)) }, "the user's session went to the background"),
        ]
        for c in cases {
            let rig = Rig()
            rig.place(W.maps1, in: place)
            rig.login(place, .inUse)
            rig.approveTap(W.maps1)
            c.end(rig)
            XCTAssertEqual(lines(rig), ["grant ended: uid 1000, executable, session :1.10, \(c.why): app \"org.example.Maps\""], c.label)
        }
    }

    func testAStoredDecisionsGrantIsLastingAndAClientObjectsIsItsOwn() {
        let rig = Rig(records: stored((W.maps1, .whenInUseReduced)))
        _ = rig.auth(W.maps1)
        XCTAssertEqual(lines(rig), ["grant began: uid 1000, executable, session :1.10, lasting, reduced: app \"org.example.Maps\""],
                       "the stored decision grants the session from its first call")
        rig.ask(W.maps1, .reduced)
        XCTAssertEqual(lines(rig), [])
        let client = W.flatpak.clientSession(3)
        let start = rig.call(client, .start(AuthOptions(), UpdateOptions()))
        rig.answer(start.promptID, "allow-once")
        XCTAssertEqual(lines(rig), ["grant began: uid 1000, flatpak, session :1.40/geoclue/3, one-time, full: app \"org.example.Flat\""])
        rig.send(.sessionEnded(client.session))
        XCTAssertEqual(lines(rig), ["grant ended: uid 1000, flatpak, session :1.40/geoclue/3, its client object stopped: app \"org.example.Flat\""])
    }

    /// An app id is any name a user gives a file: one made to read as another
    /// user's grant ("maps (uid 1000, executable), session :1.7, …" and
    /// spaces) comes last in the line, quoted and cut, after the real uid.
    func testAnAppIdCannotMakeALineReadAsAnotherUsersGrant() {
        let forged = "/tmp/x/maps (uid 1000, executable), session :1.7, one-time, full\"" + String(repeating: " ", count: 250) + "x"
        let nobody = Caller(session: ":1.66", uid: 65534, pid: 466, appID: forged, executable: forged)
        let rig = Rig(agents: [Caller(session: ":1.67", uid: 65534, pid: 467, appID: "/usr/bin/agent")])
        rig.approveTap(nobody)
        guard let line = lines(rig).first else { return XCTFail("no journal line") }
        XCTAssertTrue(line.hasPrefix("grant began: uid 65534, executable, session :1.66, one-time, full: app \"/tmp/x/maps (uid 1000"),
                      line)
        XCTAssertTrue(line.contains("full\\\" "), "the app's quote is escaped: \(line)")
        XCTAssertTrue(line.hasSuffix("…[\(forged.utf8.count) bytes]"), line)
        XCTAssertLessThanOrEqual(line.utf8.count, 80 + DisplayText.maxFieldBytes + 24)
    }
}
