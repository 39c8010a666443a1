import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A python-gi app on libgeoclue's `GClue.Simple`, a bystander and a second
/// app, against the facade and against the real GeoClue 2.6
/// (GeoClueReferenceTestCase).
final class GeoClueReferenceSimpleTests: GeoClueReferenceTestCase {
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

    // MARK: Privacy

    /// A client with thresholds, a bystander matching every signal, and a second
    /// app probing the client's objects. Match: the second app's `Get` of
    /// `Latitude` or of the client's `Location`, and its `Stop`, are refused. Differ: GeoClue
    /// refuses with `AccessDenied`, which tells the prober the object exists; the facade
    /// answers `UnknownObject`, as for a missing object. GeoClue
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
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getAllLocation), DBusError.unknownObjectName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getLatitude), DBusError.unknownObjectName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getAllClient), DBusError.unknownObjectName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.getClientLocation), DBusError.unknownObjectName)
        XCTAssertDBusError(try XCTUnwrap(ours.seen.stop), DBusError.unknownObjectName)
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
