import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A Unix stream socket that hands NMEA to whoever connects: what GeoClue's
/// `nmea-socket` source reads (it connects as a client, as to gnss-share).
///
/// No thread: connections waiting in the backlog are accepted at each `send`,
/// then every sentence goes to every open connection. A connection that fails
/// a write is dropped; one that does not read fast enough loses sentences
/// (non-blocking writes), as a receiver's output would.
public final class NMEASocketServer: @unchecked Sendable {
    /// The socket's path.
    public let path: String
    private let lock = NSLock()
    private var listenFD: Int32
    private var connections: [Int32] = []

    /// Listens on `path` (an existing file there is replaced).
    public init(path: String) throws {
        self.path = path
        unlink(path)
        listenFD = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listenFD >= 0 else { throw HarnessError("NMEASocketServer: socket: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(listenFD)
            throw HarnessError("NMEASocketServer: path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listenFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listenFD, 16) == 0 else {
            let why = String(cString: strerror(errno))
            close(listenFD)
            throw HarnessError("NMEASocketServer: cannot listen on \(path): \(why)")
        }
        _ = fcntl(listenFD, F_SETFL, fcntl(listenFD, F_GETFL) | O_NONBLOCK)
    }

    deinit { stop() }

    /// Accepts the connections waiting, and returns how many are open.
    @discardableResult
    public func acceptWaiting() -> Int {
        lock.lock(); defer { lock.unlock() }
        acceptLocked()
        return connections.count
    }

    /// Sends each sentence, CRLF-terminated, to every connection (after
    /// accepting those waiting). Returns how many connections got them.
    @discardableResult
    public func send(_ nmea: [String]) -> Int {
        let text = nmea.map { $0.hasSuffix("\r\n") ? $0 : $0.trimmingCharacters(in: .newlines) + "\r\n" }.joined()
        let bytes = Array(text.utf8)
        lock.lock(); defer { lock.unlock() }
        acceptLocked()
        connections.removeAll { fd in
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
                close(fd)
                return true
            }
            return false
        }
        return connections.count
    }

    /// Closes every connection and the socket, and removes its file. Idempotent.
    public func stop() {
        lock.lock(); defer { lock.unlock() }
        for fd in connections { close(fd) }
        connections.removeAll()
        if listenFD >= 0 {
            close(listenFD)
            listenFD = -1
            unlink(path)
        }
    }

    private func acceptLocked() {
        guard listenFD >= 0 else { return }
        while true {
            // (accept4 is hidden from Swift; children close inherited descriptors anyway.)
            let fd = accept(listenFD, nil, nil)
            if fd < 0 { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            connections.append(fd)
        }
    }
}
