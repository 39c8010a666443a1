import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The same real clients against the real GeoClue 2.6 and against the facade,
/// scenario by scenario: each test asserts where the two match and where the
/// facade deliberately differs (docs/geoclue.md, "Where we differ from GeoClue").
///
/// Each scenario runs against geoconsentd first, then against GeoClue
/// (`GeoClueInstance`: a bus of its own, NMEA from a Unix socket fed epochs
/// built as for gpsd, a config of its own). Both sides get the same GeoClue
/// agent, the stand-in for GNOME Shell's (tests/geoclue/gnome-shell-agent.py),
/// and no agent of ours, so what the agent is asked shows who asks. Where GeoClue
/// cannot run (not installed, not root), the GeoClue half is skipped with the reason.
final class GeoClueReferenceTests: GeoClueTestCase {
    override var registersAgent: Bool { false }

    /// One service under test: its bus, its fixes, and the agent on its bus.
    final class Target {
        let name: String
        let bus: String
        let feed: LocationFeed
        let send: ([String]) -> Void
        var ticker: LoopTicker?
        var shell: ClientRun?

        init(name: String, bus: String, feed: LocationFeed, send: @escaping ([String]) -> Void) {
            self.name = name
            self.bus = bus
            self.feed = feed
            self.send = send
        }
    }

    /// What a client run left: its exit status and output, the agent's
    /// `authorize` lines, and the Manager's `InUse` 2 s into the run.
    struct Outcome {
        let status: Int32?
        let output: String
        let authorizations: [[String]]
        let inUse: Bool?
    }

    private var geoclueBus: TestBus?
    private var geoclue: GeoClueInstance?
    private var targets: [Target] = []

    override func tearDown() {
        let failed = (testRun?.failureCount ?? 0) > 0
        if failed, let g = geoclue { print("---- geoclue ----\n\(g.log().suffix(6000))") }
        for t in targets {
            t.ticker?.stop()
            if failed, let s = t.shell { print("---- agent on \(t.name) ----\n\(s.output)") }
            t.shell = nil
        }
        targets = []
        geoclue?.stop()
        geoclue = nil
        geoclueBus?.stop()
        geoclueBus = nil
        super.tearDown()
    }

    // MARK: the two services

    /// geoconsentd with the facade, fed through gpsd (the test case's `feed`).
    func facade() -> Target {
        let t = Target(name: "geoconsent", bus: stack.bus.address, feed: feed) { [gpsd = stack.gpsd] in gpsd.send($0) }
        targets.append(t)
        return t
    }

    /// The real GeoClue on a bus of its own, fed through its NMEA socket.
    /// - Throws: `XCTSkip` when GeoClue cannot run here.
    func realGeoClue() throws -> Target {
        let bus = try TestBus()
        geoclueBus = bus
        let g: GeoClueInstance
        do {
            g = try GeoClueInstance(busAddress: bus.address)
        } catch let e as GeoClueInstance.Unavailable {
            throw XCTSkip("the GeoClue half of this comparison is skipped: \(e.description)")
        }
        geoclue = g
        let t = Target(name: "GeoClue", bus: bus.address, feed: LocationFeed()) { [nmea = g.nmea] in nmea.send($0) }
        targets.append(t)
        return t
    }

    /// The facade, then GeoClue, each started when its turn comes (so that the
    /// facade's half runs even where GeoClue's is skipped).
    var bothSides: [() throws -> Target] { [facade, realGeoClue] }

    /// Sends the target's next epoch every `interval` seconds while the test pumps,
    /// the receiver's clock advancing `clockStep` centiseconds per epoch (nil: as
    /// the wall clock does).
    func startFeeding(_ t: Target, interval: Double = 0.5, north: Double = 10, clockStep: Int? = nil) {
        t.feed.step = clockStep ?? Int((interval * 100).rounded())
        let ticker = LoopTicker(loop: stack.peers.loop, interval: interval) { [feed = t.feed, send = t.send] in
            feed.latitude = offset(feed.latitude, feed.longitude, north: north, east: 0).0
            send(feed.next().sentences)
        }
        ticker.start()
        t.ticker = ticker
    }

