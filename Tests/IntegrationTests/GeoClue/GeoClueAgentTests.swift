import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A GeoClue agent in place of our own: a Python stand-in for GNOME Shell's
/// (tests/geoclue/gnome-shell-agent.py) registers with `Manager.AddAgent` on
/// the private bus, and real `where-am-i` runs against the facade. The uid has
/// no agent of ours, so the GeoClue agent's `AuthorizeApp` decides, and its
/// `MaxAccuracyLevel` caps what the client gets.
final class GeoClueAgentTests: GeoClueTestCase {
    static let shellAgent = TestPaths.sourceRoot + "/tests/geoclue/gnome-shell-agent.py"
    override var registersAgent: Bool { false }
    private var shell: ClientRun?

    override func setUpWithError() throws {
        for file in [GeoClueClientTests.whereAmI, GeoClueClientTests.python]
        where !FileManager.default.isExecutableFile(atPath: file) {
            XCTFail("\(file) is missing: scripts/deps.sh installs geoclue-2-demo and python3-gi")
        }
        try super.setUpWithError()
    }

    override func tearDown() {
        if let s = shell, let t = testRun, t.failureCount > 0 { print("---- agent ----\n\(s.output)") }
        shell = nil
        super.tearDown()
    }

    /// Starts the stand-in agent answering `authorized` (at the level `allowed`,
    /// nil: the one asked for, at most its level), at the first of `levels`
    /// (each SIGUSR1 moves on), and waits until `AddAgent` succeeded.
    func startShellAgent(authorized: Bool, levels: [UInt32], allowed: UInt32? = nil) throws -> ClientRun {
        let run = try launchShellAgent(authorized: authorized, levels: levels, allowed: allowed)
        shell = run
        XCTAssertFalse(run.lines("registered").isEmpty, "AddAgent failed: \(run.output)")
        return run
    }

    /// Starts a stand-in agent and waits until its `AddAgent` is answered.
    func launchShellAgent(authorized: Bool = true, levels: [UInt32] = [8], allowed: UInt32? = nil) throws -> ClientRun {
        let arguments = [Self.shellAgent, authorized ? "true" : "false", levels.map(String.init).joined(separator: ",")]
            + (allowed.map { [String($0)] } ?? [])
        let run = try ClientRun(GeoClueClientTests.python, arguments, environment: clientEnvironment)
        stack.peers.pump(timeout: 10) { !run.lines("registered").isEmpty || !run.process.isRunning }
        return run
    }

    /// The `authorize DESKTOP_ID LEVEL` lines the agent printed.
    func authorizations(_ run: ClientRun) -> [[String]] { run.lines("authorize").map { Array($0.dropFirst()) } }

    func whereAmI(level: UInt32 = 8, seconds: Int = 10,
                  whileRunning: ((ClientRun) -> Void)? = nil) throws -> (status: Int32?, output: String) {
        try runClient(GeoClueClientTests.whereAmI, ["-t", String(seconds), "-a", String(level)], timeout: Double(seconds) + 15,
                      whileRunning: whileRunning)
    }

    /// Shared with GNOME Shell's agent (docs/geoclue.md, "GeoClue agents"):
    /// while the uid has an agent of ours, a GeoClue client's `Start` is asked
    /// of ours alone, never also of the GeoClue agent, so no prompt is
    /// answered twice; without ours, the GeoClue agent is asked (the tests below).
    func testWithOurAgentRegisteredTheGeoClueAgentIsNotAsked() throws {
        let shellRun = try startShellAgent(authorized: true, levels: [8])
        XCTAssertNoThrow(try agent.register().get())
        startFeeding(interval: 0.5, north: 10)
        let r = try whereAmI(seconds: 3)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertEqual(agent.confirms.count, 1, "our agent was asked")
        XCTAssertEqual(authorizations(shellRun), [], "GNOME Shell's was not: \(shellRun.output)")
    }

    func testOneGeoClueAgentPerUid() throws {
        _ = try startShellAgent(authorized: true, levels: [8])
        let second = try launchShellAgent()
        XCTAssertTrue(second.lines("registered").isEmpty, second.output)
        XCTAssertTrue(second.output.contains("already registered"), second.output)
    }

