import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// gpsd faults: gpsd killed and restarted while sessions
/// stream, garbage NMEA, and a fake "gpsd" on the port that speaks junk,
/// stalls mid-line, floods or hangs up: the daemon survives, keeps serving
/// other clients, logs once per episode and resumes when the real gpsd is back.
final class HostileGpsdTests: AllowingAgentTestCase {

    /// A client with a one-time grant and updates started.
    func streamingClient(file: StaticString = #filePath, line: UInt = #line) throws -> BusPeer {
        let p = try stack.peer()
        XCTAssertEqual(try p.tap().get(), 4, file: file, line: line)
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get(), file: file, line: line)
        return p
    }

    func ticker(_ feed: LocationFeed, interval: Double = 0.05) -> LoopTicker {
        LoopTicker(loop: stack.peers.loop, interval: interval) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
    }

    /// Waits until every client got a `LocationUpdated` after its mark; returns the seconds it took.
    func waitForUpdates(_ clients: [BusPeer], marks: [Int], timeout: Double) -> Double? {
        let t0 = secondsNow()
        let ok = stack.peers.pump(timeout: timeout) {
            zip(clients, marks).allSatisfy { c, m in !c.locations(from: m).isEmpty }
        }
        return ok ? secondsNow() - t0 : nil
    }

    /// Lines of the daemon's log from line `from` on that are about gpsd.
    func gpsdLogLines(from: Int) -> [String] {
        Array(stack.daemon.log().split(separator: "\n").dropFirst(from).map(String.init).filter { $0.contains("gpsd") })
    }

    var logLineCount: Int { stack.daemon.log().split(separator: "\n").count }

    /// True if every location any client got has finite, in-range coordinates.
    func allLocationsSane(_ clients: [BusPeer]) -> Bool {
        clients.allSatisfy { c in
            c.locations().allSatisfy { d in
                abs(d.latitude) <= 90 && abs(d.longitude) <= 180 && d.numbers.allSatisfy(\.isFinite)
            }
        }
    }

    // MARK: Killed and restarted while streaming

    func testGpsdKilledAndRestartedRepeatedlyWhileSessionsStream() throws {
        let cycles = Hostile.count(small: 5, full: 100)
        let seed = Hostile.seed()
        var rng = SeededRNG(seed: seed)
        let clients = [try streamingClient(), try streamingClient()]
        let feed = LocationFeed(step: 10)
        let t = ticker(feed)
        t.start()
        defer { t.stop() }
        guard waitForUpdates(clients, marks: [0, 0], timeout: 10) != nil else {
            return XCTFail("no updates before the first kill")
        }
        let logStart = logLineCount
        var resumeTimes: [Double] = []
        var errorsSeen = 0
        var sigkills = 0
        for cycle in 1...cycles {
            let errMarks = clients.map(\.signals.count)
            if rng.chance(0.5) {
                stack.gpsd.process?.kill9()
                sigkills += 1
            } else {
                stack.gpsd.kill()
            }
            // Down for a random while, pumping (the daemon notices, signals, retries).
            stack.peers.settle(Double(rng.int(0...300)) / 1000)
            errorsSeen += zip(clients, errMarks).filter { c, m in c.signals.dropFirst(m).contains { $0.member == "LocationError" } }.count
            try stack.gpsd.restart()
            let marks = clients.map(\.signals.count)
            guard let dt = waitForUpdates(clients, marks: marks, timeout: 15) else {
                XCTFail("cycle \(cycle): updates did not resume within 15 s (seed \(seed))\n\(stack.daemon.log().suffix(2000))")
                break
            }
            resumeTimes.append(dt)
            XCTAssertTrue(stack.daemon.isRunning)
        }
        let logLines = gpsdLogLines(from: logStart)
        XCTAssertTrue(allLocationsSane(clients))
        XCTAssertEqual(resumeTimes.count, cycles)
        XCTAssertEqual(clients[0].property("GpsdConnected"), .bool(true))
        let sessions = try stack.peer().sessions()
        XCTAssertEqual(sessions.filter(\.updates).count, 2, "both sessions still have updates on")
        Hostile.report("gpsd-restart", "seed \(seed), mode \(Hostile.mode): tried \(cycles) gpsd kills (\(sigkills) SIGKILL, "
            + "\(cycles - sigkills) SIGTERM) and restarts, down 0-300 ms, while 2 sessions streamed; saw updates resume "
            + "\(resumeTimes.count)/\(cycles) times to both sessions, after p50 \(Hostile.ms(percentile(resumeTimes, 50))), "
            + "max \(Hostile.ms(resumeTimes.max() ?? .nan)) from the restart; LocationError seen in \(errorsSeen) of "
            + "\(2 * cycles) session-outages; \(logLines.count) gpsd log lines (\(String(format: "%.1f", Double(logLines.count) / Double(max(cycles, 1)))) per outage)")
        XCTAssertLessThanOrEqual(logLines.count, 2 * cycles + 2, "more than 2 log lines per outage:\n\(logLines.prefix(20).joined(separator: "\n"))")
    }

    // MARK: Garbage NMEA

    func testGarbageNMEADoesNotHurtAndGoodFixesFollow() throws {
        let seed = Hostile.seed()
        var rng = SeededRNG(seed: seed)
        let datagrams = Hostile.count(small: 2_000, full: 50_000)
        let client = try streamingClient()
        let other = try stack.peer()
        let feed = LocationFeed(step: 10)
        // Good fixes first.
        let t = ticker(feed)
        t.start()
        guard waitForUpdates([client], marks: [0], timeout: 10) != nil else { t.stop(); return XCTFail("no updates") }
        t.stop()
        stack.peers.settle(0.3)
        let mark = client.signals.count
        var kinds: [String: Int] = [:]
        let t0 = secondsNow()
        for i in 0..<datagrams {
            let (kind, lines) = garbage(&rng, feed)
            kinds[kind, default: 0] += 1
            stack.gpsd.send(lines)
            if i % 100 == 99 {
                stack.peers.settle(0.005)
                XCTAssertTrue(other.pingDaemon(timeout: 5))
            }
        }
        stack.peers.settle(0.5)
        let during = client.locations(from: mark)
        let sendTime = secondsNow() - t0
        XCTAssertTrue(stack.daemon.isRunning)
        XCTAssertTrue(allLocationsSane([client]), "a garbage sentence became an impossible location")
        // Then good fixes are delivered again.
        let after = client.signals.count
        let t2 = ticker(feed)
        t2.start()
        defer { t2.stop() }
        var dt = waitForUpdates([client], marks: [after], timeout: 10)
        var gpsdNote = ""
        if dt == nil {
            // Whose fault? Ask gpsd itself. Binary junk can make gpsd's packet sniffer take the
            // source for a binary protocol (e.g. Trimble TSIP), after which it ignores NMEA: a gpsd
            // behaviour, not the daemon's. Then restart gpsd, as an admin would, and the daemon
            // must pick up the good fixes again.
            let raw = rawGpsdReports(seconds: 1) { feed.send(to: self.stack.gpsd) }
            let line = raw.first { $0.contains("\"class\":\"DEVICES\"") } ?? ""
            if let r = line.range(of: #""driver":"([^"]*)""#, options: .regularExpression),
               !line[r].contains("NMEA0183") {
                gpsdNote = " (gpsd's sniffer took the source for \(line[r].dropFirst(10).dropLast()) after the binary junk "
                    + "and ignored NMEA, gpsd restarted)"
                try stack.gpsd.restart()
                let again = client.signals.count
                dt = waitForUpdates([client], marks: [again], timeout: 15)
            }
            XCTAssertNotNil(dt, "no good fix delivered after the garbage (seed \(seed)); gpsd now says:\n"
                            + raw.suffix(8).joined(separator: "\n"))
        }
        XCTAssertTrue(other.pingDaemon())
        let kindText = kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Hostile.report("gpsd-garbage-nmea", "seed \(seed), mode \(Hostile.mode): tried \(datagrams) garbage datagrams in "
            + "\(String(format: "%.1f", sendTime)) s (\(kindText)); saw \(during.count) locations during the garbage "
            + "(all with sane coordinates), daemon alive, \(datagrams / 100) Pings answered, next good fix delivered after "
            + "\(dt.map(Hostile.ms) ?? "never")\(gpsdNote)")
    }

    /// What gpsd itself sends a plain JSON client for `seconds`, calling `tick` every 50 ms.
    func rawGpsdReports(seconds: Double, tick: () -> Void) -> [String] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = stack.gpsd.port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { return ["(cannot connect to gpsd)"] }
        let watch = Array(#"?WATCH={"enable":true,"json":true};"#.utf8) + [10]
        _ = watch.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        let end = secondsNow() + seconds
        while secondsNow() < end {
            tick()
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 50) > 0 {
                let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                out += buf[0..<n]
            }
        }
        return String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// One garbage datagram (or a few lines).
    private func garbage(_ rng: inout SeededRNG, _ feed: LocationFeed) -> (String, [String]) {
        let good = feed.next().sentences   // a valid epoch to damage (its time is consumed: fine)
        switch rng.int(0...7) {
        case 0:
            // Valid body, wrong checksum.
            return ("bad-checksum", good.map { s in
                guard let star = s.lastIndex(of: "*") else { return s }
                return String(s[..<star]) + "*" + (s.hasSuffix("00") ? "FF" : "00")
            })
        case 1:
            // Truncated anywhere.
            return ("truncated", good.map { String($0.prefix(rng.int(1...max(1, $0.count - 1)))) })
        case 2:
            var b = (0..<rng.int(1...1400)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            b.removeAll { $0 == 0 }
            return ("binary", [String(decoding: b, as: UTF8.self)])
        case 3:
            return ("overlong", ["$GPGGA," + String(repeating: "9", count: rng.int(100...1300))])
        case 4:
            // Valid checksums, absurd contents.
            let body = rng.pick(["GPGGA,999999.99,9959.99999,N,99959.99999,E,1,99,99.9,-99999.9,M,99999.9,M,,",
                                 "GPRMC,235960.00,A,9100.00000,N,18100.00000,W,99999.99,999.9,320299,,,A",
                                 "GPGSA,A,9,,,,,,,,,,,,,,,",
                                 "GPGGA,,,,,,,,,,,,,,",
                                 "GPRMC,,V,,,,,,,,,,N",
                                 "GPZZZ,1,2,3"])
            return ("absurd-valid-checksum", [NMEA.sentence(body)])
        case 5:
            return ("no-dollar", good.map { String($0.dropFirst()) })
        case 6:
            return ("wrong-field-count", [NMEA.sentence("GPGGA," + String(repeating: "1,", count: rng.int(0...60)))])
        default:
            return ("mixed-epoch", [good[0], "$GP\u{7}\u{1b}[2J", good[2] + "garbage"])
        }
    }

    // MARK: A fake gpsd on the port

    func testFakeGpsdJunkStallFloodAndHangUpThenRealGpsdAgain() throws {
        let seed = Hostile.seed()
        let episode = Hostile.stress ? 6.0 : 1.0
        let client = try streamingClient()
        let other = try stack.peer()
        XCTAssertEqual(try other.authorization().status, .notDetermined)
        let feed = LocationFeed(step: 10)
        let t = ticker(feed)
        t.start()
        defer { t.stop() }
        guard waitForUpdates([client], marks: [0], timeout: 10) != nil else { return XCTFail("no updates before the fake") }

        for behaviour in [FakeGpsd.Behaviour.junk, .stall, .flood, .hangUp] {
            let logMark = logLineCount
            let sigMark = client.signals.count
            let pidRSS = Hostile.rssKB(stack.daemon.pid)
            stack.gpsd.kill()
            let fake = try FakeGpsd(port: stack.gpsd.port, behaviour: behaviour, seed: seed &+ UInt64(logMark))
            // The daemon reconnects (to the fake) while other clients keep calling.
            var rtts: [Double] = []
            var failures = 0
            let end = secondsNow() + episode
            while secondsNow() < end {
                let t0 = secondsNow()
                if (try? other.authorization().status) != nil { rtts.append(secondsNow() - t0) } else { failures += 1 }
                stack.peers.settle(0.02)
            }
            let fixesDuring = client.locations(from: sigMark).count
            // Fixes still in flight from the real gpsd may arrive early in the episode; nothing
            // from the fake (its only in-range position is 52.5/13.4, in a mode-1 report).
            XCTAssertFalse(client.locations(from: sigMark).contains { $0.latitude == 52.5 },
                           "\(behaviour): a fake report became a location: \(client.locations(from: sigMark))")
            let errorsDuring = client.signals.dropFirst(sigMark).filter { $0.member == "LocationError" }.count
            let accepted = fake.accepted, sent = fake.bytesSent
            let rssDuring = Hostile.rssKB(stack.daemon.pid)
            fake.stop()
            try stack.gpsd.restart()
            let back = client.signals.count
            let resume = waitForUpdates([client], marks: [back], timeout: 15)
            let lines = gpsdLogLines(from: logMark)
            XCTAssertTrue(stack.daemon.isRunning, "\(behaviour): the daemon died")
            XCTAssertEqual(failures, 0, "\(behaviour): other clients were not served")
            XCTAssertNotNil(resume, "\(behaviour): updates did not resume with the real gpsd\n\(lines.suffix(10).joined(separator: "\n"))")
            XCTAssertTrue(allLocationsSane([client]), "\(behaviour): junk became a location")
            Hostile.report("gpsd-fake-\(behaviour.rawValue)", "tried a fake gpsd that \(describe(behaviour)) for "
                + "\(String(format: "%.1f", episode)) s (\(accepted) connections accepted, \(sent / 1024) KiB sent); saw "
                + "\(rtts.count) GetAuthorization calls of another client served (p50 \(Hostile.ms(percentile(rtts, 50))), "
                + "max \(Hostile.ms(rtts.max() ?? .nan)), \(failures) failed), \(fixesDuring) locations and \(errorsDuring) "
                + "LocationError signals to the streaming session, daemon RSS \(pidRSS) -> \(rssDuring) kB, "
                + "\(lines.count) gpsd log lines for the episode, updates back "
                + "\(resume.map { Hostile.ms($0) } ?? "never") after the real gpsd restarted")
            XCTAssertLessThanOrEqual(lines.count, 3, "\(behaviour): more than once per episode:\n\(lines.prefix(12).joined(separator: "\n"))")
            XCTAssertLessThanOrEqual(errorsDuring, 1, "\(behaviour): one LocationError per episode")
        }
    }

    private func describe(_ b: FakeGpsd.Behaviour) -> String {
        switch b {
        case .junk: return "speaks junk (bad JSON, impossible TPVs, NMEA, binary)"
        case .stall: return "stalls in the middle of a TPV line"
        case .flood: return "floods (64 KiB lines without newline, junk lines)"
        case .hangUp: return "accepts and hangs up at once"
        }
    }
}
