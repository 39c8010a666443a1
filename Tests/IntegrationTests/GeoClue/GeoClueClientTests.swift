import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Real, unmodified GeoClue2 clients against the facade, headless, with the
/// private test bus as their system bus: `where-am-i` from geoclue-2-demo, and
/// a Python app on libgeoclue's `GClue.Simple` (tests/geoclue/gclue-simple-client.py).
final class GeoClueClientTests: GeoClueTestCase {
    static let whereAmI = "/usr/libexec/geoclue-2.0/demos/where-am-i"
    static let python = "/usr/bin/python3"
    static let simpleClient = TestPaths.sourceRoot + "/tests/geoclue/gclue-simple-client.py"

    override func setUpWithError() throws {
        for file in [Self.whereAmI, Self.python] where !FileManager.default.isExecutableFile(atPath: file) {
            XCTFail("\(file) is missing: scripts/deps.sh installs geoclue-2-demo, gir1.2-geoclue-2.0 and python3-gi")
        }
        try super.setUpWithError()
    }

    // MARK: where-am-i

    func testWhereAmIAtExactGetsTheTrack() throws {
        startFeeding(interval: 0.5, north: 10)
        let r = try runClient(Self.whereAmI, ["-t", "10", "-a", "8"])
        XCTAssertEqual(r.status, 0, r.output)
        assertFullFixesOnTrack(printedFixes(r.output), atLeast: 5, r.output)
        XCTAssertTrue(r.output.contains("Altitude:") && r.output.contains("Heading:"), r.output)
        let confirm = try XCTUnwrap(agent.confirms.first)
        XCTAssertEqual(confirm.kind, .whenInUse)
        XCTAssertEqual(confirm.appID, Self.whereAmI, "the app is what the bus credentials show")
        XCTAssertEqual(confirm.appName, "geoclue-where-am-i", "its DesktopId, for display")
        XCTAssertEqual(confirm.accuracy, .full)
    }

    func testWhereAmIAtCityGetsTheGridCell() throws {
        startFeeding(interval: 0.5)
        let r = try runClient(Self.whereAmI, ["-t", "10", "-a", "4"])
        XCTAssertEqual(r.status, 0, r.output)
        assertGridCellFixes(r.output, atLeast: 5)
        XCTAssertFalse(r.output.contains("Speed:") || r.output.contains("Heading:"), "reduced: no speed or heading\n\(r.output)")
        XCTAssertEqual(agent.confirms.first?.accuracy, .reduced)
    }

    func testWhereAmIExits255OnDontAllowAndWhenLocationIsOff() throws {
        startFeeding(interval: 0.5)
        agent.behaviour = .answer("deny")
        let denied = try runClient(Self.whereAmI, ["-t", "10", "-a", "8"])
        XCTAssertEqual(denied.status, 255, denied.output)
        XCTAssertTrue(denied.output.contains("denied"), denied.output)
        XCTAssertEqual(printedFixes(denied.output).count, 0)

        XCTAssertNoThrow(try agentPeer.geo("ResetConsent", [.string(Self.whereAmI), .vardict([:])]).get())
        agent.behaviour = .answer("allow-while-using")
        XCTAssertNoThrow(try agentPeer.setEnabled(false).get())
        let off = try runClient(Self.whereAmI, ["-t", "10", "-a", "8"])
        XCTAssertEqual(off.status, 255, off.output)
        XCTAssertTrue(off.output.contains("switched off"), off.output)
        XCTAssertEqual(agent.confirms.count, 1, "no prompt while location is off")
    }

    func testWhereAmIQuitsWhenLocationIsSwitchedOffWhileItRuns() throws {
        startFeeding(interval: 0.5)
        var switched = false
        let r = try runClient(Self.whereAmI, ["-t", "20", "-a", "8"], timeout: 25) { run in
            if !switched, run.output.contains("Latitude:") {
                switched = true
                if case .failure(let e) = self.agentPeer.setEnabled(false) { XCTFail("\(e)") }
            }
        }
        XCTAssertTrue(switched)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertTrue(r.output.contains("Geolocation disabled. Quitting"), "Active went false\n\(r.output)")
    }

    /// A client in a cgroup named like a systemd app scope (what a desktop's
    /// launcher gives an app) is asked under the unit's app id; its DesktopId is
    /// only shown. Root stages the scope: a wrapper waits until it is in it, then
    /// execs where-am-i, so the process connects from inside.
    func testWhereAmIInAnAppScopeIsAskedUnderTheUnitsID() throws {
        let scope = "app-org.example.Foo-\(getpid()).scope"
        let (hierarchy, dir) = try makeCgroup(scope)
        defer { rmdir(dir) }
        let wrapper = "until grep -qx '0::/\(scope)' /proc/self/cgroup; do sleep 0.05; done; exec \"$0\" \"$@\""
        startFeeding(interval: 0.5)
        var moved: pid_t?
        var sessions: [SessionInfo]?
        let r = try runClient("/bin/sh", ["-c", wrapper, Self.whereAmI, "-t", "5", "-a", "8"]) { run in
            if sessions == nil, run.output.contains("Latitude:") {
                sessions = try? self.agentPeer.sessions().filter { $0.name.contains("/geoclue/") }
            }
            guard moved == nil else { return }
            moved = run.process.pid
            do {
                try "\(run.process.pid)".write(toFile: dir + "/cgroup.procs", atomically: false, encoding: .utf8)
            } catch {
                XCTFail("cannot move PID \(run.process.pid) into \(dir): \(error)")
            }
        }
        if let pid = moved, kill(pid, 0) == 0 {
            try? "\(pid)".write(toFile: hierarchy + "/cgroup.procs", atomically: false, encoding: .utf8)
        }
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertGreaterThanOrEqual(printedFixes(r.output).count, 1, r.output)
        let confirm = try XCTUnwrap(agent.confirms.first)
        XCTAssertEqual(confirm.appID, "org.example.Foo", "the app id of the unit, not the DesktopId")
        XCTAssertEqual(confirm.appName, "geoclue-where-am-i", "the DesktopId is only the name shown")
        XCTAssertEqual(confirm.executable, Self.whereAmI)
        XCTAssertEqual(sessions?.map(\.appID), ["org.example.Foo"], "its client object's session, under the unit's id")
    }

