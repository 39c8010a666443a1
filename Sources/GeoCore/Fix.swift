/// One position fix, as docs/dbus-api.md's "Location dictionary" describes it.
///
/// Every value the receiver did not report is `nil` (sent as an absent key, never
/// as NaN). Only latitude, longitude and the fix mode are always present.
public struct Fix: Equatable, Sendable {
    /// Degrees north, WGS84, in [-90, 90].
    public var latitude: Double
    /// Degrees east, WGS84, in [-180, 180].
    public var longitude: Double
    /// Metres above mean sea level (`altitude`).
    public var altitude: Double?
    /// Metres above the WGS84 ellipsoid (`ellipsoidal-altitude`).
    public var ellipsoidalAltitude: Double?
    /// Metres, as gpsd estimates it (`horizontal-accuracy`).
    public var horizontalAccuracy: Double?
    /// Metres, as gpsd estimates it (`vertical-accuracy`).
    public var verticalAccuracy: Double?
    /// Speed over ground in m/s (`speed`).
    public var speed: Double?
    /// m/s (`speed-accuracy`).
    public var speedAccuracy: Double?
    /// Course over ground in degrees from true north (`course`).
    public var course: Double?
    /// Degrees (`course-accuracy`).
    public var courseAccuracy: Double?
    /// The receiver's time of the fix, in microseconds since the Unix epoch
    /// (`timestamp`). `nil` when the receiver gave no time with the fix.
    public var timestamp: UInt64?
    /// 2D or 3D (`fix`).
    public var mode: FixMode
    /// Where the position came from (`source`).
    public var source: PositionSource

    /// A fix at `latitude`, `longitude` (degrees, WGS84); every other value is
    /// optional and absent by default.
    public init(latitude: Double, longitude: Double, mode: FixMode,
                altitude: Double? = nil, ellipsoidalAltitude: Double? = nil,
                horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
                speed: Double? = nil, speedAccuracy: Double? = nil,
                course: Double? = nil, courseAccuracy: Double? = nil,
                timestamp: UInt64? = nil, source: PositionSource = .gps) {
        self.latitude = latitude
        self.longitude = longitude
        self.mode = mode
        self.altitude = altitude
        self.ellipsoidalAltitude = ellipsoidalAltitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.speedAccuracy = speedAccuracy
        self.course = course
        self.courseAccuracy = courseAccuracy
        self.timestamp = timestamp
        self.source = source
    }

    /// Great-circle distance in metres to `other` (haversine on a sphere of the
    /// WGS84 mean radius, 6 371 008.8 m). Good to ~0.5 % against the ellipsoid,
    /// plenty for a distance filter; altitude is ignored.
    public func distance(to other: Fix) -> Double {
        GeoMath.haversine(lat1: latitude, lon1: longitude, lat2: other.latitude, lon2: other.longitude)
    }
}

/// Where a fix came from (the location dictionary's `source`), best first.
/// The location core chooses among them (`SourceChoice`); the daemon's sources
/// produce them; nothing else names one.
public enum PositionSource: String, Sendable, CaseIterable, Comparable {
    /// A receiver, through gpsd.
    case gps
    /// A lookup of the visible Wi-Fi access points.
    case wifi
    /// The admin's static position file.
    case `static`

    /// Rank in the order above: a GPS fix is better than any other.
    var rank: Int {
        switch self {
        case .gps: return 0
        case .wifi: return 1
        case .static: return 2
        }
    }

    /// This source's bit in a set of sources kept as a byte.
    var bit: UInt8 { 1 << UInt8(rank) }

    public static func < (a: PositionSource, b: PositionSource) -> Bool { a.rank < b.rank }
}

/// The fix's dimension (`fix` key: `2d` or `3d`).
public enum FixMode: String, Sendable, CaseIterable {
    case twoD = "2d"
    case threeD = "3d"
}

/// The little trigonometry GeoCore needs, in pure Swift.
///
/// GeoCore imports nothing (not even Glibc), and the standard library has no
/// `sin`/`cos`/`atan`, so they are written here: argument reduction plus Taylor
/// series on a small interval, accurate to a few ulp for the arguments used
/// (|x| of a few π). Deterministic: the same input always gives the same output,
/// which the reduced-accuracy grid relies on. Tests compare them with libm.
enum GeoMath {
    /// WGS84 mean radius R1 = (2a + b) / 3, metres.
    static let earthRadius = 6_371_008.8
    /// Metres per degree of arc on the mean sphere (≈ 111 195 m).
    static let metresPerDegree = earthRadius * Double.pi / 180
    static let radiansPerDegree = Double.pi / 180

    /// Haversine distance in metres between two points given in degrees.
    static func haversine(lat1: Double, lon1: Double, lat2: Double, lon2: Double) -> Double {
        let phi1 = lat1 * radiansPerDegree, phi2 = lat2 * radiansPerDegree
        let dPhi = (lat2 - lat1) * radiansPerDegree
        // Reduce the longitude difference to [-180, 180] so a dateline crossing
        // is short, and so sin() gets a small argument.
        let dLon = normalizedLongitude(lon2 - lon1)
        let dLambda = dLon * radiansPerDegree
        let sPhi = sin(dPhi / 2), sLambda = sin(dLambda / 2)
        var a = sPhi * sPhi + cos(phi1) * cos(phi2) * sLambda * sLambda
        a = min(max(a, 0), 1)
        let c = 2 * atan2Positive(a.squareRoot(), (1 - a).squareRoot())
        return earthRadius * c
    }

