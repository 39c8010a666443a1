import XCTest
import GeoCore
@testable import GeoGeolocate

/// The ichnaea geolocate API as the network helper speaks it, and the JSON
/// reader under it: what is sent, what each reply means, what is refused.
final class GeolocateAPITests: XCTestCase {
    let aps = [AccessPoint(bssid: "00:11:22:33:44:55", signal: -51, ageMilliseconds: 1200),
               AccessPoint(bssid: "a0:b1:c2:d3:e4:f5", signal: -77, ageMilliseconds: 0)]

    func testTheGeolocateRequestRefusesIPAndCellFallbacksAndSendsNoSSID() throws {
        let body = try JSONValue.parse(GeolocateAPI.requestBody(aps))
        XCTAssertEqual(body["considerIp"], .bool(false))
        XCTAssertEqual(body["fallbacks"], .object(["ipf": .bool(false), "lacf": .bool(false)]))
        XCTAssertEqual(body["wifiAccessPoints"]?.array?.count, 2)
        XCTAssertEqual(body["wifiAccessPoints"]?.array?.first,
                       .object(["macAddress": .string("00:11:22:33:44:55"), "signalStrength": .number(-51),
                                "age": .number(1200)]), "three keys an access point, no ssid")
    }

    func testReplies() {
        XCTAssertEqual(GeolocateAPI.decode(status: 200, body: Array(#"{"location": {"lat": 52.5, "lng": 13.4}, "accuracy": 50.0}"#.utf8)),
                       .position(latitude: 52.5, longitude: 13.4, accuracy: 50))
        XCTAssertEqual(GeolocateAPI.decode(status: 404, body: Array(#"{"error":{"errors":[{"reason":"notFound"}]}}"#.utf8)),
                       .notFound)
        XCTAssertEqual(GeolocateAPI.decode(status: 429, body: []), .rateLimited)
        XCTAssertEqual(GeolocateAPI.decode(status: 503, body: Array("<html>".utf8)), .serverError(503))
        XCTAssertEqual(GeolocateAPI.decode(status: 301, body: []), .unusable("HTTP status 301"))
        guard case .unusable = GeolocateAPI.decode(status: 200, body: Array("<html>".utf8)) else {
            return XCTFail("not JSON")
        }
        guard case .unusable = GeolocateAPI.decode(status: 200, body: Array(#"{"location": {"lat": 95, "lng": 1}, "accuracy": 5}"#.utf8)) else {
            return XCTFail("out of range")
        }
        guard case .unusable = GeolocateAPI.decode(status: 200, body: Array(#"{"accuracy": 5}"#.utf8)) else {
            return XCTFail("no location")
        }
        XCTAssertEqual(GeolocateAPI.retryAfter("120"), 120)
        XCTAssertNil(GeolocateAPI.retryAfter("Wed, 21 Oct 2026 07:28:00 GMT"), "a date: the helper's own backoff")
    }

    func testTheJSONReaderIsStrictAndBounded() throws {
        XCTAssertEqual(try JSONValue.parse(Array(#" {"a": [1, -2.5e1, true, false, null, "x\u00e9\n\ud83d\ude00"]} "#.utf8)),
                       .object(["a": .array([.number(1), .number(-25), .bool(true), .bool(false), .null,
                                             .string("xé\n😀")])]))
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "01x", "1.", "\"\u{01}\"", "{} x", "\"\\ud800\"", "nul", "1e999"] {
            XCTAssertThrowsError(try JSONValue.parse(Array(bad.utf8)), bad)
        }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        XCTAssertThrowsError(try JSONValue.parse(Array(deep.utf8)), "nesting is bounded")
        XCTAssertEqual(JSONValue.object(["k": .string("a\"b\\\u{01}")]).text, #"{"k":"a\"b\\\u0001"}"#)
    }
}
