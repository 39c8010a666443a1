import XCTest
@testable import GeoCore

/// `[sources]` (docs/dbus-api.md "Configuration", "Sources"): each key, its
/// default, and a clear `FILE:LINE: reason` for each bad value.
final class ConfigSourcesTests: XCTestCase {
    private func parse(_ text: String) throws -> SourcesConfig {
        var c = Config()
        try ConfigParser.parse(text, file: "test.conf", into: &c)
        return c.sources
    }

    private func error(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> String? {
        var c = Config()
        do {
            try ConfigParser.parse(text, file: "test.conf", into: &c)
            XCTFail("accepted:\n\(text)", file: file, line: line)
        } catch {
            return "\(error)"
        }
        return nil
    }

    func testDefaultsAreGPSAndTheGeoClueStaticFileAndNoWiFi() {
        let s = SourcesConfig()
        XCTAssertTrue(s.gps)
        XCTAssertEqual(s.gpsWait, 3)
        XCTAssertEqual(s.staticFile, "/etc/geolocation")
        XCTAssertEqual(s.wifiURL, "", "no lookup until an admin names a server")
        XCTAssertEqual(s.wifiCAFile, "")
        XCTAssertEqual(s.wifiHelper, "/run/geoconsent/wifi.sock")
        XCTAssertEqual(s.wifiInterval, 30)
    }

    func testEachKey() throws {
        let s = try parse("""
        [sources]   # where positions come from
        gps = false
        gps-wait = 1.5
        static-file =
        wifi-url = https://api.beacondb.net/v1/geolocate
        wifi-ca-file = /etc/ssl/private-ca.pem
        wifi-helper = /run/test/wifi.sock
        wifi-interval = 60
        """)
        XCTAssertFalse(s.gps)
        XCTAssertEqual(s.gpsWait, 1.5)
        XCTAssertEqual(s.staticFile, "")
        XCTAssertEqual(s.wifiURL, "https://api.beacondb.net/v1/geolocate")
        XCTAssertEqual(s.wifiCAFile, "/etc/ssl/private-ca.pem")
        XCTAssertEqual(s.wifiHelper, "/run/test/wifi.sock")
        XCTAssertEqual(s.wifiInterval, 60)
        XCTAssertEqual(try parse("[sources]\nwifi-url =\n").wifiURL, "", "empty: off")
    }

    func testBadValuesAreRefusedWithTheirLine() {
        let cases: [(String, String)] = [
            ("[sources]\ngps = yes", "test.conf:2: gps must be 'true' or 'false', not 'yes'"),
            ("[sources]\ngps-wait = 61", "test.conf:2: gps-wait must be a number of seconds from 1 up to 60, not '61'"),
            ("[sources]\ngps-wait = -1", "test.conf:2: gps-wait must be a number of seconds from 1 up to 60, not '-1'"),
            ("[sources]\ngps-wait = 0.5", "test.conf:2: gps-wait must be a number of seconds from 1 up to 60, not '0.5'"),
            ("[sources]\nstatic-file = etc/geolocation",
             "test.conf:2: static-file must be an absolute path, or empty for none, not 'etc/geolocation'"),
            ("[sources]\n\nwifi-url = http://beacondb.net/v1/geolocate",
             "test.conf:3: wifi-url must be an https:// URL with a host, or empty for no Wi-Fi positioning, not 'http://beacondb.net/v1/geolocate'"),
            ("[sources]\nwifi-url = https:///v1/geolocate",
             "test.conf:2: wifi-url must be an https:// URL with a host, or empty for no Wi-Fi positioning, not 'https:///v1/geolocate'"),
            ("[sources]\nwifi-url = https://user@host/x",
             "test.conf:2: wifi-url must be an https:// URL with a host, or empty for no Wi-Fi positioning, not 'https://user@host/x'"),
            ("[sources]\nwifi-interval = 1", "test.conf:2: wifi-interval must be a number of seconds from 5 to 3600, not '1'"),
            ("[sources]\nwifi-helper =", "test.conf:2: wifi-helper must be an absolute path, not ''"),
            ("[sources]\nwifi-ssid = yes", "test.conf:2: unknown key 'wifi-ssid' in [sources]"),
        ]
        for (text, expected) in cases { XCTAssertEqual(error(text), expected, text) }
    }
}
