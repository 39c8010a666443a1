import XCTest
import Foundation
import GeoDBus
import GeoSystem
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The identity helper as a process of its own (the built geoconsentd with
/// `--identity-helper`), asked about a process of another uid: the same
/// answers as reading /proc in this process, and what the round trip adds to
/// each resolution. Prints `identity-helper: …` with the figures.
final class IdentityHelperLatencyTests: XCTestCase {
    func testHelperAnswersAsInProcessAndWhatItAdds() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: the helper keeps CAP_SYS_PTRACE, and the target is another uid's") }
        let setpriv = try XCTUnwrap(TestPaths.findExecutable("setpriv"), "setpriv")
        let dir = try TempDir()
        defer { dir.remove() }
        let target = try ChildProcess(executable: setpriv,
                                      arguments: ServiceTests.nobody.setprivArgs() + [TestPaths.findExecutable("sleep") ?? "/bin/sleep", "60"],
                                      logPath: dir.file("sleep.log"))
        defer { target.stop() }
        usleep(200_000)
        let (fd, helperPID) = try IdentitySeparation.startHelper(executable: TestPaths.binDir + "/geoconsentd")
        let client = IdentityHelperClient(fd: fd)
        defer {
            close(fd)
            var status: Int32 = 0
            waitpid(helperPID, &status, 0)
        }
        let direct = AppIdentityResolver()
        let pid = UInt32(target.pid), uid = ServiceTests.nobody.uid

        let expected = direct.resolve(pid: pid, uid: uid)
        let app = try expected.get()
        XCTAssertEqual(client.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: nil), expected)
        XCTAssertEqual(client.resolve(pid: pid, uid: 0, firstStart: nil, securityLabel: nil), direct.resolve(pid: pid, uid: 0))
        XCTAssertNoThrow(try client.verify(pid: pid, uid: uid, startTime: app.startTime).get())

        // Call by call, alternating, so that the machine's load hits both alike;
        // medians, as wake-ups across cores on a virtual machine make the means jumpy.
        let rounds = 2000
        func timed(_ body: () -> Void) -> Double {
            let start = EventLoop.monotonicNanos()
            body()
            return Double(EventLoop.monotonicNanos() - start) / 1000
        }
        var resolveHere: [Double] = [], resolveThere: [Double] = [], verifyHere: [Double] = [], verifyThere: [Double] = []
        for _ in 0..<rounds {
            resolveHere.append(timed { _ = direct.resolve(pid: pid, uid: uid) })
            resolveThere.append(timed { _ = client.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: nil) })
            verifyHere.append(timed { _ = direct.verify(pid: pid, uid: uid, startTime: app.startTime) })
            verifyThere.append(timed { _ = client.verify(pid: pid, uid: uid, startTime: app.startTime) })
        }
        XCTAssertNil(client.lostReason)
        func p(_ xs: [Double], _ q: Double) -> Double { xs.sorted()[Int(Double(xs.count - 1) * q)] }
        let rh = p(resolveHere, 0.5), rt = p(resolveThere, 0.5), vh = p(verifyHere, 0.5), vt = p(verifyThere, 0.5)
        print(String(format: "identity-helper: resolve p50 %.1f µs in process, %.1f µs through the helper (+%.1f µs; p90 %.1f, %.1f); " +
                     "verify p50 %.1f µs, %.1f µs (+%.1f µs; p90 %.1f, %.1f); %d calls each",
                     rh, rt, rt - rh, p(resolveHere, 0.9), p(resolveThere, 0.9),
                     vh, vt, vt - vh, p(verifyHere, 0.9), p(verifyThere, 0.9), rounds))
        // A round trip on a socketpair costs tens of microseconds; a millisecond would mean something is wrong.
        XCTAssertLessThan(rt - rh, 1000)
    }
}
