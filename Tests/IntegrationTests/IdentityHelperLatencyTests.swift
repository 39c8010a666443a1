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

        let rounds = 2000
        func mean(_ body: () -> Void) -> Double {
            body()
            let start = EventLoop.monotonicNanos()
            for _ in 0..<rounds { body() }
            return Double(EventLoop.monotonicNanos() - start) / Double(rounds) / 1000
        }
        let resolveHere = mean { _ = direct.resolve(pid: pid, uid: uid) }
        let resolveThere = mean { _ = client.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: nil) }
        let verifyHere = mean { _ = direct.verify(pid: pid, uid: uid, startTime: app.startTime) }
        let verifyThere = mean { _ = client.verify(pid: pid, uid: uid, startTime: app.startTime) }
        XCTAssertNil(client.lostReason)
        print(String(format: "identity-helper: resolve %.1f µs in process, %.1f µs through the helper (+%.1f µs); " +
                     "verify %.1f µs, %.1f µs (+%.1f µs); mean of %d",
                     resolveHere, resolveThere, resolveThere - resolveHere, verifyHere, verifyThere, verifyThere - verifyHere, rounds))
        // A round trip on a socketpair costs tens of microseconds; a millisecond would mean something is wrong.
        XCTAssertLessThan(resolveThere - resolveHere, 1000)
    }
}
