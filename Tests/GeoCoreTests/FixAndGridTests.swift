import Foundation
import XCTest
@testable import GeoCore

/// A small deterministic PRNG so failures reproduce (SplitMix64).
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func point(_ lat: Double, _ lon: Double, horizontalAccuracy: Double? = nil) -> Fix {
    Fix(latitude: lat, longitude: lon, mode: .threeD, horizontalAccuracy: horizontalAccuracy)
}

final class FixAndGridTests: XCTestCase {
    // MARK: - Pure-Swift trigonometry against libm

    func testPureMathMatchesLibm() {
        var x = -4 * Double.pi
        while x <= 4 * Double.pi {
            XCTAssertEqual(GeoMath.sin(x), Foundation.sin(x), accuracy: 4e-16, "sin(\(x))")
            XCTAssertEqual(GeoMath.cos(x), Foundation.cos(x), accuracy: 4e-16, "cos(\(x))")
            x += 0.000_731
        }
        var t = 0.0
        while t <= 50 {
            XCTAssertEqual(GeoMath.atanNonNegative(t), Foundation.atan(t), accuracy: 4e-16, "atan(\(t))")
            t += 0.000_37
        }
        XCTAssertEqual(GeoMath.atanNonNegative(.infinity), Double.pi / 2)
        XCTAssertEqual(GeoMath.atanNonNegative(1e300), Double.pi / 2, accuracy: 1e-15)
        XCTAssertEqual(GeoMath.atan2Positive(0, 0), 0)
        XCTAssertEqual(GeoMath.atan2Positive(1, 0), Double.pi / 2)
        XCTAssertTrue(GeoMath.sin(.nan).isNaN)
        XCTAssertTrue(GeoMath.cos(.infinity).isNaN)
    }

    // MARK: - Fix and distance

    func testFixModeRawValues() {
        XCTAssertEqual(FixMode.twoD.rawValue, "2d")
        XCTAssertEqual(FixMode.threeD.rawValue, "3d")
        XCTAssertEqual(FixMode(rawValue: "3d"), .threeD)
    }

    func testDistanceSanity() {
        let r = 6_371_008.8
        let metresPerDegree = r * Double.pi / 180
        // One degree along a meridian and along the equator.
        XCTAssertEqual(point(0, 0).distance(to: point(1, 0)), metresPerDegree, accuracy: 1e-6)
        XCTAssertEqual(point(0, 0).distance(to: point(0, 1)), metresPerDegree, accuracy: 1e-6)
        // Zero, symmetric.
        XCTAssertEqual(point(48.1173, 11.5167).distance(to: point(48.1173, 11.5167)), 0)
        let munich = point(48.1372, 11.5756), berlin = point(52.5200, 13.4050)
        XCTAssertEqual(munich.distance(to: berlin), berlin.distance(to: munich), accuracy: 1e-6)
        // Munich–Berlin is ~504 km on the sphere.
        XCTAssertEqual(munich.distance(to: berlin), 504_000, accuracy: 3_000)
        // Across the dateline: short way round.
        XCTAssertEqual(point(0, 179.5).distance(to: point(0, -179.5)), metresPerDegree, accuracy: 1e-6)
        // Antipodes and pole to pole: half the circumference.
        XCTAssertEqual(point(0, 0).distance(to: point(0, 180)), Double.pi * r, accuracy: 1e-6)
        XCTAssertEqual(point(90, 0).distance(to: point(-90, 0)), Double.pi * r, accuracy: 1e-6)
        // Small distances keep their precision (distance filter in metres).
        let a = point(48.1173, 11.5167)
        let b = point(48.1173 + 1 / metresPerDegree, 11.5167)   // 1 m north
        XCTAssertEqual(a.distance(to: b), 1, accuracy: 1e-6)

        // Against an independent libm haversine, on random pairs.
        var rng = SplitMix(state: 42)
        for _ in 0..<2000 {
            let p = point(Double.random(in: -90...90, using: &rng), Double.random(in: -180...180, using: &rng))
            let q = point(Double.random(in: -90...90, using: &rng), Double.random(in: -180...180, using: &rng))
            let f1 = p.latitude * .pi / 180, f2 = q.latitude * .pi / 180
            let df = f2 - f1, dl = (q.longitude - p.longitude) * .pi / 180
            let h = sin(df / 2) * sin(df / 2) + cos(f1) * cos(f2) * sin(dl / 2) * sin(dl / 2)
            let expected = 2 * r * asin(min(1, sqrt(h)))
            XCTAssertEqual(p.distance(to: q), expected, accuracy: 1e-6 * max(1, expected / 1000))
        }
    }

