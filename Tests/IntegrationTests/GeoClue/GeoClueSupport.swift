import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A stack whose daemon also serves GeoClue2 (`[geoclue] serve = true`), a consent
/// agent in the test answering as told, and a receiver to feed fixes from.
class GeoClueTestCase: XCTestCase {
    var stack: Stack!
    var agentPeer: BusPeer!
    var agent: TestAgent!
    let feed = LocationFeed()
    private var feeding: LoopTicker?

    /// More config for the daemon (after `[geoclue] serve = true`).
    var extraConfig: String { "" }

    /// Whether the test's consent agent registers (false: the uid has none of ours).
    var registersAgent: Bool { true }

    /// Desktop entries of the system for the test's own clients (the daemon
    /// looks here before /usr/share/applications): a host app is named to a
    /// GeoClue agent only by an entry whose program is its executable
    /// (docs/geoclue.md, "GeoClue agents"). `org.example.Firefox` names this
    /// test process, `org.example.Simple` the Python of the GClue.Simple client.
    private var entries: TempDir?

    override func setUpWithError() throws {
        let dir = try TempDir()
        entries = dir
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        for (id, exec) in [("org.example.Firefox", me), ("org.example.Simple", GeoClueClientTests.python + " %u")] {
            try "[Desktop Entry]\nType=Application\nName=\(id)\nExec=\(exec)\n"
                .write(toFile: dir.file(id + ".desktop"), atomically: true, encoding: .utf8)
            chmod(dir.file(id + ".desktop"), 0o644)
        }
        stack = try Stack(config: "[geoclue]\nserve = true\ndesktop-entries = \(dir.path); /usr/share/applications\n" + extraConfig)
        agentPeer = try stack.peer()
        agent = TestAgent(peer: agentPeer, behaviour: .answer("allow-once"))
        if registersAgent { XCTAssertNoThrow(try agent.register().get()) }
    }

    override func tearDown() {
        if let s = stack, let t = testRun, t.failureCount > 0 {
            print("---- geoconsentd log ----\n\(s.daemon.log().suffix(6000))")
        }
        feeding?.stop()
        feeding = nil
        agent = nil
        agentPeer = nil
        stack?.stop()
        stack = nil
        entries?.remove()
        entries = nil
    }

    /// Sends the next fix of `feed` every `interval` seconds while the test pumps,
    /// each `north` metres north of the one before.
    func startFeeding(interval: Double = 0.25, north: Double = 0) {
        feeding?.stop()
        let t = LoopTicker(loop: stack.peers.loop, interval: interval) { [feed, gpsd = stack.gpsd] in
            feed.latitude = offset(feed.latitude, feed.longitude, north: north, east: 0).0
            feed.send(to: gpsd)
        }
        t.start()
        feeding = t
    }

    func stopFeeding() {
        feeding?.stop()
        feeding = nil
    }

    /// The bus address a real client gets as its system bus.
    var clientEnvironment: [String: String] { clientEnvironment(bus: stack.bus.address) }

    /// The environment of a real client whose system bus is `address`.
    func clientEnvironment(bus address: String) -> [String: String] {
        ["DBUS_SYSTEM_BUS_ADDRESS": address, "GTK_USE_PORTAL": "0"]
    }

    /// Runs a real client to its end while the test's loop runs (the agent
    /// answers, fixes are fed); its exit status (nil: still running at `timeout`,
    /// then killed) and everything it printed. Its system bus is the stack's,
    /// or `bus` when given (the real GeoClue's, in the reference tests).
    func runClient(_ executable: String, _ arguments: [String], timeout: Double = 30, bus: String? = nil,
                   whileRunning: ((ClientRun) -> Void)? = nil) throws -> (status: Int32?, output: String) {
        let run = try ClientRun(executable, arguments, environment: bus.map(clientEnvironment(bus:)) ?? clientEnvironment)
        stack.peers.pump(timeout: timeout) {
            whileRunning?(run)
            return !run.process.isRunning
        }
        let status = run.process.waitForExit(timeout: 0.5)
        if status == nil { run.process.kill9() }
        return (status, run.output)
    }

