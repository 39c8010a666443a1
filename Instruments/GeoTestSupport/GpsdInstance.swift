import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private gpsd fed with NMEA over UDP: no hardware, no gpsfake.
///
/// Runs `gpsd -N -n -b -S PORT udp://127.0.0.1:UDPPORT` on ports from
/// `FreePort`: foreground (-N), polling the source without waiting for a
/// client (-n), read-only towards the "device" (-b). `send(_:)` delivers NMEA
/// sentences as UDP datagrams. gpsd reports the first fix ~60 ms after the
/// first sentences, but datagrams sent before it has bound the UDP port are
/// lost, so callers resend until they see what they want (`sendRepeatedly`).
/// Many instances can run side by side.
public final class GpsdInstance: @unchecked Sendable {
    /// gpsd's TCP (JSON protocol) port on 127.0.0.1.
    public let port: UInt16
    /// The UDP port gpsd reads NMEA from, on 127.0.0.1.
    public let udpPort: UInt16
    /// gpsd's stderr.
    public let logPath: String
    /// The gpsd binary used.
    public let executable: String

    private let lock = NSLock()
    private var child: ChildProcess?
    private let dir: TempDir
    private let udpFD: Int32

    /// Picks two free ports, starts gpsd and waits (up to 10 s) until its TCP
    /// port accepts connections.
    public init() throws {
        guard let exe = TestPaths.findExecutable("gpsd", candidates: ["/usr/sbin/gpsd"]) else {
            throw HarnessError("GpsdInstance: gpsd not found (apt-get install gpsd; see scripts/deps.sh)")
        }
        executable = exe
        dir = try TempDir()
        logPath = dir.file("gpsd.log")
        port = try FreePort.pick()
        udpPort = try FreePort.pick()
        udpFD = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard udpFD >= 0 else { throw HarnessError("GpsdInstance: socket: \(String(cString: strerror(errno)))") }
        try start()
    }

    deinit {
        stop()
        close(udpFD)
    }

    /// The running gpsd process, if any.
    public var process: ChildProcess? {
        lock.lock(); defer { lock.unlock() }
        return child
    }

    /// True while gpsd runs.
    public var isRunning: Bool { process?.isRunning ?? false }

    private func start() throws {
        let p = try ChildProcess(
            executable: executable,
            arguments: ["-N", "-n", "-b", "-S", String(port), "udp://127.0.0.1:\(udpPort)"],
            logPath: logPath)
        lock.lock(); child = p; lock.unlock()
        try waitUntilListening(timeout: 10)
    }

    /// Waits until a TCP connection to `port` succeeds.
    /// - Throws: `HarnessError` (with gpsd's log) if gpsd exits or `timeout` passes.
    public func waitUntilListening(timeout: Double) throws {
        let deadline = monotonicNow() + timeout
        while true {
            if tcpConnectSucceeds(port: port) { return }
            if let p = process, !p.isRunning {
                throw HarnessError("gpsd exited with status \(p.exitCode ?? -1); log:\n\(tailOfFile(logPath))")
            }
            if monotonicNow() > deadline {
                throw HarnessError("gpsd not listening on 127.0.0.1:\(port) after \(timeout) s; log:\n\(tailOfFile(logPath))")
            }
            sleepSeconds(0.005)
        }
    }

    /// Sends each sentence as one UDP datagram to 127.0.0.1:`udpPort`,
    /// appending CRLF where missing. Losses (gpsd down, not yet bound) are silent.
    public func send(_ nmea: [String]) {
        var addr = loopbackAddress(port: udpPort)
        for s in nmea {
            var line = s
            if line.hasSuffix("\r\n") {
            } else if line.hasSuffix("\n") {
                line.removeLast()
                line += "\r\n"
            } else {
                line += "\r\n"
            }
            let bytes = Array(line.utf8)
            _ = bytes.withUnsafeBytes { buf in
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(udpFD, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), $0,
                               socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
    }

    /// Sends `nmea` every `interval` seconds until `done()` returns true (checked
    /// after each send) or `timeout` passes. Returns whether `done()` succeeded.
    @discardableResult
    public func sendRepeatedly(_ nmea: [String], interval: Double = 0.05, timeout: Double = 5,
                               until done: () -> Bool) -> Bool {
        let deadline = monotonicNow() + timeout
        while true {
            send(nmea)
            let next = monotonicNow() + interval
            // Poll the condition a few times within one interval.
            while monotonicNow() < next {
                if done() { return true }
                sleepSeconds(min(0.005, max(0, next - monotonicNow())))
            }
            if done() { return true }
            if monotonicNow() > deadline { return false }
        }
    }

    /// Stops gpsd (SIGTERM, then SIGKILL after 3 s) but keeps the ports, so
    /// `restart()` can bring it back for clients that reconnect.
    public func kill() {
        let p = process
        p?.stop()
    }

    /// Starts gpsd again on the same ports (stopping it first if it runs) and
    /// waits until it listens.
    public func restart() throws {
        kill()
        try start()
    }

    /// Stops gpsd. Idempotent. (Its log stays readable until the instance is
    /// released; the temp directory goes with it.)
    public func stop() {
        kill()
        lock.lock(); child = nil; lock.unlock()
    }

    /// gpsd's log so far.
    public func log() -> String { tailOfFile(logPath, maxBytes: 1 << 20) }
}
