/// Process descriptors (`ProcessExitDescriptor`) gathered in one epoll set, so
/// that an event loop polls one descriptor for all of them however many there
/// are: the set is readable while one of their processes has exited.
import Glibc
import CLinuxSyscalls

public final class ProcessExitSet {
    /// The set's own descriptor, for the loop to poll for readability; -1 if none could be made.
    public let descriptor: Int32

    public init() { descriptor = geo_epoll_create() }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Adds `fd` (the caller keeps owning it, and removes it before closing it).
    /// False, with errno set, when it could not be added.
    public func add(_ fd: Int32) -> Bool {
        descriptor >= 0 && geo_epoll_add_readable(descriptor, fd) == 0
    }

    public func remove(_ fd: Int32) {
        if descriptor >= 0 { _ = geo_epoll_remove(descriptor, fd) }
    }

    /// Descriptors whose process has exited, at most 64: each stays ready until
    /// removed, so the set stays readable while more are left for the next call.
    public func ready() -> [Int32] {
        var fds = [Int32](repeating: -1, count: 64)
        let n = descriptor >= 0 ? Int(geo_epoll_ready(descriptor, &fds, Int32(fds.count))) : 0
        return n > 0 ? Array(fds[..<n]) : []
    }
}
