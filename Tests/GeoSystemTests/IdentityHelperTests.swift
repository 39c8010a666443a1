import Foundation
import XCTest
@testable import GeoSystem
import GeoCore

/// The helper's loop and its client over a real socketpair, with the loop on
/// a thread: the same answers as reading /proc in the process, and a helper
/// that stops answering is lost for good. (The helper as a process of its own,
/// with its capabilities, is tested in IntegrationTests/IdentityHelperTests.)
final class IdentityHelperTests: XCTestCase {
    private func pair() -> (client: Int32, helper: Int32) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds), 0)
        return (fds[0], fds[1])
    }

    /// Serves `resolver` on a thread until the client's end closes.
    private func serving(_ resolver: AppIdentityResolver, _ body: (IdentityHelperClient) throws -> Void) rethrows {
        let (c, h) = pair()
        let done = DispatchSemaphore(value: 0)
        Thread {
            IdentityHelper.serve(fd: h, resolver: resolver)
            close(h)
            done.signal()
        }.start()
        let client = IdentityHelperClient(fd: c, replyTimeout: 2000)
        try body(client)
        close(c)
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success, "the helper loop did not end when the daemon's end closed")
    }

    func testAnswersAreThoseOfTheResolver() throws {
        let fake = FakeProc()
            .process(100)
            .process(101, cgroup: "0::/user.slice/app-gnome-org.example.Maps-42.scope\n")
            .process(102, exe: "/usr/bin/app (deleted)")
            .process(103, exe: nil)
            .process(104, flatpakInfo: "[Application]\nname=not a valid id\n")
        let resolver = AppIdentityResolver(procRoot: fake.root)
        let uid = getuid()
        let label = Array("snap.maps.maps (enforce)".utf8) + [0]
        try serving(resolver) { client in
            for pid: UInt32 in [100, 101, 102, 103, 104, 999] {
                XCTAssertEqual(client.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: nil),
                               resolver.resolve(pid: pid, uid: uid), "pid \(pid)")
                XCTAssertEqual(client.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: label),
                               resolver.resolve(pid: pid, uid: uid, securityLabel: label), "pid \(pid) with a label")
            }
            XCTAssertEqual(client.resolve(pid: 100, uid: uid &+ 1, firstStart: nil, securityLabel: nil),
                           .failure(.otherUser(pid: 100, owner: uid, connectionUID: uid &+ 1)))
            XCTAssertEqual(client.resolve(pid: 100, uid: uid, firstStart: 1, securityLabel: nil), .failure(.pidReused))
            XCTAssertNoThrow(try client.verify(pid: 100, uid: uid, startTime: 4242).get())
            XCTAssertEqual(String(describing: client.verify(pid: 100, uid: uid, startTime: 1)),
                           String(describing: Result<Void, IdentityError>.failure(.pidReused)))
            XCTAssertNil(client.lostReason)
        }
    }

    func testTheRealProcThroughTheHelper() throws {
        try serving(AppIdentityResolver()) { client in
            let direct = AppIdentityResolver().resolve(pid: UInt32(getpid()), uid: getuid())
            XCTAssertEqual(client.resolve(pid: UInt32(getpid()), uid: getuid(), firstStart: nil, securityLabel: nil), direct)
        }
    }

    func testAHelperThatIsGoneFailsEveryCallerAndIsReportedOnce() {
        let (c, h) = pair()
        close(h)
        let client = IdentityHelperClient(fd: c, replyTimeout: 2000)
        var reports: [String] = []
        client.onLost = { reports.append($0) }
        for _ in 0..<3 {
            guard case .failure(.unreadable(let why)) = client.resolve(pid: 1, uid: 0, firstStart: nil, securityLabel: nil) else {
                return XCTFail("a lost helper must fail the caller")
            }
            XCTAssertTrue(why.hasPrefix("the identity helper is gone"), why)
        }
        XCTAssertEqual(reports.count, 1, "\(reports)")
        close(c)
    }

    func testASilentHelperIsLostAfterTheTimeout() {
        let (c, h) = pair()
        let client = IdentityHelperClient(fd: c, replyTimeout: 200)
        let start = Date()
        guard case .failure(.unreadable(let why)) = client.verify(pid: 1, uid: 0, startTime: 1) else {
            return XCTFail("a silent helper must fail the caller")
        }
        XCTAssertTrue(why.contains("did not answer within 0.2 s"), why)
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)
        XCTAssertNotNil(client.lostReason)
        close(c)
        close(h)
    }

    func testAGarbledReplyLosesTheHelper() {
        let (c, h) = pair()
        let client = IdentityHelperClient(fd: c, replyTimeout: 2000)
        Thread {
            var buf = [UInt8](repeating: 0, count: IdentityWire.requestBytes)
            _ = buf.withUnsafeMutableBytes { recv(h, $0.baseAddress, $0.count, 0) }
            let junk: [UInt8] = [1, 2, 3]
            _ = junk.withUnsafeBytes { send(h, $0.baseAddress, $0.count, 0) }
        }.start()
        guard case .failure = client.resolve(pid: 1, uid: 0, firstStart: nil, securityLabel: nil) else {
            return XCTFail("a garbled reply must fail the caller")
        }
        XCTAssertTrue(client.lostReason?.contains("malformed") ?? false, String(describing: client.lostReason))
        close(c)
        close(h)
    }
}
