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

    func testAFixAsLocationProperties() {
        let full = Fix(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 35.8, horizontalAccuracy: 4.5,
                       speed: 1.25, course: 244.8, timestamp: 1_700_000_000_123_456)
        let values = LocationProperties.encode(full, receivedAt: 9)
        XCTAssertEqual(Set(values.keys), Set(LocationProperties.names))
        for name in LocationProperties.names {
            XCTAssertEqual(values[name]?.signature, LocationProperties.signature(of: name), name)
        }
        XCTAssertEqual(values[LocationProperties.timestamp], .structure([.uint64(1_700_000_000), .uint64(123_456)]))
        XCTAssertEqual(values[LocationProperties.description], .string(""))
        XCTAssertEqual(LocationProperties.decode(values),
                       GeoClueLocation(latitude: 52.52, longitude: 13.405, accuracy: 4.5, altitude: 35.8, speed: 1.25,
                                       heading: 244.8, description: "", timestamp: 1_700_000_000_123_456))

        // What the receiver did not report is GeoClue's "unknown"; no time: when the daemon got it.
        let bare = LocationProperties.encode(Fix(latitude: 1, longitude: 2, mode: .twoD, altitude: .nan),
                                             receivedAt: 5_000_001)
        XCTAssertEqual(bare[LocationProperties.altitude], .double(-1.7976931348623157e308))
        XCTAssertEqual(bare[LocationProperties.speed], .double(-1))
        XCTAssertEqual(bare[LocationProperties.heading], .double(-1))
        XCTAssertEqual(bare[LocationProperties.accuracy], .double(-1))
        XCTAssertEqual(bare[LocationProperties.timestamp], .structure([.uint64(5), .uint64(1)]))
        XCTAssertEqual(LocationProperties.decode(bare),
                       GeoClueLocation(latitude: 1, longitude: 2, accuracy: nil, altitude: nil, speed: nil, heading: nil,
                                       description: "", timestamp: 5_000_001))
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
}