    // MARK: - Reduced grid

    func testSamePositionSameCell() {
        let grid = ReducedGrid(cellSize: 5000)
        let fix = Fix(latitude: 48.1173, longitude: 11.5167, mode: .threeD, altitude: 545.4,
                      horizontalAccuracy: 4, speed: 11.5, course: 84.4, timestamp: 1_796_214_919_500_000)
        let a = grid.reduce(fix)
        XCTAssertEqual(a, grid.reduce(fix))
        XCTAssertEqual(a, ReducedGrid(cellSize: 5000).reduce(fix), "a new grid of the same size is the same grid")
        // Fixed in space: the same position at a different time or with other extras lands in the same cell.
        var other = fix
        other.timestamp = 1
        other.altitude = nil
        other.horizontalAccuracy = 30
        let b = grid.reduce(other)
        XCTAssertEqual(a.latitude, b.latitude)
        XCTAssertEqual(a.longitude, b.longitude)
        // Idempotent: a cell centre is in its own cell.
        let again = grid.reduce(a)
        XCTAssertEqual(again.latitude, a.latitude)
        XCTAssertEqual(again.longitude, a.longitude)
    }

    func testJitteredQueriesCannotBeAveragedBack() {
        let grid = ReducedGrid(cellSize: 5000)
        // A true position well inside a cell, but away from its centre.
        let cell = grid.cell(latitude: 48.1173, longitude: 11.5167)
        let truthLat = cell.south + 0.2 * (cell.north - cell.south)
        let truthLon = cell.west + 0.75 * (cell.east - cell.west)
        let truth = point(truthLat, truthLon)

        var rng = SplitMix(state: 7)
        var outputs: [Fix] = []
        var sumInLat = 0.0, sumInLon = 0.0
        let jitter = 150.0 / GeoMath.metresPerDegree   // ±150 m
        for _ in 0..<1000 {
            let lat = truthLat + Double.random(in: -jitter...jitter, using: &rng)
            let lon = truthLon + Double.random(in: -jitter...jitter, using: &rng) / cos(truthLat * .pi / 180)
            sumInLat += lat
            sumInLon += lon
            outputs.append(grid.reduce(point(lat, lon)))
        }
        let inputMean = point(sumInLat / 1000, sumInLon / 1000)
        XCTAssertLessThan(inputMean.distance(to: truth), 20, "the raw positions do average to the truth")

        // Every answer is the one cell centre: no information to average.
        let distinct = Set(outputs.map { "\($0.latitude),\($0.longitude)" })
        XCTAssertEqual(distinct.count, 1)
        let outputMean = point(outputs.map(\.latitude).reduce(0, +) / 1000,
                               outputs.map(\.longitude).reduce(0, +) / 1000)
        let centre = point(cell.centreLatitude, cell.centreLongitude)
        XCTAssertEqual(outputMean.distance(to: centre), 0, accuracy: 1e-6)
        XCTAssertGreaterThan(outputMean.distance(to: truth), 1000,
                             "averaging the answers stays as far from the truth as the cell puts it")

        // Near a cell corner, jitter reaches at most the 4 neighbouring centres,
        // all of them cell centres, and their mean is no better than the cell allows.
        let cornerLat = cell.north, cornerLon = cell.east
        var corners: [Fix] = []
        for _ in 0..<1000 {
            let lat = cornerLat + Double.random(in: -jitter...jitter, using: &rng)
            let lon = cornerLon + Double.random(in: -jitter...jitter, using: &rng)
            corners.append(grid.reduce(point(lat, lon)))
        }
        let centres = Set(corners.map { "\($0.latitude),\($0.longitude)" })
        XCTAssertLessThanOrEqual(centres.count, 4)
        XCTAssertGreaterThan(centres.count, 1)
        for c in corners {
            let back = grid.reduce(c)
            XCTAssertEqual(back.latitude, c.latitude)
            XCTAssertEqual(back.longitude, c.longitude)
        }
        let cornerTruth = point(cornerLat, cornerLon)
        for c in corners {
            // Each answer is a whole half-cell away from the truth.
            XCTAssertGreaterThan(c.distance(to: cornerTruth), 2000)
        }
    }

