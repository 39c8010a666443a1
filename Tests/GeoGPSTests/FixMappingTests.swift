import Foundation
import GeoCore
import XCTest
@testable import GeoGPS

/// 2026-12-02T12:35:19Z as Unix seconds.
let testEpochSeconds: Int = {
    var tm = tm()
    tm.tm_year = 2026 - 1900
    tm.tm_mon = 11
    tm.tm_mday = 2
    tm.tm_hour = 12
    tm.tm_min = 35
    tm.tm_sec = 19
    return Int(timegm(&tm))
}()

final class FixMappingTests: XCTestCase {
    private func full(mode: Int32 = 3) -> TPVFields {
        TPVFields(mode: mode, latitude: 48.1173, longitude: 11.516_666_7,
                  altMSL: 545.4, altHAE: 592.7,
                  eph: 4.5, epx: 3, epy: 4, epv: 7.2,
                  speed: 11.523, eps: 0.4, track: 84.4, epd: 2.5,
                  timeSeconds: testEpochSeconds, timeNanoseconds: 500_000_000)
    }

    func testFullTPV() throws {
        let fix = try XCTUnwrap(Fix(tpv: full()))
        XCTAssertEqual(fix.latitude, 48.1173)
        XCTAssertEqual(fix.longitude, 11.516_666_7)
        XCTAssertEqual(fix.mode, .threeD)
        XCTAssertEqual(fix.altitude, 545.4)
        XCTAssertEqual(fix.ellipsoidalAltitude, 592.7)
        XCTAssertEqual(fix.horizontalAccuracy, 4.5)
        XCTAssertEqual(fix.verticalAccuracy, 7.2)
        XCTAssertEqual(fix.speed, 11.523)
        XCTAssertEqual(fix.speedAccuracy, 0.4)
        XCTAssertEqual(fix.course, 84.4)
        XCTAssertEqual(fix.courseAccuracy, 2.5)
        XCTAssertEqual(fix.timestamp, UInt64(testEpochSeconds) * 1_000_000 + 500_000)
    }

    func testNaNDropped() throws {
        // Only a position: everything else is NaN, as libgps leaves unknown values.
        let fix = try XCTUnwrap(Fix(tpv: TPVFields(mode: 3, latitude: 1.5, longitude: -2.5)))
        XCTAssertEqual(fix, Fix(latitude: 1.5, longitude: -2.5, mode: .threeD))
        XCTAssertNil(fix.altitude)
        XCTAssertNil(fix.ellipsoidalAltitude)
        XCTAssertNil(fix.horizontalAccuracy)
        XCTAssertNil(fix.verticalAccuracy)
        XCTAssertNil(fix.speed)
        XCTAssertNil(fix.speedAccuracy)
        XCTAssertNil(fix.course)
        XCTAssertNil(fix.courseAccuracy)
        XCTAssertNil(fix.timestamp)

        // Each field NaN (and ±∞) on its own is dropped, never passed on.
        for bad in [Double.nan, .infinity, -.infinity] {
            var t = full()
            t.altMSL = bad; t.altHAE = bad; t.epv = bad; t.speed = bad
            t.eps = bad; t.track = bad; t.epd = bad
            let f = try XCTUnwrap(Fix(tpv: t))
            XCTAssertNil(f.altitude); XCTAssertNil(f.ellipsoidalAltitude); XCTAssertNil(f.verticalAccuracy)
            XCTAssertNil(f.speed); XCTAssertNil(f.speedAccuracy); XCTAssertNil(f.course); XCTAssertNil(f.courseAccuracy)
            XCTAssertEqual(f.horizontalAccuracy, 4.5)
        }
        // Negative accuracies and speeds are not estimates: dropped.
        var t = full()
        t.eph = -1; t.epx = .nan; t.epv = -1; t.eps = -0.1; t.epd = -3; t.speed = -2
        let f = try XCTUnwrap(Fix(tpv: t))
        XCTAssertNil(f.horizontalAccuracy); XCTAssertNil(f.verticalAccuracy)
        XCTAssertNil(f.speedAccuracy); XCTAssertNil(f.courseAccuracy); XCTAssertNil(f.speed)
    }

    func testModeBelowTwoIsNoFix() {
        for mode: Int32 in [-1, 0, 1] {
            XCTAssertNil(Fix(tpv: full(mode: mode)), "mode \(mode)")
        }
        // A fix needs a finite, in-range position.
        for (lat, lon) in [(Double.nan, 11.0), (48.0, .nan), (.infinity, 0), (90.5, 0), (0, 180.5), (-91, 0)] {
            var t = full()
            t.latitude = lat
            t.longitude = lon
            XCTAssertNil(Fix(tpv: t), "\(lat),\(lon)")
        }
        XCTAssertEqual(Fix(tpv: full(mode: 3))?.mode, .threeD)
        XCTAssertEqual(Fix(tpv: full(mode: 4))?.mode, .threeD)
    }

