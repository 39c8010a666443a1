import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The front-end seam, proved by a front end made only for the tests
/// (Instruments/geoconsent-frontend-lab/LabFrontEnd.swift: a made-up interface
/// served through the host alone): its caller gets a prompt from our agent,
/// a grant, fixes unicast to it alone, and the end of its grant; the daemon's
/// own API goes on beside it.
final class FrontEndLabTests: XCTestCase {
    private var stack: Stack!
    private var feeder: FixFeeder?
    static let lab = (name: "org.geoconsent.TestLab1", path: "/org/geoconsent/TestLab1")

    override func setUpWithError() throws {
        stack = try Stack(executable: TestPaths.binDir + "/geoconsent-frontend-lab")
        feeder = FixFeeder(gpsd: stack.gpsd)
    }

    override func tearDown() {
        feeder?.stop()
        stack?.stop()
        stack = nil
    }

    private func fixes(_ p: BusPeer) -> [Message] {
        p.signals.filter { $0.member == "Fix" && $0.interface == Self.lab.name }
    }

    func testALabCallerIsAskedGrantedAndStreamedThroughTheHostAlone() throws {
        let agent = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
        let app = try stack.peer()
        let bystander = try stack.peer()
        try bystander.addMatch("type='signal'")

        XCTAssertNoThrow(try app.call(Self.lab.name, Self.lab.path, Self.lab.name, "Ask", [.string("lab test")]).get(),
                         stack.daemon.log())
        XCTAssertEqual(agent.confirms.map(\.reason), ["lab test"], "our agent prompted for the lab's caller")
        XCTAssertEqual(agent.confirms.first?.kind, .whenInUse)

        XCTAssertTrue(stack.peers.pump(timeout: 10) { self.fixes(app).count >= 2 }, stack.daemon.log())
        let first = try XCTUnwrap(fixes(app).first)
        XCTAssertEqual(first.signature, "dd")
        XCTAssertEqual(first.destination, app.uniqueName, "unicast")
        XCTAssertTrue(fixes(bystander).isEmpty, "no other connection sees a lab fix")

        // The daemon lists the lab's session as its front end names it.
        let sessions = try agent.peer.sessions().map(\.name)
        XCTAssertTrue(sessions.contains(app.uniqueName + "/lab/1"), "\(sessions)")

        // Its consent reset: the grant ends, and the lab says so.
        let appID = try XCTUnwrap(agent.confirms.first?.appID)
        XCTAssertNoThrow(try agent.peer.geo("ResetConsent", [.string(appID), .vardict([:])]).get())
        XCTAssertNotNil(app.waitForSignal("Ended", timeout: 10), stack.daemon.log())
        let after = fixes(app).count
        stack.peers.settle(1)
        XCTAssertEqual(fixes(app).count, after, "no fix after the grant ended")
    }

    /// Our own API is served beside the lab's as ever.
    func testOurOwnAPIBesideIt() throws {
        let agent = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
        let app = try stack.peer()
        XCTAssertEqual(try app.tap(AuthOptions()).get(), AuthorizationStatus.whenInUse.rawValue)
    }
}
