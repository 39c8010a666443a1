import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A synthetic receiver for the location tests: NMEA epochs (GGA, GSA, RMC) at
/// strictly increasing UTC times on 2024-03-15, so gpsd reports every epoch as
/// a new fix and each fix can be recognised by its timestamp.
final class LocationFeed {
    /// 2024-03-15 00:00:00 UTC in days since the Unix epoch.
    static let day = 19797
    static let date: NMEA.DayDate = (15, 3, 2024)

    /// Time of the next epoch, in centiseconds since midnight UTC.
    var centis: Int
    /// Centiseconds the UTC time advances per epoch.
    var step: Int
    var latitude: Double
    var longitude: Double
    var altitude: Double? = 123.4
    var geoidSeparation = 47.0
    var speedKnots: Double? = 12.34
    var course: Double? = 56.7
    var hdop = 0.9

    /// Every epoch built so far: its timestamp (µs since the epoch) and position.
    private(set) var sent: [(timestamp: UInt64, latitude: Double, longitude: Double)] = []
    private(set) var sentTimestamps = Set<UInt64>()

    init(latitude: Double = 48.1173, longitude: Double = 11.516667,
         start: (h: Int, m: Int, s: Double) = (12, 35, 10.25), step: Int = 100) {
        self.latitude = latitude
        self.longitude = longitude
        self.centis = ((start.h * 60 + start.m) * 60) * 100 + Int((start.s * 100).rounded())
        self.step = step
    }

    /// Whether a position was fed, as a client prints or reads it back: NMEA
    /// carries 1/10000 of a minute, about 2e-6 degrees.
    func sentPosition(latitude: Double, longitude: Double) -> Bool {
        sent.contains { abs($0.latitude - latitude) < 2e-6 && abs($0.longitude - longitude) < 2e-6 }
    }

    /// The timestamp gpsd (and the daemon) should report for an epoch at `centis`.
    static func timestamp(centis: Int) -> UInt64 {
        UInt64(day) * 86_400_000_000 + UInt64(centis) * 10_000
    }

    var lastTimestamp: UInt64? { sent.last?.timestamp }

    /// The next epoch's sentences and its expected timestamp; advances the time.
    func next() -> (sentences: [String], timestamp: UInt64) {
        let c = centis
        centis += step
        let secCentis = c % 6000
        // A hair above the exact value so NMEA.formatTime's truncation to
        // hundredths cannot turn e.g. 19.29 into 19.28.
        let t: NMEA.Time = (c / 360_000, (c / 6000) % 60, Double(secCentis) / 100 + 1e-7)
        let (la, ns) = NMEA.formatLat(latitude)
        let (lo, ew) = NMEA.formatLon(longitude)
        let alt = altitude.map { String(format: "%.1f,M,%.1f,M", $0, geoidSeparation) } ?? ",M,,M"
        let gga = NMEA.sentence("GPGGA,\(NMEA.formatTime(t)),\(la),\(ns),\(lo),\(ew),1,08,"
                                + String(format: "%.1f,", hdop) + alt + ",,")
        let gsa = NMEA.gsa(prns: [2, 5, 7, 9, 13, 15, 19, 30], pdop: 1.6, hdop: hdop, vdop: 1.3)
        let d = String(format: "%02d%02d%02d", Self.date.d, Self.date.m, Self.date.y % 100)
        let rmc = NMEA.sentence("GPRMC,\(NMEA.formatTime(t)),A,\(la),\(ns),\(lo),\(ew),"
                                + (speedKnots.map { String(format: "%.2f", $0) } ?? "") + ","
                                + (course.map { String(format: "%.1f", $0) } ?? "") + ",\(d),,,A")
        let ts = Self.timestamp(centis: c)
        sent.append((ts, latitude, longitude))
        sentTimestamps.insert(ts)
        return ([gga, gsa, rmc], ts)
    }

    /// Builds and sends the next epoch to `gpsd`; returns its timestamp.
    @discardableResult
    func send(to gpsd: GpsdInstance) -> UInt64 {
        let e = next()
        gpsd.send(e.sentences)
        return e.timestamp
    }
}

/// Runs `action` every `interval` seconds on the test's PeerLoop while the test
/// pumps it (waiting for replies or signals), until `stop()`.
final class LoopTicker {
    private let loop: EventLoop
    private let interval: Double
    private let action: () -> Void
    private var token: EventLoop.Token?
    private(set) var running = false
    private(set) var ticks = 0