    // MARK: GClue.Simple

    func testGClueSimpleCompletesWithTheFirstFixFollowsWithThresholdsAndDeleteClientEndsTheGrant() throws {
        startFeeding(interval: 0.2, north: 5)
        var sessionsWhileRunning: [String] = []
        var sessionsAfterClose: [String]?
        let r = try runClient(Self.python, [Self.simpleClient, "org.example.Simple", "8", "0", "2", "5", "3"]) { run in
            if sessionsWhileRunning.isEmpty, !run.lines("ready").isEmpty {
                sessionsWhileRunning = (try? self.sessionNames()) ?? []
            }
            if sessionsAfterClose == nil, !run.lines("closed").isEmpty {
                // DeleteClient is on its way: the process stays connected meanwhile.
                self.stack.peers.settle(1)
                sessionsAfterClose = (try? self.sessionNames()) ?? ["?"]
            }
        }
        XCTAssertEqual(r.status, 0, r.output)
        let run = r.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        let ready = try XCTUnwrap(run.first { $0.first == "ready" }, r.output)
        XCTAssertNotNil(GeoClueAPI.clientNumber(of: ready[1]), ready[1])
        XCTAssertEqual(ready[2], ready[1] + "/Location/0", "completed with the first fix")
        let lat = try XCTUnwrap(Double(ready[3]))
        // NMEA carries 1/10000 of a minute: about 2e-6 degrees.
        XCTAssertTrue(feed.sent.contains { abs($0.latitude - lat) < 2e-6 }, "\(lat) is not on the track")

        // TimeThreshold 2 s over 5 s of fixes every 0.2 s: two updates or so, each ≥ 2 s apart.
        let updates = run.filter { $0.first == "update" }
        XCTAssertTrue((1...3).contains(updates.count), r.output)
        let times = updates.compactMap { Double($0[5]) }
        for (a, b) in zip(times, times.dropFirst()) { XCTAssertGreaterThan(b - a, 1800, r.output) }

        let number = GeoClueAPI.clientNumber(of: ready[1]).map(String.init) ?? "?"
        XCTAssertEqual(sessionsWhileRunning.filter { $0.hasSuffix("/geoclue/" + number) }.count, 1, "\(sessionsWhileRunning)")
        XCTAssertEqual(sessionsAfterClose?.filter { $0.contains("/geoclue/") }, [], "DeleteClient ended the grant")
        XCTAssertEqual(agent.confirms.first?.appName, "org.example.Simple")
    }

    func testBystanderSeesNoCoordinateAndASecondAppCannotReadTheLocation() throws {
        let bystander = try stack.peer()
        try bystander.addMatch("type='signal'")
        let other = try stack.peer()
        startFeeding(interval: 0.2, north: 5)
        var probed = false
        let r = try runClient(Self.python, [Self.simpleClient, "org.example.Simple", "8", "1", "1", "4", "0"]) { run in
            guard !probed, let ready = run.lines("ready").first, ready.count >= 3 else { return }
            probed = true
            // Another app, the same uid even: no access to the client's objects.
            XCTAssertDBusError(other.geoclueLocation(ready[2]), DBusError.unknownObjectName)
            XCTAssertDBusError(other.get(ready[2], GeoClueAPI.locationInterfaceName, LocationProperties.latitude),
                               DBusError.unknownObjectName)
            XCTAssertDBusError(other.getAll(ready[1], GeoClueAPI.clientInterfaceName), DBusError.unknownObjectName)
        }
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertTrue(probed, r.output)
        XCTAssertGreaterThanOrEqual(r.output.split(separator: "\n").filter { $0.hasPrefix("update ") }.count, 2,
                                    "the client with thresholds got fixes\n\(r.output)")
        let fromDaemon = bystander.signals.filter { $0.sender != "org.freedesktop.DBus" }
        XCTAssertFalse(fromDaemon.isEmpty, "the bystander got the broadcasts")
        XCTAssertEqual(fromDaemon.filter { ($0.path ?? "").hasPrefix(GeoClueAPI.clientsPath) }.map { $0.member ?? "" }, [])
        XCTAssertEqual(fromDaemon.flatMap { $0.arguments().flatMap(\.doubles) }, [], "no coordinate in any signal it got")
    }
}
