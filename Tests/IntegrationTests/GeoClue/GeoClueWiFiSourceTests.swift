import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// An unmodified GeoClue client on a machine with no receiver and Wi-Fi
/// positioning on: after the usual consent it gets the Wi-Fi position through
/// the facade, named as such (docs/geoclue.md, dbus-api.md "Sources"), from
/// the real helper and NetworkManager's access points.
final class GeoClueWiFiSourceTests: GeoClueTestCase {
    private var server: GeolocateServer?
    private var helperSocket: HelperSocket?
    private var networkManager: NetworkManagerStandIn?
    private var dir: TempDir?

    override var extraConfig: String {
        guard let server, let helperSocket else { return "" }
        return "[sources]\ngps = false\nwifi-url = \(server.url)\nwifi-helper = \(helperSocket.path)\n"
    }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: GeoClueClientTests.whereAmI) else {
            return XCTFail("\(GeoClueClientTests.whereAmI) is missing: scripts/deps.sh installs geoclue-2-demo")
        }
        let dir = try TempDir()
        self.dir = dir
        let server = try GeolocateServer()
        self.server = server
        try server.serve("ok 52.5163 13.3777 55")
        try HelperSocket.config(for: server).write(toFile: dir.file("helper.conf"), atomically: true, encoding: .utf8)
        helperSocket = try HelperSocket(path: dir.file("wifi.sock"),
                                        program: [TestPaths.binDir + "/geoconsent-wifi-helper", "--config", dir.file("helper.conf")],
                                        logPath: dir.file("helper.log"))
        try super.setUpWithError()
        let nm = try NetworkManagerStandIn(busAddress: stack.bus.address, peer: try stack.peer(), loop: stack.peers,
                                           logPath: dir.file("nm.log"), callLog: dir.file("nm-calls.log"))
        networkManager = nm
        try nm.addAccessPoint("office", ssid: "office", bssid: "00:1a:2b:3c:4d:5e", strength: 70)
        try nm.addAccessPoint("hall", ssid: "hall", bssid: "00:1a:2b:3c:4d:60", strength: 40)
    }

    override func tearDown() {
        super.tearDown()
        networkManager?.stop()
        helperSocket?.stop()
        server?.stop()
        dir?.remove()
    }

    func testWhereAmIWithNoReceiverGetsTheWiFiPosition() throws {
        let r = try runClient(GeoClueClientTests.whereAmI, ["-t", "2", "-a", "8"])
        XCTAssertEqual(r.status, 0, r.output)
        let first = try XCTUnwrap(printedFixes(r.output).first, r.output)
        XCTAssertEqual(first.latitude, 52.5163, accuracy: 1e-6)
        XCTAssertEqual(first.longitude, 13.3777, accuracy: 1e-6)
        XCTAssertEqual(first.accuracy, 55, "the server's radius")
        XCTAssertTrue(r.output.contains("Description: wifi"), r.output)
        XCTAssertEqual(agent.confirms.count, 1, "the usual consent first")
        XCTAssertEqual(server?.requests().count, 1, "one lookup")
    }
}
