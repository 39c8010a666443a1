import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The real GeoClue (Debian's `geoclue-2.0`, `/usr/libexec/geoclue`) on a
/// private bus, as a reference for what GeoClue2 clients see from it.
///
/// GeoClue reads its configuration from `/etc/geoclue/geoclue.conf` only, so it
/// runs in a mount namespace of its own (`unshare -m`, root only) where a
/// config of the harness is bind-mounted over that file; the host's `/etc` is
/// never touched. The config enables only the `network-nmea` source, reading
/// NMEA from `nmea` (an `NMEASocketServer`), and points the network source
/// (WiFi and GeoIP, used below exact accuracy) at a closed local port, so
/// nothing is looked up on the network and the NMEA fed is its only source.
/// `-t 0`: it never exits for inactivity. It owns `org.freedesktop.GeoClue2`
/// on `busAddress` (its system bus there), which the test bus allows anyone.
public final class GeoClueInstance: @unchecked Sendable {
    /// Why GeoClue cannot run here at all (not installed; no mount namespace,
    /// which needs root): a reason to skip, unlike a GeoClue that fails.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where Debian installs GeoClue's daemon.
    public static let executable = "/usr/libexec/geoclue"

    /// True when the daemon is installed.
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// The socket GeoClue reads NMEA from: `send` to it feeds GeoClue.
    public let nmea: NMEASocketServer
    /// The GeoClue process (its pid is geoclue's: `sh` and `unshare` exec it).
    public let process: ChildProcess
    /// Its stderr (with `debug`, every fix and client it handles).
    public let logPath: String
    private let dir: TempDir

    /// Starts GeoClue on `busAddress` and waits (up to 10 s) until it owns its name.
    /// - Parameters:
    ///   - agentWhitelist: the ids `Manager.AddAgent` accepts (`[agent] whitelist`).
    ///   - debug: log at debug level (`G_MESSAGES_DEBUG`); off for measurements.
    /// - Throws:
    ///   `Unavailable` when it is not installed or its config cannot be mounted
    ///   (not root); `HarnessError` (with its log) when it does not take its name.
    public init(busAddress: String, agentWhitelist: [String] = ["gnome-shell", "geoclue-demo-agent"],
                debug: Bool = true) throws {
        guard Self.isInstalled else { throw Unavailable(description: "\(Self.executable) is not installed (geoclue-2.0)") }
        guard getuid() == 0 else {
            throw Unavailable(description: "GeoClue reads only /etc/geoclue/geoclue.conf; giving it a config of its own needs a mount namespace, and that needs root")
        }
        dir = try TempDir()
        logPath = dir.file("geoclue.log")
        nmea = try NMEASocketServer(path: dir.file("nmea.sock"))
        let config = dir.file("geoclue.conf")
        try Self.config(nmeaSocket: nmea.path, agentWhitelist: agentWhitelist).write(toFile: config, atomically: true, encoding: .utf8)
        let script = "mount --bind \"$0\" /etc/geoclue/geoclue.conf || exit 97; exec \(Self.executable) -t 0"
        var env = ["DBUS_SYSTEM_BUS_ADDRESS": busAddress]
        if debug { env["G_MESSAGES_DEBUG"] = "Geoclue" }
        let unshare = TestPaths.findExecutable("unshare", candidates: ["/usr/bin/unshare"]) ?? "unshare"
        process = try ChildProcess(executable: unshare, arguments: ["-m", "/bin/sh", "-c", script, config],
                                   logPath: logPath, environment: env)
        let deadline = monotonicNow() + 10
        while true {
            if let r = try? TestBus.busctl(address: busAddress, ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                                 "org.freedesktop.DBus", "NameHasOwner", "s",
                                                                 "org.freedesktop.GeoClue2"]),
               r.output.contains("true") { break }
            if !process.isRunning {
                let status = process.exitCode ?? -1
                let log = tailOfFile(logPath)
                dir.remove()
                if status == 97 {
                    throw Unavailable(description: "cannot bind-mount a config over /etc/geoclue/geoclue.conf in a mount namespace: \(log)")
                }
                throw HarnessError("GeoClueInstance: geoclue exited with status \(status); log:\n\(log)")
            }
            if monotonicNow() > deadline {
                process.stop()
                throw HarnessError("GeoClueInstance: geoclue did not own org.freedesktop.GeoClue2 in 10 s; log:\n\(tailOfFile(logPath))")
            }
            sleepSeconds(0.02)
        }
    }

    deinit { stop() }

    /// The config GeoClue gets: only the NMEA socket as a source.
    public static func config(nmeaSocket: String, agentWhitelist: [String]) -> String {
        """
        [agent]
        whitelist=\(agentWhitelist.joined(separator: ";"))

        [network-nmea]
        enable=true
        nmea-socket=\(nmeaSocket)

        [wifi]
        enable=false
        url=http://127.0.0.1:9/v1/geolocate

        [3g]
        enable=false

        [cdma]
        enable=false

        [modem-gps]
        enable=false

        [compass]
        enable=false

        """
    }

    /// Stops GeoClue and the NMEA socket, and removes the directory. Idempotent.
    public func stop() {
        process.stop()
        nmea.stop()
        dir.remove()
    }

    /// GeoClue's log so far.
    public func log() -> String { tailOfFile(logPath, maxBytes: 1 << 20) }
}