    /// Starts the GNOME Shell stand-in on the target's bus, answering `authorized`
    /// at the first of `levels` (SIGUSR1: the next), until its `AddAgent` is answered.
    func startShellAgent(_ t: Target, authorized: Bool = true, levels: [UInt32] = [8]) throws -> ClientRun {
        let run = try ClientRun(GeoClueClientTests.python,
                                [GeoClueAgentTests.shellAgent, authorized ? "true" : "false",
                                 levels.map(String.init).joined(separator: ",")],
                                environment: clientEnvironment(bus: t.bus))
        t.shell = run
        stack.peers.pump(timeout: 10) { !run.lines("registered").isEmpty || !run.process.isRunning }
        XCTAssertFalse(run.lines("registered").isEmpty, "\(t.name): AddAgent failed: \(run.output)")
        return run
    }

    /// Runs a real client against the target, fed and with the agent as given.
    func run(_ t: Target, authorized: Bool = true, levels: [UInt32] = [8], interval: Double = 0.5, north: Double = 10,
             clockStep: Int? = nil, _ executable: String, _ arguments: [String], timeout: Double = 25,
             whileRunning: ((ClientRun, ClientRun) -> Void)? = nil) throws -> Outcome {
        let shell = try startShellAgent(t, authorized: authorized, levels: levels)
        let probe = try stack.peers.connect(t.bus)
        startFeeding(t, interval: interval, north: north, clockStep: clockStep)
        let started = Date()
        var inUse: Bool?
        let r = try runClient(executable, arguments, timeout: timeout, bus: t.bus) { client in
            if inUse == nil, Date().timeIntervalSince(started) > 2 { inUse = self.managerInUse(probe) }
            whileRunning?(client, shell)
        }
        t.ticker?.stop()
        return Outcome(status: r.status, output: r.output, authorizations: shell.lines("authorize").map { Array($0.dropFirst()) },
                       inUse: inUse)
    }

    /// The Manager's `InUse`, as `peer` reads it.
    func managerInUse(_ peer: BusPeer) -> Bool? {
        try? peer.get(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "InUse").get().boolValue
    }

    func whereAmI(_ t: Target, level: UInt32 = 8, seconds: Int = 6, authorized: Bool = true, levels: [UInt32] = [8],
                  whileRunning: ((ClientRun, ClientRun) -> Void)? = nil) throws -> Outcome {
        try run(t, authorized: authorized, levels: levels, GeoClueClientTests.whereAmI,
                ["-t", String(seconds), "-a", String(level)], timeout: Double(seconds) + 15, whileRunning: whileRunning)
    }

    /// Asserts where-am-i printed at least `minimum` fixes, each a position of the target's track.
    func assertFixesOnTrack(_ o: Outcome, _ t: Target, atLeast minimum: Int,
                            file: StaticString = #filePath, line: UInt = #line) {
        let fixes = printedFixes(o.output)
        XCTAssertGreaterThanOrEqual(fixes.count, minimum, "\(t.name)\n\(o.output)", file: file, line: line)
        for f in fixes {
            // where-am-i prints 6 decimals; NMEA carries about as many.
            XCTAssertTrue(t.feed.sent.contains { abs($0.latitude - f.latitude) < 2e-6 && abs($0.longitude - f.longitude) < 2e-6 },
                          "\(t.name): \(f) is not on the track", file: file, line: line)
        }
    }

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

