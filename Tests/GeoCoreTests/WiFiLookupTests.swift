import XCTest
@testable import GeoCore

/// The daemon's conversation with the network helper, encoder against
/// decoder, and what each side refuses.
final class WiFiLookupTests: XCTestCase {
    let aps = [AccessPoint(bssid: "00:11:22:33:44:55", signal: -51, ageMilliseconds: 1200),
               AccessPoint(bssid: "a0:b1:c2:d3:e4:f5", signal: -77, ageMilliseconds: 0)]

    func testTheHelperRequestCarriesBSSIDsSignalsAndAgesOnly() throws {
        let line = WiFiLookupWire.encodeRequest(aps)
        XCTAssertEqual(String(decoding: line, as: UTF8.self),
                       "lookup 00:11:22:33:44:55,-51,1200 a0:b1:c2:d3:e4:f5,-77,0\n")
        XCTAssertEqual(try WiFiLookupWire.decodeRequest(Array(line.dropLast())), aps)
        for bad in ["lookup 00:11:22:33:44:55,-51", "lookup 00:11:22:33:44:5g,-51,0", "lookup 00:11:22:33:44:55,5,0",
                    "look 00:11:22:33:44:55,-51,0", "lookup 02:11:22:33:44:55,-51,0"] {
            XCTAssertThrowsError(try WiFiLookupWire.decodeRequest(Array(bad.utf8)), bad)
        }
        let many = "lookup" + String(repeating: " 00:11:22:33:44:55,-51,0", count: 65)
        XCTAssertThrowsError(try WiFiLookupWire.decodeRequest(Array(many.utf8)), "65 access points")
    }

    func testBSSIDsThatMoveOrMeanNothingAreDropped() {
        XCTAssertEqual(AccessPoint.bssid("00:1A:2B:3C:4D:5E"), "00:1a:2b:3c:4d:5e")
        XCTAssertNil(AccessPoint.bssid("02:1a:2b:3c:4d:5e"), "locally administered: a randomized or phone hotspot")
        XCTAssertNil(AccessPoint.bssid("00:00:00:00:00:00"))
        XCTAssertNil(AccessPoint.bssid("ff:ff:ff:ff:ff:ff"))
        XCTAssertNil(AccessPoint.bssid("00:1a:2b:3c:4d"))
        XCTAssertNil(AccessPoint.bssid("001a:2b:3c:4d:5e:6f"))
    }

    func testEveryAnswerRoundTripsAndBadOnesAreRefused() throws {
        let answers: [WiFiLookupWire.Answer] = [
            .position(latitude: 52.5163, longitude: 13.3777, accuracy: 55.5), .notFound,
            .retry(after: 120, "the server answered 429"), .failed("TLS: certificate verify failed"),
        ]
        for a in answers {
            let line = WiFiLookupWire.encodeAnswer(a)
            XCTAssertEqual(line.last, 0x0A)
            XCTAssertEqual(try WiFiLookupWire.decodeAnswer(Array(line.dropLast())), a)
        }
        XCTAssertEqual(WiFiLookupWire.encodeAnswer(.failed("two\nlines")), Array("error two lines\n".utf8),
                       "one line whatever the reason says")
        for bad in ["position 91 0 10", "position 1 2 0", "position 1 2", "retry soon", "hello", "notfound x"] {
            XCTAssertThrowsError(try WiFiLookupWire.decodeAnswer(Array(bad.utf8)), bad)
        }
    }
}
