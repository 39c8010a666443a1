import GeoCore

/// What the network helper does around each request to the geolocate
/// server (docs/dbus-api.md "Wi-Fi"), without I/O, clock injected: answers
/// from its cache for the same access points, refuses to ask again while the
/// server said to wait (429, 5xx, `Retry-After`) or after a failure, and maps
/// each reply to the answer the daemon gets.
public struct WiFiLookupPolicy {
    /// Seconds an answer for one set of access points is reused.
    public static let cacheSeconds = 120.0
    /// Sets of access points remembered at most.
    public static let cacheEntries = 32
    /// First waits after a 429 and after a 5xx, doubled each time again, up to `maxWait`.
    public static let firstWaitRateLimited = 60.0
    public static let firstWaitServerError = 30.0
    /// Wait after a failure of the request itself (unreachable, TLS, a bad reply).
    public static let waitAfterFailure = 10.0
    public static let maxWait = 3600.0

    private var cache: [String: (answer: WiFiLookupWire.Answer, at: Double)] = [:]
    /// No request to the server before this time, and why.
    private var notBefore = 0.0
    private var waitReason = ""
    private var nextWaitRateLimited = firstWaitRateLimited
    private var nextWaitServerError = firstWaitServerError

    public init() {}

    /// Why the request was not answered by the server.
    public enum TransportFailure: Error, Equatable, Sendable {
        /// No reply: the reason as libcurl says it (unreachable, TLS, timeout).
        case noReply(String)
        /// The reply passed the size bound.
        case tooLarge(Int)
    }

    /// The answer to give without asking the server, or nil to ask it.
    public mutating func before(_ aps: [AccessPoint], now: Double) -> WiFiLookupWire.Answer? {
        guard aps.count >= 2 else {
            return .failed("fewer than two access points are visible; a lookup needs two")
        }
        let key = Self.key(aps)
        if let hit = cache[key], now - hit.at < Self.cacheSeconds { return hit.answer }
        if now < notBefore { return .retry(after: (notBefore - now).rounded(.up), waitReason) }
        return nil
    }

    /// The answer for the server's reply (or its absence), remembered as it
    /// says: a position or `notFound` cached, a 429 or 5xx waited out.
    public mutating func after(_ aps: [AccessPoint], _ reply: Result<(GeolocateAPI.Reply, retryAfter: Double?), TransportFailure>,
                               now: Double) -> WiFiLookupWire.Answer {
        let answer: WiFiLookupWire.Answer
        switch reply {
        case .success((.position(let la, let lo, let acc), _)):
            answer = .position(latitude: la, longitude: lo, accuracy: acc)
            remember(aps, answer, now)
        case .success((.notFound, _)):
            answer = .notFound
            remember(aps, answer, now)
        case .success((.rateLimited, let after)):
            answer = wait(after ?? nextWaitRateLimited, "the server answered 429 (too many requests)", now)
            nextWaitRateLimited = min(nextWaitRateLimited * 2, Self.maxWait)
        case .success((.serverError(let status), let after)):
            answer = wait(after ?? nextWaitServerError, "the server answered \(status)", now)
            nextWaitServerError = min(nextWaitServerError * 2, Self.maxWait)
        case .success((.unusable(let why), _)):
            answer = failed(why, now)
        case .failure(.noReply(let why)):
            answer = failed(why, now)
        case .failure(.tooLarge(let bound)):
            answer = failed("the reply is larger than \(bound) bytes", now)
        }
        return answer
    }

    private mutating func remember(_ aps: [AccessPoint], _ answer: WiFiLookupWire.Answer, _ now: Double) {
        nextWaitRateLimited = Self.firstWaitRateLimited
        nextWaitServerError = Self.firstWaitServerError
        cache = cache.filter { now - $0.value.at < Self.cacheSeconds }
        if cache.count >= Self.cacheEntries, let oldest = cache.min(by: { $0.value.at < $1.value.at })?.key {
            cache[oldest] = nil
        }
        cache[Self.key(aps)] = (answer, now)
    }

    private mutating func wait(_ seconds: Double, _ why: String, _ now: Double) -> WiFiLookupWire.Answer {
        let s = min(max(seconds, 1), Self.maxWait)
        notBefore = now + s
        waitReason = why
        return .retry(after: s, why)
    }

    private mutating func failed(_ why: String, _ now: Double) -> WiFiLookupWire.Answer {
        notBefore = now + Self.waitAfterFailure
        waitReason = why
        return .failed(why)
    }

    /// One set of access points, whatever their order, signals or ages.
    static func key(_ aps: [AccessPoint]) -> String { aps.map(\.bssid).sorted().joined(separator: " ") }
}
