import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The tapping process where it cannot be watched (docs/dbus-api.md, "The
/// tapping process", Limits): `pidfd_open` refused by a seccomp filter, as
/// systemd's `SystemCallFilter=` refuses a call (EPERM), and more sessions
/// than the descriptor limit leaves room for. Sessions are served as before,
/// the log says so once, and no descriptor is kept for them.
final class TappingProcessFallbackTests: XCTestCase {
    /// Starts a program (`WRAP_EXEC`, with this script's arguments) with the
    /// descriptor limit `WRAP_NOFILE` and, with `WRAP_DENY_PIDFD_OPEN`, a
    /// seccomp filter that answers `pidfd_open` with EPERM.
    static let wrapper = """
        #!/usr/bin/python3
        import ctypes, os, platform, resource, struct, sys
        if os.environ.get("WRAP_NOFILE"):
            n = int(os.environ["WRAP_NOFILE"])
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
        if os.environ.get("WRAP_DENY_PIDFD_OPEN"):
            arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
            def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
            prog = b"".join([
                ins(0x20, 0, 0, 4), ins(0x15, 1, 0, arch), ins(0x06, 0, 0, 0x7fff0000),   # other arch: allow
                ins(0x20, 0, 0, 0), ins(0x15, 0, 1, 434),                                  # pidfd_open?
                ins(0x06, 0, 0, 0x00050000 | 1), ins(0x06, 0, 0, 0x7fff0000)])            # EPERM, else allow
            buf = ctypes.create_string_buffer(prog)
            class FProg(ctypes.Structure):
                _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
            fp = FProg(len(prog) // 8, ctypes.addressof(buf))
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
            # PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER.
            if libc.prctl(38, 1, None, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
                sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
        exe = os.environ["WRAP_EXEC"]
        os.execv(exe, [exe] + sys.argv[1:])

        """

    private var bus: TestBus!
    private var gpsd: GpsdInstance!
    private var daemon: DaemonInstance!
    private var work: TempDir!
    private let peers = PeerLoop()

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("no python3") }
        work = try TempDir()
        let script = work.file("wrap.py")
        try Self.wrapper.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        var env = ["WRAP_EXEC": TestPaths.binDir + "/geoconsentd"]
        if name.contains("Refused") { env["WRAP_DENY_PIDFD_OPEN"] = "1" }
        if name.contains("Bound") { env["WRAP_NOFILE"] = "80" }   // 80 - 64: 16 sessions watched
        bus = try TestBus()
        gpsd = try GpsdInstance()
        daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port, environment: env, executable: script)
    }

    override func tearDown() {
        daemon?.stop()
        gpsd?.stop()
        bus?.stop()
    }

    /// `count` connections of this process, each with a session; returns them
    /// and the daemon's descriptor count while they live.
    private func sessions(_ count: Int) throws -> ([BusPeer], Int) {
        var list: [BusPeer] = []
        for _ in 0..<count {
            let p = try peers.connect(bus.address)
            XCTAssertNoThrow(try p.authorization())
            list.append(p)
        }
        return (list, Hostile.fdCount(daemon.pid))
    }

    /// The daemon's descriptor count once it is `expected`, or after 5 s: a
    /// descriptor the daemon opens for a moment (a `/proc` read) is not counted.
    private func settledFDCount(_ expected: Int) -> Int {
        _ = peers.pump(timeout: 5) { Hostile.fdCount(self.daemon.pid) == expected }
        return Hostile.fdCount(daemon.pid)
    }

    private func waitUntilNoSessions(_ root: BusPeer) {
        XCTAssertTrue(peers.pump(timeout: 10) { (try? root.sessions())?.isEmpty == true }, "every session ended")
    }

    private func occurrences(_ text: String, in log: String) -> Int { log.components(separatedBy: text).count - 1 }

    func testPidfdOpenRefusedBySeccompLeavesSessionsAsBefore() throws {
        let root = try peers.connect(bus.address)
        let baseline = Hostile.fdCount(daemon.pid)
        var (list, _) = try sessions(20)
        // Settled: a descriptor open for a moment (a /proc read of a caller) is not kept.
        XCTAssertEqual(settledFDCount(baseline), baseline, "no descriptor is kept for a session")
        list.removeAll()
        waitUntilNoSessions(root)
        (list, _) = try sessions(5)
        list.removeAll()
        waitUntilNoSessions(root)
        XCTAssertEqual(Hostile.fdCount(daemon.pid), baseline)
        let log = daemon.log()
        XCTAssertEqual(occurrences("pidfd_open is not available (Operation not permitted)", in: log), 1, "said once: \(log)")
        XCTAssertFalse(log.contains("has exited while its connection lives on"), log)
    }

    func testSessionsBeyondTheDescriptorBoundAreNotWatched() throws {
        let root = try peers.connect(bus.address)
        let baseline = Hostile.fdCount(daemon.pid)
        for round in 0..<2 {
            var (list, _) = try sessions(20)
            // 80 descriptors less 64 reserved, and the epoll set they are in (one of the reserved).
            XCTAssertEqual(settledFDCount(baseline + 17), baseline + 17, "round \(round): 80 descriptors less 64 reserved, and their set")
            for p in list { XCTAssertEqual(try p.authorization().status, .notDetermined, "every session is served") }
            list.removeAll()
            waitUntilNoSessions(root)
            XCTAssertEqual(settledFDCount(baseline), baseline, "round \(round)")
        }
        let log = daemon.log()
        XCTAssertEqual(occurrences("16 connections are watched already", in: log), 1, "said once: \(log)")
    }
}
