import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The same real clients against the real GeoClue 2.6 and against the facade,
/// scenario by scenario (GeoClueReferenceTests, GeoClueReferenceSimpleTests):
/// each test asserts where the two match and where the facade deliberately
/// differs (docs/geoclue.md, "Side by side: the same clients against GeoClue 2.6").
///
/// Each scenario runs against geoconsentd first, then against GeoClue
/// (`GeoClueInstance`: a bus of its own, NMEA from a Unix socket fed epochs
/// built as for gpsd, a config of its own). Both sides get the same GeoClue
/// agent, the stand-in for GNOME Shell's (tests/geoclue/gnome-shell-agent.py),
/// and no agent of ours, so what the agent is asked shows who asks. Where GeoClue
/// cannot run (not installed, not root), the GeoClue half is skipped with the reason.
class GeoClueReferenceTestCase: GeoClueTestCase {
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
    /// The real GeoClue, once a test has started it.
    private(set) var geoclue: GeoClueInstance?
    private(set) var targets: [Target] = []

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
            XCTAssertTrue(t.feed.sentPosition(latitude: f.latitude, longitude: f.longitude),
                          "\(t.name): \(f) is not on the track", file: file, line: line)
        }
    }

    /// The `Timestamp:` seconds where-am-i printed (`... (N seconds since the Epoch)`).
    func printedSeconds(_ output: String) -> [UInt64] {
        output.split(separator: "\n").filter { $0.hasPrefix("Timestamp:") }.compactMap { line in
            guard let open = line.lastIndex(of: "(") else { return nil }
            return UInt64(line[line.index(after: open)...].split(separator: " ").first ?? "")
        }
    }

    /// The lines the GClue.Simple client printed that start with `word`, as words.
    func simpleLines(_ output: String, _ word: String) -> [[String]] {
        output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.filter { $0.first == word }
    }

    /// The monotonic milliseconds of the client's `update` lines.
    func updateTimes(_ output: String) -> [Double] {
        simpleLines(output, "update").compactMap { $0.count > 5 ? Double($0[5]) : nil }
    }
}