    /// The `Latitude:`, `Longitude:` and `Accuracy:` values where-am-i printed, per fix.
    func printedFixes(_ output: String) -> [(latitude: Double, longitude: Double, accuracy: Double)] {
        var out: [(Double, Double, Double)] = []
        var lat: Double?, lon: Double?
        for line in output.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "°" })
            guard words.count >= 2, let v = Double(words[1]) else { continue }
            switch words[0] {
            case "Latitude:": lat = v
            case "Longitude:": lon = v
            case "Accuracy:":
                if let la = lat, let lo = lon { out.append((la, lo, v)) }
                lat = nil
                lon = nil
            default: break
            }
        }
        return out
    }

    /// Asserts where-am-i printed at least `minimum` fixes, each the reduced-accuracy
    /// grid cell of the fed position (centre and half-diagonal), with no altitude.
    func assertGridCellFixes(_ output: String, atLeast minimum: Int, file: StaticString = #filePath, line: UInt = #line) {
        let fixes = printedFixes(output)
        XCTAssertGreaterThanOrEqual(fixes.count, minimum, output, file: file, line: line)
        let cell = ReducedGrid(cellSize: 5000).reduce(Fix(latitude: feed.latitude, longitude: feed.longitude, mode: .threeD))
        for f in fixes {
            XCTAssertEqual(f.latitude, cell.latitude, accuracy: 1e-6, file: file, line: line)
            XCTAssertEqual(f.longitude, cell.longitude, accuracy: 1e-6, file: file, line: line)
            XCTAssertEqual(f.accuracy, cell.horizontalAccuracy ?? 0, accuracy: 1e-6, file: file, line: line)
        }
        XCTAssertFalse(output.contains("Altitude:"), "reduced: no altitude\n\(output)", file: file, line: line)
    }

    /// Waits for the `n`th `LocationUpdated` of `client` to `p` (counting from 1).
    func waitForUpdate(_ p: BusPeer, _ client: String, count n: Int = 1, timeout: Double = 15) -> (old: String, new: String)? {
        stack.peers.pump(timeout: timeout) { p.locationUpdates(of: client).count >= n }
        let all = p.locationUpdates(of: client)
        return all.count >= n ? all[n - 1] : nil
    }

    /// Creates the cgroup `name` at the top of the cgroup2 hierarchy (a scope a
    /// client is then moved into): the hierarchy's root and the new cgroup's
    /// path. Skips the test where that cannot be.
    func makeCgroup(_ name: String) throws -> (hierarchy: String, dir: String) {
        guard let hierarchy = LocalUserForgedIdentityTests.unifiedCgroupMount() else {
            throw XCTSkip("no cgroup2 hierarchy mounted")
        }
        let dir = hierarchy + "/" + name
        guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
            throw XCTSkip("cannot create the cgroup \(dir): \(String(cString: strerror(errno)))")
        }
        return (hierarchy, dir)
    }

    /// Asserts there are at least `minimum` fixes, each a position of the fed
    /// track, as printed (6 decimals), with an accuracy of gpsd's (0 to 100 m).
    func assertFullFixesOnTrack(_ fixes: [(latitude: Double, longitude: Double, accuracy: Double)], atLeast minimum: Int,
                                _ output: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertGreaterThanOrEqual(fixes.count, minimum, output, file: file, line: line)
        for f in fixes {
            XCTAssertTrue(feed.sentPosition(latitude: f.latitude, longitude: f.longitude),
                          "\(f) is not on the track", file: file, line: line)
            XCTAssertGreaterThan(f.accuracy, 0, "\(f)", file: file, line: line)
            XCTAssertLessThan(f.accuracy, 100, "\(f)", file: file, line: line)
        }
    }

    /// A full-accuracy fix: a position of the fed track (NMEA carries 1/10000
    /// of a minute, about 2e-6 degrees), with its altitude.
    func isOnTheTrack(_ loc: GeoClueLocation) -> Bool {
        loc.altitude != nil && (loc.accuracy ?? 0) > 0 && (loc.accuracy ?? .infinity) < 100
            && feed.sentPosition(latitude: loc.latitude, longitude: loc.longitude)
    }

    /// A reduced fix: the grid cell of a fed position (its centre, its
    /// half-diagonal as the accuracy), with no altitude, speed or heading.
    func isGridCell(_ loc: GeoClueLocation) -> Bool {
        let grid = ReducedGrid(cellSize: 5000)
        return loc.altitude == nil && loc.speed == nil && loc.heading == nil && feed.sent.contains { s in
            let cell = grid.reduce(Fix(latitude: s.latitude, longitude: s.longitude, mode: .threeD))
            return abs(cell.latitude - loc.latitude) < 1e-9 && abs(cell.longitude - loc.longitude) < 1e-9
                && abs((cell.horizontalAccuracy ?? -1) - (loc.accuracy ?? 0)) < 1e-6
        }
    }

    /// `ListSessions` as root (the test runs as root): every session.
    func sessionNames() throws -> [String] {
        try agentPeer.sessions().map(\.name)
    }
}

