import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// where-am-i and a GeoClue agent, against the facade and against the real
/// GeoClue 2.6 (GeoClueReferenceTestCase).
final class GeoClueReferenceTests: GeoClueReferenceTestCase {
    // MARK: where-am-i

    /// Match: fixes of the track, altitude and heading included. Differ: GeoClue
    /// asks nobody for an app that is not a Flatpak; the facade asks (here its
    /// GeoClue agent, under the DesktopId). Differ: GeoClue's `Accuracy` comes
    /// from a table of the HDOP (0 m up to HDOP 1), ours is gpsd's estimate; and
    /// its `Timestamp` has the fix's time of day, but not its date.
    func testWhereAmIAtExact() throws {
        let f = facade()
        let ours = try whereAmI(f)
        XCTAssertEqual(ours.status, 0, ours.output)
        assertFixesOnTrack(ours, f, atLeast: 5)
        XCTAssertTrue(ours.output.contains("Altitude:") && ours.output.contains("Heading:"), ours.output)
        XCTAssertEqual(ours.authorizations, [["geoclue-where-am-i", "8"]], "geoconsent asks for every app")
        for fix in printedFixes(ours.output) { XCTAssertTrue(fix.accuracy > 0 && fix.accuracy < 100, "\(fix)") }

        let g = try realGeoClue()
        let theirs = try whereAmI(g)
        XCTAssertEqual(theirs.status, 0, theirs.output)
        assertFixesOnTrack(theirs, g, atLeast: 5)
        XCTAssertTrue(theirs.output.contains("Altitude:") && theirs.output.contains("Heading:"), theirs.output)
        XCTAssertEqual(theirs.authorizations, [], "GeoClue asks no agent for an app that is not a Flatpak")
        XCTAssertEqual(Set(printedFixes(theirs.output).map(\.accuracy)), [0], "HDOP 0.9 is 0 m to GeoClue\n\(theirs.output)")

        // Differ: the facade's Timestamp is the receiver's (date and time, here
        // 2024-03-15); GeoClue takes the time of day of the GGA sentence on
        // today's or yesterday's date.
        let ourTimes = Set(f.feed.sent.map { $0.timestamp / 1_000_000 })
        XCTAssertFalse(printedSeconds(ours.output).isEmpty)
        for s in printedSeconds(ours.output) { XCTAssertTrue(ourTimes.contains(s), "\(s) is not a fix's time") }
        let dayTimes = Set(g.feed.sent.map { ($0.timestamp / 1_000_000) % 86_400 })
        let now = UInt64(Date().timeIntervalSince1970)
        XCTAssertFalse(printedSeconds(theirs.output).isEmpty)
        for s in printedSeconds(theirs.output) {
            XCTAssertTrue(dayTimes.contains(s % 86_400), "\(s): the time of day of a fix")
            XCTAssertTrue(s + 2 * 86_400 > now && s < now + 86_400, "\(s): on a date near today, not the fix's")
        }
    }

    /// Differ: at city level GeoClue uses its network source (WiFi, GeoIP), never
    /// GPS, so with GPS alone the client gets nothing; the facade gives the
    /// reduced fix of the GPS position (the grid cell).
    func testWhereAmIAtCity() throws {
        let f = facade()
        let ours = try whereAmI(f, level: 4)
        XCTAssertEqual(ours.status, 0, ours.output)
        assertGridCellFixes(ours.output, atLeast: 5)
        XCTAssertEqual(ours.authorizations, [["geoclue-where-am-i", "4"]])

        let g = try realGeoClue()
        let theirs = try whereAmI(g, level: 4)
        XCTAssertEqual(theirs.status, 0, theirs.output)
        XCTAssertEqual(theirs.inUse, true, "it started")
        XCTAssertEqual(printedFixes(theirs.output).count, 0, "no GPS fix below exact\n\(theirs.output)")
        XCTAssertEqual(theirs.authorizations, [])
    }

    // MARK: GeoClue agent

