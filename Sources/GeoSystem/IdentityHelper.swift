/// The identity helper process (`geoconsentd --identity-helper FD`): the one
/// part of geoconsentd that keeps CAP_SYS_PTRACE, which reading another uid's
/// `/proc/PID/exe` and `/proc/PID/root` needs. It reads requests of a fixed
/// size from its end of a socketpair (IdentityWire.swift), answers each with
/// `AppIdentityResolver`, and parses nothing else: no bus message, no gpsd
/// data, no configuration. The daemon that parses those holds no capability
/// (IdentitySeparation.swift).
import Glibc
import CLinuxSyscalls

public enum IdentityHelper {
    /// Runs the helper on `fd`, its end of the socketpair, and exits: 0 when
    /// the daemon closed its end, 1 on a malformed request or any failure.
    public static func run(fd: Int32) -> Never {
        do {
            try confine(keeping: fd)
        } catch {
            fail("cannot drop its privileges: \(error)")
        }
        serve(fd: fd, resolver: AppIdentityResolver())
        exit(0)
    }

    /// Answers requests on `fd` until the other end closes it (returns) or
    /// sends something that is not a request (exits 1). Tests run it on a thread.
    public static func serve(fd: Int32, resolver: AppIdentityResolver) {
        var buffer = [UInt8](repeating: 0, count: IdentityWire.requestBytes + 1)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n == 0 { return }
            if n < 0 { fail("cannot read a request: \(String(cString: strerror(errno)))") }
            guard let request = IdentityWire.decodeRequest(Array(buffer[0..<n])) else {
                fail("received a malformed request (\(n) bytes)")
            }
            let reply = IdentityWire.encode(answer(request, resolver), sequence: request.sequence)
            let sent = reply.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EPIPE || errno == ECONNRESET { return }
                fail("cannot send a reply: \(String(cString: strerror(errno)))")
            }
        }
    }

    static func answer(_ r: IdentityRequest, _ resolver: AppIdentityResolver) -> IdentityReply {
        switch r.operation {
        case .resolve:
            switch resolver.resolve(pid: r.pid, uid: r.uid, firstStart: r.startTime, securityLabel: r.securityLabel) {
            // `resolve` checked that r.uid owns /proc/PID before and after reading.
            case .success(let app): return .resolved(app, procUID: r.uid)
            case .failure(let e): return .failed(e)
            }
        case .verify:
            switch resolver.verify(pid: r.pid, uid: r.uid, startTime: r.startTime ?? 0) {
            case .success: return .verified
            case .failure(let e): return .failed(e)
            }
        }
    }

    /// Everything but CAP_SYS_PTRACE and `fd` goes: other capabilities, other
    /// descriptors (standard error stays, for the one line a failure writes),
    /// new privileges, being traced or read by the daemon (not dumpable), and
    /// the signals that stop the service: the helper ends when the daemon
    /// closes its end, so a stop never looks like a lost helper.
    static func confine(keeping fd: Int32) throws {
        let ptrace = UInt64(1) << UInt64(Capabilities.sysPtrace)
        if try !Capabilities.keepOnly(ptrace) {
            // capset denied (systemd's ~@privileged): fine if nothing else is left.
            let now = try CapabilitySets.current()
            guard now.effective & ~ptrace == 0, now.permitted & ~ptrace == 0, now.ambient == 0 else {
                throw SystemError(operation: "capset", path: "self", errno: EPERM)
            }
        }
        try Capabilities.setNoNewPrivileges()
        _ = geo_prctl(CLinuxSyscalls.GEO_PR_SET_DUMPABLE, 0, 0, 0, 0)
        closeDescriptors(except: [2, fd])
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { signal(sig, SIG_IGN) }
        "geoconsentd-id".withCString { _ = geo_prctl(CLinuxSyscalls.GEO_PR_SET_NAME, UInt(bitPattern: $0), 0, 0, 0) }
    }

    private static func closeDescriptors(except keep: [Int32]) {
        var first: Int32 = 0
        for k in keep.sorted() + [Int32.max] {
            if first < k {
                let last = k == Int32.max ? UInt32.max : UInt32(k - 1)
                if geo_close_range(UInt32(first), last) != 0 {
                    for f in first..<min(k, 65536) { _ = close(f) }
                }
            }
            first = k &+ 1
        }
    }

    private static func fail(_ why: String) -> Never {
        let line = "geoconsentd identity helper: \(why)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
}
