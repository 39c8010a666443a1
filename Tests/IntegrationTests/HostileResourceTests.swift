import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Calls that try to make the daemon hold what the caller sent: file
/// descriptors, and large messages kept alive by calls that wait on a prompt.
/// libdbus stops reading a connection when the messages it holds pass ~63 MiB
/// (or its descriptor count reaches its limit), so a daemon that kept them
/// would answer nobody until the prompt timed out. Here the prompt never
/// times out within the test, and a bystander's call must still be answered.
final class HostileResourceTests: StackTestCase {
    private var agent: TestAgent!

    override func setUpWithError() throws {
        try super.setUpWithError()
        // An agent that never answers: every tap waits on the one open prompt.
        agent = TestAgent(peer: try stack.peer(), behaviour: .never)
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        agent = nil
        super.tearDown()
    }

    /// The bystander: a fresh connection whose GetAuthorization is answered.
    private func assertBystanderServed(_ what: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let p = try? stack.peer() else { return XCTFail("no connection", file: file, line: line) }
        let start = EventLoop.monotonicNanos()
        let r = p.geo("GetAuthorization", timeout: 20)
        let ms = Double(EventLoop.monotonicNanos() - start) / 1e6
        XCTAssertNoThrow(try r.get(), "\(what): the bystander was not served", file: file, line: line)
        print("HostileResourceTests: \(what): bystander's GetAuthorization answered in \(String(format: "%.1f", ms)) ms")
    }

    func testCallsCarryingFileDescriptorsAreRefusedAndTheirDescriptorsClosed() throws {
        let pid = stack.daemon.pid
        let before = Hostile.fdCount(pid)
        let devNull = open("/dev/null", O_RDONLY)
        XCTAssertGreaterThanOrEqual(devNull, 0)
        defer { close(devNull) }
        // 66 taps with 16 descriptors each (unknown option keys are otherwise ignored):
        // 1,056 descriptors, past the daemon's descriptor limit if it kept them.
        var fds: [String: DBusValue] = [:]
        for i in 0..<16 { fds["fd\(i)"] = .unixFD(devNull) }
        var peers: [BusPeer] = []
        var calls: [BusPeer.PendingCall] = []
        for _ in 0..<66 {
            let p = try stack.peer()
            peers.append(p)
            calls.append(p.geoAsync("RequestOneTimeAuthorization", [.vardict(fds)], timeout: 30))
        }
        XCTAssertTrue(stack.peers.pump(timeout: 30) { calls.allSatisfy(\.isDone) }, "every tap answered at once")
        for c in calls {
            guard case .failure(let e)? = c.result else { return XCTFail("a tap with descriptors was accepted: \(String(describing: c.result))") }
            XCTAssertEqual(e.name, DBusError.invalidArgsName, e.message)
            XCTAssertTrue(e.message.contains("file descriptors"), e.message)
        }
        XCTAssertEqual(agent.confirms.count, 0, "no prompt was opened for them")
        // A GetAuthorization with descriptors too: every method refuses them.
        let p = try stack.peer()
        let getAll = p.call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, ObjectServer.properties, "GetAll",
                            [.string(GeoConsentAPI.interfaceName), .unixFD(devNull)], timeout: 10)
        XCTAssertDBusError(getAll, DBusError.invalidArgsName)
        if case .failure(let e) = getAll { XCTAssertTrue(e.message.contains("file descriptors"), e.message) }
        let after = Hostile.fdCount(pid)
        XCTAssertLessThanOrEqual(after, before + 2, "the daemon kept descriptors: \(before) before, \(after) after")
        print("HostileResourceTests: daemon descriptors \(before) before, \(after) after 1,056 sent")
        assertBystanderServed("after 1,056 descriptors")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testWaitingCallsDoNotPinTheirMessages() throws {
        // 24 taps joining one prompt, each with 4 MiB under an unknown option key:
        // 96 MiB of messages, past libdbus's ~63 MiB, if the waiting calls kept them.
        let junk = DBusValue.string(String(repeating: "j", count: 4 << 20))
        var peers: [BusPeer] = []
        var calls: [BusPeer.PendingCall] = []
        for _ in 0..<24 {
            let p = try stack.peer()
            peers.append(p)
            calls.append(p.geoAsync("RequestOneTimeAuthorization", [.vardict(["junk": junk, "reason": .string("pin")])],
                                    timeout: 120))
        }
        XCTAssertTrue(stack.peers.pump(timeout: 30) { self.agent.confirms.count == 1 }, "the taps opened one prompt")
        stack.peers.settle(1)
        XCTAssertEqual(calls.filter(\.isDone).count, 0, "the taps wait on the prompt")
        let rss = Hostile.rssKB(stack.daemon.pid)
        assertBystanderServed("24 taps of 4 MiB waiting")
        print("HostileResourceTests: daemon RSS with 96 MiB of taps waiting: \(rss / 1024) MiB")
        XCTAssertLessThan(rss, 48 * 1024, "the daemon holds the waiting calls' messages (\(rss) KiB)")
        XCTAssertTrue(stack.daemon.isRunning)
    }
}
