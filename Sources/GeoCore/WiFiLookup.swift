/// The daemon's conversation with the network helper, encoder beside decoder
/// (docs/dbus-api.md "Sources", "Wi-Fi"): what the daemon tells it (visible
/// access points: a BSSID, a signal, an age, nothing else) and what it
/// answers. The helper's side towards the server is GeoGeolocate's.

/// One access point as it is looked up.
public struct AccessPoint: Equatable, Sendable {
    /// Lowercase `aa:bb:cc:dd:ee:ff`.
    public var bssid: String
    /// Signal in dBm, -120 to 0.
    public var signal: Int
    /// Milliseconds since it was last seen in a scan.
    public var ageMilliseconds: UInt32

    public init(bssid: String, signal: Int, ageMilliseconds: UInt32) {
        self.bssid = bssid
        self.signal = signal
        self.ageMilliseconds = ageMilliseconds
    }

    /// A BSSID as the lookup takes it: six hex octets with colons, lowercased;
    /// nil for anything else, for the all-zero and broadcast addresses, and
    /// for locally administered ones (randomized or phone hotspots, which move
    /// with their owner and say nothing of where this machine is).
    public static func bssid(_ text: String) -> String? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var octets: [UInt8] = []
        for p in parts {
            guard p.utf8.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            octets.append(v)
        }
        guard octets.contains(where: { $0 != 0 }), !octets.allSatisfy({ $0 == 0xFF }), octets[0] & 0x02 == 0 else {
            return nil
        }
        return text.lowercased()
    }
}

/// The daemon's conversation with the network helper over its unix socket,
/// one line each way per lookup:
///
///     lookup BSSID,DBM,AGE_MS BSSID,DBM,AGE_MS …\n
///     position LAT LON ACCURACY\n | notfound\n | retry SECONDS REASON\n | error REASON\n
public enum WiFiLookupWire {
    /// Access points in one lookup, at most (the strongest are kept).
    public static let maxAccessPoints = 64
    /// Longest request line (64 entries of at most 31 bytes, and the word).
    public static let maxRequestBytes = 8 + maxAccessPoints * 32
    /// Longest answer line.
    public static let maxAnswerBytes = 512

    public static func encodeRequest(_ aps: [AccessPoint]) -> [UInt8] {
        var line = "lookup"
        for ap in aps.prefix(maxAccessPoints) { line += " \(ap.bssid),\(ap.signal),\(ap.ageMilliseconds)" }
        return Array((line + "\n").utf8)
    }

    /// A request line without its newline; throws a reason for the helper's `error` answer.
    public static func decodeRequest(_ line: [UInt8]) throws(WiFiLookupError) -> [AccessPoint] {
        guard line.count <= maxRequestBytes else { throw .malformed("request longer than \(maxRequestBytes) bytes") }
        let words = String(decoding: line, as: UTF8.self).split(separator: " ")
        guard words.first == "lookup" else { throw .malformed("expected 'lookup'") }
        guard words.count - 1 <= maxAccessPoints else { throw .malformed("more than \(maxAccessPoints) access points") }
        return try words.dropFirst().map { (w) throws(WiFiLookupError) -> AccessPoint in
            let f = w.split(separator: ",", omittingEmptySubsequences: false)
            guard f.count == 3, let bssid = AccessPoint.bssid(String(f[0])), let signal = Int(f[1]),
                  (-120...0).contains(signal), let age = UInt32(f[2]) else {
                throw .malformed("bad access point '\(w.prefix(40))'")
            }
            return AccessPoint(bssid: bssid, signal: signal, ageMilliseconds: age)
        }
    }

    /// What the helper answers.
    public enum Answer: Equatable, Sendable {
        /// Degrees and metres, as the server said.
        case position(latitude: Double, longitude: Double, accuracy: Double)
        /// The server knows none of these access points.
        case notFound
        /// Not before this many seconds (the server's `Retry-After`, or the
        /// helper's backoff after an error); the reason for the log.
        case retry(after: Double, String)
        /// The lookup failed; why, for the log and the caller's error.
        case failed(String)
    }

    public static func encodeAnswer(_ a: Answer) -> [UInt8] {
        let line: String
        switch a {
        case .position(let la, let lo, let acc): line = "position \(la) \(lo) \(acc)"
        case .notFound: line = "notfound"
        case .retry(let after, let why): line = "retry \(after) \(oneLine(why))"
        case .failed(let why): line = "error \(oneLine(why))"
        }
        return Array(String(line.utf8.prefix(maxAnswerBytes - 1))!.utf8) + [0x0A]
    }

    /// An answer line without its newline.
    public static func decodeAnswer(_ line: [UInt8]) throws(WiFiLookupError) -> Answer {
        guard line.count < maxAnswerBytes else { throw .malformed("answer longer than \(maxAnswerBytes) bytes") }
        let text = String(decoding: line, as: UTF8.self)
        let words = text.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        switch words.first {
        case "position":
            guard words.count == 4, let la = Double(words[1]), let lo = Double(words[2]), let acc = Double(words[3]),
                  (-90...90).contains(la), (-180...180).contains(lo), acc.isFinite, acc > 0 else {
                throw .malformed("bad position answer")
            }
            return .position(latitude: la, longitude: lo, accuracy: acc)
        case "notfound" where words.count == 1:
            return .notFound
        case "retry":
            let rest = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard rest.count >= 2, let after = Double(rest[1]), after.isFinite, after >= 0 else {
                throw .malformed("bad retry answer")
            }
            return .retry(after: min(after, 86_400), rest.count > 2 ? String(rest[2]) : "")
        case "error":
            return .failed(String(text.dropFirst(6)))
        default:
            throw .malformed("unknown answer")
        }
    }

    /// Text safe on one line: control characters become spaces.
    static func oneLine(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
    }
}

public enum WiFiLookupError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    public var description: String {
        switch self {
        case .malformed(let why): return why
        }
    }
}
