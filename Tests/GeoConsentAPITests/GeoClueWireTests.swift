import XCTest
import GeoCore
import GeoDBus
import GeoConsentAPI

/// GeoClue's values in our words (docs/geoclue.md "Accuracy", "Fixes"): each
/// accuracy level's grant, and a fix as a Location object's properties.
final class GeoClueWireTests: XCTestCase {
    func testEachAccuracyLevelAsksForAGrant() {
        let table: [(UInt32, Accuracy?)] = [
            (0, nil), (1, .reduced), (2, .reduced), (3, .reduced), (4, .reduced), (5, .reduced),
            (6, .full), (7, .full), (8, .full), (9, .full), (UInt32.max, .full),
        ]
        for (level, expected) in table {
            XCTAssertEqual(GeoClueAccuracyLevel.accuracy(forLevel: level), expected, "level \(level)")
        }
        XCTAssertEqual(GeoClueAccuracyLevel.defaultRequested, GeoClueAccuracyLevel.city)
    }

    /// A GeoClue agent's replies and properties, as the daemon reads them (docs/geoclue.md "GeoClue agents").
    func testAGeoClueAgentsAnswersAndLevels() {
        let answers: [(String, [DBusValue], AgentAnswer)] = [
            ("bu", [.bool(true), .uint32(8)], .decision(.allowWhileUsing)),
            ("bu", [.bool(true), .uint32(6)], .decision(.allowWhileUsing)),
            ("bu", [.bool(true), .uint32(4)], .capped(.allowWhileUsing, .reduced)),
            ("bu", [.bool(true), .uint32(1)], .capped(.allowWhileUsing, .reduced)),
            ("bu", [.bool(true), .uint32(0)], .noAnswer("AuthorizeApp authorized at allowed_accuracy_level 0 (none)")),
            ("bu", [.bool(false), .uint32(8)], .decision(.deny)),
            ("bu", [.bool(false), .uint32(0)], .decision(.deny)),
            ("b", [.bool(true)], .noAnswer("AuthorizeApp replied with signature 'b', not 'bu'")),
            ("s", [.string("true")], .noAnswer("AuthorizeApp replied with signature 's', not 'bu'")),
        ]
        for (signature, args, expected) in answers {
            XCTAssertEqual(AuthorizeAppCall.decode(signature: signature, args), expected, "\(signature) \(args)")
        }
        XCTAssertEqual(AuthorizeAppCall.encode(desktopID: "org.gnome.Maps", level: 8), [.string("org.gnome.Maps"), .uint32(8)])

        let levels: [(DBusValue, Accuracy??)] = [
            (.variant(.uint32(0)), .some(nil)), (.variant(.uint32(4)), .some(.reduced)),
            (.uint32(5), .some(.reduced)), (.variant(.uint32(6)), .some(.full)), (.variant(.uint32(8)), .some(.full)),
            (.variant(.int32(8)), nil), (.variant(.string("8")), nil),
        ]
        for (value, expected) in levels {
            XCTAssertEqual(MaxAccuracyLevelProperty.cap(value), expected, "\(value)")
        }
        let agentInterface = DBusValue.string(GeoClueAPI.agentInterfaceName)
        let changed = DBusValue.vardict(["MaxAccuracyLevel": .uint32(0)])
        XCTAssertEqual(MaxAccuracyLevelProperty.changed(signature: "sa{sv}as", [agentInterface, changed, .strings([])]),
                       .some(nil), "switched off")
        XCTAssertNil(MaxAccuracyLevelProperty.changed(signature: "sa{sv}as", [.string("org.example.Other"), changed,
                                                                              .strings([])]), "another interface")
        XCTAssertNil(MaxAccuracyLevelProperty.changed(signature: "sa{sv}as", [agentInterface, .vardict([:]), .strings([])]),
                     "no new level")
    }

