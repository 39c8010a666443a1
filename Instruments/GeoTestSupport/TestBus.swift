import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private `dbus-daemon` for one test (ready in a few milliseconds).
///
/// Runs `dbus-daemon --config-file=<root>/tests/dbus/test-bus.conf --nofork
/// --print-address=1 --address=unix:dir=<fresh temp dir>` and reads the
/// address it prints. The directory is mode 0711 and the socket name random,
/// so other uids can connect (tests may act as several users) only when told
/// the address. Nothing is exported: pass `address` explicitly
/// (`--bus ADDRESS`, `busctl --address=`); the caller's session bus is never
/// touched.
public final class TestBus: @unchecked Sendable {
    /// The bus address, e.g. `unix:path=/tmp/geoconsent-test.Ab12Cd/dbus-XYZ,guid=...`.
    public let address: String
    /// The dbus-daemon process.
    public let process: ChildProcess
    /// Its stderr (policy rejections are logged here, which helps when a call is denied).
    public let logPath: String
    private let dir: TempDir

    /// Starts the bus and waits (up to 10 s) for its address.
    /// - Parameter serviceDirectory: a directory of D-Bus `.service` files the bus
    ///   activates names from (as the system bus does through systemd); nil: none,
    ///   nothing is ever started by the bus.
    /// - Throws: `HarnessError` with the daemon's log if it fails to start.
    public init(serviceDirectory: String? = nil) throws {
        dir = try TempDir()
        chmod(dir.path, 0o711)
        logPath = dir.file("dbus-daemon.log")
        var config = TestPaths.testBusConfig
        guard FileManager.default.fileExists(atPath: config) else {
            throw HarnessError("TestBus: no bus config at \(config) (set GEOCONSENT_SOURCE_ROOT?)")
        }
        if let serviceDirectory {
            // The same bus, plus a service directory to activate from.
            let activating = dir.file("activating-bus.conf")
            try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <include>\(config)</include>
              <servicedir>\(serviceDirectory)</servicedir>
            </busconfig>
            """.write(toFile: activating, atomically: true, encoding: .utf8)
            config = activating
        }
        let exe = TestPaths.findExecutable("dbus-daemon") ?? "dbus-daemon"
        process = try ChildProcess(
            executable: exe,
            arguments: ["--config-file=\(config)", "--nofork", "--print-address=1",
                        "--address=unix:dir=\(dir.path)"],
            logPath: logPath, captureStdout: true)
        guard let line = process.readStdoutLine(timeout: 10), line.hasPrefix("unix:") else {
            process.stop()
            throw HarnessError("TestBus: dbus-daemon printed no address; log:\n\(tailOfFile(logPath))")
        }
        address = line.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit { stop() }

    /// Stops the daemon and removes its directory. Idempotent.
    public func stop() {
        process.stop()
        dir.remove()
    }

    /// The daemon's log so far.
    public func log() -> String { tailOfFile(logPath, maxBytes: 1 << 20) }

    /// Runs `busctl --address=<address> ARGS...` and returns its status (nil on
    /// timeout) and stdout, e.g. `busctl(["call", "org.freedesktop.DBus",
    /// "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId"])`.
    public func busctl(_ arguments: [String], timeout: Double = 10) throws -> (status: Int32?, output: String) {
        try TestBus.busctl(address: address, arguments, timeout: timeout)
    }

    /// `busctl --address=ADDRESS ARGS...` against any bus address.
    public static func busctl(address: String, _ arguments: [String],
                              timeout: Double = 10) throws -> (status: Int32?, output: String) {
        let exe = TestPaths.findExecutable("busctl") ?? "busctl"
        return try ChildProcess.run(exe, ["--address=\(address)"] + arguments, timeout: timeout)
    }
}
