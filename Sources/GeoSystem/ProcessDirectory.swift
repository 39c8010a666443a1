/// Reading another process's `/proc/PID` without trusting it: one directory
/// handle for every read (so all of them describe the same process), bounded
/// reads, and a safe way into files the process itself controls.
import Glibc
import CLinuxSyscalls

/// The bounds identity reading keeps to (docs/dbus-api.md, "Identity limits").
public enum IdentityLimits {
    /// The most bytes read from any file under `/proc/PID`, `PID/root/.flatpak-info`
    /// included; a longer file is refused, not cut.
    public static let fileBytes = 64 * 1024
    /// The longest app id or executable path (after escaping) accepted as an identity.
    public static let identityBytes = 4096
    /// The longest Flatpak app id (flatpak's own limit).
    public static let flatpakIDBytes = 255
}

/// Why a file in a caller's root was not read: it could have stalled or flooded
/// the daemon, or it is not the kind of file the sandbox marker is.
public struct UnsafeCallerFile: Error, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// An open `/proc/PID` directory (an `O_PATH` handle). Opened once per
/// resolution: every later read goes through this handle, and once that process
/// has ended, reads through it fail instead of reaching a new process that got
/// the same PID.
struct ProcessDirectory {
    let fd: Int32
    /// `/proc/PID`, for messages.
    let path: String

