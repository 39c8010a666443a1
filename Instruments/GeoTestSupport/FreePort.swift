import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Picks loopback ports for test daemons (other processes on the machine may
/// hold any fixed port, so tests never use one).
public enum FreePort {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var handedOut = Set<UInt16>()

    /// A port on 127.0.0.1 that was free for both TCP and UDP a moment ago,
    /// never the same one twice in this process. The kernel picks it (bind to
    /// port 0 over TCP), then the same port is bound over UDP to check it;
    /// both sockets are closed before returning, so there is a small window in
    /// which someone else could take it.
    public static func pick() throws -> UInt16 {
        for _ in 0..<200 {
            guard let port = bindLoopback(type: SOCK_STREAM, port: 0) else { continue }
            guard bindLoopback(type: SOCK_DGRAM, port: port) != nil else { continue }
            lock.lock()
            let fresh = handedOut.insert(port).inserted
            lock.unlock()
            if fresh { return port }
        }
        throw HarnessError("FreePort: no port free for both TCP and UDP after 200 tries")
    }

    /// Binds a socket of `type` to 127.0.0.1:`port`, reads back the port and
    /// closes the socket. Nil if the bind fails.
    static func bindLoopback(type: __socket_type, port: UInt16) -> UInt16? {
        let fd = socket(AF_INET, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var addr = loopbackAddress(port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else { return nil }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let g = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard g == 0 else { return nil }
        return UInt16(bigEndian: bound.sin_port)
    }
}

/// sockaddr_in for 127.0.0.1:`port`.
func loopbackAddress(port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return addr
}

/// True if a TCP connection to 127.0.0.1:`port` succeeds right now.
func tcpConnectSucceeds(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = loopbackAddress(port: port)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return rc == 0
}
