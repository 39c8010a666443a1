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

    /// A Firefox client started on a new connection, its first fix in after
    /// the agent's answer (one prompt), then the screen locked.
    private func startedThenLocked(_ answer: String,
                                   file: StaticString = #filePath, line: UInt = #line) throws -> (BusPeer, String) {
        agent.behaviour = .answer(answer)
        let p = try stack.peer()
        startFeeding()
        let c = try firefoxClient(p)
        XCTAssertNotNil(waitForUpdate(p, c), "a fix after \(answer)", file: file, line: line)
        XCTAssertEqual(agent.confirms.count, 1, file: file, line: line)
        try logind.setLockedHint(Self.me, true)
        return (p, c)
    }

    func testAfterALockTheUserIsAskedAgainAndFixesResume() throws {
        let (p, c) = try startedThenLocked("allow-once")
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

    /// Allowed while using (stored), the client's updates pause at the lock
    /// and its grant stays; the user resets the app's consent from another
    /// place while away (here through the API, as the settings window does).
    /// That grant did not end by the pause: at the return the client stays
    /// stopped and nobody is asked, as after a reset with the user present.
    func testAGrantResetWhileLockedIsNotAskedForAgain() throws {
        let (p, c) = try startedThenLocked("allow-while-using")
        stack.peers.settle(0.6)
        XCTAssertEqual(actives(p, c), [true], "a stored decision's grant outlasts the lock")
        let app = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "?"
        XCTAssertNoThrow(try stack.peer().geo("ResetConsent", [.string(app), OptionDictionary.encodeReset(uid: nil)]).get())
        stack.peers.pump(timeout: 10) { self.actives(p, c).last == false }
        XCTAssertEqual(actives(p, c), [true, false], "the reset ended the grant")

        try logind.setLockedHint(Self.me, false)
        stack.peers.settle(1.0)
        XCTAssertEqual(agent.confirms.count, 1, "nobody is asked again: the reset, not the lock, ended it")
        XCTAssertEqual(actives(p, c), [true, false], "the client stays stopped")
    }

    func testAStoppedClientIsNotStartedAgain() throws {
        let (p, c) = try startedThenLocked("allow-once")
        stack.peers.pump(timeout: 10) { self.actives(p, c).last == false }
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
        try logind.setLockedHint(Self.me, false)
        stack.peers.settle(1)
        XCTAssertEqual(agent.confirms.count, 1, "the app stopped it: nothing to ask for")
        XCTAssertEqual(actives(p, c), [true, false])
    }
}
