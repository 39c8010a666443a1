/// A descriptor that tells when one process exits: a pidfd (`pidfd_open(2)`,
/// Linux 5.3), which `poll(2)` reports readable once that process has exited
/// (become a zombie; it need not have been reaped). Opening one needs no
/// privilege over the process, and `/proc` is not involved, so neither
/// `ProtectProc=invisible` nor another uid stands in the way.
import Glibc
import CLinuxSyscalls

public enum ProcessExitDescriptor {
    /// Why no descriptor was opened.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// No process has that PID now: it has exited already.
        case exited
        /// This kernel has no `pidfd_open` (ENOSYS, before Linux 5.3) or a
        /// seccomp filter refuses it (EPERM): no descriptor will ever open.
        case unsupported(errno: Int32)
        /// Anything else (EMFILE, ENOMEM, ...): this one could not be opened.
        case failed(errno: Int32)

        public var description: String {
            switch self {
            case .exited: return "the process has exited"
            case .unsupported(let e): return "pidfd_open is not available (\(String(cString: strerror(e))))"
            case .failed(let e): return "pidfd_open failed (\(String(cString: strerror(e))))"
            }
        }
    }

    /// A close-on-exec descriptor for the process that holds `pid` now; the
    /// caller closes it. It refers to that process for good, even if the PID
    /// goes to another process later: check that it is the process meant
    /// (its start time) after opening, not before; or open it before the
    /// process is read from `/proc` and find it running after (`isRunning`).
    public static func open(pid: UInt32) -> Result<Int32, Failure> {
        guard pid > 0, pid <= UInt32(Int32.max) else { return .failure(.exited) }
        let fd = geo_pidfd_open(Int32(pid))
        if fd >= 0 { return .success(fd) }
        switch errno {
        case ESRCH: return .failure(.exited)
        case ENOSYS, EPERM: return .failure(.unsupported(errno: errno))
        case let e: return .failure(.failed(errno: e))
        }
    }

    /// Whether the process of `fd` (from `open`) is, right now, still running:
    /// `poll` with no wait finds the descriptor not readable. False when it has
    /// exited (a zombie too) or the poll fails.
    ///
    /// What a true proves: the process held its PID from when `fd` was opened
    /// until now, because a PID goes to another process only after its process
    /// has exited and been reaped, and its pidfd is readable from the exit on.
    /// So whatever was read from `/proc/PID` in between (by this process or
    /// another in the same PID namespace) was read from the process of `fd`.
    public static func isRunning(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&p, 1, 0)
            if ready == 0 { return true }
            if ready < 0 && errno == EINTR { continue }
            return false
        }
    }
}