    /// Opens `path`; throws `SystemError` (ENOENT when there is no such process).
    init(path: String) throws {
        let fd = retryingEINTR { open(path, Int32(CLinuxSyscalls.GEO_O_PATH) | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0 { throw SystemError.last("open", path) }
        self.fd = fd
        self.path = path
    }

    func close() { _ = Glibc.close(fd) }

    /// The uid that owns `/proc/PID`: the process's effective uid (root's for a
    /// process that is not dumpable, such as a set-uid program).
    func ownerUID() throws -> UInt32 {
        var st = stat()
        if fstat(fd, &st) != 0 { throw SystemError.last("fstat", path) }
        return st.st_uid
    }

    /// A file the kernel writes (`stat`, `cgroup`), read to its end but at most
    /// `IdentityLimits.fileBytes`. Nil when it does not exist.
    func readKernelFile(_ name: String) throws -> [UInt8]? {
        guard let read = try readKernelFilePrefix(name) else { return nil }
        guard read.complete else {
            throw UnsafeCallerFile(reason: "\(path)/\(name) is larger than \(IdentityLimits.fileBytes / 1024) KiB")
        }
        return read.bytes
    }

    /// The first `IdentityLimits.fileBytes` of a file the kernel writes that can
    /// be long for reasons of no concern here (`mountinfo` on a host with many
    /// mounts), and whether that was all of it. Nil when it does not exist.
    func readKernelFilePrefix(_ name: String) throws -> (bytes: [UInt8], complete: Bool)? {
        let full = path + "/" + name
        let fd = retryingEINTR { openat(self.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SystemError.last("open", full)
        }
        defer { _ = Glibc.close(fd) }
        return try readPrefix(fd, path: full)
    }

    /// The target of the symbolic link `name` (`exe`).
    func readLink(_ name: String) throws -> String {
        let full = path + "/" + name
        // PATH_MAX is the most the kernel returns for /proc/PID/exe.
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = buf.withUnsafeMutableBufferPointer { readlinkat(fd, name, $0.baseAddress!, $0.count) }
        if n < 0 { throw SystemError.last("readlink", full) }
        if n >= buf.count { throw SystemError(operation: "readlink", path: full, errno: ENAMETOOLONG) }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An `O_PATH` handle on the process's root directory (`PID/root`, what it
    /// calls `/`). Nil when it has none any more (a zombie) or `root` is missing.
    func openRoot() throws -> Int32? {
        let fd = retryingEINTR { openat(self.fd, "root", Int32(CLinuxSyscalls.GEO_O_PATH) | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw SystemError.last("open", path + "/root")
        }
        return fd
    }
}

/// Reads `name`, a single path component, in the directory `root` that another
/// process controls (its root, seen through `PID/root`), so that nothing there
/// can stall, flood or redirect the daemon:
/// - `openat2` with `RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`:
///   no symbolic link is followed, so nothing outside that root (`/dev/zero`, a
///   file of the daemon's) is reached;
/// - `O_NONBLOCK | O_NOCTTY`: opening a FIFO returns at once instead of waiting
///   for a writer, and no terminal is acquired;
/// - only a regular file is read (`fstat`), and at most `IdentityLimits.fileBytes`.
///
/// Where `openat2` is missing (Linux before 5.6) or refused (systemd's
/// `RestrictSUIDSGID=` answers it with ENOSYS, as it cannot see into its
/// `struct open_how`), `openat` with `O_NOFOLLOW` does the same for a single
/// component: nothing is traversed, and a symbolic link in its place fails with
/// ELOOP. Anything but a single plain component is then refused.
///
/// Returns nil when the file does not exist. Throws `UnsafeCallerFile` for a file
/// refused by these rules. Throws `SystemError` for other failures.
func readCallerFile(root: Int32, _ name: String, describedAs shown: String) throws -> [UInt8]? {
    let resolve = CLinuxSyscalls.GEO_RESOLVE_IN_ROOT | CLinuxSyscalls.GEO_RESOLVE_NO_SYMLINKS
        | CLinuxSyscalls.GEO_RESOLVE_NO_MAGICLINKS
    let flags = UInt64(UInt32(bitPattern: O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW))
    var fd: Int32
    if openat2Refused {
        (fd, errno) = (-1, ENOSYS)
    } else {
        repeat { fd = geo_openat2(root, name, flags, resolve) } while fd < 0 && errno == EINTR
    }
    if fd < 0 && (errno == ENOSYS || errno == EPERM) {
        guard isSingleComponent(name) else {
            throw UnsafeCallerFile(reason: "cannot read \(shown) safely: openat2 is unavailable " +
                                   "(\(String(cString: strerror(errno)))) and the path has more than one component")
        }
        repeat { fd = openat(root, name, Int32(truncatingIfNeeded: flags)) } while fd < 0 && errno == EINTR
    }
    if fd < 0 {
        switch errno {
        case ENOENT: return nil
        case ELOOP: throw UnsafeCallerFile(reason: "\(shown) is a symbolic link")
        case ENXIO: throw UnsafeCallerFile(reason: "\(shown) is a socket")
        default: throw SystemError.last("open", shown)
        }
    }
    defer { _ = close(fd) }
    var st = stat()
    if fstat(fd, &st) != 0 { throw SystemError.last("fstat", shown) }
    let type = st.st_mode & S_IFMT
    guard type == S_IFREG else {
        throw UnsafeCallerFile(reason: "\(shown) is not a regular file (\(fileTypeName(type)))")
    }
    let tooLarge = UnsafeCallerFile(reason: "\(shown) is larger than \(IdentityLimits.fileBytes / 1024) KiB")
    if st.st_size > IdentityLimits.fileBytes { throw tooLarge }
    guard let bytes = try readBounded(fd, path: shown) else { throw tooLarge }
    return bytes
}

/// Tests set this to take the path a seccomp filter that refuses `openat2` forces.
var openat2Refused = false

/// A name that `openat` resolves without traversing anything: no slash, not "." or "..".
func isSingleComponent(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/"))
}

/// Reads `fd` to its end, nil when that is more than `IdentityLimits.fileBytes`.
private func readBounded(_ fd: Int32, path: String) throws -> [UInt8]? {
    let r = try readPrefix(fd, path: path)
    return r.complete ? r.bytes : nil
}

/// Reads `fd` to its end or to just past `IdentityLimits.fileBytes`: at most
/// that many bytes, and whether they are all. Does not trust `st_size` (/proc
/// files report 0). EAGAIN (a non-blocking read with nothing to give) ends the
/// read: what was read is all there is now.
private func readPrefix(_ fd: Int32, path: String) throws -> (bytes: [UInt8], complete: Bool) {
    let limit = IdentityLimits.fileBytes
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while result.count <= limit {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            if errno == EAGAIN { break }
            throw SystemError.last("read", path)
        }
        if n == 0 { break }
        result.append(contentsOf: chunk[0..<n])
    }
    return result.count <= limit ? (result, true) : (Array(result[0..<limit]), false)
}

private func fileTypeName(_ type: mode_t) -> String {
    switch type {
    case S_IFIFO: return "a FIFO"
    case S_IFDIR: return "a directory"
    case S_IFCHR: return "a character device"
    case S_IFBLK: return "a block device"
    case S_IFSOCK: return "a socket"
    case S_IFLNK: return "a symbolic link"
    default: return "type \(String(type, radix: 8))"
    }
}
