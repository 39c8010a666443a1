import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A GeoClue client whose one-time grant ends at a lock (docs/geoclue.md, "A
/// grant that ends"). Firefox calls `Start` once and never again, not even on
/// reload: after Allow Once and a lock it kept a stale position until it was
/// restarted. Now, while the client stays started, the user is asked again when
/// back, and fixes resume once allowed. With python-dbusmock's logind.
final class GeoClueLockTests: GeoClueTestCase {
    typealias API = GeoClueAPI
    private var logind: LogindMock!
    private var work: TempDir!
    static let me = "c1"

    override func setUpWithError() throws {
        try super.setUpWithError()
        work = try TempDir()
        logind = try LogindMock.start(on: stack, logPath: work.file("logind.log"), session: Self.me)
    }

    override func tearDown() {
        logind?.stop()
        super.tearDown()
    }

    /// `Active` values `p` was told of `client`, in order.
    private func actives(_ p: BusPeer, _ client: String) -> [Bool] {
        p.signals.compactMap { m in
            guard m.member == "PropertiesChanged", m.path == client else { return nil }
            return m.arguments()[1].vardictValue?[ClientProperty.active]?.boolValue
        }
    }

    /// Firefox's way: one client, DesktopId and exact level set, one `Start`.
    private func firefoxClient(_ p: BusPeer) throws -> String {
        let c = try p.geoclueClient()
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.desktopID, .string("firefox-esr")).get())
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel,
                                   .uint32(GeoClueAccuracyLevel.exact)).get())
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
        return c
    }

    func testAfterALockTheUserIsAskedAgainAndFixesResume() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try firefoxClient(p)
        XCTAssertNotNil(waitForUpdate(p, c), "a fix after Allow Once")
        XCTAssertEqual(agent.confirms.count, 1)

        try logind.setLockedHint(Self.me, true)
        stack.peers.pump(timeout: 10) { self.actives(p, c).last == false }
        XCTAssertEqual(actives(p, c).last, false, "the one-time grant ended at the lock: \(actives(p, c))")
        stack.peers.settle(0.6)
        let updatesWhileLocked = p.locationUpdates(of: c).count
        stack.peers.settle(0.6)
        XCTAssertEqual(p.locationUpdates(of: c).count, updatesWhileLocked, "no fix while locked")
        XCTAssertEqual(agent.confirms.count, 1, "nobody is asked while the user is away")

        try logind.setLockedHint(Self.me, false)
        stack.peers.pump(timeout: 10) { self.agent.confirms.count == 2 && self.actives(p, c).last == true }
        XCTAssertEqual(agent.confirms.count, 2, "the user is asked again when back")
        XCTAssertEqual(agent.confirms.last?.kind, .whenInUse)
        XCTAssertEqual(actives(p, c), [true, false, true])
        XCTAssertNotNil(waitForUpdate(p, c, count: updatesWhileLocked + 1), "fixes resume without a new Start")
    }

    func testAStoppedClientIsNotStartedAgain() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try firefoxClient(p)
        XCTAssertNotNil(waitForUpdate(p, c))
        try logind.setLockedHint(Self.me, true)
        stack.peers.pump(timeout: 10) { self.actives(p, c).last == false }
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
        try logind.setLockedHint(Self.me, false)
        stack.peers.settle(1)
        XCTAssertEqual(agent.confirms.count, 1, "the app stopped it: nothing to ask for")
        XCTAssertEqual(actives(p, c), [true, false])
    }
}