    func testAFixAsLocationProperties() {
        let full = Fix(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 35.8, horizontalAccuracy: 4.5,
                       speed: 1.25, course: 244.8, timestamp: 1_700_000_000_123_456)
        let values = LocationProperties.encode(full, receivedAt: 9)
        XCTAssertEqual(Set(values.keys), Set(LocationProperties.names))
        for name in LocationProperties.names {
            XCTAssertEqual(values[name]?.signature, LocationProperties.signature(of: name), name)
        }
        XCTAssertEqual(values[LocationProperties.timestamp], .structure([.uint64(1_700_000_000), .uint64(123_456)]))
        XCTAssertEqual(values[LocationProperties.description], .string("gps"), "the source, as the location dictionary names it")
        XCTAssertEqual(LocationProperties.decode(values),
                       GeoClueLocation(latitude: 52.52, longitude: 13.405, accuracy: 4.5, altitude: 35.8, speed: 1.25,
                                       heading: 244.8, description: "gps", timestamp: 1_700_000_000_123_456))

        // What the receiver did not report is GeoClue's "unknown"; no time: when the daemon got it.
        let bare = LocationProperties.encode(Fix(latitude: 1, longitude: 2, mode: .twoD, altitude: .nan, source: .wifi),
                                             receivedAt: 5_000_001)
        XCTAssertEqual(bare[LocationProperties.altitude], .double(-1.7976931348623157e308))
        XCTAssertEqual(bare[LocationProperties.speed], .double(-1))
        XCTAssertEqual(bare[LocationProperties.heading], .double(-1))
        XCTAssertEqual(bare[LocationProperties.accuracy], .double(-1))
        XCTAssertEqual(bare[LocationProperties.timestamp], .structure([.uint64(5), .uint64(1)]))
        XCTAssertEqual(LocationProperties.decode(bare),
                       GeoClueLocation(latitude: 1, longitude: 2, accuracy: nil, altitude: nil, speed: nil, heading: nil,
                                       description: "wifi", timestamp: 5_000_001))
    }

    func testReducedFixShowsTheCellOnly() {
        let grid = ReducedGrid(cellSize: 5000)
        let fix = Fix(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 35.8, horizontalAccuracy: 4.5,
                      speed: 1.25, course: 244.8, timestamp: 1)
        let shown = LocationProperties.decode(LocationProperties.encode(grid.reduce(fix), receivedAt: 0))
        let cell = grid.reduce(fix)
        XCTAssertEqual(shown?.latitude, cell.latitude)
        XCTAssertEqual(shown?.accuracy, cell.horizontalAccuracy)
        XCTAssertGreaterThan(shown?.accuracy ?? 0, 2500, "the cell's half-diagonal")
        XCTAssertNil(shown?.altitude)
        XCTAssertNil(shown?.speed)
        XCTAssertNil(shown?.heading)
    }

    func testClientPaths() {
        XCTAssertEqual(GeoClueAPI.clientPath(3), "/org/freedesktop/GeoClue2/Client/3")
        XCTAssertEqual(GeoClueAPI.locationPath(client: 3, 0), "/org/freedesktop/GeoClue2/Client/3/Location/0")
        XCTAssertEqual(GeoClueAPI.clientNumber(of: "/org/freedesktop/GeoClue2/Client/3"), 3)
        for bad in ["/org/freedesktop/GeoClue2/Client/", "/org/freedesktop/GeoClue2/Client/3/Location/0",
                    "/org/freedesktop/GeoClue2/Client/x", "/org/freedesktop/GeoClue2/Client/-1",
                    "/org/freedesktop/GeoClue2/Client/99999999999", "/"] {
            XCTAssertNil(GeoClueAPI.clientNumber(of: bad), bad)
        }
    }

    /// `LocationUpdated(oo)`, encoder beside decoder, and the interface table's signature.
    func testLocationUpdatedShape() {
        let args = GeoClueLocationUpdated.encode(old: "/", new: "/org/freedesktop/GeoClue2/Client/3/Location/0")
        XCTAssertEqual(args, [.objectPath("/"), .objectPath("/org/freedesktop/GeoClue2/Client/3/Location/0")])
        let back = GeoClueLocationUpdated.decode(signature: "oo", args)
        XCTAssertEqual(back?.old, "/")
        XCTAssertEqual(back?.new, "/org/freedesktop/GeoClue2/Client/3/Location/0")
        XCTAssertNil(GeoClueLocationUpdated.decode(signature: "ss", [.string("/"), .string("/")]))
        XCTAssertNil(GeoClueLocationUpdated.decode(signature: "o", [.objectPath("/")]))
        let declared = GeoClueAPI.client.signals.first { $0.name == GeoClueLocationUpdated.member }
        XCTAssertEqual(declared?.args.map(\.signature).joined(), "oo")
    }
}
