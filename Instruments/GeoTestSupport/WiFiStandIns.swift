import Foundation
import GeoDBus

/// The loopback HTTPS geolocate server (tests/wifi/geolocate-server.py): a
/// real TLS server with a test CA it makes itself, which records what it was
/// sent and answers as told (`serve`).
public final class GeolocateServer {
    public let dir: TempDir
    public let process: ChildProcess
    public let port: Int

    public var url: String { "https://127.0.0.1:\(port)/v1/geolocate" }
    /// The CA its certificate is signed with.
    public var caFile: String { dir.file("ca.pem") }

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw HarnessError("GeolocateServer: /usr/bin/openssl is missing (scripts/deps.sh installs it)")
        }
        dir = try TempDir()
        process = try ChildProcess(executable: "/usr/bin/python3",
                                   arguments: [TestPaths.sourceRoot + "/tests/wifi/geolocate-server.py", dir.path],
                                   logPath: dir.file("server.log"))
        let deadline = Date().addingTimeInterval(20)
        var port: Int?
        while Date() < deadline, port == nil, process.isRunning {
            port = (try? String(contentsOfFile: dir.file("port"), encoding: .utf8)).flatMap { Int($0) }
            if port == nil { usleep(20_000) }
        }
        guard let port else {
            process.stop()
            throw HarnessError("the geolocate server did not start: \(tailOfFile(dir.file("server.log")))")
        }
        self.port = port
    }

    /// How it answers from now on (geolocate-server.py's modes).
    public func serve(_ mode: String) throws {
        try mode.write(toFile: dir.file("mode"), atomically: true, encoding: .utf8)
    }

    /// Every request it got, parsed.
    public func requests() -> [[String: Any]] {
        rawRequests().split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    /// The requests as it logged them.
    public func rawRequests() -> String { (try? String(contentsOfFile: dir.file("requests.jsonl"), encoding: .utf8)) ?? "" }

    public func stop() {
        process.stop()
        dir.remove()
    }
}

/// The network helper's socket as systemd's geoconsent-wifi.socket provides
/// it (`Accept=yes`, standard input and output the connection), through
/// systemd-socket-activate: each connection starts `program`.
public final class HelperSocket {
    public let path: String
    private(set) public var activator: ChildProcess?

    public init(path: String, program: [String], logPath: String) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            throw HarnessError("HelperSocket: /usr/bin/systemd-socket-activate is missing (the systemd package)")
        }
        self.path = path
        let activator = try ChildProcess(executable: "/usr/bin/systemd-socket-activate",
                                         arguments: ["--listen=\(path)", "--accept", "--inetd"] + program, logPath: logPath)
        self.activator = activator
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, access(path, F_OK) != 0, activator.isRunning { usleep(5_000) }
        guard access(path, F_OK) == 0 else {
            activator.stop()
            throw HarnessError("systemd-socket-activate did not listen on \(path): \(tailOfFile(logPath))")
        }
    }

    /// The helper's own config: the server and its CA.
    public static func config(for server: GeolocateServer, trustCA: Bool = true) -> String {
        "[sources]\nwifi-url = \(server.url)\nwifi-ca-file = \(trustCA ? server.caFile : "")\n"
    }

    /// No socket any more: the helper cannot be reached.
    public func stop() {
        activator?.stop()
        activator = nil
        unlink(path)
    }

    /// The helper processes running now (the activator's children).
    public func helperProcesses() -> [pid_t] {
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

/// NetworkManager on a test bus: python-dbusmock's `networkmanager` template
/// (told the bus as its system bus), with one Wi-Fi device, access points
/// added as NetworkManager would list them after a scan, and every method
/// call logged.
public final class NetworkManagerStandIn {
    public static let busName = "org.freedesktop.NetworkManager"
    public static let mockInterface = "org.freedesktop.DBus.Mock"

    public let process: ChildProcess
    private let peer: BusPeer
    private let callLog: String
    public private(set) var device = ""

    public init(busAddress: String, peer: BusPeer, loop: PeerLoop, logPath: String, callLog: String) throws {
        guard (try? ChildProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]))?.status == 0 else {
            throw HarnessError("python3-dbusmock is not installed (scripts/deps.sh installs it)")
        }
        self.peer = peer
        self.callLog = callLog
        process = try ChildProcess(executable: "/usr/bin/python3",
                                   arguments: ["-m", "dbusmock", "--template", "networkmanager", "-l", callLog],
                                   logPath: logPath, environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
        let up = loop.pump(timeout: 15) {
            (try? peer.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                            [.string(Self.busName)], timeout: 2).get().first?.boolValue) == true
        }
        guard up else {
            process.stop()
            throw HarnessError("dbusmock's NetworkManager did not come up: \(tailOfFile(logPath))")
        }
        device = try peer.call(Self.busName, "/org/freedesktop", Self.mockInterface, "AddWiFiDevice",
                               [.string("wlan0dev"), .string("wlan0"), .uint32(100)]).get().first?.stringValue ?? ""
    }

    /// An access point seen now (`LastSeen` set to the boot clock now, as
    /// NetworkManager sets it after a scan; the template says 1), or at `lastSeen`.
    public func addAccessPoint(_ name: String, ssid: String, bssid: String, strength: UInt8, lastSeen: Int32? = nil) throws {
        let path = try peer.call(Self.busName, "/org/freedesktop", Self.mockInterface, "AddAccessPoint",
                                 [.string(device), .string(name), .string(ssid), .string(bssid), .uint32(2),
                                  .uint32(2412), .uint32(54000), .byte(strength), .uint32(0)]).get().first?.stringValue ?? ""
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        _ = try peer.call(Self.busName, path, Self.mockInterface, "UpdateProperties",
                          [.string("org.freedesktop.NetworkManager.AccessPoint"),
                           .vardict(["LastSeen": .int32(lastSeen ?? Int32(ts.tv_sec))])]).get()
    }

    /// A method of NetworkManager's replaced (`AddMethod`), to answer garbage.
    public func replace(_ interface: String, _ member: String, out: String, code: String, at path: String) throws {
        _ = try peer.call(Self.busName, path, Self.mockInterface, "AddMethod",
                          [.string(interface), .string(member), .string(""), .string(out), .string(code)]).get()
    }

    /// The methods it was called with, as dbusmock logged them.
    public func calls() -> String { (try? String(contentsOfFile: callLog, encoding: .utf8)) ?? "" }

    public func stop() { process.stop() }
}
