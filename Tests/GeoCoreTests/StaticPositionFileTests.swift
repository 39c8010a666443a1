import XCTest
@testable import GeoCore

/// The static position file, in GeoClue 2.7's `/etc/geolocation` format.
final class StaticPositionFileTests: XCTestCase {
    private func parse(_ text: String) throws -> StaticPosition {
        try StaticPositionFile.parse(bytes: Array(text.utf8), file: "/etc/geolocation")
    }

    private func refusal(_ text: String) -> String {
        do {
            let p = try parse(text)
            return "accepted \(p)"
        } catch {
            return "\(error)"
        }
    }

    func testGeoClueDocumentedLayoutWithCommentsAndBlankLines() throws {
        let text = """
            # The office.
            52.5163    # latitude
            13.3777\t# longitude

              34       # altitude (m)
            50         # accuracy radius (m)
            # trailing comment

            """
        XCTAssertEqual(try parse(text), StaticPosition(latitude: 52.5163, longitude: 13.3777, altitude: 34, accuracy: 50))
    }

    func testWindowsLineEndingsSignsAndExponents() throws {
        let p = try parse("-33.8688\r\n+151.2093\r\n-1.5e1\r\n2.5E2\r\n")
        XCTAssertEqual(p, StaticPosition(latitude: -33.8688, longitude: 151.2093, altitude: -15, accuracy: 250))
    }

    func testEachMalformedLineIsNamedWithItsNumber() {
        XCTAssertEqual(refusal("52.5\n13,4\n34\n50\n"),
                       "/etc/geolocation:2: the longitude must be a decimal number, with '.' as the decimal point")
        XCTAssertEqual(refusal("# c\n\n91\n13\n34\n50\n"),
                       "/etc/geolocation:3: the latitude is outside -90...90 degrees")
        XCTAssertEqual(refusal("52\n-180.5\n34\n50\n"),
                       "/etc/geolocation:2: the longitude is outside -180...180 degrees")
        XCTAssertEqual(refusal("52\n13\n1e9\n50\n"),
                       "/etc/geolocation:3: the altitude is not on or near the Earth (-12000...100000 m)")
        XCTAssertEqual(refusal("52\n13\n34\n0\n"),
                       "/etc/geolocation:4: accuracy 0.0 m must be more than 0 and at most 5000000 m")
    }

    func testNotANumberInfinityAndHexAreRefused() {
        for word in ["nan", "inf", "-infinity", "0x1p4", "1e400", "1 2", "--5"] {
            XCTAssertEqual(refusal("\(word)\n13\n34\n50\n"),
                           "/etc/geolocation:1: the latitude must be a decimal number, with '.' as the decimal point", word)
        }
    }

    func testAShortFileSaysWhatItLacks() {
        XCTAssertEqual(refusal("52.5\n13.4\n"),
                       "/etc/geolocation: ends before its altitude; it needs latitude, longitude, altitude and accuracy, one a line")
        XCTAssertEqual(refusal("# only a comment\n"),
                       "/etc/geolocation: ends before its latitude; it needs latitude, longitude, altitude and accuracy, one a line")
    }

    func testAFifthValueIsRefusedRatherThanGuessedAt() {
        XCTAssertEqual(refusal("52\n13\n34\n50\n7\n"),
                       "/etc/geolocation:5: unexpected text after the accuracy; the file holds four numbers")
    }

    func testBadBytesAndOversizedFiles() {
        var bytes = Array("52\n13\n".utf8)
        bytes += [0xFF, 0x0A]
        XCTAssertThrowsError(try StaticPositionFile.parse(bytes: bytes, file: "f")) {
            XCTAssertEqual("\($0)", "f:3: not valid UTF-8")
        }
        let big = [UInt8](repeating: UInt8(ascii: "#"), count: StaticPositionFile.maxBytes + 1)
        XCTAssertThrowsError(try StaticPositionFile.parse(bytes: big, file: "f")) {
            XCTAssertEqual("\($0)", "f: larger than 65536 bytes; not a position file")
        }
    }

    /// The log is read by more people than the file: no error repeats the
    /// file's text, a mistyped coordinate (a comma for a point) included.
    func testNoErrorRepeatsTheFilesText() {
        for text in ["52,5163\n13.3777\n34\n50\n", "52.5163\n13,3777\n34\n50\n", "52.5163\n13.3777\n34\n50\n52.5\n",
                     "95.5163\n13.3777\n34\n50\n", String(repeating: "x", count: 10_000) + "\n"] {
            let message = refusal(text)
            for secret in ["5163", "3777", "95.5", "xxx"] { XCTAssertFalse(message.contains(secret), message) }
            XCTAssertLessThan(message.utf8.count, 200)
        }
    }
}
