import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The tapping process (docs/dbus-api.md, "Words": Session) on the real bus and
/// daemon: a temporary grant ends when the process the session's first call
/// came from exits while a child keeps its connection; a process that exits
/// with its connection is seen exactly as before; and each session's process
/// descriptor is closed when the session ends. The app is
/// `geoconsent-localuser` (`hand-over`, `tap`), run as this uid, and its
/// agent is the same program's `agent`, answering allow-once.
final class TappingProcessTests: StackTestCase {
    private var localuser: String { TestPaths.binDir + "/geoconsent-localuser" }
    private var work: TempDir!
    private var agent: ChildProcess?

    override func setUpWithError() throws {
        try super.setUpWithError()
        work = try TempDir()
        let a = try ChildProcess(executable: localuser, arguments: ["--bus", stack.bus.address, "agent", "--answer", "allow-once"],
                                 logPath: work.file("agent.log"), captureStdout: true)
        agent = a
        guard let line = a.readStdoutLine(timeout: 15), line.hasPrefix("registered") else {
            throw HarnessError("the agent did not register: \(tailOf(work.file("agent.log")))")
        }
    }

    override func tearDown() {
        agent?.stop()
        agent = nil
        super.tearDown()
    }

    /// The lines `process` prints until one starts with `last` (or 30 s pass).
    private func lines(of process: ChildProcess, through last: String) -> [String] {
        var out: [String] = []
        while let l = process.readStdoutLine(timeout: 30) {
            out.append(l)
            if l.hasPrefix(last) { break }
        }
        return out
    }

    private var exitLogLine: String { "has exited while its connection lives on" }

    func testTemporaryGrantEndsWhenTheTappingProcessExitsAndAChildKeepsItsConnection() throws {
        let root = try stack.peer()
        var latencies: [Int] = []
        var refusals: [String] = []
        // The first round prompts (the agent allows once); later ones are silent taps.
        for round in 0..<5 {
            let p = try ChildProcess(executable: localuser, arguments: ["--bus", stack.bus.address, "hand-over", "--linger", "30"],
                                     logPath: work.file("hand-over-\(round).log"), captureStdout: true)
            defer { p.stop() }
            let out = lines(of: p, through: "done")
            let context = "round \(round): \(out)\n\(tailOf(work.file("hand-over-\(round).log")))"
            guard let holder = out.first(where: { $0.hasPrefix("holder pid=") }).flatMap({ pid_t($0.dropFirst("holder pid=".count)) }),
                  let name = out.first(where: { $0.hasPrefix("connected ") })?.split(separator: " ").last?.dropFirst("name=".count)
            else { return XCTFail("hand-over did not get to the hand-over: \(context)") }
            defer { kill(holder, SIGKILL) }   // our grandchild: it lingers with the connection

            XCTAssertTrue(out.contains("reply RequestOneTimeAuthorization ok status 4"), context)
            XCTAssertTrue(out.contains { $0.hasPrefix("reply StartUpdates ok") }, context)
            XCTAssertNotNil(p.waitForExit(timeout: 10), "the tapping process exits: \(context)")

            // In order: the parent's exit, then AuthorizationChanged (not-determined), then the
            // child's RequestLocation, refused; nothing after the exit said the grant held.
            let changes = out.filter { $0.hasPrefix("changed ") }
            XCTAssertEqual(changes.count, 1, "one AuthorizationChanged after the exit: \(context)")
            let fields = changes.first?.split(separator: " ") ?? []
            XCTAssertEqual(fields.count, 5, context)
            XCTAssertEqual(fields.dropFirst(1).prefix(2).joined(separator: " "), "status \(AuthorizationStatus.notDetermined.rawValue)",
                           context)
            if fields.count == 5, let us = Int(fields[4]) { latencies.append(us) }
            let exitIndex = out.firstIndex { $0.hasPrefix("parent exited") }
            let changeIndex = out.firstIndex { $0.hasPrefix("changed status") }
            let locateIndex = out.firstIndex { $0.hasPrefix("reply RequestLocation ") }
            XCTAssertNotNil(exitIndex, context)
            if let e = exitIndex, let c = changeIndex, let l = locateIndex { XCTAssertTrue(e < c && c < l, context) }

            // Not served on the old grant. The core answers NotAuthorized; once the
            // daemon's next check of the connection's PID (at most every 100 ms,
            // "Identity") has seen the process gone, the caller is refused before that.
            let locate = locateIndex.map { out[$0] } ?? "(none)"
            let notAuthorized = locate.hasPrefix("reply RequestLocation error \(GeoConsentAPI.ErrorName.notAuthorized) ")
            let refused = locate.hasPrefix("reply RequestLocation error \(DBusError.accessDeniedName) ")
                && locate.contains("the calling process has exited")
            XCTAssertTrue(notAuthorized || refused, "the child's RequestLocation: \(locate)")
            refusals.append(notAuthorized ? "NotAuthorized" : refused ? "AccessDenied" : locate)

            // The session lives on with the child, without a grant and without updates.
            let sessions = try root.sessions()
            let session = sessions.first { $0.name == String(name) }
            XCTAssertEqual(session?.status, .notDetermined, "\(name) in \(sessions); \(context)")
            XCTAssertEqual(session?.updates, false, "updates stop with the grant")
            XCTAssertEqual(root.property(DaemonProperties.inUse)?.boolValue, false)
            XCTAssertTrue(stack.daemon.log().contains("(pid \(p.pid)) \(exitLogLine)"), stack.daemon.log())
        }
        // The approval the user gave in round 0 is stored, and the exits left it alone.
        let consents = try root.consents()
        XCTAssertEqual(consents.count, 1)
        XCTAssertEqual(consents.first?.record.oneTimeApproved, true)
        let sorted = latencies.sorted()
        print("tapping process: grant ended \(sorted.map { "\($0) µs" }.joined(separator: ", ")) after the parent's exit " +
              "(median \(sorted.isEmpty ? -1 : sorted[sorted.count / 2]) µs); the child's RequestLocation: \(refusals)")
    }

