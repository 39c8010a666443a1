import Foundation
import GeoCore
import GeoTestSupport
import XCTest
@testable import GeoGPS

/// GPSDClient against a real gpsd fed NMEA over UDP (GeoTestSupport.GpsdInstance).
final class GPSDClientTests: XCTestCase {
    // The epoch sent: 48°07.038'N 11°31.000'E, 545.4 m MSL, 22.4 kn, 84.4°,
    // 2026-12-02 12:35:19.50 UTC.
    let latitude = 48 + 7.038 / 60
    let longitude = 11 + 31.0 / 60
    let altitude = 545.4
    let knots = 22.4
    let course = 84.4

    var epoch: [String] {
        var c = DateComponents()
        c.year = 2026; c.month = 12; c.day = 2
        c.hour = 12; c.minute = 35; c.second = 19; c.nanosecond = 500_000_000
        return NMEA.epoch(at: c, lat: latitude, lon: longitude, altitude: altitude,
                          speedKnots: knots, course: course)
    }

    /// Waits up to `timeout` s for the client's socket to be readable, then reads.
    private func pollOnce(_ client: GPSDClient, timeout: Double) -> GPSDClient.ReadResult? {
        var p = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        let n = poll(&p, 1, Int32(timeout * 1000))
        return n > 0 ? client.readAvailable() : nil
    }

