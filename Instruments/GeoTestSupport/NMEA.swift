import Foundation

/// Builders and parsers for the NMEA 0183 sentences the tests feed gpsd.
///
/// Sentences are returned without line terminator (`GpsdInstance.send`
/// appends CRLF). Talker is `GP`. Latitude/longitude are formatted
/// `ddmm.mmmmm` / `dddmm.mmmmm` (five decimals of minutes, ~2 cm).
public enum NMEA {
    /// UTC time of day; `s` may carry a fraction (two decimals are written).
    public typealias Time = (h: Int, m: Int, s: Double)
    /// UTC date; `y` is the full year (only `y % 100` is written).
    public typealias DayDate = (d: Int, m: Int, y: Int)

    /// The checksum of a sentence body (the bytes between `$` and `*`):
    /// XOR of all bytes, as two upper-case hex digits.
    public static func checksum(_ body: String) -> String {
        var cs: UInt8 = 0
        for b in body.utf8 { cs ^= b }
        return String(format: "%02X", cs)
    }

    /// `$BODY*CS`.
    public static func sentence(_ body: String) -> String { "$\(body)*\(checksum(body))" }

    /// True if `sentence` is `$BODY*CS` (optionally followed by CR/LF) with the
    /// right checksum.
    public static func isValid(_ sentence: String) -> Bool {
        let s = sentence.trimmingCharacters(in: .whitespacesAndNewlines)
        guard s.hasPrefix("$"), let star = s.lastIndex(of: "*") else { return false }
        let body = String(s[s.index(after: s.startIndex)..<star])
        let given = String(s[s.index(after: star)...])
        return given.uppercased() == checksum(body)
    }

    /// A GGA (fix data) sentence.
    /// - Parameters: `quality` 0 = no fix, 1 = GPS, 2 = DGPS; `altitude` above
    ///   mean sea level and `geoidSeparation` in metres.
    public static func gga(time: Time, lat: Double, lon: Double, quality: Int = 1, satellites: Int = 8,
                           hdop: Double = 0.9, altitude: Double, geoidSeparation: Double = 47.0) -> String {
        let (la, ns) = formatLat(lat)
        let (lo, ew) = formatLon(lon)
        return sentence("GPGGA,\(formatTime(time)),\(la),\(ns),\(lo),\(ew),\(quality),"
            + String(format: "%02d,%.1f,%.1f,M,%.1f,M,,", satellites, hdop, altitude, geoidSeparation))
    }

    /// An RMC (recommended minimum) sentence. `valid: false` writes status `V`
    /// and mode `N` (receiver warning, no fix).
    public static func rmc(time: Time, date: DayDate, lat: Double, lon: Double, speedKnots: Double,
                           course: Double, valid: Bool = true) -> String {
        let (la, ns) = formatLat(lat)
        let (lo, ew) = formatLon(lon)
        let d = String(format: "%02d%02d%02d", date.d, date.m, ((date.y % 100) + 100) % 100)
        return sentence("GPRMC,\(formatTime(time)),\(valid ? "A" : "V"),\(la),\(ns),\(lo),\(ew),"
            + String(format: "%.2f,%.1f,", speedKnots, course) + "\(d),,,\(valid ? "A" : "N")")
    }

    /// A GSA (DOP and active satellites) sentence: `mode` 1 = no fix, 2 = 2D,
    /// 3 = 3D; up to 12 PRNs (the rest blank).
    public static func gsa(mode: Int = 3, prns: [Int], pdop: Double, hdop: Double, vdop: Double) -> String {
        let used = prns.prefix(12).map { String(format: "%02d", $0) }
        let fields = used + Array(repeating: "", count: 12 - used.count)
        return sentence("GPGSA,A,\(mode),\(fields.joined(separator: ",")),"
            + String(format: "%.1f,%.1f,%.1f", pdop, hdop, vdop))
    }

    /// One second of a receiver's output at `date` (UTC): [GGA, GSA, RMC].
    public static func epoch(at date: Date, lat: Double, lon: Double, altitude: Double,
                             speedKnots: Double, course: Double) -> [String] {
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = TimeZone(identifier: "UTC")!
        let c = cal.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        return epoch(at: c, lat: lat, lon: lon, altitude: altitude, speedKnots: speedKnots, course: course)
    }

    /// One second of a receiver's output at UTC date components (year, month,
    /// day, hour, minute, second, optional nanosecond): [GGA, GSA, RMC].
    public static func epoch(at date: DateComponents, lat: Double, lon: Double, altitude: Double,
                             speedKnots: Double, course: Double) -> [String] {
        let secs = Double(date.second ?? 0) + Double(date.nanosecond ?? 0) / 1e9
        let t: Time = (date.hour ?? 0, date.minute ?? 0, secs)
        let d: DayDate = (date.day ?? 1, date.month ?? 1, date.year ?? 2000)
        return [
            gga(time: t, lat: lat, lon: lon, altitude: altitude),
            gsa(prns: [2, 5, 7, 9, 13, 15, 19, 30], pdop: 1.6, hdop: 0.9, vdop: 1.3),
            rmc(time: t, date: d, lat: lat, lon: lon, speedKnots: speedKnots, course: course),
        ]
    }

