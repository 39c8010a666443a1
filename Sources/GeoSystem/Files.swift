/// Small file helpers on Glibc. The daemon avoids Foundation to stay small (idle
/// RSS target), so the few file operations it needs live here.
import Glibc

/// A failed system call: which operation on which path, and the errno it gave.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    /// What was being done, e.g. `open`, `rename`.
    public var operation: String
    /// The path it was done to (or `from -> to` for renames).
    public var path: String
    /// The errno value the call left.
    public var errno: Int32

    public init(operation: String, path: String, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// Captures the current `errno` right after a failed call.
    static func last(_ operation: String, _ path: String) -> SystemError {
        SystemError(operation: operation, path: path, errno: Glibc.errno)
    }

    /// The C library's text for `errno`, e.g. "No such file or directory".
    public var message: String { String(cString: strerror(errno)) }

    /// True when the path (or a directory on the way) does not exist.
    public var isNotFound: Bool { errno == ENOENT }

    public var description: String { "\(operation) \(path): \(message)" }
}

/// Reads a whole file. Returns nil when it does not exist, throws `SystemError` on
/// any other failure. Reads until end of file rather than trusting `st_size`,
/// because /proc files report a size of 0.
public func readFileBytes(_ path: String) throws -> [UInt8]? {
    let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC) }
    if fd < 0 {
        if Glibc.errno == ENOENT { return nil }
        throw SystemError.last("open", path)
    }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if Glibc.errno == EINTR { continue }
            throw SystemError.last("read", path)
        }
        if n == 0 { break }
        result.append(contentsOf: chunk[0..<n])
    }
    return result
}

/// Reads a whole file as text (invalid UTF-8 is repaired to U+FFFD). Returns nil
/// when it does not exist, throws `SystemError` on any other failure.
public func readFileString(_ path: String) throws -> String? {
    guard let bytes = try readFileBytes(path) else { return nil }
    return String(decoding: bytes, as: UTF8.self)
}

/// Replaces `path` with `contents` so that a reader, or the file system after a
/// crash, sees either the old file or the complete new one, never a mix: the data
/// goes to a fresh temporary file in the same directory, is flushed, and is renamed
/// over the target; then the directory is flushed so the rename itself persists.
/// The file gets exactly `mode` (not reduced by the umask). On failure the
/// temporary file is removed and the old file is left as it was.
public func writeFileAtomically(path: String, contents: [UInt8], mode: mode_t = 0o600) throws {
    let dir = directoryName(of: path)
    let base = baseName(of: path)
    var fd: Int32 = -1
    var tempPath = ""
    // O_EXCL makes a clash with a stale or concurrent temp file fail rather than
    // share it; a few names are tried before giving up.
    for attempt in 0..<100 {
        tempPath = dir + "/." + base + ".tmp-" + String(getpid()) + "-" + String(now() &+ UInt64(attempt), radix: 36)
        fd = retryingEINTR { open(tempPath, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode) }
        if fd >= 0 || Glibc.errno != EEXIST { break }
    }
    if fd < 0 { throw SystemError.last("create", tempPath) }
    var committed = false
    defer {
        if fd >= 0 { close(fd) }
        if !committed { unlink(tempPath) }
    }
    if fchmod(fd, mode) != 0 { throw SystemError.last("chmod", tempPath) }
    var offset = 0
    while offset < contents.count {
        let n = contents.withUnsafeBytes { buf in
            write(fd, buf.baseAddress! + offset, buf.count - offset)
        }
        if n < 0 {
            if Glibc.errno == EINTR { continue }
            throw SystemError.last("write", tempPath)
        }
        offset += n
    }
    if fsync(fd) != 0 { throw SystemError.last("fsync", tempPath) }
    let closed = close(fd)
    fd = -1
    if closed != 0 && Glibc.errno != EINTR { throw SystemError.last("close", tempPath) }
    if rename(tempPath, path) != 0 { throw SystemError.last("rename", tempPath + " -> " + path) }
    committed = true
    try syncDirectory(dir)
}

/// `writeFileAtomically` for text, written as UTF-8.
public func writeFileAtomically(path: String, contents: String, mode: mode_t = 0o600) throws {
    try writeFileAtomically(path: path, contents: Array(contents.utf8), mode: mode)
}