    /// Resends the epoch every 50 ms while polling `fd`, until a fix that carries
    /// the RMC's data (time, speed) arrives; returns every fix seen, in order.
    private func fixes(from gpsd: GpsdInstance, _ client: GPSDClient, timeout: Double = 5) -> [Fix] {
        var seen: [Fix] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            gpsd.send(epoch)
            let sliceEnd = Date().addingTimeInterval(0.05)
            while Date() < sliceEnd {
                if let r = pollOnce(client, timeout: max(0, sliceEnd.timeIntervalSinceNow)) {
                    XCTAssertFalse(r.closed, "gpsd connection closed unexpectedly")
                    seen += r.fixes
                    if r.closed { return seen }
                }
                if seen.contains(where: { $0.timestamp != nil && $0.speed != nil }) { return seen }
            }
        }
        return seen
    }

    func testFixFromRealGpsd() throws {
        let gpsd = try GpsdInstance()
        defer { gpsd.stop() }
        let started = Date()
        let client = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        defer { client.close() }
        XCTAssertGreaterThanOrEqual(client.fd, 0)
        let flags = fcntl(client.fd, F_GETFL)
        XCTAssertNotEqual(flags & O_NONBLOCK, 0, "the socket must not block the event loop")

        let seen = fixes(from: gpsd, client)
        let fix = try XCTUnwrap(seen.first { $0.timestamp != nil && $0.speed != nil },
                                "no complete fix within 5 s; saw \(seen); gpsd log:\n\(gpsd.log())")
        let elapsed = Date().timeIntervalSince(started)
        print("first complete fix after \(String(format: "%.1f", elapsed * 1000)) ms (\(seen.count) fixes)")

        XCTAssertEqual(fix.latitude, latitude, accuracy: 1e-6)
        XCTAssertEqual(fix.longitude, longitude, accuracy: 1e-6)
        XCTAssertEqual(fix.mode, .threeD)
        XCTAssertEqual(try XCTUnwrap(fix.altitude), altitude, accuracy: 1e-3)
        // NMEA.gga writes a geoid separation of 47.0 m: HAE = MSL + N.
        XCTAssertEqual(try XCTUnwrap(fix.ellipsoidalAltitude), altitude + 47.0, accuracy: 1e-3)
        XCTAssertEqual(try XCTUnwrap(fix.speed), knots * 0.514444, accuracy: 1e-3)
        XCTAssertEqual(try XCTUnwrap(fix.course), course, accuracy: 1e-6)
        let expectedTime = UInt64(testEpochSeconds) * 1_000_000 + 500_000
        XCTAssertEqual(fix.timestamp, expectedTime, "receiver time to the microsecond")
        // gpsd derives eph from HDOP; whatever it is, it is a finite, positive number.
        if let h = fix.horizontalAccuracy { XCTAssertTrue(h.isFinite && h > 0) }
        // Never NaN anywhere.
        for f in seen {
            for v in [f.altitude, f.ellipsoidalAltitude, f.horizontalAccuracy, f.verticalAccuracy,
                      f.speed, f.speedAccuracy, f.course, f.courseAccuracy] {
                if let v { XCTAssertTrue(v.isFinite) }
            }
            XCTAssertEqual(f.latitude, latitude, accuracy: 1e-6)
        }
        // gpsd's first TPV after a GGA without a date has no time: still a fix, no timestamp.
        if let first = seen.first, first.timestamp == nil {
            XCTAssertEqual(first.mode, .threeD)
        }
    }

    func testKilledGpsdReportsClosedAndReconnectWorks() throws {
        let gpsd = try GpsdInstance()
        defer { gpsd.stop() }
        let client = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        defer { client.close() }
        XCTAssertFalse(fixes(from: gpsd, client).isEmpty, "no fix before the kill")

        gpsd.process?.kill9()
        var closed = false
        let deadline = Date().addingTimeInterval(5)
        while !closed && Date() < deadline {
            if let r = pollOnce(client, timeout: 0.1) { closed = r.closed }
        }
        XCTAssertTrue(closed, "readAvailable did not report the closed connection")
        // Once closed it stays closed, and closing (twice) is safe: no SIGPIPE, no crash.
        XCTAssertTrue(client.readAvailable().closed)
        client.close()
        client.close()
        XCTAssertEqual(client.fd, -1)
        XCTAssertTrue(client.readAvailable().closed)

        // While gpsd is down, connecting fails at once.
        XCTAssertThrowsError(try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port))

        // gpsd back on the same port: a new client gets fixes again.
        try gpsd.restart()
        let again = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        defer { again.close() }
        XCTAssertFalse(fixes(from: gpsd, again).isEmpty, "no fix after reconnecting")
    }

    /// libgps writes commands with plain write(): closing (WATCH_DISABLE) a
    /// connection whose peer already reset it must not kill the process with SIGPIPE.
    func testCloseAfterPeerResetDoesNotRaiseSIGPIPE() throws {
        let gpsd = try GpsdInstance()
        defer { gpsd.stop() }
        let client = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        gpsd.process?.kill9()
        // Provoke the RST: a first write to the dead peer (without SIGPIPE here).
        _ = send(client.fd, "?\n", 2, Int32(MSG_NOSIGNAL))
        usleep(50_000)
        client.close()   // gps_stream(WATCH_DISABLE) hits EPIPE; the signal is swallowed
        XCTAssertEqual(client.fd, -1)
        var pending = sigset_t()
        sigpending(&pending)
        XCTAssertEqual(sigismember(&pending, SIGPIPE), 0, "no SIGPIPE left pending")
    }

    func testCloseWhileGpsdRunsAndDeinit() throws {
        let gpsd = try GpsdInstance()
        defer { gpsd.stop() }
        var client: GPSDClient? = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        let fd = try XCTUnwrap(client?.fd)
        client?.close()          // WATCH_DISABLE then gps_close
        XCTAssertEqual(client?.fd, -1)
        XCTAssertEqual(fcntl(fd, F_GETFD), -1, "the socket is closed")
        client = nil             // deinit after close: no double close
        // And a client dropped without close() closes itself.
        var other: GPSDClient? = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        let fd2 = try XCTUnwrap(other?.fd)
        other = nil
        XCTAssertNil(other)
        XCTAssertEqual(fcntl(fd2, F_GETFD), -1, "deinit closed the socket")
    }

    /// The streamed read hands over each fix as soon as it is decoded, and stops
    /// when the handler closes the client (the daemon's effects can), instead of
    /// reading on through a closed libgps handle.
    func testStreamedReadStopsWhenTheHandlerClosesTheClient() throws {
        let gpsd = try GpsdInstance()
        defer { gpsd.stop() }
        let client = try GPSDClient.connect(host: "127.0.0.1", port: gpsd.port)
        defer { client.close() }
        XCTAssertFalse(fixes(from: gpsd, client).isEmpty, "no fix from gpsd to start with")
        // Three more epochs, a second apart, buffered before anything is read.
        var c = DateComponents()
        c.year = 2026; c.month = 12; c.day = 2; c.hour = 12; c.minute = 40
        for second in 0..<3 {
            c.second = second
            gpsd.send(NMEA.epoch(at: c, lat: latitude, lon: longitude, altitude: altitude, speedKnots: knots, course: course))
        }
        usleep(300_000)
        var p = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&p, 1, 5000), 1, "gpsd sent nothing")
        var all: [Fix] = []
        XCTAssertFalse(client.readAvailable { all.append($0) })
        XCTAssertEqual(all.compactMap(\.timestamp).suffix(3).map { Int($0 / 1_000_000 % 60) }, [0, 1, 2],
                       "every buffered fix is handed over, in order")
        // The same again, but the first fix's handler closes the client.
        for second in 3..<6 {
            c.second = second
            gpsd.send(NMEA.epoch(at: c, lat: latitude, lon: longitude, altitude: altitude, speedKnots: knots, course: course))
        }
        usleep(300_000)
        XCTAssertEqual(poll(&p, 1, 5000), 1, "gpsd sent nothing")
        var handed: [Fix] = []
        let closed = client.readAvailable { fix in
            handed.append(fix)
            client.close()
        }
        XCTAssertEqual(handed.count, 1, "reading went on after the handler closed the client")
        XCTAssertTrue(closed, "a closed client reads as closed")
        XCTAssertEqual(client.fd, -1)
        XCTAssertTrue(client.readAvailable().closed)
    }

    func testConnectToClosedPortThrows() throws {
        let port = try FreePort.pick()   // free: nothing listens there
        let started = Date()
        XCTAssertThrowsError(try GPSDClient.connect(host: "127.0.0.1", port: port)) { error in
            guard let e = error as? GPSDError else { return XCTFail("not a GPSDError: \(error)") }
            XCTAssertNotEqual(e.code, 0)
            XCTAssertFalse(e.message.isEmpty)
            XCTAssertTrue(e.description.contains("\(port)"), e.description)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "a refused loopback connect must not hang")
    }
}
