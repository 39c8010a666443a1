import XCTest
@testable import GeoCore

/// `WatchSessions` (docs/dbus-api.md): the settings window's live "in use now".
/// A watcher hears `SessionsChanged` when a session of its uid starts, ends, or
/// changes what `ListSessionDetails` shows (status, updates, pause, grant),
/// and nothing of another uid's sessions (root hears of all); a session that
/// only calls again changes nothing it is told of.
final class ConsentCoreSessionWatchTests: XCTestCase {
    typealias W = Who
    static let settings = Caller(session: ":1.60", uid: 1000, pid: 460, appID: "/usr/bin/geoconsent-settings")

    private func told(_ effects: [CoreEffect]) -> [String] {
        effects.compactMap { if case .sessionsChanged(let w) = $0 { return w.joined(separator: ",") } else { return nil } }
    }

    func testTheWatcherHearsOfItsUsersSessionsOnly() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        let watch = rig.manage(Self.settings, .watchSessions)
        XCTAssertEqual(watch.effects, [.reply(watch.call, .empty)])
        XCTAssertEqual(told(rig.tap(W.maps1).effects), [":1.60"], "a session began, with a grant")
        XCTAssertEqual(told(rig.tap(W.maps1).effects), [], "the same again: nothing changed")
        XCTAssertEqual(told(rig.call(W.maps1, .startUpdates(UpdateOptions())).effects), [":1.60"], "now it receives fixes")
        let details = rig.manage(Self.settings, .listSessionDetails).reply
        guard case .sessionDetails(let list)? = details else { return XCTFail("\(String(describing: details))") }
        XCTAssertEqual(list.map(\.receiving), [true])
        XCTAssertEqual(list.map(\.accuracy), [.full])
        XCTAssertEqual(told(rig.call(W.maps1, .stopUpdates).effects), [":1.60"])
        XCTAssertEqual(told(rig.tap(W.bobMaps).effects), [], "another user's app is none of its business")
        XCTAssertEqual(told(rig.leave(W.maps1)), [":1.60"], "a session ended")
        rig.leave(Self.settings)
        XCTAssertEqual(told(rig.tap(W.maps2).effects), [], "a watcher that left hears nothing more")
    }

    /// A change of precision alone is news too: the list shows it.
    func testAnAccuracyChangeAloneIsTold() {
        let rig = Rig(records: stored((W.maps1, .approvedFull)))
        rig.manage(Self.settings, .watchSessions)
        XCTAssertEqual(told(rig.tap(W.maps1).effects), [":1.60"])
        XCTAssertEqual(told(rig.tap(W.maps1, .reduced).effects), [":1.60"], "full, then reduced: the list changed")
        XCTAssertEqual(told(rig.tap(W.maps1, .reduced).effects), [], "reduced again: it did not")
    }

    func testRootHearsOfEveryUserAndSandboxesMayNotWatch() {
        let rig = Rig(agents: [W.agent, W.bobAgent])
        rig.manage(W.root, .watchSessions)
        XCTAssertEqual(told(rig.tap(W.bobMaps).effects), [":1.1"])
        XCTAssertTrue(rig.manage(W.flatpak, .watchSessions).accessDenied, "a sandboxed app may not watch other apps")
    }

    func testWatchersPerUserAreBounded() {
        let rig = Rig()
        for i in 0..<Limits.sessionWatchersPerUser {
            let s = rig.manage(Self.settings.connection(":2.\(i)"), .watchSessions)
            XCTAssertEqual(s.effects, [.reply(s.call, .empty)])
        }
        let again = rig.manage(Self.settings.connection(":2.0"), .watchSessions)
        XCTAssertEqual(again.effects, [.reply(again.call, .empty)], "the same connection again is no new watcher")
        guard case .limitsExceeded? = rig.manage(Self.settings.connection(":2.99"), .watchSessions).error else {
            return XCTFail("a ninth watcher of one uid")
        }
        XCTAssertEqual(rig.manage(W.bobCtl, .watchSessions).error, nil, "another uid has its own")
    }
}
