import XCTest
import GeoCore
@testable import GeoConsentDaemon

/// `[geoclue]`, read by the facade that owns it (GeoClueSettings.swift) from
/// the entries the config parser kept: its keys, defaults, and errors at
/// `FILE:LINE`.
final class GeoClueSettingsTests: XCTestCase {
    private func settings(_ text: String) throws -> GeoClueSettings {
        var c = Config()
        c.frontEndSections = [GeoClueSettings.section]
        try ConfigParser.parse(text, file: "test.conf", into: &c)
        return try GeoClueSettings(c.frontEndEntries[GeoClueSettings.section] ?? [])
    }

    func testKeysAndDefaults() throws {
        XCTAssertEqual(try settings(""), GeoClueSettings())
        XCTAssertFalse(try settings("[geoclue]").serve)
        XCTAssertEqual(try settings("[geoclue]").desktopEntries, ["/usr/local/share/applications", "/usr/share/applications"])
        XCTAssertTrue(try settings("[geoclue]\nserve = true").serve)
        XCTAssertFalse(try settings("[geoclue]\nserve = true\n[geoclue]\nserve = false").serve, "a key given again wins")
        XCTAssertEqual(try settings("[geoclue]\ndesktop-entries = /opt/apps ; /usr/share/applications;").desktopEntries,
                       ["/opt/apps", "/usr/share/applications"])
    }

    func testErrorsSayWhere() {
        let cases: [(text: String, said: String)] = [
            ("[geoclue]\nserve = yes", "test.conf:2: serve must be 'true' or 'false', not 'yes'"),
            ("[geoclue]\ndesktop-entries = apps", "test.conf:2: desktop-entries wants absolute directories separated by ';', not 'apps'"),
            ("[daemon]\nprompt-timeout = 5\n[geoclue]\nagents = 1", "test.conf:4: unknown key 'agents' in [geoclue]"),
        ]
        for c in cases {
            XCTAssertThrowsError(try settings(c.text), c.text) { e in XCTAssertEqual("\(e)", c.said) }
        }
    }
}