/// Flushes a directory's entries (after a rename) to disk.
public func syncDirectory(_ path: String) throws {
    let dfd = retryingEINTR { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    if dfd < 0 { throw SystemError.last("open", path) }
    defer { close(dfd) }
    if fsync(dfd) != 0 && Glibc.errno != EINVAL { throw SystemError.last("fsync", path) }
}

/// The names in a directory, without `.` and `..`, sorted by their bytes (so the
/// order does not depend on locale or Unicode collation). Throws `SystemError`
/// (`isNotFound` when the directory does not exist).
public func listDirectory(_ path: String) throws -> [String] {
    guard let dir = opendir(path) else { throw SystemError.last("opendir", path) }
    defer { closedir(dir) }
    var names: [String] = []
    while true {
        Glibc.errno = 0
        guard let entry = readdir(dir) else {
            if Glibc.errno != 0 { throw SystemError.last("readdir", path) }
            break
        }
        let name = withUnsafePointer(to: &entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if name == "." || name == ".." { continue }
        names.append(name)
    }
    return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
}

/// Creates `path` and any missing parents. Missing parents get 0755 (they are
/// ordinary path components); the last component gets exactly `mode`. An
/// existing directory is left as it is (its mode is not changed).
public func makeDirectory(_ path: String, mode: mode_t = 0o700) throws {
    if isDirectory(path) { return }
    let parent = directoryName(of: path)
    if parent != path && !isDirectory(parent) {
        try makeDirectory(parent, mode: 0o755)
    }
    if mkdir(path, mode) != 0 {
        if Glibc.errno == EEXIST && isDirectory(path) { return }
        throw SystemError.last("mkdir", path)
    }
    // mkdir's mode is reduced by the umask; set what was asked for.
    if chmod(path, mode) != 0 { throw SystemError.last("chmod", path) }
}

/// True when `path` exists and is a directory (following symlinks).
public func isDirectory(_ path: String) -> Bool {
    var st = stat()
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
}

/// The target of a symbolic link, as stored in the link. Throws `SystemError`.
public func readLink(_ path: String) throws -> String {
    var size = 256
    while true {
        var buf = [CChar](repeating: 0, count: size)
        let n = buf.withUnsafeMutableBufferPointer { readlink(path, $0.baseAddress!, $0.count) }
        if n < 0 { throw SystemError.last("readlink", path) }
        if n < size {
            return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        // Possibly truncated: try again with more room.
        size *= 4
        if size > 1 << 20 { throw SystemError(operation: "readlink", path: path, errno: ENAMETOOLONG) }
    }
}

/// The directory part of a path: `/a/b` → `/a`, `/a` → `/`, `a` → `.`.
public func directoryName(of path: String) -> String {
    var bytes = Array(path.utf8)
    while bytes.count > 1 && bytes.last == 0x2F { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: 0x2F) else { return "." }
    var end = slash
    while end > 0 && bytes[end - 1] == 0x2F { end -= 1 }
    if end == 0 { return "/" }
    return String(decoding: bytes[0..<end], as: UTF8.self)
}

/// The last component of a path: `/a/b` → `b`.
public func baseName(of path: String) -> String {
    var bytes = Array(path.utf8)
    while bytes.count > 1 && bytes.last == 0x2F { bytes.removeLast() }
    guard let slash = bytes.lastIndex(of: 0x2F) else { return String(decoding: bytes, as: UTF8.self) }
    if bytes.count == 1 { return "/" }
    return String(decoding: bytes[(slash + 1)...], as: UTF8.self)
}

/// Repeats a call that failed with EINTR (a signal arrived mid-call).
@inline(__always)
func retryingEINTR(_ call: () -> Int32) -> Int32 {
    while true {
        let r = call()
        if r >= 0 || Glibc.errno != EINTR { return r }
    }
}

/// The value of one hexadecimal digit (ASCII), for `%XX` and `\xNN` escapes.
func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case 0x30...0x39: return b - 0x30
    case 0x41...0x46: return b - 0x41 + 10
    case 0x61...0x66: return b - 0x61 + 10
    default: return nil
    }
}
