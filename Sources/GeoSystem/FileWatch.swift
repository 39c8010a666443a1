import Glibc

/// Tells when one file may have changed, through inotify on its directory:
/// so a file replaced by a rename (as editors and package managers write
/// them), removed or created is seen as well as one written in place. The
/// owner watches `fd` for readability and calls `changed()`, which drains the
/// queue and says whether the file's name was among the events; `read`
/// reads the file and refuses a read that a write overlapped.
public final class FileWatch {
    /// The inotify descriptor to watch for readability.
    public let fd: Int32
    /// The file watched.
    public let path: String
    /// The file's name in its directory.
    private let name: [UInt8]

    /// The events that may change what the file holds or whether it exists.
    private static let mask = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE
                                     | IN_DELETE_SELF | IN_MOVE_SELF)

    /// Watches `path`'s directory; throws if it cannot be watched (the
    /// directory is missing, or the uid's inotify watches are used up).
    public init(path: String) throws {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw SystemError.last("inotify_init1", path) }
        let directory = directoryName(of: path)
        guard inotify_add_watch(fd, directory, Self.mask) >= 0 else {
            let error = SystemError.last("inotify_add_watch", directory)
            close(fd)
            throw error
        }
        self.fd = fd
        self.path = path
        name = Array(baseName(of: path).utf8)
    }

    deinit { close(fd) }

    /// Reads the file (`readSmallRegularFile`), and refuses the read with
    /// `.changing` if the file was written, replaced or removed meanwhile (a
    /// write queues its event before the writer's next system call). The
    /// caller has drained the events that made it read.
    public func read(maxBytes: Int) throws(SmallFileError) -> [UInt8]? {
        let bytes = try readSmallRegularFile(path, maxBytes: maxBytes)
        if changed() != .none { throw .changing }
        return bytes
    }

    /// Reads every queued event and says what the last one about the file
    /// means (`FileChange`).
    public func changed() -> FileChange {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var last = FileChange.none
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return last }
            var offset = 0
            buffer.withUnsafeBytes { raw in
                while offset + MemoryLayout<inotify_event>.size <= n {
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    let nameStart = offset + MemoryLayout<inotify_event>.size
                    let nameBytes = raw[nameStart..<min(nameStart + Int(event.len), n)].prefix { $0 != 0 }
                    if event.mask & UInt32(IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                        last = .settled
                    } else if nameBytes.elementsEqual(name) {
                        last = event.mask & UInt32(IN_MODIFY | IN_CREATE) != 0 ? .writing : .settled
                    }
                    offset = nameStart + Int(event.len)
                }
            }
        }
    }
}

/// What the events about a watched file say.
public enum FileChange: Equatable, Sendable {
    /// Nothing about the file.
    case none
    /// Someone is writing it in place (or created it empty): what a read
    /// finds now may be half of what the writer means. Read when it is quiet.
    case writing
    /// Closed after writing, renamed into place, removed, or its directory
    /// went away: read it now.
    case settled
}

/// Why `readSmallRegularFile` refused a file.
public enum SmallFileError: Error, Equatable, CustomStringConvertible {
    case system(SystemError)
    /// A directory, FIFO, device or socket named where a file was expected.
    case notRegular
    /// Larger than the bound.
    case tooLarge(Int)
    /// It changed while it was read, every try.
    case changing

    public var description: String {
        switch self {
        case .system(let e): return e.description
        case .notRegular: return "not a regular file"
        case .tooLarge(let bound): return "larger than \(bound) bytes"
        case .changing: return "it kept changing while it was read"
        }
    }
}

/// Reads a regular file of at most `maxBytes`; nil when it does not exist.
/// Opened without blocking (a FIFO put in its place cannot stall the caller)
/// and refused unless regular. A file that changes while it is read (its
/// size or modification time differ before and after) is read again, a few
/// times, and then refused: the next change notice brings it back.
public func readSmallRegularFile(_ path: String, maxBytes: Int) throws(SmallFileError) -> [UInt8]? {
    for _ in 0..<3 {
        let fd = retryingEINTR { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .system(SystemError.last("open", path))
        }
        defer { close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else { throw .system(SystemError.last("fstat", path)) }
        guard before.st_mode & S_IFMT == S_IFREG else { throw .notRegular }
        guard before.st_size <= maxBytes else { throw .tooLarge(maxBytes) }
        var bytes = [UInt8](repeating: 0, count: maxBytes + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw .system(SystemError.last("read", path)) }
            if n == 0 { break }
            count += n
        }
        guard count <= maxBytes else { throw .tooLarge(maxBytes) }
        var after = stat()
        guard fstat(fd, &after) == 0 else { throw .system(SystemError.last("fstat", path)) }
        if after.st_size == before.st_size && after.st_size == count
            && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec {
            return Array(bytes[0..<count])
        }
    }
    throw .changing
}
