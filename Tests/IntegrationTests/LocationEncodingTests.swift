import XCTest
import GeoCore
import GeoDBus
import GeoConsentAPI

/// The location dictionary is built by hand (sorted, no Dictionary) because it is
/// encoded for every fix; it must stay exactly what `.vardict` of its fields gives.
final class LocationEncodingTests: XCTestCase {
    func testEncodingIsTheSortedVardictOfTheReportedFields() {
        let full = Fix(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 40, ellipsoidalAltitude: 80,
                       horizontalAccuracy: 5, verticalAccuracy: 7, speed: 3, speedAccuracy: 0.5,
                       course: 90, courseAccuracy: 2, timestamp: 1_800_000_000_000_000)
        XCTAssertEqual(LocationDictionary.encode(full, accuracy: .full), .vardict([
            "accuracy-authorization": .string("full"), "altitude": .double(40), "course": .double(90),
            "course-accuracy": .double(2), "ellipsoidal-altitude": .double(80), "fix": .string("3d"),
            "horizontal-accuracy": .double(5), "latitude": .double(52.52), "longitude": .double(13.405),
            "speed": .double(3), "speed-accuracy": .double(0.5), "timestamp": .uint64(1_800_000_000_000_000),
            "vertical-accuracy": .double(7),
        ]))
        // Missing and non-finite values are left out, not sent as NaN.
        let sparse = Fix(latitude: 1, longitude: 2, mode: .twoD, altitude: .nan, speed: .infinity)
        XCTAssertEqual(LocationDictionary.encode(sparse, accuracy: .reduced), .vardict([
            "accuracy-authorization": .string("reduced"), "fix": .string("2d"),
            "latitude": .double(1), "longitude": .double(2),
        ]))
        let decoded = LocationDictionary.decode(LocationDictionary.encode(full, accuracy: .full))
        XCTAssertEqual(decoded?.fix, full)
        XCTAssertEqual(decoded?.accuracy, .full)
    }

    func testConsentRecordDecodesWhatItEncodes() {
        let r = ConsentRecord(decision: .whenInUse, decisionAccuracy: .reduced, oneTimeApproved: true,
                              oneTimeAccuracy: .full, decidedAt: 1_700_000_000_000_000, lastUsed: 1_800_000_000_000_000)
        XCTAssertEqual(RecordEncoding.encode(r).vardictValue.map(RecordEncoding.decode), r)
        let empty = ConsentRecord(decision: nil, decisionAccuracy: nil, oneTimeApproved: false, oneTimeAccuracy: nil,
                                  decidedAt: 0, lastUsed: 0)
        XCTAssertEqual(RecordEncoding.encode(empty).vardictValue.map(RecordEncoding.decode), empty)
    }
}
