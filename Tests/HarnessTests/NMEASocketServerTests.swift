import Foundation
import XCTest
@testable import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The Unix socket that feeds NMEA to the real GeoClue: every connection gets
/// what is sent while it is open, CRLF-terminated; a closed one is dropped.
final class NMEASocketServerTests: XCTestCase {
    func testEveryOpenConnectionGetsTheSentencesSentWhileOpen() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let server = try NMEASocketServer(path: dir.file("nmea.sock"))
        defer { server.stop() }
        let gga = NMEA.sentence("GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")

        let first = try connect(server.path)
        XCTAssertEqual(server.send([gga, gga + "\r\n"]), 1)
        XCTAssertEqual(read(first, bytes: 2 * (gga.utf8.count + 2)), gga + "\r\n" + gga + "\r\n")

        let second = try connect(server.path)
        XCTAssertEqual(server.acceptWaiting(), 2)
        XCTAssertEqual(server.send(["$X*58"]), 2)
        XCTAssertEqual(read(first, bytes: 7), "$X*58\r\n")
        XCTAssertEqual(read(second, bytes: 7), "$X*58\r\n", "only what was sent after it connected")

        close(first)
        _ = server.send(["$X*58"])   // the first write to a closed peer may still succeed
        XCTAssertEqual(server.send(["$X*58"]), 1, "the closed connection is dropped")
        close(second)
        server.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.path))
    }

    private func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw HarnessError("connect: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    /// Reads exactly `bytes` bytes (or what came before a 5 s timeout).
    private func read(_ fd: Int32, bytes: Int) -> String {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: bytes)
        while out.count < bytes {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, bytes - out.count) }
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