    init(loop: EventLoop, interval: Double, action: @escaping () -> Void) {
        self.loop = loop
        self.interval = interval
        self.action = action
    }

    /// Starts ticking; the first tick runs now.
    func start() {
        guard !running else { return }
        running = true
        tick()
    }

    func stop() {
        running = false
        if let t = token { loop.cancelTimer(t) }
        token = nil
    }

    private func tick() {
        guard running else { return }
        ticks += 1
        action()
        token = loop.schedule(after: interval) { [weak self] in self?.tick() }
    }

    deinit { stop() }
}

extension Message {
    /// The location a `LocationUpdated` signal carries.
    var location: Location? {
        member == LocationUpdatedSignal.member ? LocationBody.decode(arguments()) : nil
    }
}

extension Location {
    /// Every number of the fix that was reported: for checks that none is NaN or infinite.
    var numbers: [Double] {
        let f = fix
        return [f.latitude, f.longitude] + [f.altitude, f.ellipsoidalAltitude, f.horizontalAccuracy, f.verticalAccuracy,
                                            f.speed, f.speedAccuracy, f.course, f.courseAccuracy].compactMap { $0 }
    }
}

extension BusPeer {
    /// The locations of the `LocationUpdated` signals from index `from` on.
    func locations(from: Int = 0) -> [Location] {
        signals.dropFirst(from).compactMap { $0.location }
    }

    /// Index of the first signal named `member` at or after `from`, if any.
    func indexOfSignal(_ member: String, from: Int = 0) -> Int? {
        signals.indices.dropFirst(from).first { signals[$0].member == member }
    }

    /// Calls a client method; `done` runs from the reply's completion, i.e. at
    /// the exact point in this connection's message order where the reply is
    /// dispatched (every signal sent before it has been appended to `signals`).
    func geoCall(_ member: String, _ args: [DBusValue] = [], interface: String = GeoConsentAPI.interfaceName,
                 timeout: Double = 30,
                 done: @escaping (Result<[DBusValue], DBusError>, Int) -> Void) {
        do {
            let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                           interface: interface, member: member)
            try m.append(args)
            connection.call(m, timeout: timeout) { [unowned self] r in
                done(r.map { $0.arguments() }, self.signals.count)
            }
        } catch let e as DBusError {
            done(.failure(e), signals.count)
        } catch {
            done(.failure(.failed("\(error)")), signals.count)
        }
    }

    /// `RequestLocation`; options left out take the daemon's defaults (docs/dbus-api.md).
    func requestLocation(maxAge: Double? = nil, timeout: Double? = nil, callTimeout: Double = 40) -> PendingCall {
        let defaults = LocationOptions()
        return geoAsync("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: maxAge ?? defaults.maxAge,
                                                                                    timeout: timeout ?? defaults.timeout))],
                        timeout: callTimeout)
    }

    /// Switches location on or off for everyone (`Enabled`; root only).
    func setEnabled(_ value: Bool) -> Result<[DBusValue], DBusError> {
        geo("Set", [.string(GeoConsentAPI.interfaceName), .string(DaemonProperties.enabled), .variant(.bool(value))],
            interface: ObjectServer.properties)
    }
}

/// Nearest-rank percentile of `values` (sorted or not), `p` in [0, 100].
func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let s = values.sorted()
    let rank = Int((p / 100 * Double(s.count)).rounded(.up))
    return s[min(max(rank - 1, 0), s.count - 1)]
}

/// Metres between two points (haversine on the WGS84 mean sphere).
func metresBetween(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
    let r = 6_371_008.8, rad = Double.pi / 180
    let dPhi = (lat2 - lat1) * rad, dLambda = (lon2 - lon1) * rad
    let a = sin(dPhi / 2) * sin(dPhi / 2) + cos(lat1 * rad) * cos(lat2 * rad) * sin(dLambda / 2) * sin(dLambda / 2)
    return 2 * r * atan2(a.squareRoot(), (1 - a).squareRoot())
}

/// `(lat, lon)` moved `north` and `east` metres (small offsets, mean sphere).
func offset(_ lat: Double, _ lon: Double, north: Double, east: Double) -> (Double, Double) {
    let m = 6_371_008.8 * Double.pi / 180
    return (lat + north / m, lon + east / (m * cos(lat * Double.pi / 180)))
}

/// Monotonic seconds.
func secondsNow() -> Double { Double(EventLoop.monotonicNanos()) / 1e9 }
