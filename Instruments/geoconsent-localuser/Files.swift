import Glibc

/// The whole file at `path`, nil when it cannot be read.
func readAll(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return n == 0 ? out : nil }
        out += chunk[0..<n]
    }
}

/// Creates or truncates `path` (mode 0644) and writes `bytes`; exits on failure.
func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { fail("create \(path): \(String(cString: strerror(errno)))") }
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { fail("write \(path): \(String(cString: strerror(errno)))") }
        off += n
    }
    close(fd)
}
