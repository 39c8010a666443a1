import XCTest
import GeoCore
@testable import GeoGeolocate

/// The network helper's rules around the server (docs/dbus-api.md "Wi-Fi"):
/// a cache per set of access points for a bounded time, the server's 429 and
/// 5xx waited out (`Retry-After` first, else doubling waits), a short wait
/// after a failed request, and never a request for fewer than two access points.
final class WiFiLookupPolicyTests: XCTestCase {
    let office = [AccessPoint(bssid: "00:11:22:33:44:55", signal: -50, ageMilliseconds: 0),
                  AccessPoint(bssid: "00:11:22:33:44:66", signal: -70, ageMilliseconds: 0)]
    let hall = [AccessPoint(bssid: "00:11:22:33:44:77", signal: -50, ageMilliseconds: 0),
                AccessPoint(bssid: "00:11:22:33:44:88", signal: -70, ageMilliseconds: 0)]

    func found(_ la: Double) -> Result<(GeolocateAPI.Reply, retryAfter: Double?), WiFiLookupPolicy.TransportFailure> {
        .success((.position(latitude: la, longitude: 13, accuracy: 50), nil))
    }

    func testAnswersAreCachedPerSetOfAccessPointsForABoundedTime() {
        var p = WiFiLookupPolicy()
        XCTAssertNil(p.before(office, now: 0), "ask the server")
        XCTAssertEqual(p.after(office, found(52), now: 0), .position(latitude: 52, longitude: 13, accuracy: 50))
        let reordered = office.reversed().map { ap -> AccessPoint in var a = ap; a.signal -= 5; return a }
        XCTAssertEqual(p.before(reordered, now: 60), .position(latitude: 52, longitude: 13, accuracy: 50),
                       "the same access points in another order, with other signals: the cached answer")
        XCTAssertNil(p.before(hall, now: 60), "another set: ask")
        XCTAssertNil(p.before(office, now: WiFiLookupPolicy.cacheSeconds), "expired: ask again")
        XCTAssertEqual(p.after(hall, .success((.notFound, nil)), now: 61), .notFound)
        XCTAssertEqual(p.before(hall, now: 62), .notFound, "notFound is cached too")
    }

    func testTheCacheIsBounded() {
        var p = WiFiLookupPolicy()
        for i in 0..<(WiFiLookupPolicy.cacheEntries + 8) {
            let set = [AccessPoint(bssid: String(format: "00:11:22:33:%02x:01", i), signal: -50, ageMilliseconds: 0),
                       AccessPoint(bssid: String(format: "00:11:22:33:%02x:02", i), signal: -50, ageMilliseconds: 0)]
            _ = p.after(set, found(Double(i)), now: Double(i) * 0.01)
        }
        let first = [AccessPoint(bssid: "00:11:22:33:00:01", signal: -50, ageMilliseconds: 0),
                     AccessPoint(bssid: "00:11:22:33:00:02", signal: -50, ageMilliseconds: 0)]
        XCTAssertNil(p.before(first, now: 1), "the oldest entry made room")
    }

    func testRateLimitsAndServerErrorsAreWaitedOut() {
        var p = WiFiLookupPolicy()
        XCTAssertEqual(p.after(office, .success((.rateLimited, 120)), now: 0),
                       .retry(after: 120, "the server answered 429 (too many requests)"), "Retry-After first")
        XCTAssertEqual(p.before(hall, now: 100), .retry(after: 20, "the server answered 429 (too many requests)"),
                       "no request to the server for any set until then")
        XCTAssertNil(p.before(hall, now: 120))
        XCTAssertEqual(p.after(hall, .success((.rateLimited, nil)), now: 120), .retry(after: 120, "the server answered 429 (too many requests)"),
                       "the second 429 in a row, without Retry-After: twice the first wait")
        XCTAssertEqual(p.after(hall, .success((.rateLimited, nil)), now: 240), .retry(after: 240, "the server answered 429 (too many requests)"),
                       "and doubling")
        XCTAssertEqual(p.after(hall, .success((.serverError(503), nil)), now: 300), .retry(after: 30, "the server answered 503"))
        XCTAssertEqual(p.after(hall, .success((.serverError(502), nil)), now: 330), .retry(after: 60, "the server answered 502"))
        _ = p.after(hall, found(1), now: 390)
        XCTAssertEqual(p.after(office, .success((.serverError(503), nil)), now: 400), .retry(after: 30, "the server answered 503"),
                       "an answer resets the doubling")
        XCTAssertEqual(p.after(office, .success((.rateLimited, 999_999)), now: 500),
                       .retry(after: WiFiLookupPolicy.maxWait, "the server answered 429 (too many requests)"), "bounded")
    }

    func testAFailedRequestIsNotRepeatedAtOnceAndTooFewAccessPointsAreNotSent() {
        var p = WiFiLookupPolicy()
        XCTAssertEqual(p.after(office, .failure(.noReply("TLS failed: bad certificate")), now: 0),
                       .failed("TLS failed: bad certificate"))
        XCTAssertEqual(p.before(office, now: 5), .retry(after: 5, "TLS failed: bad certificate"))
        XCTAssertNil(p.before(office, now: WiFiLookupPolicy.waitAfterFailure))
        XCTAssertEqual(p.after(office, .failure(.tooLarge(65536)), now: 20), .failed("the reply is larger than 65536 bytes"))
        XCTAssertEqual(p.before(Array(office.prefix(1)), now: 100),
                       .failed("fewer than two access points are visible; a lookup needs two"))
    }
}
