import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The static source on the real daemon, bus and gpsd (docs/dbus-api.md
/// "Sources"): GeoClue 2.7's `/etc/geolocation` format from `[sources]
/// static-file`, read at start and when it changes; a silent receiver waited
/// for `gps-wait`; a fresh GPS fix first; a malformed file refused as
/// `FILE:LINE: reason`, with GPS still served.
final class StaticSourceBusTests: XCTestCase {
    var stack: Stack!
    var agentPeer: BusPeer!
    var agent: TestAgent!
    var dir: TempDir!
    var file: String { dir.file("geolocation") }

    /// The Brandenburg Gate, as an admin writes it.
    static let office = "# the office\n52.5163   # latitude\n13.3777   # longitude\n34        # altitude\n50        # accuracy\n"
    static let moved = "52.5200\n13.4050\n35\n25\n"

    func makeStack(gps: Bool = true) throws {
        dir = try TempDir()
        try write(Self.office)
        stack = try Stack(config: "[sources]\ngps = \(gps)\ngps-wait = 1\nstatic-file = \(file)\n")
        agentPeer = try stack.peer()
        agent = TestAgent(peer: agentPeer, behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        if let s = stack, let t = testRun, t.failureCount > 0 {
            print("---- geoconsentd log ----\n\(s.daemon.log().suffix(6000))")
        }
        agent = nil
        agentPeer = nil
        stack?.stop()
        stack = nil
        dir?.remove()
    }

    /// Replaces the file as editors and package managers do: a new file renamed over it.
    func write(_ text: String) throws {
        try text.write(toFile: file + ".new", atomically: false, encoding: .utf8)
        XCTAssertEqual(rename(file + ".new", file), 0)
    }

    func tappedClient() throws -> BusPeer {
        let p = try stack.peer()
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: .full)).get(), 4)
        return p
    }

    func locate(_ p: BusPeer, timeout: Double = 10) -> Result<[DBusValue], DBusError> {
        let call = p.requestLocation(maxAge: 0, timeout: timeout)
        stack.peers.pump(timeout: timeout + 5) { call.isDone }
        return call.result ?? .failure(DBusError(DBusError.noReplyName, "test gave up waiting"))
    }

    /// Pumps until the daemon's log contains `text`.
    func waitForLog(_ text: String, timeout: Double = 5) -> Bool {
        stack.peers.pump(timeout: timeout) { self.stack.daemon.log().contains(text) }
    }

    func testWithNoGPSFixTheStaticPositionAnswersAndAFreshGPSFixWins() throws {
        try makeStack()
        let p = try tappedClient()
        // gpsd runs but has no receiver: gps-wait (1 s) later the file answers.
        let reply = try locate(p).get()
        let here = try XCTUnwrap(LocationBody.decode(reply))
        XCTAssertEqual(here.fix.source, .static)
        XCTAssertEqual(here.latitude, 52.5163)
        XCTAssertEqual(here.longitude, 13.3777)
        XCTAssertEqual(here.fix.altitude, 34)
        XCTAssertEqual(here.fix.horizontalAccuracy, 50, "the accuracy the admin vouches for")
        XCTAssertNil(here.timestamp, "no receiver time: the key is left out")
        XCTAssertEqual(p.property(DaemonProperties.gpsdConnected), .bool(true), "the receiver was tried first")

        // Updates start with the static position; the first GPS fix takes over.
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        XCTAssertEqual(p.waitForSignal(LocationUpdatedSignal.member)?.location?.fix.source, .static)
        func listedSource() throws -> PositionSource? {
            try SessionDetailsReply.decode(p.geo("ListSessionDetails").get())?.first { $0.name == p.uniqueName }?.source
        }
        XCTAssertEqual(try listedSource(), .static, "ListSessionDetails says where its last position came from")
        let feed = LocationFeed(latitude: 48.1173, longitude: 11.516667)
        let mark = p.signals.count
        let ticker = LoopTicker(loop: stack.peers.loop, interval: 0.05) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
        ticker.start()
        XCTAssertTrue(stack.peers.pump(timeout: 10) { p.locations(from: mark).contains { $0.fix.source == .gps } })
        ticker.stop()
        XCTAssertEqual(try listedSource(), .gps)
        let gps = try XCTUnwrap(p.locations(from: mark).first { $0.fix.source == .gps })
        XCTAssertTrue(feed.sentPosition(latitude: gps.latitude, longitude: gps.longitude))
        XCTAssertFalse(p.locations(from: mark).drop { $0.fix.source != .gps }.contains { $0.fix.source == .static },
                       "no static position while GPS is fresh")
        // The grant journal names each source once for the session (its line
        // is written after the signal goes out).
        XCTAssertTrue(waitForLog("from gps: app"))
        let log = stack.daemon.log()
        XCTAssertEqual(log.components(separatedBy: "from static: app").count - 1, 1, log)
        XCTAssertEqual(log.components(separatedBy: "from gps: app").count - 1, 1, log)
        XCTAssertFalse(log.contains("52.5163"), "never a coordinate in the log")
    }

    func testTheFileIsReadAgainWhenItChangesAndAMalformedOneIsRefusedWithItsLine() throws {
        try makeStack(gps: false)
        let p = try tappedClient()
        func sources() throws -> [PositionSource] {
            DaemonProperties.decode(try p.geo("GetAll", [.string(GeoConsentAPI.interfaceName)],
                                              interface: ObjectServer.properties).get().first?.vardictValue ?? [:]).sources
        }
        XCTAssertEqual(try sources(), [.static], "GPS off, the file read: the static source alone")
        XCTAssertEqual(try LocationBody.decode(locate(p).get())?.latitude, 52.5163, "no wait with GPS off")
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        XCTAssertEqual(p.waitForSignal(LocationUpdatedSignal.member)?.location?.latitude, 52.5163)

        // Replaced: the new position reaches the running session.
        var mark = p.signals.count
        try write(Self.moved)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { p.locations(from: mark).contains { $0.latitude == 52.52 } })
        XCTAssertEqual(p.locations(from: mark).last?.fix.horizontalAccuracy, 25)

        // Malformed on its second line: refused with FILE:LINE, and nothing answers.
        try write("52.5\nabc\n30\n10\n")
        XCTAssertTrue(waitForLog("no static position: \(file):2: "), stack.daemon.log())
        let refused = locate(p)
        XCTAssertEqual(refused.errorName, GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertTrue(refused.errorMessage?.contains("no other source has a position") ?? false, "\(refused)")

        // Written in place in two steps, as an editor that truncates and
        // writes does: the file is read once its writer is done.
        mark = p.signals.count
        let fd = open(file, O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = "52.51".withCString { Glibc.write(fd, $0, 5) }
        _ = "70\n13.3777\n34\n50\n".withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { p.locations(from: mark).contains { $0.latitude == 52.5170 } },
                      stack.daemon.log())

        // Removed: nothing answers; the daemon is the same process throughout.
        unlink(file)
        XCTAssertTrue(waitForLog("no static position: \(file) does not exist"))
        XCTAssertEqual(locate(p).errorName, GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertEqual(try sources(), [], "no file, no static source")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testAMalformedFileLeavesGPSServing() throws {
        dir = try TempDir()
        try write("91\n0\n0\n10\n")
        stack = try Stack(config: "[sources]\ngps-wait = 1\nstatic-file = \(file)\n")
        agentPeer = try stack.peer()
        agent = TestAgent(peer: agentPeer, behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
        XCTAssertTrue(waitForLog("no static position: \(file):1: "), stack.daemon.log())
        let p = try tappedClient()
        let feed = LocationFeed()
        let ticker = LoopTicker(loop: stack.peers.loop, interval: 0.05) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
        ticker.start()
        let reply = locate(p)
        ticker.stop()
        let fix = try XCTUnwrap(LocationBody.decode(reply.get()))
        XCTAssertEqual(fix.fix.source, .gps)
        XCTAssertTrue(feed.sentPosition(latitude: fix.latitude, longitude: fix.longitude))
    }
}

extension Result where Success == [DBusValue], Failure == DBusError {
    var errorName: String? { if case .failure(let e) = self { return e.name } else { return nil } }
    var errorMessage: String? { if case .failure(let e) = self { return e.message } else { return nil } }
}
