import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The built `geoconsentd`, started against a test bus and a test gpsd.
///
/// Command line: `geoconsentd --bus ADDRESS --gpsd 127.0.0.1:PORT --config FILE
/// --state-dir DIR EXTRA...` (docs/dbus-api.md "Command lines"). The binary comes from
/// `TestPaths.binDir` (`$GEOCONSENT_BIN_DIR`, else beside the running test
/// bundle). `init` returns once the daemon owns `org.geoconsent.GeoConsent1`.
public final class DaemonInstance: @unchecked Sendable {
    /// The well-known name the daemon owns when ready.
    public static let busName = "org.geoconsent.GeoConsent1"

    /// The process.
    public let process: ChildProcess
    /// Its pid.
    public var pid: pid_t { process.pid }
    /// The bus it was told to use.
    public let busAddress: String
    /// The gpsd port it was told to use.
    public let gpsdPort: UInt16
    /// The config file written from `configText`.
    public let configPath: String
    /// The state directory in use.
    public let stateDir: String
    /// Its stderr (and stdout).
    public let logPath: String
    /// The full argument list it was started with (without argv[0]).
    public let arguments: [String]
    private let dir: TempDir

    /// Starts the daemon and waits (up to 10 s) until it owns `busName`.
    /// - Parameters:
    ///   - configText: contents of the config file (empty = defaults).
    ///   - stateDir: state directory; nil for a fresh one inside the instance's
    ///     temp dir (removed with it). A directory you pass is never removed.
    ///   - extraArguments: appended after the standard ones.
    ///   - environment: added to the daemon's environment.
    ///   - executable: the binary to run instead of `TestPaths.binDir/geoconsentd`.
    /// - Throws: `HarnessError` with the daemon's log if it exits first or
    ///   does not own the name in time.
    public init(busAddress: String, gpsdPort: UInt16, configText: String = "", stateDir: String? = nil,
                extraArguments: [String] = [], environment: [String: String] = [:],
                executable: String? = nil) throws {
        self.busAddress = busAddress
        self.gpsdPort = gpsdPort
        dir = try TempDir()
        configPath = dir.file("geoconsent.conf")
        logPath = dir.file("geoconsentd.log")
        // A test daemon stays up between calls however long a test waits; a test
        // of idle exit names the key itself (a later [daemon] section wins).
        var text = configText.contains("idle-exit") ? configText : "[daemon]\nidle-exit = 0\n" + configText
        // Nor does a test read the machine's own static position file, unless it names one.
        if !configText.contains("static-file") { text = "[sources]\nstatic-file =\n" + text }
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
        if let s = stateDir {
            self.stateDir = s
        } else {
            self.stateDir = dir.file("state")
            mkdir(self.stateDir, 0o700)
        }
        let exe = executable ?? (TestPaths.binDir + "/geoconsentd")
        guard access(exe, X_OK) == 0 else {
            throw HarnessError("DaemonInstance: no executable \(exe) (build first, or set GEOCONSENT_BIN_DIR)")
        }
        arguments = ["--bus", busAddress, "--gpsd", "127.0.0.1:\(gpsdPort)", "--config", configPath,
                     "--state-dir", self.stateDir] + extraArguments
        process = try ChildProcess(executable: exe, arguments: arguments, logPath: logPath,
                                   environment: environment)
        do {
            try waitForBusName(timeout: 10)
        } catch {
            process.stop()
            throw error
        }
    }

    deinit { process.stop() }

    /// Polls `NameHasOwner(busName)` every ~20 ms until true.
    /// - Throws: `HarnessError` with the log if the daemon exits or `timeout` passes.
    public func waitForBusName(timeout: Double) throws {
        let deadline = monotonicNow() + timeout
        while true {
            let r = try? TestBus.busctl(address: busAddress,
                                        ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "NameHasOwner", "s", DaemonInstance.busName],
                                        timeout: 5)
            if let r = r, r.status == 0, r.output.contains("true") { return }
            if !process.isRunning {
                throw HarnessError("geoconsentd exited with status \(process.exitCode ?? -1) before owning "
                                   + "\(DaemonInstance.busName); log:\n\(tailOfFile(logPath))")
            }
            if monotonicNow() > deadline {
                throw HarnessError("geoconsentd did not own \(DaemonInstance.busName) within \(timeout) s; "
                                   + "log:\n\(tailOfFile(logPath))")
            }
            sleepSeconds(0.02)
        }
    }

    /// Everything the daemon logged so far.
    public func log() -> String { tailOfFile(logPath, maxBytes: 16 << 20) }

    /// SIGTERM, up to 3 s, then SIGKILL; reaped. Idempotent.
    public func stop() { process.stop() }

    /// SIGKILL (a crash, as far as its clients can tell); reaped.
    public func kill9() { process.kill9() }

    /// Sends a signal (e.g. SIGTERM to check a clean exit with `waitForExit`).
    public func signal(_ sig: Int32) { process.signal(sig) }

    /// Waits for the daemon to exit: its exit status (128+signal for a signal
    /// death), or nil on timeout.
    @discardableResult
    public func waitForExit(timeout: Double) -> Int32? { process.waitForExit(timeout: timeout) }

    /// True while it runs.
    public var isRunning: Bool { process.isRunning }
}