    /// Differ: `AuthorizeApp` false stops the app in the facade (where-am-i exits
    /// 255); GeoClue never asks for an unsandboxed app, which gets fixes anyway.
    func testAuthorizeAppFalse() throws {
        let f = facade()
        let ours = try whereAmI(f, authorized: false)
        XCTAssertEqual(ours.status, 255, ours.output)
        XCTAssertTrue(ours.output.contains("AccessDenied") && ours.output.contains("denied"), ours.output)
        XCTAssertEqual(printedFixes(ours.output).count, 0)
        XCTAssertEqual(ours.authorizations.count, 1)

        let g = try realGeoClue()
        let theirs = try whereAmI(g, authorized: false)
        XCTAssertEqual(theirs.status, 0, theirs.output)
        assertFixesOnTrack(theirs, g, atLeast: 5)
        XCTAssertEqual(theirs.authorizations, [], "never asked")
    }

    /// Differ: with no agent at all, GeoClue's `GetClient` waits for one, so
    /// where-am-i gets nothing until its own timeout; the facade answers at once
    /// and `Start` fails saying that no agent is registered (where-am-i exits 255).
    func testNoAgentAtAll() throws {
        let f = facade()
        startFeeding(f)
        let ours = try runClient(GeoClueClientTests.whereAmI, ["-t", "5", "-a", "8"], timeout: 20, bus: f.bus)
        XCTAssertEqual(ours.status, 255, ours.output)
        XCTAssertTrue(ours.output.contains("No consent agent is registered"), ours.output)

        let g = try realGeoClue()
        startFeeding(g)
        let theirs = try runClient(GeoClueClientTests.whereAmI, ["-t", "5", "-a", "8"], timeout: 20, bus: g.bus)
        XCTAssertEqual(theirs.status, 0, "where-am-i gave up by its own timeout\n\(theirs.output)")
        XCTAssertEqual(printedFixes(theirs.output).count, 0, theirs.output)
        XCTAssertTrue(geoclue?.log().contains("waiting for agent") ?? false, "GetClient waited for an agent")
    }

    /// Match: the agent's `MaxAccuracyLevel` 0 refuses `Start` with `AccessDenied`
    /// (where-am-i exits 255) without asking; only the messages differ.
    func testMaxAccuracyLevelZeroRefusesStart() throws {
        let f = facade()
        let ours = try whereAmI(f, levels: [0])
        XCTAssertEqual(ours.status, 255, ours.output)
        XCTAssertTrue(ours.output.contains("org.freedesktop.DBus.Error.AccessDenied"), ours.output)
        XCTAssertTrue(ours.output.contains("switched off"), ours.output)
        XCTAssertEqual(ours.authorizations, [])

        let g = try realGeoClue()
        let theirs = try whereAmI(g, levels: [0])
        XCTAssertEqual(theirs.status, 255, theirs.output)
        XCTAssertTrue(theirs.output.contains("org.freedesktop.DBus.Error.AccessDenied"), theirs.output)
        XCTAssertTrue(theirs.output.contains("Geolocation disabled for UID"), theirs.output)
        XCTAssertEqual(theirs.authorizations, [])
    }

    /// Match: `MaxAccuracyLevel` going to 0 while where-am-i runs makes `Active`
    /// false, and where-am-i quits.
    func testMaxAccuracyLevelGoingToZeroStopsTheClient() throws {
        for side in bothSides {
            let t = try side()
            var switched = false
            let o = try whereAmI(t, seconds: 20, levels: [8, 0]) { client, shell in
                if !switched, client.output.contains("Latitude:") {
                    switched = true
                    shell.process.signal(SIGUSR1)
                }
            }
            XCTAssertTrue(switched, "\(t.name)\n\(o.output)")
            XCTAssertEqual(o.status, 0, "\(t.name)\n\(o.output)")
            XCTAssertTrue(o.output.contains("Geolocation disabled. Quitting"), "\(t.name): Active went false\n\(o.output)")
        }
    }

    /// Differ: a reduced `MaxAccuracyLevel` (city) caps an exact client: GeoClue
    /// then uses its network source only, so GPS alone gives nothing; the facade
    /// gives the grid cell of the GPS fix.
    func testReducedMaxAccuracyLevelCapsAnExactClient() throws {
        let f = facade()
        let ours = try whereAmI(f, levels: [4])
        XCTAssertEqual(ours.status, 0, ours.output)
        assertGridCellFixes(ours.output, atLeast: 5)

        let g = try realGeoClue()
        let theirs = try whereAmI(g, levels: [4])
        XCTAssertEqual(theirs.status, 0, theirs.output)
        XCTAssertEqual(theirs.inUse, true, "it started")
        XCTAssertEqual(printedFixes(theirs.output).count, 0, theirs.output)
    }