    func testHalfDiagonalRule() {
        let grid = ReducedGrid(cellSize: 5000)
        let small = grid.reduce(point(48.1173, 11.5167, horizontalAccuracy: 3))
        let cell = grid.cell(latitude: 48.1173, longitude: 11.5167)
        let half = grid.halfDiagonal(of: cell)
        XCTAssertEqual(small.horizontalAccuracy, half)
        // ~5 km square cell: half-diagonal ≈ 5000·√2/2 ≈ 3536 m, never more.
        XCTAssertGreaterThan(half, 3000)
        XCTAssertLessThanOrEqual(half, 3536)
        // A reported accuracy larger than the cell is kept.
        XCTAssertEqual(grid.reduce(point(48.1173, 11.5167, horizontalAccuracy: 12_000)).horizontalAccuracy, 12_000)
        // No reported accuracy: the half-diagonal.
        XCTAssertEqual(grid.reduce(point(48.1173, 11.5167)).horizontalAccuracy, half)

        // Property everywhere: the true position lies within horizontal-accuracy of the answer.
        var rng = SplitMix(state: 99)
        for size in [1000.0, 5000, 20_000] {
            let g = ReducedGrid(cellSize: size)
            for _ in 0..<3000 {
                let lat = Double.random(in: -90...90, using: &rng)
                let lon = Double.random(in: -180...180, using: &rng)
                let r = g.reduce(point(lat, lon))
                XCTAssertLessThanOrEqual(r.distance(to: point(lat, lon)), r.horizontalAccuracy! * (1 + 1e-9),
                                         "size \(size) at \(lat),\(lon)")
            }
        }
    }

    func testFieldsStripped() {
        let grid = ReducedGrid(cellSize: 5000)
        let fix = Fix(latitude: 48.1173, longitude: 11.5167, mode: .twoD,
                      altitude: 545.4, ellipsoidalAltitude: 592.7,
                      horizontalAccuracy: 4, verticalAccuracy: 7,
                      speed: 11.52, speedAccuracy: 0.4, course: 84.4, courseAccuracy: 2,
                      timestamp: 1_796_214_919_500_000)
        let r = grid.reduce(fix)
        XCTAssertNil(r.altitude)
        XCTAssertNil(r.ellipsoidalAltitude)
        XCTAssertNil(r.verticalAccuracy)
        XCTAssertNil(r.speed)
        XCTAssertNil(r.speedAccuracy)
        XCTAssertNil(r.course)
        XCTAssertNil(r.courseAccuracy)
        XCTAssertEqual(r.timestamp, 1_796_214_919_500_000)
        XCTAssertEqual(r.mode, .twoD)
        XCTAssertNotNil(r.horizontalAccuracy)
        XCTAssertNotEqual(r.latitude, fix.latitude)
    }