/// A real client process, its output in a file.
final class ClientRun {
    let process: ChildProcess
    private let dir: TempDir

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        dir = try TempDir()
        process = try ChildProcess(executable: executable, arguments: arguments, logPath: dir.file("client.log"),
                                   environment: environment)
    }

    deinit {
        process.stop()
        dir.remove()
    }

    /// Everything printed so far (stdout and stderr).
    var output: String { (try? String(contentsOfFile: dir.file("client.log"), encoding: .utf8)) ?? "" }

    /// The printed lines that start with `word` and a space, split into their words.
    func lines(_ word: String) -> [[String]] {
        output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.filter { $0.first == word }
    }
}

extension BusPeer {
    /// A call to the GeoClue facade.
    func gc(_ path: String, _ interface: String?, _ member: String, _ args: [DBusValue] = [],
            timeout: Double = 30) -> Result<[DBusValue], DBusError> {
        call(GeoClueAPI.busName, path, interface, member, args, timeout: timeout)
    }

    func gcAsync(_ path: String, _ interface: String?, _ member: String, _ args: [DBusValue] = [],
                 timeout: Double = 30) -> PendingCall {
        callAsync(GeoClueAPI.busName, path, interface, member, args, timeout: timeout)
    }

    /// `Manager.GetClient` (or `CreateClient`): the client object's path.
    func geoclueClient(create: Bool = false) throws -> String {
        let r = try gc(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, create ? "CreateClient" : "GetClient").get()
        guard let path = r.first?.stringValue else { throw DBusError.failed("no path in \(r)") }
        return path
    }

    func get(_ path: String, _ interface: String, _ name: String) -> Result<DBusValue, DBusError> {
        gc(path, ObjectServer.properties, "Get", [.string(interface), .string(name)]).map { $0.first?.unwrapped ?? .bool(false) }
    }

    func set(_ path: String, _ interface: String, _ name: String, _ value: DBusValue) -> Result<[DBusValue], DBusError> {
        gc(path, ObjectServer.properties, "Set", [.string(interface), .string(name), .variant(value)])
    }

    func getAll(_ path: String, _ interface: String) -> Result<[String: DBusValue], DBusError> {
        gc(path, ObjectServer.properties, "GetAll", [.string(interface)]).map { $0.first?.vardictValue ?? [:] }
    }

    /// A client property.
    func clientProperty(_ client: String, _ name: String) -> DBusValue? {
        try? get(client, GeoClueAPI.clientInterfaceName, name).get()
    }

    /// A location object's values, as a GeoClue client reads them (`GetAll`).
    func geoclueLocation(_ path: String) -> Result<GeoClueLocation?, DBusError> {
        getAll(path, GeoClueAPI.locationInterfaceName).map(LocationProperties.decode)
    }

    /// `LocationUpdated(old, new)` signals of `client` received from index `from` on.
    func locationUpdates(of client: String, from: Int = 0) -> [(old: String, new: String)] {
        signals.dropFirst(from).compactMap { m in
            guard m.member == GeoClueLocationUpdated.member, m.path == client,
                  m.interface == GeoClueAPI.clientInterfaceName else { return nil }
            return GeoClueLocationUpdated.decode(signature: m.signature, m.arguments())
        }
    }
}

extension DBusValue {
    /// Every double inside the value, however deeply nested.
    var doubles: [Double] {
        switch self {
        case .double(let d): return [d]
        case .array(_, let items), .structure(let items): return items.flatMap(\.doubles)
        case .dict(_, _, let entries): return entries.flatMap { $0.key.doubles + $0.value.doubles }
        case .variant(let v): return v.doubles
        default: return []
        }
    }
}
