import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Wi-Fi positioning end to end (docs/dbus-api.md "Sources", "Wi-Fi"): the
/// real daemon reads NetworkManager (python-dbusmock) on its bus only after a
/// tap, the real helper posts BSSIDs and signals only to the loopback HTTPS
/// server, and the app gets a position marked wifi.
final class WiFiSourceBusTests: XCTestCase {
    var rig: WiFiRig!

    override func tearDown() {
        if let rig, let t = testRun, t.failureCount > 0 {
            print("---- geoconsentd log ----\n\(rig.stack.daemon.log().suffix(6000))")
            print("---- helper log ----\n\(tailOf(rig.dir.file("helper.log")))\n---- NetworkManager ----\n\(rig.networkManager?.calls() ?? "")")
        }
        rig?.stop()
        rig = nil
    }

    func seeAccessPoints() throws {
        try rig.startNetworkManager()
        try rig.addAccessPoint("office", ssid: "office", bssid: "00:1A:2B:3C:4D:5E", strength: 70)
        try rig.addAccessPoint("hall", ssid: "hall", bssid: "00:1a:2b:3c:4d:60", strength: 40)
        try rig.addAccessPoint("optout", ssid: "neighbour_nomap", bssid: "00:1a:2b:3c:4d:61", strength: 90)
        try rig.addAccessPoint("phone", ssid: "my phone", bssid: "02:1a:2b:3c:4d:62", strength: 95)
        try rig.addAccessPoint("stale", ssid: "gone", bssid: "00:1a:2b:3c:4d:63", strength: 60, lastSeen: 1)
    }