    func testDatelineAndPoles() {
        for size in [1.0, 1000, 5000, 20_000, 500_000, 20_000_000] {
            let grid = ReducedGrid(cellSize: size)
            let positions: [(Double, Double)] = [
                (0, 180), (0, -180), (0, 179.999_999), (0, -179.999_999), (10, 540), (10, -540), (-33, 359.5),
                (90, 0), (90, 123), (-90, -45), (89.999_99, 179.9), (-89.999_99, -179.9), (89.99, 0), (-89.9, 90),
                (91, 0), (-1000, 5),   // out of range: clamped, no crash
            ]
            for (lat, lon) in positions {
                let r = grid.reduce(point(lat, lon))
                XCTAssertTrue(r.latitude.isFinite && r.longitude.isFinite, "\(size): \(lat),\(lon)")
                XCTAssertTrue((-90...90).contains(r.latitude), "\(size): \(lat),\(lon) -> \(r.latitude)")
                XCTAssertTrue((-180...180).contains(r.longitude), "\(size): \(lat),\(lon) -> \(r.longitude)")
                XCTAssertTrue(r.horizontalAccuracy!.isFinite)
                if (-90...90).contains(lat) {
                    XCTAssertLessThanOrEqual(r.distance(to: point(lat, lon)), r.horizontalAccuracy! * (1 + 1e-9),
                                             "\(size): \(lat),\(lon)")
                }
            }
            // 180 and -180 are the same meridian: the same cell.
            XCTAssertEqual(grid.reduce(point(12, 180)), grid.reduce(point(12, -180)))
            XCTAssertEqual(grid.reduce(point(12, 190)), grid.reduce(point(12, -170)))
        }
        // Cells on either side of the dateline are distinct and do not straddle it.
        let grid = ReducedGrid(cellSize: 5000)
        let east = grid.cell(latitude: 0, longitude: 179.999)
        let west = grid.cell(latitude: 0, longitude: -179.999)
        XCTAssertEqual(east.east, 180)
        XCTAssertEqual(west.west, -180)
        XCTAssertNotEqual(east.column, west.column)
        // Polar bands have few cells; the cap's band never reaches past the pole.
        let top = grid.cell(latitude: 90, longitude: 0)
        XCTAssertEqual(top.north, 90)
        XCTAssertLessThan(top.columns, 10)
        XCTAssertEqual(grid.cell(latitude: -90, longitude: 0).south, -90)
        // Non-finite input does not trap.
        _ = grid.reduce(point(.nan, .nan))
        _ = grid.reduce(point(.infinity, -.infinity))
        _ = ReducedGrid(cellSize: .nan).reduce(point(1, 1))
        _ = ReducedGrid(cellSize: -5).reduce(point(1, 1))
    }

    func testCellSizes() {
        for size in [500.0, 1000, 5000, 20_000, 100_000] {
            let grid = ReducedGrid(cellSize: size)
            for lat in [-70.0, -45, 0, 30, 48.1, 65] {
                let c = grid.cell(latitude: lat, longitude: 11.5)
                let centre = point(c.centreLatitude, c.centreLongitude)
                // Cell height and width (at the centre latitude) are at most the size and not much less.
                let height = point(c.south, c.centreLongitude).distance(to: point(c.north, c.centreLongitude))
                let width = point(c.centreLatitude, c.west).distance(to: point(c.centreLatitude, c.east))
                XCTAssertLessThanOrEqual(height, size * (1 + 1e-9))
                XCTAssertGreaterThan(height, size * 0.95)
                XCTAssertLessThanOrEqual(width, size * 1.001, "size \(size) lat \(lat)")
                XCTAssertGreaterThan(width, size * 0.9, "size \(size) lat \(lat)")
                // The centre of the neighbouring cell to the east is about one size away.
                let next = grid.reduce(point(c.centreLatitude, c.east + 1e-9))
                XCTAssertEqual(centre.distance(to: next), width, accuracy: size * 0.01)
            }
            // Bigger cells, bigger radius.
            let h = grid.reduce(point(48.1, 11.5)).horizontalAccuracy!
            XCTAssertEqual(h, size * 2.0.squareRoot() / 2, accuracy: size * 0.02)
        }
        XCTAssertNotEqual(ReducedGrid(cellSize: 1000).reduce(point(48.1, 11.5)),
                          ReducedGrid(cellSize: 5000).reduce(point(48.1, 11.5)))
    }
}
