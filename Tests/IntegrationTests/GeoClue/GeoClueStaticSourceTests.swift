import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// An unmodified GeoClue client on a machine whose receiver gives nothing:
/// after the usual consent it gets the static position through the facade,
/// named as such (docs/geoclue.md, dbus-api.md "Sources").
final class GeoClueStaticSourceTests: GeoClueTestCase {
    private var positionDir: TempDir?

    override var extraConfig: String {
        "[sources]\ngps-wait = 1\nstatic-file = \(positionDir?.file("geolocation") ?? "")\n"
    }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: GeoClueClientTests.whereAmI) else {
            return XCTFail("\(GeoClueClientTests.whereAmI) is missing: scripts/deps.sh installs geoclue-2-demo")
        }
        let dir = try TempDir()
        positionDir = dir
        try "52.5163\n13.3777\n34\n50\n".write(toFile: dir.file("geolocation"), atomically: true, encoding: .utf8)
        try super.setUpWithError()
    }

    override func tearDown() {
        super.tearDown()
        positionDir?.remove()
    }

    func testWhereAmIWithASilentReceiverGetsTheStaticPosition() throws {
        let r = try runClient(GeoClueClientTests.whereAmI, ["-t", "2", "-a", "8"])
        XCTAssertEqual(r.status, 0, r.output)
        let fixes = printedFixes(r.output)
        let first = try XCTUnwrap(fixes.first, r.output)
        XCTAssertEqual(first.latitude, 52.5163, accuracy: 1e-6)
        XCTAssertEqual(first.longitude, 13.3777, accuracy: 1e-6)
        XCTAssertEqual(first.accuracy, 50, "the file's radius")
        XCTAssertEqual(fixes.count, 1, "a standing position is sent once\n\(r.output)")
        XCTAssertTrue(r.output.contains("Description: static"), r.output)
        XCTAssertEqual(agent.confirms.count, 1, "the usual consent first")
    }
}