    func testWithNoReceiverTheAppGetsTheWiFiPositionAndTheServerSeesBSSIDsAndSignalsOnly() throws {
        rig = try WiFiRig()
        try seeAccessPoints()
        try rig.server.serve("ok 52.5163 13.3777 55")
        let (app, _) = try rig.tappedApp()
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.rig.helperSocket.helperProcesses().count == 1 },
                      "a grant holds and GPS is off: the helper is started ahead of the first request")
        XCTAssertTrue(rig.server.requests().isEmpty, "nothing is sent before a position is asked for")
        XCTAssertTrue(stack.peers.pump(timeout: 5) { (self.rig.networkManager?.calls() ?? "").contains("GetDevices") },
                      "the Wi-Fi devices are found ahead of the first request")
        XCTAssertFalse((rig.networkManager?.calls() ?? "").contains("GetAllAccessPoints"), "but no access points are read")
        XCTAssertFalse((rig.networkManager?.calls() ?? "").contains("RequestScan"), "nor is a scan asked for")

        let here = try XCTUnwrap(LocationBody.decode(rig.locate(app).get()))
        XCTAssertEqual(here.fix.source, .wifi)
        XCTAssertEqual(here.latitude, 52.5163)
        XCTAssertEqual(here.longitude, 13.3777)
        XCTAssertEqual(here.fix.horizontalAccuracy, 55, "the server's own radius")
        XCTAssertEqual(here.fix.mode, .twoD)

        let requests = rig.server.requests()
        XCTAssertEqual(requests.count, 1)
        let request = try XCTUnwrap(requests.first)
        XCTAssertEqual(request["path"] as? String, "/v1/geolocate")
        let headers = try XCTUnwrap(request["headers"] as? [String: String])
        XCTAssertTrue(headers["User-Agent"]?.hasPrefix("geoconsent/") ?? false, "\(headers)")
        let body = try XCTUnwrap(request["body"] as? [String: Any])
        XCTAssertEqual(Set(body.keys), ["considerIp", "fallbacks", "wifiAccessPoints"])
        XCTAssertEqual(body["considerIp"] as? Bool, false)
        XCTAssertEqual(body["fallbacks"] as? [String: Bool], ["ipf": false, "lacf": false])
        let aps = try XCTUnwrap(body["wifiAccessPoints"] as? [[String: Any]])
        XCTAssertEqual(aps.map { $0["macAddress"] as? String }, ["00:1a:2b:3c:4d:5e", "00:1a:2b:3c:4d:60"],
                       "strongest first; no _nomap, no phone hotspot, nothing stale")
        XCTAssertEqual(aps.map { Set($0.keys) }, [["macAddress", "signalStrength", "age"], ["macAddress", "signalStrength", "age"]])
        XCTAssertEqual(aps.map { $0["signalStrength"] as? Int }, [-50, -80], "NetworkManager's percentage as dBm")
        for ssid in ["office", "hall", "neighbour", "phone"] {
            XCTAssertFalse(rig.server.rawRequests().contains(ssid), "no SSID reaches the server: \(ssid)")
        }
        let calls = (rig.networkManager?.calls() ?? "")
        XCTAssertTrue(calls.contains("RequestScan"), "a scan is asked for while a position is needed")
        XCTAssertEqual(calls.components(separatedBy: "GetDevices").count - 1, 1,
                       "the request reads the devices found ahead, not again: \(calls)")
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.stack.daemon.log().contains("from wifi: app") },
                      "the journal names the source (its line follows the reply)")
        XCTAssertFalse(stack.daemon.log().contains("52.5163"), "never a coordinate in the log")

        // The grant ends with the app: the helper's connection closes and it exits.
        app.connection.close()
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.rig.helperSocket.helperProcesses().isEmpty },
                      "no helper process while no grant holds: \(rig.helperSocket.helperProcesses())")
    }

    var stack: Stack { rig.stack }

    /// `geoconsentctl locate`, as a person types it on a machine without a
    /// receiver: the usual consent, then the Wi-Fi position, named as such.
    func testGeoconsentctlLocateShowsTheWiFiPosition() throws {
        rig = try WiFiRig()
        try seeAccessPoints()
        // The consent agent in a process of its own: ctl below blocks this thread.
        let agent = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                     arguments: ["--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                                     logPath: rig.dir.file("agent.log"), captureStdout: true)
        defer { agent.stop() }
        var registered = false
        let deadline = Date().addingTimeInterval(15)
        while !registered, Date() < deadline {
            registered = agent.readStdoutLine(timeout: 0.1)?.contains("Consent agent registered for uid") ?? false
        }
        XCTAssertTrue(registered, "geoconsentctl agent registered")
        let r = try stack.ctl(["locate"], timeout: 30)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertTrue(r.output.contains("52.5163000") && r.output.contains("13.3777000"), r.output)
        XCTAssertTrue(r.output.contains("Wi-Fi access points"), "the Source row:\n\(r.output)")
    }

    /// Each fault of the server, the helper or NetworkManager fails the
    /// request with `PositionUnavailable` naming the cause, and the daemon
    /// goes on (each on a daemon of its own: a failure holds Wi-Fi off for
    /// `wifi-interval`).
    func testEachFaultFailsTheRequestNamingItsCause() throws {
        rig = try WiFiRig()
        try seeAccessPoints()
        let faults: [(String, String)] = [
            ("notfound", "the server knows none of the visible access points"),
            ("429 120", "the server answered 429 (too many requests)"),
            ("503", "the server answered 503"),
            ("notjson", "the reply is not JSON"),
            ("huge", "the reply is larger than 65536 bytes"),
            ("hang", "timed out"),
            ("drip", "timed out"),
        ]
        for (mode, cause) in faults {
            try rig.server.serve(mode)
            try stack.restartDaemon()
            let (app, _) = try rig.tappedApp()
            let r = rig.locate(app)
            XCTAssertEqual(r.errorName, GeoConsentAPI.ErrorName.positionUnavailable, "\(mode): \(r)")
            XCTAssertTrue(r.errorMessage?.contains(cause) ?? false, "\(mode): \(r)")
            XCTAssertTrue(r.errorMessage?.contains("GPS is off") ?? false, "both sources named: \(r)")
            XCTAssertTrue(stack.daemon.isRunning, mode)
        }
    }

    func testATLSFailureAnUnreachableServerAndAMissingOrCrashingHelper() throws {
        // The helper does not trust the test CA: the system's CAs do not know it.
        rig = try WiFiRig(trustCA: false)
        try seeAccessPoints()
        var (app, _) = try rig.tappedApp()
        var r = rig.locate(app)
        XCTAssertEqual(r.errorName, GeoConsentAPI.ErrorName.positionUnavailable)
        XCTAssertTrue(r.errorMessage?.contains("TLS failed") ?? false, "\(r)")
        XCTAssertTrue(rig.server.requests().isEmpty, "nothing reached an unverified server")

        // The server gone.
        rig.server.process.stop()
        try stack.restartDaemon()
        (app, _) = try rig.tappedApp()
        r = rig.locate(app)
        XCTAssertTrue(r.errorMessage?.contains("cannot reach the server") ?? false, "\(r)")

        // No helper behind the socket.
        rig.helperSocket.stop()
        try stack.restartDaemon()
        (app, _) = try rig.tappedApp()
        r = rig.locate(app)
        XCTAssertTrue(r.errorMessage?.contains("the network helper cannot be reached") ?? false, "\(r)")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testAHelperThatCrashesBeforeAnswering() throws {
        rig = try WiFiRig(helper: ["/bin/sh", "-c", "read line; kill -SEGV $$"])
        try seeAccessPoints()
        let (app, _) = try rig.tappedApp()
        let r = rig.locate(app)
        XCTAssertTrue(r.errorMessage?.contains("the network helper closed the connection without an answer") ?? false, "\(r)")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testNetworkManagerAbsentOrAnsweringGarbage() throws {
        rig = try WiFiRig()
        var (app, _) = try rig.tappedApp()
        var r = rig.locate(app)
        XCTAssertTrue(r.errorMessage?.contains("NetworkManager is not running") ?? false, "\(r)")

        try rig.startNetworkManager()
        try rig.networkManager!.replace("org.freedesktop.NetworkManager", "GetDevices", out: "s",
                                        code: "ret = 'not a list of devices'", at: "/org/freedesktop/NetworkManager")
        try stack.restartDaemon()
        (app, _) = try rig.tappedApp()
        r = rig.locate(app)
        XCTAssertTrue(r.errorMessage?.contains("NetworkManager answered garbage") ?? false, "\(r)")
        XCTAssertTrue(rig.server.requests().isEmpty)
        XCTAssertTrue(stack.daemon.isRunning)
    }

    /// Root's switch: off, nothing is read or sent and the helper is closed,
    /// the property and Sources say so, and it is kept across a restart;
    /// another uid may not touch it.
    func testRootSwitchesWiFiOffAndOnAndItIsKept() throws {
        rig = try WiFiRig()
        try seeAccessPoints()
        func status() throws -> DaemonStatus {
            DaemonProperties.decode(try rig.peer.geo("GetAll", [.string(GeoConsentAPI.interfaceName)],
                                                     interface: ObjectServer.properties).get().first?.vardictValue ?? [:])
        }
        XCTAssertEqual(try status().sources, [.wifi])
        XCTAssertTrue(try status().wifiEnabled)
        let (app, _) = try rig.tappedApp()
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.rig.helperSocket.helperProcesses().count == 1 })

        // Another user may not switch it unless polkit says so (none on the test
        // bus; a real polkitd decides in tests/systemd).
        let stderr = rig.dir.file("ctl-stderr")
        let denied = try stack.ctl(["wifi", "off"], asUID: 65534, stderrPath: stderr)
        let said = (try? String(contentsOfFile: stderr, encoding: .utf8)) ?? ""
        XCTAssertEqual(denied.status, 1, said)
        XCTAssertTrue(said.contains("Only root may switch Wi-Fi positioning on or off (polkit could not be asked"), said)
        XCTAssertTrue(try status().wifiEnabled)

        let watcher = try stack.peer()
        try watcher.addMatch("type='signal',interface='org.freedesktop.DBus.Properties'")
        XCTAssertEqual(try stack.ctl(["wifi", "off"]).status, 0)
        XCTAssertFalse(try status().wifiEnabled)
        XCTAssertEqual(try status().sources, [.wifi], "still configured; switched off")
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.rig.helperSocket.helperProcesses().isEmpty },
                      "switched off: the helper is closed though the grant holds")
        XCTAssertTrue(stack.peers.pump(timeout: 5) {
            watcher.signals.contains { $0.changedProperties?[DaemonProperties.wifiEnabled] == .bool(false)
                && $0.changedProperties?[DaemonProperties.sources] == .strings(["wifi"]) }
        }, "PropertiesChanged for WiFiEnabled and Sources: \(watcher.signals.map { $0.changedProperties ?? [:] })")
        let off = rig.locate(app)
        XCTAssertEqual(off.errorName, GeoConsentAPI.ErrorName.gpsUnavailable, "\(off)")
        XCTAssertTrue(rig.server.requests().isEmpty && !(rig.networkManager?.calls() ?? "").contains("GetAllAccessPoints"),
                      "off: nothing read, nothing sent")

        // Kept across a restart; on again, a lookup answers.
        try stack.restartDaemon()
        XCTAssertFalse(try status().wifiEnabled)
        XCTAssertEqual(try stack.ctl(["wifi", "on"]).status, 0)
        XCTAssertTrue(try status().wifiEnabled)
        let (again, _) = try rig.tappedApp()
        XCTAssertEqual(try LocationBody.decode(rig.locate(again).get())?.fix.source, .wifi)
        let shown = try stack.ctl(["status"])
        XCTAssertTrue(shown.output.contains("Wi-Fi access points"), shown.output)
    }

    func testAFreshGPSFixWinsOverWiFiAndGPSGoesOnWhenWiFiFails() throws {
        rig = try WiFiRig(gps: true)
        try seeAccessPoints()
        try rig.server.serve("503")
        let (app, _) = try rig.tappedApp()
        let feed = LocationFeed()
        let ticker = LoopTicker(loop: stack.peers.loop, interval: 0.05) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
        ticker.start()
        let r = rig.locate(app)
        ticker.stop()
        let fix = try XCTUnwrap(LocationBody.decode(r.get()))
        XCTAssertEqual(fix.fix.source, .gps)
        XCTAssertTrue(rig.server.requests().isEmpty, "GPS answered: no lookup was made")
        // The receiver silent: after gps-wait Wi-Fi is asked, fails, and the
        // receiver (connected) still answers the request when it speaks.
        let call = app.requestLocation(maxAge: 0, timeout: 10)
        XCTAssertTrue(stack.peers.pump(timeout: 10) { !self.rig.server.requests().isEmpty }, "Wi-Fi asked once GPS was silent")
        XCTAssertFalse(call.isDone, "a connected receiver may still answer")
        ticker.start()
        stack.peers.pump(timeout: 10) { call.isDone }
        ticker.stop()
        XCTAssertEqual(call.result.flatMap { try? $0.get() }.flatMap(LocationBody.decode)?.fix.source, .gps)
    }
}
