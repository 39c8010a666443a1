/// Which position a session gets, among the sources' latest fixes (GeoClue's
/// `gclue-locator.c`, "a master source that hides all individual sources"),
/// by one rule (docs/dbus-api.md, "Sources"):
///
/// - a fresh GPS fix (at most `gpsWait` old) is always the answer, and while
///   there is one no other source's fix goes out;
/// - another source answers only once GPS is *silent*: it was needed for
///   `gpsWait` seconds with no fix, gpsd cannot be reached, or GPS is off.
///   Silence lasts until the next GPS fix, so a machine without a receiver
///   waits `gpsWait` once, not at every request;
/// - among the other sources, the fix with the smaller accuracy radius wins,
///   ties going to the better kind (`PositionSource` order).
///
/// Pure: times are monotonic nanoseconds handed in.
struct SourceChoice {
    /// Seconds a GPS fix counts as fresh, and seconds GPS is waited for
    /// before another source may answer.
    let gpsWait: Double
    /// Whether a receiver is used at all (`[sources] gps`).
    let gpsEnabled: Bool

    /// The receiver's latest fix and when it came.
    private(set) var lastGPS: (fix: Fix, at: UInt64)?
    /// Each other source's position and when it came: a static one stands
    /// until withdrawn or replaced, a Wi-Fi one for `wifiLifetime`.
    private(set) var others: [PositionSource: (fix: Fix, at: UInt64)] = [:]
    /// Seconds a Wi-Fi position is served after its lookup (the machine may move).
    let wifiLifetime: Double
    /// GPS had its chance and gave nothing; cleared by a GPS fix.
    private(set) var gpsSilent: Bool

    init(gpsWait: Double, gpsEnabled: Bool, wifiLifetime: Double = 60) {
        self.gpsWait = gpsWait
        self.gpsEnabled = gpsEnabled
        self.wifiLifetime = wifiLifetime
        gpsSilent = !gpsEnabled
    }

    /// A GPS fix came at `now`: GPS speaks again.
    mutating func gpsFix(_ fix: Fix, at now: UInt64) {
        lastGPS = (fix, now)
        gpsSilent = false
    }

    /// GPS was waited for in vain, or cannot be reached.
    mutating func gpsWentSilent() { gpsSilent = true }

    /// Another source's position at `now`, or nil when it withdrew it.
    mutating func set(_ source: PositionSource, _ fix: Fix?, at now: UInt64) {
        others[source] = fix.map { ($0, now) }
    }

    /// Seconds since `source`'s position came, if it has one.
    func age(of source: PositionSource, now: UInt64) -> Double? {
        others[source].map { Double(now &- $0.at) / 1e9 }
    }

    /// A GPS fix younger than `seconds`.
    func gps(youngerThan seconds: Double, now: UInt64) -> Fix? {
        guard let last = lastGPS, Double(now &- last.at) / 1e9 < seconds else { return nil }
        return last.fix
    }

    /// The position another source may give now: nil while a fresh GPS fix
    /// is there or GPS has not had its chance.
    func fallback(now: UInt64) -> Fix? {
        guard gpsSilent, gps(youngerThan: gpsWait, now: now) == nil else { return nil }
        return others.values.lazy.filter { $0.fix.source != .wifi || Double(now &- $0.at) / 1e9 < self.wifiLifetime }
            .map(\.fix).min(by: Self.better)
    }

    /// Whether a waiting request can still hope for anything: GPS may yet
    /// speak, or another source has a position.
    var anySourceLeft: Bool { gpsEnabled || !others.isEmpty }

    /// `a` is a better position than `b`: the smaller radius (an unknown
    /// radius is the worst), then the better kind of source.
    static func better(_ a: Fix, _ b: Fix) -> Bool {
        let ra = a.horizontalAccuracy ?? .infinity, rb = b.horizontalAccuracy ?? .infinity
        return ra != rb ? ra < rb : a.source < b.source
    }
}
