import Foundation
import XCTest
@testable import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Self-tests of the GeoTestSupport harness: real dbus-daemon, real gpsd,
/// real child processes.
final class GeoTestSupportSelfTests: XCTestCase {

    // MARK: TestBus

    func testPrivateBusAnswersGetId() throws {
        let bus = try TestBus()
        XCTAssertTrue(bus.address.hasPrefix("unix:path=/tmp/geoconsent-test."), bus.address)
        let r = try bus.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus", "GetId"])
        XCTAssertEqual(r.status, 0, bus.log())
        XCTAssertTrue(r.output.hasPrefix("s \""), r.output)
        let pid = bus.process.pid
        bus.stop()
        XCTAssertFalse(bus.process.isRunning)
        XCTAssertNotEqual(kill(pid, 0), 0, "dbus-daemon still exists after stop()")
    }

    // MARK: GpsdInstance

    func testGpsdReportsTPVFromUDPNMEA() throws {
        let gpsd = try GpsdInstance()
        XCTAssertNotEqual(gpsd.port, gpsd.udpPort)
        try gpsd.waitUntilListening(timeout: 5)

        let client = try LineSocket(port: gpsd.port)
        client.write("?WATCH={\"enable\":true,\"json\":true}\n")

        let lat = 48.117300, lon = 11.516667
        let epoch = NMEA.epoch(at: Date(), lat: lat, lon: lon, altitude: 545.4, speedKnots: 10, course: 84.4)

        var tpv: [String: Any]?
        let ok = gpsd.sendRepeatedly(epoch, interval: 0.05, timeout: 10) {
            while let line = client.readLine(timeout: 0) {
                guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      obj["class"] as? String == "TPV", obj["lat"] != nil else { continue }
                tpv = obj
                return true
            }
            return false
        }
        XCTAssertTrue(ok, "no TPV with a position from gpsd; log:\n\(gpsd.log())")
        let gotLat = try XCTUnwrap(tpv?["lat"] as? Double)
        let gotLon = try XCTUnwrap(tpv?["lon"] as? Double)
        XCTAssertEqual(gotLat, lat, accuracy: 1e-6)
        XCTAssertEqual(gotLon, lon, accuracy: 1e-6)
    }

    func testGpsdKillAndRestartKeepPorts() throws {
        let gpsd = try GpsdInstance()
        let (port, udp) = (gpsd.port, gpsd.udpPort)
        gpsd.kill()
        XCTAssertFalse(gpsd.isRunning)
        XCTAssertThrowsError(try gpsd.waitUntilListening(timeout: 0.2))
        try gpsd.restart()
        XCTAssertEqual(gpsd.port, port)
        XCTAssertEqual(gpsd.udpPort, udp)
        try gpsd.waitUntilListening(timeout: 5)
        gpsd.stop()
        XCTAssertFalse(gpsd.isRunning)
    }

    // MARK: ChildProcess

    func testStopKillsAChildThatIgnoresSIGTERM() throws {
        let dir = try TempDir()
        // The sleep's pid is printed so we can check the whole group died.
        let p = try ChildProcess(executable: "/bin/sh",
                                 arguments: ["-c", "trap '' TERM; sleep 30 & echo $!; wait"],
                                 logPath: dir.file("log"), captureStdout: true)
        let line = try XCTUnwrap(p.readStdoutLine(timeout: 5))
        let sleepPid = try XCTUnwrap(pid_t(line))
        XCTAssertTrue(p.isRunning)

        let start = Date()
        p.stop()
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertLessThan(elapsed, 4.0)
        XCTAssertGreaterThan(elapsed, 2.5, "SIGTERM should have been ignored for the 3 s grace period")
        XCTAssertFalse(p.isRunning)
        XCTAssertEqual(p.waitForExit(timeout: 0), 128 + SIGKILL)
        XCTAssertTrue(processGone(sleepPid), "grandchild \(sleepPid) survived stop()")
        p.stop()   // idempotent
    }

