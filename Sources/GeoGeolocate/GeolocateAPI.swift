import GeoCore

/// The ichnaea geolocate API (`POST /v1/geolocate`): only BSSIDs, signals and
/// ages are sent; IP and cell fallbacks are refused in the request itself.
public enum GeolocateAPI {
    /// The request body.
    public static func requestBody(_ aps: [AccessPoint]) -> [UInt8] {
        let list = JSONValue.array(aps.prefix(WiFiLookupWire.maxAccessPoints).map { ap in
            .object(["macAddress": .string(ap.bssid), "signalStrength": .number(Double(ap.signal)),
                     "age": .number(Double(ap.ageMilliseconds))])
        })
        let body = JSONValue.object(["considerIp": .bool(false),
                                     "fallbacks": .object(["ipf": .bool(false), "lacf": .bool(false)]),
                                     "wifiAccessPoints": list])
        return Array(body.text.utf8)
    }

    /// What a reply says, by its HTTP status and body.
    public enum Reply: Equatable, Sendable {
        case position(latitude: Double, longitude: Double, accuracy: Double)
        /// 404, ichnaea's `notFound`.
        case notFound
        /// 429: too many requests.
        case rateLimited
        /// 5xx.
        case serverError(Int)
        /// Any other status, or a body that is not the API's.
        case unusable(String)
    }

    public static func decode(status: Int, body: [UInt8]) -> Reply {
        switch status {
        case 200:
            let json: JSONValue
            do throws(JSONError) {
                json = try JSONValue.parse(body)
            } catch {
                return .unusable("the reply is \(error)")
            }
            guard let la = json["location"]?["lat"]?.number, let lo = json["location"]?["lng"]?.number,
                  let acc = json["accuracy"]?.number else {
                return .unusable("the reply has no location and accuracy")
            }
            guard (-90...90).contains(la), (-180...180).contains(lo), acc > 0, acc <= 20_000_000 else {
                return .unusable("the reply's position is out of range")
            }
            return .position(latitude: la, longitude: lo, accuracy: acc)
        case 404: return .notFound
        case 429: return .rateLimited
        case 500...599: return .serverError(status)
        default: return .unusable("HTTP status \(status)")
        }
    }

    /// `Retry-After` in seconds (RFC 9110: a delay in seconds; an HTTP date
    /// is not read, and the caller's own backoff applies).
    public static func retryAfter(_ header: String) -> Double? {
        let v = header.split(separator: " ").first.map(String.init) ?? ""
        guard !v.isEmpty, v.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), v.utf8.count <= 6, let n = Double(v) else {
            return nil
        }
        return n
    }
}
