import Foundation
import GeoTestSupport

/// The floor under every fix row: NMEA sent to gpsd until a direct JSON client of
/// gpsd on a raw socket has read the TPV of that epoch, in µs, for `fixes` epochs
/// (after 5 untimed ones). Nil when gpsd cannot be reached.
func gpsdClientLatency(gpsd: GpsdInstance, fixes: Int,
                       epoch: () -> (sentences: [String], micros: UInt64, iso: String)) -> Sample? {
    var sample = Sample()
    guard let fd = openGpsdWatch(port: gpsd.port) else { return nil }
    defer { close(fd) }
    var pending = ""
    /// Reads lines until a TPV with this epoch's time; returns when the chunk holding it was read.
    func waitForTPV(_ iso: String, timeout: Double) -> UInt64? {
        let deadline = nowNanos() + UInt64(timeout * 1e9)
        while nowNanos() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { return nil }
            let stamp = nowNanos()
            pending += String(decoding: chunk[..<n], as: UTF8.self)
            var found = false
            // gpsd ends lines with CRLF, which Swift sees as one Character.
            while let nl = pending.firstIndex(where: { $0 == "\n" || $0 == "\r\n" }) {
                let line = pending[..<nl]
                if line.contains("\"class\":\"TPV\"") && line.contains("\"time\":\"\(iso)") { found = true }
                pending.removeSubrange(...nl)
            }
            if found { return stamp }
        }
        return nil
    }
    for _ in 0..<5 { let e = epoch(); gpsd.send(e.sentences); _ = waitForTPV(e.iso, timeout: 0.5) }
    for _ in 0..<fixes {
        let e = epoch()
        let t0 = nowNanos()
        gpsd.send(e.sentences)
        if let t1 = waitForTPV(e.iso, timeout: 2) { sample.add(micros(t1 - t0)) }
        usleep(5000)
    }
    return sample
}
