import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Wi-Fi positioning's real parts for a test (GeoTestSupport/WiFiStandIns.swift):
/// the loopback HTTPS geolocate server with its test CA, the real network
/// helper socket-activated per connection (as geoconsent-wifi.socket does),
/// NetworkManager through python-dbusmock on the test bus, and the daemon
/// configured for them.
final class WiFiRig {
    let dir: TempDir
    let server: GeolocateServer
    let helperSocket: HelperSocket
    let stack: Stack
    private(set) var networkManager: NetworkManagerStandIn?
    let peer: BusPeer

    /// `helper`: the program the socket starts (nil: the real helper);
    /// `trustCA`: the helper verifies the server with the test CA.
    init(gps: Bool = false, helper: [String]? = nil, trustCA: Bool = true) throws {
        dir = try TempDir()
        server = try GeolocateServer()
        let helperConfig = dir.file("helper.conf")
        try HelperSocket.config(for: server, trustCA: trustCA).write(toFile: helperConfig, atomically: true, encoding: .utf8)
        let program = helper ?? [TestPaths.binDir + "/geoconsent-wifi-helper", "--config", helperConfig, "--timeout", "2"]
        helperSocket = try HelperSocket(path: dir.file("wifi.sock"), program: program, logPath: dir.file("helper.log"))
        stack = try Stack(config: """
        [sources]
        gps = \(gps)
        gps-wait = 1
        wifi-url = \(server.url)
        wifi-helper = \(helperSocket.path)
        wifi-interval = 5
        """)
        peer = try stack.peer()
    }

    func stop() {
        stack.stop()
        networkManager?.stop()
        helperSocket.stop()
        server.stop()
        dir.remove()
    }

    func startNetworkManager() throws {
        networkManager = try NetworkManagerStandIn(busAddress: stack.bus.address, peer: peer, loop: stack.peers,
                                                   logPath: dir.file("nm.log"), callLog: dir.file("nm-calls.log"))
    }

    func addAccessPoint(_ name: String, ssid: String, bssid: String, strength: UInt8, lastSeen: Int32? = nil) throws {
        try networkManager!.addAccessPoint(name, ssid: ssid, bssid: bssid, strength: strength, lastSeen: lastSeen)
    }

    // MARK: The app

    /// A consent agent answering allow-once, and an app that tapped.
    func tappedApp() throws -> (app: BusPeer, agent: TestAgent) {
        let agent = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
        let app = try stack.peer()
        XCTAssertEqual(try app.tap(AuthOptions(accuracy: .full)).get(), 4)
        return (app, agent)
    }

    func locate(_ app: BusPeer, timeout: Double = 10) -> Result<[DBusValue], DBusError> {
        let call = app.requestLocation(maxAge: 0, timeout: timeout)
        stack.peers.pump(timeout: timeout + 5) { call.isDone }
        return call.result ?? .failure(DBusError(DBusError.noReplyName, "test gave up waiting"))
    }
}