    /// An app in a systemd scope named like a Flatpak's
    /// (`app-flatpak-org.example.Foo-N.scope`) that is not one (no sandbox, no
    /// `/.flatpak-info`), the agent answering `AuthorizeApp` false. Match: `Start`
    /// is refused with `AccessDenied` and where-am-i exits 255. Differ: GeoClue
    /// takes the scope's name for a Flatpak id and asks the agent under it; the
    /// facade asks under the `DesktopId`, since only a verified Flatpak's id is
    /// passed on (any program can run in a scope it names).
    ///
    /// GeoClue 2.6 reads a Flatpak id only from a pure cgroup v2 layout (a single
    /// `0::` line in `/proc/PID/cgroup`); on a hybrid layout it would see none.
    /// So in GeoClue's own mount namespace the client's `/proc/PID/cgroup` is
    /// shown as that single line (a bind mount), what a pure v2 machine shows.
    func testAnAppInAFlatpakNamedScope() throws {
        let scope = "app-flatpak-org.example.Foo-\(getpid()).scope"
        let (hierarchy, dir) = try makeCgroup(scope)
        defer { rmdir(dir) }
        let flags = try TempDir()
        defer { flags.remove() }
        let pureV2 = flags.file("cgroup")
        try "0::/user.slice/user-0.slice/user@0.service/app.slice/\(scope)\n".write(toFile: pureV2, atomically: true, encoding: .utf8)

        func scenario(_ t: Target) throws -> Outcome {
            let ready = flags.file("ready-\(t.name)")
            // Runs where-am-i once it is in the scope and GeoClue's view is set up.
            let wrapper = "until grep -qx '0::/\(scope)' /proc/self/cgroup && [ -e '\(ready)' ]; do sleep 0.05; done; exec \"$0\" \"$@\""
            var moved: pid_t?
            let o = try run(t, authorized: false, "/bin/sh", ["-c", wrapper, GeoClueClientTests.whereAmI, "-t", "5", "-a", "8"],
                            timeout: 20) { client, _ in
                guard moved == nil else { return }
                let pid = client.process.pid
                moved = pid
                do {
                    try "\(pid)".write(toFile: dir + "/cgroup.procs", atomically: false, encoding: .utf8)
                    if t.name == "GeoClue", let g = self.geoclue {
                        let r = try ChildProcess.run("/usr/bin/nsenter", ["-t", "\(g.process.pid)", "-m",
                                                                          "mount", "--bind", pureV2, "/proc/\(pid)/cgroup"])
                        XCTAssertEqual(r.status, 0, "cannot show GeoClue the pure cgroup v2 line")
                    }
                    XCTAssertTrue(FileManager.default.createFile(atPath: ready, contents: nil))
                } catch {
                    XCTFail("cannot stage PID \(pid): \(error)")
                }
            }
            if let pid = moved, kill(pid, 0) == 0 {
                try? "\(pid)".write(toFile: hierarchy + "/cgroup.procs", atomically: false, encoding: .utf8)
            }
            return o
        }

        let ours = try scenario(facade())
        XCTAssertEqual(ours.status, 255, ours.output)
        XCTAssertTrue(ours.output.contains("AccessDenied"), ours.output)
        XCTAssertEqual(ours.authorizations, [["geoclue-where-am-i", "8"]], "asked under the DesktopId: no verified Flatpak")

        let theirs = try scenario(try realGeoClue())
        XCTAssertEqual(theirs.status, 255, theirs.output)
        XCTAssertTrue(theirs.output.contains("AccessDenied") && theirs.output.contains("Agent rejected 'org.example.Foo'"),
                      theirs.output)
        XCTAssertEqual(theirs.authorizations, [["org.example.Foo", "8"]], "GeoClue asks under the scope's name")
    }
}