    /// The `Timestamp:` seconds where-am-i printed (`... (N seconds since the Epoch)`).
    func printedSeconds(_ output: String) -> [UInt64] {
        output.split(separator: "\n").filter { $0.hasPrefix("Timestamp:") }.compactMap { line in
            guard let open = line.lastIndex(of: "(") else { return nil }
            return UInt64(line[line.index(after: open)...].split(separator: " ").first ?? "")
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
        guard let hierarchy = LocalUserForgedIdentityTests.unifiedCgroupMount() else {
            throw XCTSkip("no cgroup2 hierarchy mounted")
        }
        let scope = "app-flatpak-org.example.Foo-\(getpid()).scope"
        let dir = hierarchy + "/" + scope
        guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
            throw XCTSkip("cannot create the cgroup \(dir): \(String(cString: strerror(errno)))")
        }
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

    // MARK: GClue.Simple

    /// Match: `GClue.Simple` completes with the first fix (the client's
    /// `Location/0`), follows updates no closer than `TimeThreshold` (2 s, the
    /// receiver's clock running as the wall clock), and on close (`DeleteClient`)
    /// the Manager's `InUse` goes false while the app is still connected.
    /// Differ: only the facade asks the agent.
    func testGClueSimpleCompletesFollowsAndDeleteClientEndsIt() throws {
        for side in bothSides {
            let t = try side()
            let probe = try stack.peers.connect(t.bus)
            var inUseAfterClose: Bool?
            let o = try run(t, interval: 0.25, north: 5, GeoClueClientTests.python,
                            [GeoClueClientTests.simpleClient, "org.example.Simple", "8", "0", "2", "5", "3"]) { client, _ in
                if inUseAfterClose == nil, !client.lines("closed").isEmpty {
                    self.stack.peers.settle(1)
                    inUseAfterClose = self.managerInUse(probe)
                }
            }
            XCTAssertEqual(o.status, 0, "\(t.name)\n\(o.output)")
            let ready = try XCTUnwrap(simpleLines(o.output, "ready").first, "\(t.name)\n\(o.output)")
            XCTAssertTrue(ready[1].hasPrefix(GeoClueAPI.clientsPath + "/"), ready[1])
            XCTAssertEqual(ready[2], ready[1] + "/Location/0", "\(t.name): completed with the first fix")
            let lat = try XCTUnwrap(Double(ready[3]))
            XCTAssertTrue(t.feed.sent.contains { abs($0.latitude - lat) < 2e-6 }, "\(t.name): \(lat) is not on the track")
            let times = updateTimes(o.output)
            XCTAssertTrue((1...3).contains(times.count), "\(t.name)\n\(o.output)")
            for (a, b) in zip(times, times.dropFirst()) { XCTAssertGreaterThan(b - a, 1800, "\(t.name)\n\(o.output)") }
            XCTAssertEqual(o.inUse, true, t.name)
            XCTAssertEqual(inUseAfterClose, false, "\(t.name): DeleteClient ended it")
            XCTAssertEqual(o.authorizations, t.name == "GeoClue" ? [] : [["org.example.Simple", "8"]], t.name)
        }
    }

    /// Differ: GeoClue measures `TimeThreshold` on the fixes' timestamps (the
    /// receiver's clock), the facade on its own clock. With a receiver whose
    /// clock runs 5 times as fast as the wall clock (1 s per epoch, an epoch
    /// every 0.2 s), GeoClue updates a 2 s client every 0.4 s; the facade every 2 s.
    func testTimeThresholdIsOnWhichClock() throws {
        func gaps(_ t: Target) throws -> [Double] {
            let o = try run(t, interval: 0.2, north: 5, clockStep: 100, GeoClueClientTests.python,
                            [GeoClueClientTests.simpleClient, "org.example.Simple", "8", "0", "2", "5", "0"])
            XCTAssertEqual(o.status, 0, "\(t.name)\n\(o.output)")
            let times = updateTimes(o.output)
            return zip(times, times.dropFirst()).map { $1 - $0 }
        }
        let ours = try gaps(facade())
        XCTAssertFalse(ours.isEmpty)
        XCTAssertTrue(ours.allSatisfy { $0 > 1800 }, "geoconsent: the wall clock's 2 s: \(ours)")

        let theirs = try gaps(try realGeoClue())
        XCTAssertGreaterThanOrEqual(theirs.count, 5, "\(theirs)")
        guard !theirs.isEmpty else { return }
        // The median: a loaded machine may delay a tick now and then.
        XCTAssertLessThan(theirs.sorted()[theirs.count / 2], 1000, "GeoClue: 2 s of the receiver's clock: \(theirs)")
    }

    /// The lines the GClue.Simple client printed that start with `word`, as words.
    func simpleLines(_ output: String, _ word: String) -> [[String]] {
        output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.filter { $0.first == word }
    }

    /// The monotonic milliseconds of the client's `update` lines.
    func updateTimes(_ output: String) -> [Double] {
        simpleLines(output, "update").compactMap { $0.count > 5 ? Double($0[5]) : nil }
    }

    // MARK: Privacy

    /// A client with thresholds, a bystander matching every signal, and a second
    /// app probing the client's objects. Match: the second app's `Get` of
    /// `Latitude` or of the client's `Location`, and its `Stop`, are refused with `AccessDenied`. Differ: GeoClue
    /// answers the second app's `GetAll` with `{}` where the facade refuses it, its
    /// `Introspect` lists every client's objects, and its broadcasts carry the
    /// client's coordinates to the bystander; the facade's carry none.
    func testBystanderAndASecondApp() throws {
        struct Seen {
            var getAllLocation: Result<[String: DBusValue], DBusError>?
            var getLatitude: Result<DBusValue, DBusError>?
            var getAllClient: Result<[String: DBusValue], DBusError>?
            var getClientLocation: Result<DBusValue, DBusError>?
            var stop: Result<[DBusValue], DBusError>?
            var introspectClients: Result<[DBusValue], DBusError>?
            var clientPath = ""
        }
        func scenario(_ t: Target) throws -> (outcome: Outcome, seen: Seen, broadcast: [Message]) {
            let bystander = try stack.peers.connect(t.bus)
            try bystander.addMatch("type='signal'")
            let other = try stack.peers.connect(t.bus)
            var seen = Seen()
            var probed = false
            let o = try run(t, interval: 0.2, north: 5, GeoClueClientTests.python,
                            [GeoClueClientTests.simpleClient, "org.example.Simple", "8", "1", "1", "4", "0"]) { client, _ in
                guard !probed, let ready = client.lines("ready").first, ready.count >= 3 else { return }
                probed = true
                seen.clientPath = ready[1]
                seen.getAllLocation = other.getAll(ready[2], GeoClueAPI.locationInterfaceName)
                seen.getLatitude = other.get(ready[2], GeoClueAPI.locationInterfaceName, LocationProperties.latitude)
                seen.getAllClient = other.getAll(ready[1], GeoClueAPI.clientInterfaceName)
                seen.getClientLocation = other.get(ready[1], GeoClueAPI.clientInterfaceName, "Location")
                seen.stop = other.gc(ready[1], GeoClueAPI.clientInterfaceName, "Stop")
                seen.introspectClients = other.gc(GeoClueAPI.clientsPath, ObjectServer.introspectable, "Introspect")
            }
            XCTAssertEqual(o.status, 0, "\(t.name)\n\(o.output)")
            XCTAssertTrue(probed, "\(t.name)\n\(o.output)")
            XCTAssertGreaterThanOrEqual(o.output.split(separator: "\n").filter { $0.hasPrefix("update ") }.count, 2,
                                        "\(t.name): the client with thresholds got fixes\n\(o.output)")
            return (o, seen, bystander.signals.filter { $0.sender != "org.freedesktop.DBus" })
        }

        let ours = try scenario(facade())
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getAllLocation), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getLatitude), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getAllClient), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getClientLocation), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.stop), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.introspectClients), DBusError.unknownObjectName)
        XCTAssertFalse(ours.broadcast.isEmpty, "the bystander got the broadcasts (InUse)")
        XCTAssertEqual(ours.broadcast.filter { ($0.path ?? "").hasPrefix(GeoClueAPI.clientsPath) }.map { $0.member ?? "" }, [])
        XCTAssertEqual(ours.broadcast.flatMap { $0.arguments().flatMap(\.doubles) }, [], "no coordinate in any broadcast")

        let theirs = try scenario(try realGeoClue())
        XCTAssertDBusError(try XCTUnwrap(theirs.seen.getLatitude), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(theirs.seen.stop), DBusError.accessDeniedName)
        XCTAssertDBusError(try XCTUnwrap(theirs.seen.getClientLocation), DBusError.accessDeniedName)
        XCTAssertEqual(try XCTUnwrap(theirs.seen.getAllLocation).get().count, 0, "GeoClue: an empty GetAll, not an error")
        XCTAssertEqual(try XCTUnwrap(theirs.seen.getAllClient).get().count, 0)
        let node = theirs.seen.clientPath.split(separator: "/").last.map(String.init) ?? "?"
        let xml = try XCTUnwrap(theirs.seen.introspectClients).get().first?.stringValue ?? ""
        XCTAssertTrue(xml.contains("<node name=\"\(node)\"/>"), "GeoClue lists another app's client to anyone\n\(xml)")
        let broadcastNumbers = theirs.broadcast.filter { ($0.path ?? "").hasPrefix(theirs.seen.clientPath + "/Location/") }
            .flatMap { $0.arguments().flatMap(\.doubles) }
        let track = targets.first { $0.name == "GeoClue" }?.feed.sent.map(\.latitude) ?? []
        XCTAssertTrue(broadcastNumbers.contains { n in track.contains { abs($0 - n) < 2e-6 } },
                      "GeoClue broadcasts the Location's PropertiesChanged, the client's latitude included: \(broadcastNumbers)\n"
                      + theirs.broadcast.map { "\($0.path ?? "") \($0.member ?? "") \($0.arguments())" }.joined(separator: "\n"))
    }
}