    func testProcessesThatExitWithTheirConnectionAreSeenAsBefore() throws {
        let root = try stack.peer()
        // More rounds under `make stress`: each is a race between the process's exit
        // and its departure, which must never look like a hand-over.
        for round in 0..<Hostile.count(small: 10, full: 300) {
            let r = try ChildProcess.run(localuser, ["--bus", stack.bus.address, "tap"], timeout: 30)
            XCTAssertEqual(r.status, 0, r.output)
            XCTAssertTrue(r.output.contains("reply RequestOneTimeAuthorization ok status 4"), "round \(round): \(r.output)")
        }
        XCTAssertTrue(stack.peers.pump(timeout: 10) { (try? root.sessions())?.isEmpty == true }, "every session ended")
        let log = stack.daemon.log()
        XCTAssertFalse(log.contains(exitLogLine), "a process that took its connection with it is a departure, nothing more: \(log)")
        XCTAssertFalse(log.contains("not watching"), log)
    }

    func testEachSessionsProcessDescriptorIsClosedWhenTheSessionEnds() throws {
        let pid = stack.daemon.pid
        let root = try stack.peer()
        _ = try root.authorization()   // root's session and its descriptor are part of the baseline
        // The daemon opens a session's descriptor right after replying to its first
        // call; one more call, answered after that, makes sure it is open.
        _ = try root.authorization()
        let baseline = Hostile.fdCount(pid)
        let count = 50
        for round in 0..<3 {
            var peers: [BusPeer] = []
            for _ in 0..<count {
                let p = try stack.peer()
                XCTAssertNoThrow(try p.authorization())
                peers.append(p)
            }
            _ = try root.authorization()
            // One descriptor per session while it lives: proof that they are watched.
            XCTAssertEqual(Hostile.fdCount(pid), baseline + count, "round \(round)")
            peers.removeAll()
            XCTAssertTrue(stack.peers.pump(timeout: 10) { ((try? root.sessions()) ?? []).count == 1 }, "round \(round)")
            XCTAssertEqual(Hostile.fdCount(pid), baseline, "round \(round): the descriptors are closed with the sessions")
        }
        XCTAssertFalse(stack.daemon.log().contains(exitLogLine), stack.daemon.log())
    }

    /// The daemon opens a pidfd on a new connection's process before resolving
    /// it; a first call that starts no session (here `ListSessions`) must not
    /// leave it open, however long the connection stays. More connections than
    /// the resolver may hold at once, so a leak shows whatever its bound.
    func testAConnectionWhoseFirstCallStartsNoSessionKeepsNoDescriptor() throws {
        let pid = stack.daemon.pid
        let root = try stack.peer()
        _ = try root.authorization()
        _ = try root.authorization()   // root's session descriptor is open (see above)
        let baseline = Hostile.fdCount(pid)
        let count = 50
        var peers: [BusPeer] = []
        for _ in 0..<count {
            let p = try stack.peer()
            XCTAssertNoThrow(try p.sessions())
            peers.append(p)
        }
        _ = try root.authorization()
        XCTAssertEqual(Hostile.fdCount(pid), baseline, "a descriptor is left per connection without a session")
        // Their later session calls are watched all the same (a pidfd opened then).
        for p in peers { XCTAssertNoThrow(try p.authorization()) }
        _ = try root.authorization()
        XCTAssertEqual(Hostile.fdCount(pid), baseline + count)
        peers.removeAll()
        XCTAssertTrue(stack.peers.pump(timeout: 10) { ((try? root.sessions()) ?? []).count == 1 })
        XCTAssertEqual(Hostile.fdCount(pid), baseline)
    }

    /// A connection whose first call starts a session costs the identity helper
    /// what one whose first call starts none costs: the resolution, and no second
    /// request to check the pidfd of the process watch (the pidfd, opened before
    /// the resolution and found running after it, is proven already).
    func testASessionsFirstCallAsksTheIdentityHelperOnce() throws {
        let cost = try IdentityHelperCost(stack)
        let root = try stack.peer()
        _ = try root.authorization()
        // Its session's watch (and the set that holds the watched descriptors) is
        // made after that reply is sent: a second call is answered after it.
        _ = try root.authorization()
        let count = 20
        // One call per connection, each a new connection: no later check of a
        // known connection (at most every 100 ms) comes into it.
        let settle = { _ = try root.authorization() }
        let noSession = try cost.perConnection(count, settle: settle) { _ = try $0.sessions() }
        let session = try cost.perConnection(count, settle: settle) { _ = try $0.authorization() }
        XCTAssertGreaterThan(noSession.reads, 0, "the helper resolved nothing: not the helper the daemon asks")
        XCTAssertEqual(noSession.descriptors, 0)
        XCTAssertEqual(session.descriptors, count, "each session's process is watched")
        XCTAssertEqual(session.reads, noSession.reads, "a session's first call asked the helper again")
        XCTAssertFalse(stack.daemon.log().contains("not watching"), stack.daemon.log())
    }
}
