import GeoCore

/// The values of one gpsd TPV report that become a `Fix`, copied out of libgps's
/// `gps_fix_t` (API 11). Kept apart from libgps so the mapping can be tested
/// without a gpsd. Unknown values are NaN, as libgps leaves them.
public struct TPVFields: Equatable, Sendable {
    /// `fix.mode`: 0 not seen, 1 no fix, 2 2D, 3 3D.
    public var mode: Int32
    public var latitude: Double
    public var longitude: Double
    /// `fix.altMSL`, metres above mean sea level.
    public var altMSL: Double
    /// `fix.altHAE`, metres above the WGS84 ellipsoid.
    public var altHAE: Double
    public var eph: Double
    public var epx: Double
    public var epy: Double
    public var epv: Double
    public var speed: Double
    public var eps: Double
    public var track: Double
    public var epd: Double
    /// `fix.time.tv_sec`; 0 (with `timeNanoseconds` 0) means no time.
    public var timeSeconds: Int
    /// `fix.time.tv_nsec`.
    public var timeNanoseconds: Int

    public init(mode: Int32, latitude: Double = .nan, longitude: Double = .nan,
                altMSL: Double = .nan, altHAE: Double = .nan,
                eph: Double = .nan, epx: Double = .nan, epy: Double = .nan, epv: Double = .nan,
                speed: Double = .nan, eps: Double = .nan, track: Double = .nan, epd: Double = .nan,
                timeSeconds: Int = 0, timeNanoseconds: Int = 0) {
        self.mode = mode
        self.latitude = latitude
        self.longitude = longitude
        self.altMSL = altMSL
        self.altHAE = altHAE
        self.eph = eph
        self.epx = epx
        self.epy = epy
        self.epv = epv
        self.speed = speed
        self.eps = eps
        self.track = track
        self.epd = epd
        self.timeSeconds = timeSeconds
        self.timeNanoseconds = timeNanoseconds
    }
}

extension Fix {
    /// Turns one TPV report into a `Fix`, or `nil` when it is not a position fix.
    ///
    /// Rules (the choices are deliberate; the daemon and docs/dbus-api.md rely on them):
    /// - **A fix** needs `mode` >= 2 (`MODE_2D`) and a finite latitude in [-90, 90] and
    ///   longitude in [-180, 180]. Mode 0/1 (not seen / no fix) gives `nil`. Mode 2 is
    ///   `.twoD`, 3 (or higher) `.threeD`.
    /// - **Never NaN**: every optional value is kept only when finite; accuracies also
    ///   only when >= 0, and speed only when >= 0.
    /// - **Altitude**: `altMSL` → `altitude`, `altHAE` → `ellipsoidalAltitude`. There is
    ///   no fallback to the deprecated `fix.altitude`: in API 11 it is "undefined" and
    ///   may be either reference, which could be off by the geoid separation (up to
    ///   ~100 m). In a 2D fix the altitudes and `epv` are dropped: gpsd documents them
    ///   valid only in mode 3, and a 2D solution's height is a held or stale value.
    /// - **Horizontal accuracy**: `eph` when finite (gpsd's own horizontal estimate;
    ///   with NMEA it comes from HDOP). Otherwise, when both `epx` and `epy` are finite,
    ///   `hypot(epx, epy)`, i.e. the radial (2D, DRMS-like) combination of the two
    ///   per-axis errors, which is never smaller than either one. With only one of the
    ///   two there is no horizontal estimate (libgps itself needs both for `HERR_SET`).
    /// - `epv` → `verticalAccuracy`, `speed`/`eps` → `speed`/`speedAccuracy` (m/s),
    ///   `track`/`epd` → `course`/`courseAccuracy` (degrees; the course is wrapped into
    ///   [0, 360)).
    /// - **Time**: `fix.time` → microseconds since the epoch, rounded to the nearest
    ///   microsecond (gpsd carries ms precision through a text → double → ns path, so
    ///   truncating could turn .500 s into .499999 s). A time of 0 (or negative, or
    ///   with nanoseconds out of range) means the receiver gave none: **the fix is
    ///   still a fix, with `timestamp` absent** (e.g. the first TPV after a GGA that
    ///   carries no date). The daemon records its own arrival time separately for
    ///   `max-age`, so nothing is invented here.
    public init?(tpv t: TPVFields) {
        guard t.mode >= 2 else { return nil }
        guard t.latitude.isFinite, t.longitude.isFinite,
              t.latitude >= -90, t.latitude <= 90,
              t.longitude >= -180, t.longitude <= 180 else { return nil }
        let mode: FixMode = t.mode >= 3 ? .threeD : .twoD

        func finite(_ x: Double) -> Double? { x.isFinite ? x : nil }
        func nonNegative(_ x: Double) -> Double? { x.isFinite && x >= 0 ? x : nil }

        var horizontal = nonNegative(t.eph)
        if horizontal == nil, let x = nonNegative(t.epx), let y = nonNegative(t.epy) {
            horizontal = hypot2(x, y)
        }

        var course = finite(t.track)
        if let c = course, c < 0 || c >= 360 {
            let r = c.truncatingRemainder(dividingBy: 360)
            course = r < 0 ? r + 360 : r
            if course == 360 { course = 0 }
        }

        let threeD = mode == .threeD
        self.init(latitude: t.latitude, longitude: t.longitude, mode: mode,
                  altitude: threeD ? finite(t.altMSL) : nil,
                  ellipsoidalAltitude: threeD ? finite(t.altHAE) : nil,
                  horizontalAccuracy: horizontal,
                  verticalAccuracy: threeD ? nonNegative(t.epv) : nil,
                  speed: nonNegative(t.speed),
                  speedAccuracy: nonNegative(t.eps),
                  course: course,
                  courseAccuracy: nonNegative(t.epd),
                  timestamp: TPVFields.microseconds(seconds: t.timeSeconds, nanoseconds: t.timeNanoseconds))
    }
}

extension TPVFields {
    /// A timespec as microseconds since the epoch, rounded to the nearest µs; `nil`
    /// for "no time" (0), times before the epoch and malformed nanoseconds.
    public static func microseconds(seconds: Int, nanoseconds: Int) -> UInt64? {
        guard seconds > 0 || (seconds == 0 && nanoseconds > 0) else { return nil }
        guard nanoseconds >= 0, nanoseconds < 1_000_000_000 else { return nil }
        let (us, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000)
        guard !overflow else { return nil }
        return us + UInt64((nanoseconds + 500) / 1000)
    }
}

/// sqrt(x² + y²) without overflow, for non-negative finite x and y.
private func hypot2(_ x: Double, _ y: Double) -> Double {
    let big = max(x, y), small = min(x, y)
    if big == 0 { return 0 }
    let r = small / big
    return big * (1 + r * r).squareRoot()
}