    /// `lon` moved into [-180, 180) by whole turns.
    static func normalizedLongitude(_ lon: Double) -> Double {
        guard lon.isFinite else { return lon }
        if lon >= -180 && lon < 180 { return lon }
        var r = lon - 360 * ((lon + 180) / 360).rounded(.down)
        if r >= 180 { r -= 360 }   // rounding at the upper edge
        if r < -180 { r += 360 }
        return r
    }

    // π/2 in two parts (Cody–Waite, fdlibm's pio2_1/pio2_1t): the high part has
    // 33 bits, so k·pio2Hi is exact for the small k used here.
    private static let pio2Hi = 1.57079632673412561417e+00
    private static let pio2Lo = 6.07710050650619224932e-11

    /// Returns r in [-π/4, π/4] and the quadrant k mod 4 with x = k·π/2 + r.
    private static func reduce(_ x: Double) -> (r: Double, quadrant: Int) {
        let k = (x / (Double.pi / 2)).rounded(.toNearestOrEven)
        let r = (x - k * pio2Hi) - k * pio2Lo
        // k is small for our inputs; wrap safely for big ones.
        let q = Int(k.truncatingRemainder(dividingBy: 4))
        return (r, (q + 4) & 3)
    }

    /// Taylor series of sin on [-π/4, π/4]; the 1/19! term is below 1e-19.
    private static func sinKernel(_ r: Double) -> Double {
        let z = r * r
        let p = 1.0 / 6 - z * (1.0 / 120 - z * (1.0 / 5040 - z * (1.0 / 362_880
            - z * (1.0 / 39_916_800 - z * (1.0 / 6_227_020_800 - z * (1.0 / 1_307_674_368_000
            - z * (1.0 / 355_687_428_096_000 - z * (1.0 / 121_645_100_408_832_000))))))))
        return r - r * z * p
    }

    /// Taylor series of cos on [-π/4, π/4]; the 1/20! term is below 1e-20.
    private static func cosKernel(_ r: Double) -> Double {
        let z = r * r
        let p = 1.0 / 24 - z * (1.0 / 720 - z * (1.0 / 40_320 - z * (1.0 / 3_628_800
            - z * (1.0 / 479_001_600 - z * (1.0 / 87_178_291_200 - z * (1.0 / 20_922_789_888_000
            - z * (1.0 / 6_402_373_705_728_000 - z * (1.0 / 2_432_902_008_176_640_000))))))))
        return 1 - z / 2 + z * z * p
    }

    static func sin(_ x: Double) -> Double {
        guard x.isFinite else { return .nan }
        let (r, q) = reduce(x)
        switch q {
        case 0: return sinKernel(r)
        case 1: return cosKernel(r)
        case 2: return -sinKernel(r)
        default: return -cosKernel(r)
        }
    }

    static func cos(_ x: Double) -> Double {
        guard x.isFinite else { return .nan }
        let (r, q) = reduce(x)
        switch q {
        case 0: return cosKernel(r)
        case 1: return -sinKernel(r)
        case 2: return -cosKernel(r)
        default: return sinKernel(r)
        }
    }

    private static let sqrt3 = 1.7320508075688772935
    private static let tanPi12 = 0.26794919243112270647   // tan(π/12) = 2 - √3

    /// atan(x) for x >= 0 (finite or +∞).
    static func atanNonNegative(_ x: Double) -> Double {
        if x.isInfinite { return Double.pi / 2 }
        if x > 1 { return Double.pi / 2 - atanNonNegative(1 / x) }
        if x > tanPi12 {
            // atan(x) = π/6 + atan((x√3 - 1) / (x + √3)); the new argument is in [-tan(π/12), tan(π/12)].
            return Double.pi / 6 + atanSmall((x * sqrt3 - 1) / (x + sqrt3))
        }
        return atanSmall(x)
    }

    /// Taylor series of atan for |t| <= tan(π/12) ≈ 0.268: 16 terms leave < 1e-19.
    private static func atanSmall(_ t: Double) -> Double {
        let z = t * t
        var s = 0.0
        var n = 33.0
        while n >= 3 {   // Horner from the smallest term: 1/33 … 1/3 with alternating signs
            s = 1 / n - z * s
            n -= 2
        }
        return t - t * z * s
    }

    /// atan2(y, x) for y >= 0 and x >= 0, the only quadrant haversine needs.
    static func atan2Positive(_ y: Double, _ x: Double) -> Double {
        if y == 0 { return 0 }
        if x == 0 { return Double.pi / 2 }
        return y <= x ? atanNonNegative(y / x) : Double.pi / 2 - atanNonNegative(x / y)
    }
}
