import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Seen while used, on a real bus and daemon: a silent tap is checked with an
/// agent that can tell the app in front (`CheckFocus`) and told to it
/// (`Notice`); a tap from behind is asked as a first tap; an agent of the
/// earlier contract sees what it saw before; the indicator's Stop
/// (`EndGrants`) ends an app's grant now; a decision unused for longer than
/// `unused-lapse` lapses when the daemon starts, and the journal says so.
final class SilentTapBusTests: StackTestCase {
    private var selfAppID: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "?"
    }

    private func agent(features: [String]?) throws -> TestAgent {
        let a = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        if let features {
            XCTAssertNoThrow(try a.registerWith(features: features).get())
        } else {
            XCTAssertNoThrow(try a.register().get())
        }
        return a
    }

    func testASilentTapIsAskedWhetherItIsInFrontAndToldAndOneFromBehindPrompts() throws {
        let agent = try agent(features: ["notices", "focus", "a-later-feature"])
        XCTAssertEqual(try stack.peer().tap().get(), 4, "the first tap: Allow Once")
        XCTAssertEqual(agent.confirms.count, 1)

        // In front, with a press: silent, and told once.
        XCTAssertEqual(try stack.peer().tap(AuthOptions(appName: "Maps")).get(), 4)
        XCTAssertEqual(agent.focusPIDs, [UInt32(getpid())], "asked about the tapping process")
        XCTAssertEqual(agent.confirms.count, 1, "no prompt")
        XCTAssertTrue(stack.peers.pump(timeout: 5) { agent.notices.count == 1 }, "a notice of the silent grant")
        XCTAssertEqual(agent.notices.first?.appID, selfAppID)
        XCTAssertEqual(agent.notices.first?.kind, "silent-grant")
        XCTAssertEqual(agent.notices.first?.witness, .pressed)
        XCTAssertEqual(agent.notices.first?.always, false)

        // Again within the minute: silent, not told again.
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        XCTAssertEqual(agent.focusPIDs.count, 2)
        stack.peers.pump(timeout: 0.3) { false }
        XCTAssertEqual(agent.notices.count, 1, "one notice per app per minute")

        // From behind: asked as a first tap, and the user's Allow Once grants.
        agent.focus = (.no, .unknown)
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        XCTAssertEqual(agent.focusPIDs.count, 3)
        XCTAssertEqual(agent.confirms.count, 2, "the tap from behind got the prompt")
        XCTAssertEqual(agent.confirms.last?.kind, .oneTime)

        // In front but no press where presses can be seen: the prompt too.
        agent.focus = (.yes, .no)
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 3)
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testAnAgentOfTheEarlierContractIsNeitherAskedNorTold() throws {
        let agent = try agent(features: nil)
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        stack.peers.pump(timeout: 0.3) { false }
        XCTAssertEqual(agent.confirms.count, 1, "the second tap is silent, as before")
        XCTAssertTrue(agent.focusPIDs.isEmpty)
        XCTAssertTrue(agent.notices.isEmpty)
        // Features of the wrong type are refused with InvalidArgs, and the slot stays the agent's.
        let other = try stack.peer()
        XCTAssertDBusError(other.geo("RegisterAgentWithOptions", [.objectPath("/x"), .vardict(["features": .string("focus")])]),
                           DBusError.invalidArgsName)
        XCTAssertDBusError(other.geo("RegisterAgent", [.objectPath("/x")]), GeoConsentAPI.ErrorName.agentExists)
    }

    func testEndGrantsEndsTheAppsGrantAndUpdatesNow() throws {
        let agent = try agent(features: nil)
        defer { withExtendedLifetime(agent) {} }   // its connection is the agent's registration
        let app = try stack.peer()
        XCTAssertEqual(try app.tap().get(), 4)
        XCTAssertNoThrow(try app.geo("StartUpdates", [.vardict([:])]).get())
        let settings = try stack.peer()
        func receiving() throws -> Bool? {
            (SessionDetailsReply.decode(try settings.geo("ListSessionDetails").get()) ?? [])
                .first { $0.name == app.uniqueName }?.receiving
        }
        XCTAssertEqual(try receiving(), true)
        let told = app.signals(named: "AuthorizationChanged").count
        XCTAssertNoThrow(try settings.geo("EndGrants", [.string(selfAppID), .vardict([:])]).get())
        stack.peers.pump(timeout: 5) { app.signals(named: "AuthorizationChanged").count > told }
        XCTAssertEqual(app.signals(named: "AuthorizationChanged").last?.changedStatus, .notDetermined)
        XCTAssertEqual(try app.authorization().status, .notDetermined)
        XCTAssertEqual(try receiving(), false, "its updates stopped")
        XCTAssertEqual(try settings.consents().first { $0.appID == selfAppID }?.record.oneTimeApproved, true,
                       "the button's confirmation stays")
        XCTAssertTrue(stack.daemon.log().contains("the user stopped it"), "the journal says why")
        XCTAssertDBusError(settings.geo("EndGrants", [.uint32(1), .vardict([:])]), DBusError.invalidArgsName)
    }

    func testADecisionUnusedForLongerThanItsDaysLapsesAtStart() throws {
        stack.stop()
        let dir = try TempDir()
        let longAgo = "1000000"   // 1970: far more than 90 days ago
        try ("# geoconsent consents v1\n" +
             "0\t\(selfAppID)\twhen-in-use\tfull\t0\t-\t\(longAgo)\t\(longAgo)\n")
            .write(toFile: dir.path + "/consents", atomically: true, encoding: .utf8)
        stack = try Stack(stateDir: dir)
        let peer = try stack.peer()
        XCTAssertEqual(try peer.authorization().status, .notDetermined, "asked again")
        let record = try XCTUnwrap(try peer.consents().first { $0.appID == selfAppID }?.record)
        XCTAssertNil(record.decision)
        XCTAssertEqual(record.lapsed, "when-in-use")
        XCTAssertGreaterThan(record.lapsedAt, 1_000_000)
        XCTAssertTrue(stack.daemon.log().contains("decisions lapsed: uid 0, unused since 1970-01-01"),
                      stack.daemon.log().suffix(2000).description)
        // Kept on disk, ten fields, for the settings window after a restart:
        // no decision any more, and what lapsed.
        let text = try String(contentsOfFile: dir.path + "/consents", encoding: .utf8)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("0\t\(selfAppID)\t") }, text)
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        XCTAssertEqual(fields.count, 10, text)
        XCTAssertEqual(fields[2], "-", "no decision: \(text)")
        XCTAssertEqual(fields[8], "when-in-use", "what lapsed: \(text)")
    }
}