    func testTwoDDropsHeight() throws {
        let fix = try XCTUnwrap(Fix(tpv: full(mode: 2)))
        XCTAssertEqual(fix.mode, .twoD)
        XCTAssertNil(fix.altitude)
        XCTAssertNil(fix.ellipsoidalAltitude)
        XCTAssertNil(fix.verticalAccuracy)
        XCTAssertEqual(fix.horizontalAccuracy, 4.5)
        XCTAssertEqual(fix.speed, 11.523)
    }

    func testTimeToTheMicrosecond() throws {
        let s = testEpochSeconds
        let base = UInt64(s) * 1_000_000
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 0), base)
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 500_000_000), base + 500_000)
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 123_456_789), base + 123_457)
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 123_456_499), base + 123_456)
        // A ms value that came through a double a hair short still lands on it.
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 499_999_999), base + 500_000)
        XCTAssertEqual(TPVFields.microseconds(seconds: s, nanoseconds: 999_999_999), base + 1_000_000)
        XCTAssertEqual(TPVFields.microseconds(seconds: 1, nanoseconds: 1), 1_000_000)
        // No time / nonsense.
        XCTAssertNil(TPVFields.microseconds(seconds: 0, nanoseconds: 0))
        XCTAssertNil(TPVFields.microseconds(seconds: -5, nanoseconds: 0))
        XCTAssertNil(TPVFields.microseconds(seconds: s, nanoseconds: -1))
        XCTAssertNil(TPVFields.microseconds(seconds: s, nanoseconds: 1_000_000_000))
        XCTAssertNil(TPVFields.microseconds(seconds: Int.max, nanoseconds: 0))

        // A fix without a time is still a fix, without a timestamp.
        var t = full()
        t.timeSeconds = 0
        t.timeNanoseconds = 0
        let fix = try XCTUnwrap(Fix(tpv: t))
        XCTAssertNil(fix.timestamp)
        XCTAssertEqual(fix.latitude, 48.1173)
    }

    func testEphVersusEpxEpy() throws {
        var t = full()
        XCTAssertEqual(Fix(tpv: t)?.horizontalAccuracy, 4.5, "eph wins when finite")
        t.eph = .nan
        XCTAssertEqual(try XCTUnwrap(Fix(tpv: t)?.horizontalAccuracy), 5, accuracy: 1e-12, "hypot(3, 4)")
        t.epx = 0; t.epy = 0
        XCTAssertEqual(Fix(tpv: t)?.horizontalAccuracy, 0)
        t.epx = 1e200; t.epy = 1e200
        XCTAssertEqual(try XCTUnwrap(Fix(tpv: t)?.horizontalAccuracy), 1e200 * 2.0.squareRoot(), accuracy: 1e186)
        t.epx = 3; t.epy = .nan
        XCTAssertNil(Fix(tpv: t)?.horizontalAccuracy, "one axis alone is no horizontal estimate")
        t.epx = .nan; t.epy = 4
        XCTAssertNil(Fix(tpv: t)?.horizontalAccuracy)
    }

    func testCourseWrapped() {
        var t = full()
        for (raw, expected) in [(0.0, 0.0), (359.9, 359.9), (360.0, 0.0), (-10.0, 350.0), (725.0, 5.0)] {
            t.track = raw
            XCTAssertEqual(Fix(tpv: t)?.course ?? .nan, expected, accuracy: 1e-9, "\(raw)")
        }
    }

    func testTPVClassTag() {
        func head(_ s: String) -> [CChar] {
            var a = Array(s.utf8.prefix(31)).map { CChar(bitPattern: $0) }
            a += [CChar](repeating: 0, count: 32 - a.count)
            return a
        }
        func isTPV(_ a: [CChar]) -> Bool { a.withUnsafeBufferPointer { GPSDClient.isTPV($0) } }
        XCTAssertTrue(isTPV(head(#"{"class":"TPV","device":"udp://127.0.0.1:1","mode":3}"#)))
        XCTAssertFalse(isTPV(head(#"{"class":"SKY","device":"x"}"#)))
        XCTAssertFalse(isTPV(head(#"{"class":"TPVX","mode":3}"#)))
        XCTAssertFalse(isTPV(head("")))
        XCTAssertFalse(isTPV([]))
    }

    func testErrorDescription() {
        let e = GPSDError(operation: "gps_open(127.0.0.1:1)", code: -4)
        XCTAssertTrue(e.description.contains("gps_open(127.0.0.1:1)"))
        XCTAssertFalse(e.message.isEmpty)
        XCTAssertEqual(GPSDError(operation: "x", code: ECONNREFUSED).message, String(cString: strerror(ECONNREFUSED)))
    }
}
