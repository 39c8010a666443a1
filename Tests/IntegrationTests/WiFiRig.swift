import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Wi-Fi positioning's real parts for a test: the loopback HTTPS geolocate
/// server with its test CA (tests/wifi/geolocate-server.py, which records
/// what it was sent), the real network helper socket-activated per
/// connection by systemd-socket-activate (as geoconsent-wifi.socket does),
/// NetworkManager through python-dbusmock's `networkmanager` template on the
/// test bus, and the daemon configured for them.
final class WiFiRig {
    let dir: TempDir
    let server: ChildProcess
    let port: Int
    private(set) var activator: ChildProcess?
    let stack: Stack
    private(set) var networkManager: ChildProcess?
    let peer: BusPeer
    var device = ""

    var socketPath: String { dir.file("wifi.sock") }
    var url: String { "https://127.0.0.1:\(port)/v1/geolocate" }
    var caFile: String { dir.file("ca.pem") }

    /// `helper`: the program the socket starts (nil: the real helper);
    /// `trustCA`: the helper verifies the server with the test CA.
    init(gps: Bool = false, helper: [String]? = nil, trustCA: Bool = true, extraConfig: String = "") throws {
        for tool in ["/usr/bin/systemd-socket-activate", "/usr/bin/openssl"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is missing (scripts/deps.sh installs systemd and openssl)")
        }
        dir = try TempDir()
        server = try ChildProcess(executable: "/usr/bin/python3",
                                  arguments: [TestPaths.sourceRoot + "/tests/wifi/geolocate-server.py", dir.path],
                                  logPath: dir.file("server.log"))
        let deadline = Date().addingTimeInterval(20)
        var port: Int?
        while Date() < deadline, port == nil, server.isRunning {
            port = (try? String(contentsOfFile: dir.file("port"), encoding: .utf8)).flatMap { Int($0) }
            if port == nil { usleep(20_000) }
        }
        guard let port else {
            server.stop()
            throw HarnessError("the geolocate server did not start: \(tailOf(dir.file("server.log")))")
        }
        self.port = port
        let helperConfig = dir.file("helper.conf")
        try "[sources]\nwifi-url = https://127.0.0.1:\(port)/v1/geolocate\nwifi-ca-file = \(trustCA ? dir.file("ca.pem") : "")\n"
            .write(toFile: helperConfig, atomically: true, encoding: .utf8)
        let program = helper ?? [TestPaths.binDir + "/geoconsent-wifi-helper", "--config", helperConfig, "--timeout", "2"]
        activator = try ChildProcess(executable: "/usr/bin/systemd-socket-activate",
                                     arguments: ["--listen=\(dir.file("wifi.sock"))", "--accept", "--inetd"] + program,
                                     logPath: dir.file("helper.log"))
        while Date() < deadline, access(dir.file("wifi.sock"), F_OK) != 0 { usleep(10_000) }
        stack = try Stack(config: """
        [sources]
        gps = \(gps)
        gps-wait = 0.3
        wifi-url = https://127.0.0.1:\(port)/v1/geolocate
        wifi-helper = \(dir.file("wifi.sock"))
        wifi-interval = 5
        \(extraConfig)
        """)
        peer = try stack.peer()
    }

    func stop() {
        stack.stop()
        networkManager?.stop()
        activator?.stop()
        server.stop()
        dir.remove()
    }

    /// Stops the socket: the helper cannot be reached.
    func stopHelperSocket() {
        activator?.stop()
        activator = nil
        unlink(socketPath)
    }

    // MARK: The server

    /// How the server answers from now on (geolocate-server.py's modes).
    func serve(_ mode: String) throws {
        try mode.write(toFile: dir.file("mode"), atomically: true, encoding: .utf8)
    }

    /// Every request the server got, parsed.
    func requests() -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// The raw bytes of every request the server got.
    func rawRequests() -> String { (try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "" }

    // MARK: NetworkManager

    static let nmBus = "org.freedesktop.NetworkManager"
    static let mockInterface = "org.freedesktop.DBus.Mock"

    /// python-dbusmock's NetworkManager on the test bus with one Wi-Fi device.
    func startNetworkManager() throws {
        guard (try? ChildProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]))?.status == 0 else {
            throw XCTSkip("python3-dbusmock is not installed (scripts/deps.sh installs it)")
        }
        networkManager = try ChildProcess(executable: "/usr/bin/python3",
                                          arguments: ["-m", "dbusmock", "--template", "networkmanager",
                                                      "-l", dir.file("nm-calls.log")],
                                          logPath: dir.file("nm.log"),
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": stack.bus.address])
        let up = stack.peers.pump(timeout: 15) {
            (try? self.peer.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                                 [.string(Self.nmBus)], timeout: 2).get().first?.boolValue) == true
        }
        guard up else { throw HarnessError("dbusmock's NetworkManager did not come up: \(tailOf(dir.file("nm.log")))") }
        device = try peer.call(Self.nmBus, "/org/freedesktop", Self.mockInterface, "AddWiFiDevice",
                               [.string("wlan0dev"), .string("wlan0"), .uint32(100)]).get().first?.stringValue ?? ""
    }

    /// An access point NetworkManager sees now (its `LastSeen` set to now, as
    /// NetworkManager sets it after a scan: the template says 1).
    func addAccessPoint(_ name: String, ssid: String, bssid: String, strength: UInt8, lastSeen: Int32? = nil) throws {
        let path = try peer.call(Self.nmBus, "/org/freedesktop", Self.mockInterface, "AddAccessPoint",
                                 [.string(device), .string(name), .string(ssid), .string(bssid), .uint32(2),
                                  .uint32(2412), .uint32(54000), .byte(strength), .uint32(0)]).get().first?.stringValue ?? ""
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        _ = try peer.call(Self.nmBus, path, Self.mockInterface, "UpdateProperties",
                          [.string("org.freedesktop.NetworkManager.AccessPoint"),
                           .vardict(["LastSeen": .int32(lastSeen ?? Int32(ts.tv_sec))])]).get()
    }

    /// The methods NetworkManager was called with, as dbusmock logged them.
    func networkManagerCalls() -> String { (try? String(contentsOfFile: dir.file("nm-calls.log"), encoding: .utf8)) ?? "" }

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

    /// The helper processes running now (the socket activator's children).
    func helperProcesses() -> [pid_t] {
        guard let activator else { return [] }
        var out: [pid_t] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == activator.pid { out.append(pid) }
        }
        return out
    }
}