    /// Errors from `loadTrack`.
    public struct TrackError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads a track file (one sentence per line, e.g. `data/track.nmea`) and
    /// groups it into epochs: a GGA or RMC whose time field differs from the
    /// current epoch's time starts a new epoch; other sentences (GSA, ...)
    /// join the current one. Blank lines and `#` comments are skipped.
    /// - Throws: `TrackError` for an unreadable file or a bad checksum.
    public static func loadTrack(path: String) throws -> [[String]] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TrackError(description: "cannot read \(path)")
        }
        var epochs: [[String]] = []
        var current: [String] = []
        var currentTime: String?
        for (n, raw) in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard isValid(line) else {
                throw TrackError(description: "\(path):\(n + 1): bad NMEA sentence or checksum: \(line)")
            }
            if let t = timeField(line) {
                if let ct = currentTime, ct != t, !current.isEmpty {
                    epochs.append(current)
                    current = []
                }
                currentTime = t
            }
            current.append(line)
        }
        if !current.isEmpty { epochs.append(current) }
        return epochs
    }

    /// The sentence type without talker, e.g. `GGA` for `$GPGGA,...`.
    public static func type(of sentence: String) -> String {
        guard sentence.hasPrefix("$"), let comma = sentence.firstIndex(of: ",") else { return "" }
        let tag = sentence[sentence.index(after: sentence.startIndex)..<comma]
        return String(tag.suffix(3))
    }

    /// The UTC time field of a GGA or RMC sentence, nil for other types.
    static func timeField(_ sentence: String) -> String? {
        let t = type(of: sentence)
        guard t == "GGA" || t == "RMC" else { return nil }
        let fields = sentence.split(separator: ",", omittingEmptySubsequences: false)
        return fields.count > 1 ? String(fields[1]) : nil
    }

    /// The same sentence with its time (GGA, RMC) and date (RMC) replaced by
    /// `date` (UTC) and the checksum recomputed; other sentences unchanged.
    /// Lets a recorded track replay as a live receiver (`nmea-replay --now`).
    public static func retime(_ sentence: String, to date: Date) -> String {
        let t = type(of: sentence)
        guard t == "GGA" || t == "RMC", sentence.hasPrefix("$"),
              let star = sentence.lastIndex(of: "*") else { return sentence }
        var fields = sentence[sentence.index(after: sentence.startIndex)..<star]
            .split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = TimeZone(identifier: "UTC")!
        let c = cal.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let secs = Double(c.second ?? 0) + Double(c.nanosecond ?? 0) / 1e9
        if fields.count > 1 { fields[1] = formatTime((c.hour ?? 0, c.minute ?? 0, secs)) }
        if t == "RMC", fields.count > 9 {
            fields[9] = String(format: "%02d%02d%02d", c.day ?? 1, c.month ?? 1, (c.year ?? 2000) % 100)
        }
        return NMEA.sentence(fields.joined(separator: ","))
    }

    // MARK: formatting

    /// `hhmmss.ss`, hundredths truncated.
    public static func formatTime(_ t: Time) -> String {
        // Truncate to hundredths so 59.999 never prints as 60.00.
        let centis = Int((t.s * 100).rounded(.down))
        return String(format: "%02d%02d%02d.%02d", t.h, t.m, centis / 100, centis % 100)
    }

    /// `ddmm.mmmmm` and N/S.
    public static func formatLat(_ lat: Double) -> (String, String) {
        let (deg, min) = degMin(abs(lat))
        return (String(format: "%02d%08.5f", deg, min), lat < 0 ? "S" : "N")
    }

    /// `dddmm.mmmmm` and E/W.
    public static func formatLon(_ lon: Double) -> (String, String) {
        let (deg, min) = degMin(abs(lon))
        return (String(format: "%03d%08.5f", deg, min), lon < 0 ? "W" : "E")
    }

    /// Whole degrees and minutes rounded to 5 decimals, carrying 60' into a degree.
    static func degMin(_ v: Double) -> (Int, Double) {
        var deg = Int(v)
        var min = ((v - Double(deg)) * 60 * 100_000).rounded() / 100_000
        if min >= 60 { deg += 1; min = 0 }
        return (deg, min)
    }

    /// Parses `ddmm.mmmm` + hemisphere (or `dddmm.mmmm`) into signed degrees.
    public static func parseCoordinate(_ field: String, hemisphere: String) -> Double? {
        let dot = field.firstIndex(of: ".") ?? field.endIndex
        let degDigits = field.distance(from: field.startIndex, to: dot) - 2
        guard degDigits >= 1, let deg = Double(field.prefix(degDigits)),
              let min = Double(field.dropFirst(degDigits)) else { return nil }
        let v = deg + min / 60
        return (hemisphere == "S" || hemisphere == "W") ? -v : v
    }
}
