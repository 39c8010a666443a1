/// Keeping CAP_SYS_PTRACE away from the code that parses bus messages and
/// gpsd data (geoconsentd(8), SECURITY; docs/architecture.md).
///
/// Reading another uid's `/proc/PID/exe` and `/proc/PID/root` needs
/// CAP_SYS_PTRACE, which the unit grants. With it, a compromised daemon could
/// walk into every other process's root through `/proc/PID/root`, outside its
/// own mount namespace, and so past `ProtectSystem=`, `ProtectHome=`,
/// `PrivateTmp=` and any `ReadOnlyPaths=` (only file permissions would stay in
/// its way), and see every process's memory map. So a daemon started with the
/// capability in its effective set:
/// 1. makes a socketpair and starts `/proc/self/exe --identity-helper FD`,
///    which inherits the capability as an ambient one and keeps only it
///    (IdentityHelper.swift);
/// 2. gives up every capability it can: the ambient set, the bounding set
///    (when it has CAP_SETPCAP, as root has), and with `capset` the rest
///    (systemd's `SystemCallFilter=~@privileged` denies `capset`), and sets
///    no_new_privs;
/// 3. where `capset` was denied, executes itself again, keeping only its end
///    of the socketpair (`--identity-helper-socket=FD`): an `execve` without
///    ambient capabilities starts a process of a non-root uid (or of root
///    with an empty bounding set) with nothing permitted and nothing
///    effective. Where `capset` emptied the sets (the unit allows it), that
///    second start is skipped: it cost a cold start (D-Bus activation) a
///    third of its time (docs/performance.md, "Cold start");
/// 4. checks that it holds no capability, and only then reads its config and
///    connects to the bus. Every identity comes from the helper from then on.
///
/// A daemon started without the capability (as a user on a session bus)
/// has nothing to give up: it reads `/proc` itself, as it always did, and
/// identifies callers of its own uid only.
import Glibc
import CLinuxSyscalls

public enum IdentitySeparation {
    /// The helper's command line: `geoconsentd --identity-helper FD`.
    public static let helperFlag = "--identity-helper"
    /// How the daemon passes its end of the socketpair to itself across the exec.
    public static let socketFlag = "--identity-helper-socket="

    /// What `prepare` set up, and a line for the log.
    public struct Outcome {
        public var source: IdentitySource
        public var note: String
    }

    /// Removes `--identity-helper-socket=FD` (put there by `prepare` before it
    /// executed itself again) from `args`, and returns FD.
    public static func takeInheritedSocket(_ args: inout [String]) -> Int32? {
        guard let i = args.firstIndex(where: { $0.hasPrefix(socketFlag) }) else { return nil }
        let fd = Int32(args[i].dropFirst(socketFlag.count)) ?? -1
        args.remove(at: i)
        return fd
    }

    /// Steps 1-4 above. `argv` is the daemon's whole command line (to execute
    /// itself again with), `inherited` what `takeInheritedSocket` returned.
    /// Does not return when it executes itself; throws a one-line error when
    /// the daemon must not run.
    public static func prepare(argv: [String], inherited: Int32?) throws -> Outcome {
        if let fd = inherited {
            // Executed as /proc/self/exe, the process would be named "exe" in ps and top.
            let name = String((argv.first ?? "geoconsentd").split(separator: "/").last ?? "geoconsentd").utf8.prefix(15)
            String(decoding: Array(name), as: UTF8.self).withCString {
                _ = geo_prctl(CLinuxSyscalls.GEO_PR_SET_NAME, UInt(bitPattern: $0), 0, 0, 0)
            }
            return try adopt(fd)
        }
        guard Capabilities.isEffective(Capabilities.sysPtrace) else {
            return Outcome(source: AppIdentityResolver(),
                           note: "without CAP_SYS_PTRACE: callers are identified in this process, those of other uids not at all")
        }
        let (fd, helper) = try startHelper()
        let dropped = try Capabilities.keepOnly(0)
        try Capabilities.setNoNewPrivileges()
        if dropped, let caps = try? CapabilitySets.current(), caps.effective == 0, caps.permitted == 0,
           caps.ambient == 0, caps.inheritable == 0 {
            // Step 4 in place: nothing is held, so no execve is needed to shed it.
            return Outcome(source: IdentityHelperClient(fd: fd),
                           note: "callers are identified by the identity helper, which alone holds CAP_SYS_PTRACE; " +
                                 "this process dropped every capability (\(caps))")
        }
        // Only this end crosses the exec; the helper's end was closed after the spawn.
        if fcntl(fd, F_SETFD, 0) != 0 { throw SystemError.last("fcntl", "the identity helper's socket") }
        let args = argv + [socketFlag + String(fd)]
        var cArgs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        execv("/proc/self/exe", &cArgs)
        throw StartupFailure("cannot execute /proc/self/exe to leave CAP_SYS_PTRACE to the identity helper (pid \(helper)): " +
                             String(cString: strerror(errno)))
    }

    /// Step 4: after the exec, the daemon holds no capability and its socket is a seqpacket one.
    private static func adopt(_ fd: Int32) throws -> Outcome {
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard fd >= 0, getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_SEQPACKET.rawValue) else {
            throw StartupFailure("\(socketFlag)\(fd) is not the identity helper's socket")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let caps = try CapabilitySets.current()
        guard caps.effective == 0, caps.permitted == 0, caps.ambient == 0 else {
            throw StartupFailure("still holding capabilities after leaving them to the identity helper (\(caps)); not starting")
        }
        return Outcome(source: IdentityHelperClient(fd: fd),
                       note: "callers are identified by the identity helper, which alone holds CAP_SYS_PTRACE; " +
                             "this process holds no capability (\(caps))")
    }

    /// Step 1: the socketpair and the helper (`executable --identity-helper FD`;
    /// tests name the built daemon); returns this end, close-on-exec, and the
    /// helper's pid. The helper ends when this end is closed.
    public static func startHelper(executable: String = "/proc/self/exe") throws -> (fd: Int32, pid: pid_t) {
        var pair: [Int32] = [-1, -1]
        if socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) != 0 {
            throw SystemError.last("socketpair", "for the identity helper")
        }
        let (mine, theirs) = (pair[0], pair[1])
        defer { _ = close(theirs) }
        // The helper's end alone crosses into it; nothing else starts meanwhile
        // (the daemon has no other thread yet).
        _ = fcntl(theirs, F_SETFD, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let args = ["geoconsentd", helperFlag, String(theirs)]
        var cArgs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var environment: [UnsafeMutablePointer<CChar>?] = [nil]
        var pid: pid_t = 0
        let r = posix_spawn(&pid, executable, nil, &attributes, &cArgs, &environment)
        if r != 0 {
            _ = close(mine)
            throw SystemError(operation: "posix_spawn", path: "\(executable) \(helperFlag)", errno: r)
        }
        return (mine, pid)
    }
}

/// A reason the daemon must not start, in one line.
public struct StartupFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
