import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The user's own decisions (`SetConsent`, docs/dbus-api.md) on the real
/// daemon, through `geoconsentctl decide` as the settings window makes them:
/// less is stored at once, more only after the user's agent said yes.
final class UserDecisionBusTests: StackTestCase {
    private var agent: ChildProcess?

    override func tearDown() {
        agent?.stop()
        super.tearDown()
    }

    /// A terminal agent of this uid that answers every prompt `word`; the prompts it saw.
    private func startAgent(_ word: String) throws {
        agent?.stop()
        let a = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                 arguments: ["--bus", stack.bus.address, "agent", "--auto", word],
                                 logPath: "/dev/null", captureStdout: true)
        XCTAssertTrue(a.readStdoutLine(timeout: 10)?.contains("registered") ?? false)
        agent = a
    }

    private func record(_ appID: String) throws -> ConsentRecord? {
        try stack.peer().consents().first { $0.appID == appID && $0.uid == getuid() }?.record
    }

    func testNeverAskAndWhileUsingThroughTheAgent() throws {
        try startAgent("allow-once")
        let app = try stack.peer()
        XCTAssertEqual(try app.tap().get(), 4)
        let appID = try app.authorization().appID
        XCTAssertEqual(try record(appID)?.oneTimeApproved, true)

        // Never: at once, no prompt; the app hears it and its grant is gone.
        let mark = app.signals.count
        let never = try stack.ctl(["decide", appID, "never"])
        XCTAssertEqual(never.status, 0)
        XCTAssertEqual(never.output, "\(appID): denied\n")
        XCTAssertEqual(try record(appID)?.decision, .denied)
        XCTAssertEqual(try record(appID)?.oneTimeApproved, false)
        XCTAssertEqual(app.waitForSignal(AuthorizationChangedSignal.member, from: mark, timeout: 5)?.changedStatus, .denied)
        XCTAssertEqual(try app.authorization().status, .denied)
        XCTAssertEqual(try app.authorization().accuracy, nil, "its grant ended")

        // While Using: the agent is asked first; its yes is stored.
        try startAgent("allow-while-using-reduced")
        let more = try stack.ctl(["decide", appID, "while-using"], timeout: 40)
        XCTAssertEqual(more.output, "\(appID): when-in-use\n")
        XCTAssertEqual(try record(appID)?.decision, .whenInUse)
        XCTAssertEqual(try record(appID)?.decisionAccuracy, .reduced, "the user's Precise switch was off")

        // Precise on is more: asked again; this agent says no, nothing changes.
        try startAgent("deny")
        XCTAssertEqual(try stack.ctl(["decide", appID, "--precise", "on"], timeout: 40).output, "\(appID): when-in-use\n")
        XCTAssertEqual(try record(appID)?.decisionAccuracy, .reduced)

        // Ask Next Time forgets it.
        XCTAssertEqual(try stack.ctl(["decide", appID, "ask"]).output, "\(appID): not-determined\n")
        XCTAssertNil(try record(appID))

        // An app it knows nothing of, and a word it does not know.
        let dir = try TempDir()
        let unknown = try ChildProcess.run(TestPaths.binDir + "/geoconsentctl",
                                           ["--bus", stack.bus.address, "decide", "org.example.Nope", "never"],
                                           logPath: dir.file("stderr"))
        XCTAssertEqual(unknown.status, 1)
        XCTAssertEqual(try String(contentsOfFile: dir.file("stderr"), encoding: .utf8),
                       "geoconsentctl: geoconsentd refused the arguments: No consent or session of org.example.Nope for uid \(getuid())\n")
        XCTAssertEqual(try stack.ctl(["decide", appID, "sometimes"]).status, 2)
    }

    /// The user's own switch through the real daemon: off restricts the user's
    /// apps and is kept across a restart; on again after the agent's yes.
    func testTheUsersOwnSwitchIsKeptAcrossARestart() throws {
        try startAgent("allow-once")
        let off = try stack.ctl(["user-location", "off"])
        XCTAssertEqual(off.status, 0)
        XCTAssertEqual(off.output, "Location is off for the apps of uid \(getuid()).\n")
        XCTAssertEqual(try stack.peer().tap().get(), 1, "restricted, no prompt")
        try stack.restartDaemon()
        XCTAssertEqual(try stack.ctl(["user-location"]).output, "Location is off for the apps of uid \(getuid()).\n",
                       "kept in the state directory")
        XCTAssertEqual(try stack.peer().tap().get(), 1)
        try startAgent("allow-once")   // the daemon restarted: an agent again (it answers Switch On)
        XCTAssertEqual(try stack.ctl(["user-location", "on"], timeout: 40).output,
                       "Location is on for the apps of uid \(getuid()).\n")
        XCTAssertEqual(try stack.peer().tap().get(), 4)
    }

    /// Without an agent nobody can say yes: more is refused, less still works.
    func testWithoutAnAgentMoreIsRefusedAndLessIsNot() throws {
        let app = try stack.peer()
        _ = try app.authorization()   // a session, so the daemon knows the app
        let appID = try app.authorization().appID
        let r = app.geo("SetConsent", [.string(appID), OptionDictionary.encodeSetConsent(decision: .whileUsing, accuracy: nil, uid: nil)])
        XCTAssertDBusError(r, GeoConsentAPI.ErrorName.noAgent)
        XCTAssertEqual(try app.geo("SetConsent", [.string(appID), OptionDictionary.encodeSetConsent(decision: .never, accuracy: nil,
                                                                                                    uid: nil)]).get(),
                       [.uint32(2)])
        XCTAssertDBusError(app.geo("SetConsent", [.string(appID), .vardict(["decision": .uint32(1)])]),
                           DBusError.invalidArgsName)
        XCTAssertDBusError(app.geo("SetConsent", [.string(appID), .vardict([:])]), DBusError.invalidArgsName)
    }
}