    func testExitStatusAndDefaultSIGTERM() throws {
        let dir = try TempDir()
        let a = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "echo hi >&2; exit 3"],
                                 logPath: dir.file("a.log"))
        XCTAssertEqual(a.waitForExit(timeout: 5), 3)
        XCTAssertEqual(try String(contentsOfFile: dir.file("a.log"), encoding: .utf8), "hi\n")

        // Spawned from a test thread, SIGTERM must still be deliverable
        // (Foundation's Process gets this wrong; see ChildProcess docs).
        let b = try ChildProcess(executable: "sleep", arguments: ["30"], logPath: dir.file("b.log"))
        XCTAssertNil(b.waitForExit(timeout: 0.05))
        b.signal(SIGTERM)
        XCTAssertEqual(b.waitForExit(timeout: 3), 128 + SIGTERM)

        let c = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "echo \"$GEO_X\"; echo tail"],
                                 logPath: dir.file("c.log"), captureStdout: true,
                                 environment: ["GEO_X": "from-env"])
        XCTAssertEqual(c.readStdoutLine(timeout: 5), "from-env")
        XCTAssertEqual(c.readStdoutLine(timeout: 5), "tail")
        XCTAssertNil(c.readStdoutLine(timeout: 5))   // EOF
        XCTAssertEqual(c.waitForExit(timeout: 5), 0)

        XCTAssertThrowsError(try ChildProcess(executable: "/nonexistent/geo", arguments: [],
                                              logPath: dir.file("d.log")))
    }

    // MARK: FreePort, TempDir

    func testFreePortsAreDistinctAndBindable() throws {
        var seen = Set<UInt16>()
        for _ in 0..<20 {
            let p = try FreePort.pick()
            XCTAssertTrue(seen.insert(p).inserted, "port \(p) handed out twice")
            XCTAssertEqual(FreePort.bindLoopback(type: SOCK_STREAM, port: p), p, "TCP port \(p) not bindable")
            XCTAssertEqual(FreePort.bindLoopback(type: SOCK_DGRAM, port: p), p, "UDP port \(p) not bindable")
        }
    }

    func testTempDirIsRemoved() throws {
        var d: TempDir? = try TempDir()
        let path = d!.path
        XCTAssertTrue(path.hasPrefix("/tmp/geoconsent-test."))
        try "x".write(toFile: d!.file("sub"), atomically: false, encoding: .utf8)
        d = nil
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    // MARK: NMEA

    func testNMEAChecksums() {
        let known = "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"
        XCTAssertEqual(NMEA.checksum("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), "47")
        XCTAssertTrue(NMEA.isValid(known))
        XCTAssertFalse(NMEA.isValid(known.replacingOccurrences(of: "*47", with: "*48")))
        XCTAssertEqual(NMEA.parseCoordinate("4807.038", hemisphere: "N") ?? 0, 48.1173, accuracy: 1e-9)
        XCTAssertEqual(NMEA.parseCoordinate("01131.000", hemisphere: "W") ?? 0, -11.516666667, accuracy: 1e-8)

        let gga = NMEA.gga(time: (12, 35, 19), lat: 48.1173, lon: 11.516666666666667,
                           satellites: 8, hdop: 0.9, altitude: 545.4, geoidSeparation: 46.9)
        XCTAssertEqual(gga, "$GPGGA,123519.00,4807.03800,N,01131.00000,E,1,08,0.9,545.4,M,46.9,M,,*"
                       + NMEA.checksum("GPGGA,123519.00,4807.03800,N,01131.00000,E,1,08,0.9,545.4,M,46.9,M,,"))
        let rmc = NMEA.rmc(time: (23, 59, 59.999), date: (31, 12, 2024), lat: -33.8688, lon: -151.2093,
                           speedKnots: 3.25, course: 359.9)
        XCTAssertTrue(NMEA.isValid(rmc), rmc)
        XCTAssertTrue(rmc.hasPrefix("$GPRMC,235959.99,A,3352.12800,S,15112.55800,W,3.25,359.9,311224,,,A*"), rmc)
        let gsa = NMEA.gsa(prns: [1, 2, 3], pdop: 1.5, hdop: 0.9, vdop: 1.2)
        XCTAssertTrue(gsa.hasPrefix("$GPGSA,A,3,01,02,03,,,,,,,,,,1.5,0.9,1.2*"), gsa)
        XCTAssertTrue(NMEA.isValid(gsa))

        var comps = DateComponents()
        (comps.year, comps.month, comps.day, comps.hour, comps.minute, comps.second) = (2024, 6, 14, 10, 0, 5)
        let epoch = NMEA.epoch(at: comps, lat: 52.52, lon: 13.405, altitude: 36, speedKnots: 0, course: 0)
        XCTAssertEqual(epoch.map(NMEA.type(of:)), ["GGA", "GSA", "RMC"])
        XCTAssertTrue(epoch.allSatisfy(NMEA.isValid))
        XCTAssertTrue(epoch[2].contains(",100005.00,A,5231.20000,N,01324.30000,E,0.00,0.0,140624,"), epoch[2])

        let retimed = NMEA.retime(epoch[2], to: Date(timeIntervalSince1970: 0))
        XCTAssertTrue(retimed.hasPrefix("$GPRMC,000000.00,A,") && retimed.contains(",010170,"), retimed)
        XCTAssertTrue(NMEA.isValid(retimed))
    }

    func testTrackFileHasAtLeast300Epochs() throws {
        let epochs = try NMEA.loadTrack(path: TestPaths.trackFile)
        XCTAssertGreaterThanOrEqual(epochs.count, 300)
        for (i, e) in epochs.enumerated() {
            XCTAssertEqual(e.map(NMEA.type(of:)), ["GGA", "GSA", "RMC"], "epoch \(i)")
        }
    }

    // MARK: DaemonInstance (against stand-ins; the real daemon has its own tests)

    func testDaemonInstanceReportsEarlyExitWithLog() throws {
        let bus = try TestBus()
        let dir = try TempDir()
        let fake = dir.file("geoconsentd")
        try "#!/bin/sh\necho \"fake daemon args: $*\" >&2\nexit 3\n".write(toFile: fake, atomically: true, encoding: .utf8)
        chmod(fake, 0o755)
        XCTAssertThrowsError(try DaemonInstance(busAddress: bus.address, gpsdPort: 2,
                                                configText: "x", extraArguments: ["--extra"],
                                                executable: fake)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("status 3"), text)
            XCTAssertTrue(text.contains("fake daemon args: --bus \(bus.address) --gpsd 127.0.0.1:2 --config /tmp/geoconsent-test."), text)
            XCTAssertTrue(text.contains("--extra"), text)
        }
    }

    func testDaemonInstanceWaitsForBusName() throws {
        // Against the real binary from the build directory; skipped while it
        // cannot own the name yet (e.g. before the daemon is written).
        let bus = try TestBus()
        let gpsd = try GpsdInstance()
        let daemon: DaemonInstance
        do {
            daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port)
        } catch {
            throw XCTSkip("geoconsentd not usable yet: \(error)")
        }
        let r = try bus.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameHasOwner", "s", DaemonInstance.busName])
        XCTAssertEqual(r.output.trimmingCharacters(in: .whitespacesAndNewlines), "b true")
        XCTAssertTrue(daemon.log().contains(DaemonInstance.busName), daemon.log())
        // The daemon's own exit behaviour (status 0 on SIGTERM) is checked by
        // the integration tests; here only that the harness ends and reaps it.
        daemon.stop()
        XCTAssertFalse(daemon.isRunning)
        XCTAssertNotNil(daemon.waitForExit(timeout: 0))
        XCTAssertNotEqual(kill(daemon.pid, 0), 0)
    }
}

/// A blocking-connect TCP client reading newline-terminated lines (gpsd's JSON).
final class LineSocket {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            throw HarnessError("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    func write(_ s: String) {
        let bytes = Array(s.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// One line, or nil if none is complete within `timeout` seconds.
    func readLine(timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            guard poll(&pfd, 1, ms) > 0 else { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }
}

/// True if `pid` no longer exists or is only a zombie (reparented to an init
/// that has not reaped it yet).
private func processGone(_ pid: pid_t, within timeout: Double = 2) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    repeat {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        if let paren = stat.lastIndex(of: ")"),
           stat[stat.index(paren, offsetBy: 2)] == "Z" { return true }
        usleep(10_000)
    } while Date() < deadline
    return false
}
