import XCTest
@testable import GeoCore

/// The one sanitizer for identities and log lines: what it escapes, and that
/// ordinary text passes through unchanged.
final class DisplayTextTests: XCTestCase {
    func testOrdinaryTextIsUnchanged() {
        for s in ["/usr/bin/gnome-maps", "org.gnome.Maps", "été", "日本語のアプリ", "C:\\weird\\path", "", "a b\u{00A0}c", "🗺️"] {
            XCTAssertEqual(DisplayText.escaped(s), s)
            XCTAssertTrue(DisplayText.isSafe(s), s)
        }
    }

    func testEveryListedClassIsEscaped() {
        let cases: [(UInt32, String)] = [
            (0x00, "\\u0000"), (0x0A, "\\u000A"), (0x1B, "\\u001B"), (0x1F, "\\u001F"), (0x7F, "\\u007F"),
            (0x80, "\\u0080"), (0x85, "\\u0085"), (0x9F, "\\u009F"),
            (0x200E, "\\u200E"), (0x200F, "\\u200F"),
            (0x202A, "\\u202A"), (0x202B, "\\u202B"), (0x202C, "\\u202C"), (0x202D, "\\u202D"), (0x202E, "\\u202E"),
            (0x2066, "\\u2066"), (0x2067, "\\u2067"), (0x2068, "\\u2068"), (0x2069, "\\u2069"),
            (0x2028, "\\u2028"), (0x2029, "\\u2029"), (0x061C, "\\u061C"),
            // Other format characters: zero-width joiner, BOM, a tag character.
            (0x200D, "\\u200D"), (0xFEFF, "\\uFEFF"), (0xE0041, "\\U000E0041"),
        ]
        for (value, escaped) in cases {
            let s = "a" + String(Unicode.Scalar(value)!) + "b"
            XCTAssertFalse(DisplayText.isSafe(s), String(value, radix: 16))
            XCTAssertEqual(DisplayText.escaped(s), "a" + escaped + "b", String(value, radix: 16))
        }
    }

    func testSpoofedPathReadsAsItIs() {
        let spoof = "/tmp/\u{202E}spaM.emonG.gro\n(system app)"
        let shown = DisplayText.escaped(spoof)
        XCTAssertEqual(shown, "/tmp/\\u202EspaM.emonG.gro\\u000A(system app)")
        XCTAssertTrue(DisplayText.isSafe(shown))
    }
}