    func testAuthorizeAppTrueGivesFixesAndIsStored() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [8])
        startFeeding(interval: 0.5, north: 10)
        let r = try whereAmI()
        XCTAssertEqual(r.status, 0, r.output)
        assertFullFixesOnTrack(printedFixes(r.output), atLeast: 3, r.output)
        XCTAssertEqual(authorizations(agentRun), [["geoclue-where-am-i", "8"]], "asked once, under its DesktopId")
        XCTAssertEqual(agent.confirms.count, 0)
        let consents = try agentPeer.consents()
        XCTAssertEqual(consents.first { $0.appID == GeoClueClientTests.whereAmI }?.record.decision, .whenInUse,
                       "true counts as Allow While Using: \(consents)")
    }

    func testAuthorizeAppFalseMakesWhereAmIExit255() throws {
        let agentRun = try startShellAgent(authorized: false, levels: [8])
        startFeeding(interval: 0.5)
        let r = try whereAmI()
        XCTAssertEqual(r.status, 255, r.output)
        XCTAssertTrue(r.output.contains("denied"), r.output)
        XCTAssertEqual(printedFixes(r.output).count, 0)
        XCTAssertEqual(authorizations(agentRun).count, 1)
    }

    func testMaxAccuracyLevelZeroRefusesWithoutAsking() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [0])
        startFeeding(interval: 0.5)
        let r = try whereAmI()
        XCTAssertEqual(r.status, 255, r.output)
        XCTAssertTrue(r.output.contains("switched off"), r.output)
        XCTAssertEqual(authorizations(agentRun), [], "no prompt while location is off")
    }

    /// GNOME's location switch off (its agent's level 0) holds for every app
    /// of the uid, our own API's too: a tap is answered restricted, no prompt.
    func testMaxAccuracyLevelZeroHoldsForOurOwnAPIToo() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [0])
        let p = try stack.peer()
        XCTAssertEqual(try p.tap().get(), 1, "restricted while the desktop says location is off")
        XCTAssertEqual(authorizations(agentRun), [], "nobody was asked")
    }

    func testMaxAccuracyLevelGoingToZeroStopsARunningClient() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [8, 0])
        startFeeding(interval: 0.5)
        var switched = false
        let r = try whereAmI(seconds: 20) { run in
            if !switched, run.output.contains("Latitude:") {
                switched = true
                agentRun.process.signal(SIGUSR1)
            }
        }
        XCTAssertTrue(switched, r.output)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertTrue(r.output.contains("Geolocation disabled. Quitting"), "Active went false\n\(r.output)")
        XCTAssertEqual(agentRun.lines("level").map { $0.last }, ["0"])
    }

    /// GNOME Shell answers with the level it allows (what was asked, at most its
    /// `MaxAccuracyLevel`, or the level stored for the app): below 6 the grant is reduced.
    func testAReducedAllowedAccuracyLevelCapsTheGrant() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [8], allowed: GeoClueAccuracyLevel.city)
        startFeeding(interval: 0.5)
        let r = try whereAmI(level: 8)
        XCTAssertEqual(r.status, 0, r.output)
        assertGridCellFixes(r.output, atLeast: 3)
        XCTAssertEqual(authorizations(agentRun), [["geoclue-where-am-i", "8"]])
        let record = try agentPeer.consents().first { $0.appID == GeoClueClientTests.whereAmI }?.record
        XCTAssertEqual(record?.decision, .whenInUse)
        XCTAssertEqual(record?.decisionAccuracy, .reduced, "stored as the agent allowed it")
    }

    /// `AvailableAccuracyLevel` is the caller's uid's: its GeoClue agent's
    /// `MaxAccuracyLevel` (0: off), EXACT without one; changes go to each reader
    /// with its own value, never broadcast. The agent's uid is the test's (root);
    /// another uid reads it with busctl.
    func testAvailableAccuracyLevelIsTheCallersUidsAgentLevel() throws {
        let reader = try stack.peer()
        let manager = GeoClueAPI.managerPath, iface = GeoClueAPI.managerInterfaceName
        func level(_ p: BusPeer) -> DBusValue? { try? p.get(manager, iface, ManagerProperty.availableAccuracyLevel).get() }
        func nobodysLevel() throws -> String {
            let r = try ChildProcess.run("/usr/bin/setpriv", ServiceTests.nobody.setprivArgs() + [
                TestPaths.findExecutable("busctl") ?? "busctl", "--address=\(stack.bus.address)", "get-property",
                GeoClueAPI.busName, manager, iface, ManagerProperty.availableAccuracyLevel])
            return r.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        /// The values of the Manager's `PropertiesChanged` `reader` got.
        func changes() -> [UInt32] {
            reader.signals.compactMap { m in
                guard m.member == "PropertiesChanged", m.path == manager,
                      m.arguments().first?.stringValue == iface else { return nil }
                return m.arguments()[1].vardictValue?[ManagerProperty.availableAccuracyLevel]?.uint32Value
            }
        }
        let bystander = try stack.peer()
        try bystander.addMatch("type='signal'")

        XCTAssertEqual(level(reader), .uint32(GeoClueAccuracyLevel.exact), "no GeoClue agent: exact")
        let agentRun = try startShellAgent(authorized: true, levels: [5, 0])
        stack.peers.pump(timeout: 3) { changes().count >= 1 }
        XCTAssertEqual(level(reader), .uint32(5), "the agent's MaxAccuracyLevel")
        XCTAssertEqual(try getAllLevel(reader), .uint32(5), "GetAll too")
        XCTAssertEqual(try nobodysLevel(), "u 8", "another uid has no GeoClue agent")

        agentRun.process.signal(SIGUSR1)
        stack.peers.pump(timeout: 3) { changes().count >= 2 }
        XCTAssertEqual(level(reader), .uint32(0), "MaxAccuracyLevel 0: location is off for the uid")
        XCTAssertEqual(try nobodysLevel(), "u 8")

        XCTAssertNoThrow(try agentPeer.setEnabled(false).get())
        XCTAssertEqual(try nobodysLevel(), "u 0", "location switched off for everyone")
        XCTAssertNoThrow(try agentPeer.setEnabled(true).get())
        XCTAssertEqual(try nobodysLevel(), "u 8")
        XCTAssertEqual(level(reader), .uint32(0), "still off for the agent's uid")

        agentRun.process.signal(SIGTERM)
        stack.peers.pump(timeout: 5) { changes().count >= 3 }
        XCTAssertEqual(level(reader), .uint32(GeoClueAccuracyLevel.exact), "the agent gone: exact")
        XCTAssertEqual(changes(), [5, 0, 8], "each change once, to the reader, with its uid's value")

        let broadcast = bystander.signals.filter {
            $0.member == "PropertiesChanged" && $0.path == manager
                && $0.arguments()[1].vardictValue?[ManagerProperty.availableAccuracyLevel] != nil
        }
        XCTAssertEqual(broadcast.count, 0, "a uid's level is never broadcast")
    }

    private func getAllLevel(_ p: BusPeer) throws -> DBusValue? {
        try p.getAll(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName).get()[ManagerProperty.availableAccuracyLevel]
    }

    /// Firefox's accuracy change (`Stop`, set `RequestedAccuracyLevel`, `Start`)
    /// from city to exact under a GeoClue agent at `MaxAccuracyLevel` 4: the
    /// agent is asked again, for exact, answers with its level (as GNOME Shell
    /// does), and the fixes stay the grid's.
    func testRaisingTheAccuracyOfALiveClientStaysCappedByTheAgent() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [GeoClueAccuracyLevel.city])
        startFeeding(interval: 0.25, north: 10)
        let p = try stack.peer()
        let c = try p.geoclueClient()
        let API = GeoClueAPI.self
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.desktopID, .string("org.example.Firefox")).get())
        var fixes: [GeoClueLocation] = []
        for level in [GeoClueAccuracyLevel.city, GeoClueAccuracyLevel.exact] {
            XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
            XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(level)).get())
            let from = p.locationUpdates(of: c).count
            XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
            XCTAssertNotNil(waitForUpdate(p, c, count: from + 2))
            fixes += try p.locationUpdates(of: c).dropFirst(from).map { try XCTUnwrap(try p.geoclueLocation($0.new).get()) }
        }
        XCTAssertEqual(authorizations(agentRun), [["org.example.Firefox", "4"], ["org.example.Firefox", "8"]])
        XCTAssertGreaterThanOrEqual(fixes.count, 4)
        for loc in fixes { XCTAssertTrue(isGridCell(loc), "\(loc)") }
    }

    func testReducedMaxAccuracyLevelGivesReducedFixesEvenAtExact() throws {
        let agentRun = try startShellAgent(authorized: true, levels: [4])
        startFeeding(interval: 0.5)
        let r = try whereAmI(level: 8)
        XCTAssertEqual(r.status, 0, r.output)
        assertGridCellFixes(r.output, atLeast: 3)
        XCTAssertEqual(authorizations(agentRun), [["geoclue-where-am-i", "8"]])
    }
}

/// `[agents] allow` admits GeoClue agents as it admits ours.
final class GeoClueAgentAllowListTests: GeoClueTestCase {
    override var registersAgent: Bool { false }
    override var extraConfig: String { "[agents]\nallow = /usr/bin/gnome-shell\n" }

    func testAnUnlistedAgentIsRefused() throws {
        let run = try ClientRun(GeoClueClientTests.python, [GeoClueAgentTests.shellAgent, "true", "8"],
                                environment: clientEnvironment)
        stack.peers.pump(timeout: 10) { !run.process.isRunning }
        XCTAssertTrue(run.lines("registered").isEmpty, run.output)
        XCTAssertTrue(run.output.contains("is not allowed to register a consent agent"), run.output)
    }
}
