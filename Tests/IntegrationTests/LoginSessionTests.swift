import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// "In use" (docs/dbus-api.md) on the real bus and daemon, with python-dbusmock's
/// logind on the test bus: while the user's login session is locked or in the
/// background, streams pause with `LocationError` (`SessionInactive`),
/// `RequestLocation` fails with it, taps are answered as when location is off,
/// a one-time grant ends; back in use, streams resume by themselves. Another
/// user's session is not touched. The clients are connections of this process
/// (uid 0, placed by logind's `ListSessions` in session `c1`, or by `GetSessionByPID`).
final class LoginSessionTests: StackTestCase {
    private var logind: LogindMock!
    private var control: BusPeer!
    private var feeder: FixFeeder?
    private var work: TempDir!
    private var children: [ChildProcess] = []
    /// Agents registered by the test (their connections live as long as the test).
    private var agents: [TestAgent] = []

    static let me = "c1"

    override func setUpWithError() throws {
        try super.setUpWithError()
        work = try TempDir()
        control = try stack.peer()
        // Started after the daemon: it follows logind's arrival on the bus too.
        logind = try LogindMock(address: stack.bus.address, peer: control, loop: stack.peers, logPath: work.file("logind.log"))
        try logind.addSession(Self.me, uid: getuid())
        feeder = FixFeeder(gpsd: stack.gpsd)
    }

    override func tearDown() {
        for c in children { c.stop() }
        agents = []
        feeder?.stop()
        logind?.stop()
        super.tearDown()
    }

    private func agent(_ answer: String) throws -> TestAgent {
        let a = TestAgent(peer: try stack.peer(), behaviour: .answer(answer))
        XCTAssertNoThrow(try a.register().get())
        agents.append(a)
        return a
    }

    /// The AuthorizationChanged statuses `p` received from index `from` on.
    private func changes(_ p: BusPeer, from: Int = 0) -> [AuthorizationStatus] {
        p.signals.dropFirst(from).compactMap(\.changedStatus)
    }

    private func locationErrors(_ p: BusPeer, from: Int = 0) -> [(name: String, message: String)] {
        p.signals.dropFirst(from).filter { $0.member == LocationErrorSignal.member }
            .compactMap { LocationErrorSignal.decode($0.arguments()) }
    }

    @discardableResult
    private func waitUntil(_ what: String, timeout: Double = 10, file: StaticString = #filePath, line: UInt = #line,
                           _ done: () -> Bool) -> Bool {
        let ok = stack.peers.pump(timeout: timeout, until: done)
        XCTAssertTrue(ok, "\(what); daemon log:\n\(stack.daemon.log().suffix(3000))", file: file, line: line)
        return ok
    }

    private func startUpdates(_ p: BusPeer) throws {
        _ = try p.geo("StartUpdates", [OptionDictionary.encode(UpdateOptions())]).get()
    }

    /// An app with a stored when-in-use grant (its agent allows while using) whose fixes flow.
    private func streamingWithAStoredGrant(file: StaticString = #filePath, line: UInt = #line) throws -> BusPeer {
        _ = try agent("allow-while-using")
        let app = try stack.peer()
        XCTAssertEqual(try app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get().first,
                       .uint32(AuthorizationStatus.whenInUse.rawValue), file: file, line: line)
        try startUpdates(app)
        waitUntil("fixes flow", file: file, line: line) { app.locations().count >= 2 }
        return app
    }

    /// A stream with a stored when-in-use grant, paused by `pause` and resumed by `resume`.
    private func checkPauseAndResume(reason: String, pause: () throws -> Void, resume: () throws -> Void) throws {
        let app = try streamingWithAStoredGrant()

        let paused = app.signals.count
        try pause()
        waitUntil("LocationError at the pause") { !locationErrors(app, from: paused).isEmpty }
        let error = locationErrors(app, from: paused).first
        XCTAssertEqual(error?.name, GeoConsentAPI.ErrorName.sessionInactive)
        XCTAssertTrue(error?.message.contains(reason) == true, "\(String(describing: error))")
        waitUntil("AuthorizationChanged restricted") { changes(app, from: paused) == [.restricted] }
        let a = try app.authorization()
        XCTAssertEqual(a.status, .restricted)
        XCTAssertNil(a.accuracy)
        // No fix while paused, though gpsd keeps sending; and nobody uses location.
        let quiet = app.signals.count
        stack.peers.settle(1.2)
        XCTAssertEqual(app.locations(from: quiet).count, 0, "no fix while paused")
        XCTAssertEqual(app.property(DaemonProperties.inUse)?.boolValue, false, "InUse is off while every stream is paused")
        // RequestLocation during the pause fails saying why.
        let request = app.requestLocation(maxAge: 60, timeout: 5)
        waitUntil("RequestLocation answered") { request.isDone }
        if case .failure(let e)? = request.result {
            XCTAssertEqual(e.name, GeoConsentAPI.ErrorName.sessionInactive)
        } else {
            XCTFail("RequestLocation during the pause: \(String(describing: request.result))")
        }
        // ListSessions shows it.
        let details = SessionDetailsReply.decode(try control.geo("ListSessionDetails").get()) ?? []
        let mine = details.first { $0.name == app.uniqueName }
        XCTAssertEqual(mine?.status, .restricted)
        XCTAssertEqual(mine?.updates, true, "updates stay on, paused")
        XCTAssertNotNil(mine?.paused)
        XCTAssertEqual(try control.sessions().first { $0.name == app.uniqueName }?.status, .restricted,
                       "ListSessions as before, without the pause")

        let back = app.signals.count
        try resume()
        waitUntil("fixes again after the return") { app.locations(from: back).count >= 2 }
        XCTAssertEqual(changes(app, from: back), [.whenInUse])
        XCTAssertEqual(app.property(DaemonProperties.inUse)?.boolValue, true)
        XCTAssertEqual(try control.consents().first?.record.decision, .whenInUse, "the stored decision stayed")
    }

    /// The first tap after login: the user's login session began a moment
    /// ago and its agent has not registered yet (it starts with the session,
    /// maybe after the app). The tap waits for it (`agent-wait`), and the
    /// prompt is shown once it registers; a caller of an old session gets
    /// `NoAgent` at once, as before.
    func testTheFirstTapAfterLoginWaitsForTheAgent() throws {
        try logind.setBegan(Self.me, wall: UInt64(Date().timeIntervalSince1970 * 1e6),
                            monotonic: EventLoop.monotonicNanos() / 1000)
        try checkTheFirstTapWaitsForTheAgent()
    }

    /// A machine with no real-time clock: the login screen came up with the
    /// clock hours behind, and NTP stepped it forward after the login. logind's
    /// `Timestamp` (the wall clock at login) then says the session is hours
    /// old; its `TimestampMonotonic` says it began a moment ago, and the first
    /// tap waits for the agent all the same.
    func testAClockSteppedForwardAfterLoginStillWaitsForTheAgent() throws {
        let threeHoursAgo = UInt64(Date().timeIntervalSince1970 * 1e6) - 3 * 3600 * 1_000_000
        try logind.setBegan(Self.me, wall: threeHoursAgo, monotonic: EventLoop.monotonicNanos() / 1000)
        try checkTheFirstTapWaitsForTheAgent()
    }

    /// The other way round: the wall clock at login says a moment ago (the
    /// clock was set back since), the monotonic clock says the session is
    /// old (the template's 42 µs after boot). Old it is: `NoAgent` at once.
    func testASessionOldOnTheMonotonicClockGetsNoAgentAtOnce() throws {
        try logind.setBegan(Self.me, wall: UInt64(Date().timeIntervalSince1970 * 1e6), monotonic: 42)
        let app = try stack.peer()
        XCTAssertDBusError(app.geo("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions())], timeout: 5),
                           GeoConsentAPI.ErrorName.noAgent)
    }

    private func checkTheFirstTapWaitsForTheAgent(file: StaticString = #filePath, line: UInt = #line) throws {
        let app = try stack.peer()
        let tap = app.geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions())])
        stack.peers.settle(0.5)
        XCTAssertFalse(tap.isDone, "no NoAgent while the session is new: \(String(describing: tap.result))",
                       file: file, line: line)
        let a = try agent("allow-once")
        waitUntil("the tap is answered") { tap.isDone }
        guard case .success(let v)? = tap.result else {
            return XCTFail("tap: \(String(describing: tap.result))", file: file, line: line)
        }
        XCTAssertEqual(StatusReply.decode(v), .whenInUse, file: file, line: line)
        XCTAssertEqual(a.confirms.count, 1, "the agent that came was asked", file: file, line: line)
    }

    func testLockPausesTheStreamAndUnlockResumesIt() throws {
        try checkPauseAndResume(reason: "locked",
                                pause: { try logind.setLockedHint(Self.me, true) },
                                resume: { try logind.setLockedHint(Self.me, false) })
    }

    func testLogindsLockAndUnlockSignals() throws {
        try checkPauseAndResume(reason: "locked",
                                pause: { try logind.emit(Self.me, lock: true) },
                                resume: { try logind.emit(Self.me, lock: false) })
    }

    func testUserSwitchPausesUntilTheSessionIsActiveAgain() throws {
        try checkPauseAndResume(reason: "foreground",
                                pause: { try logind.setActive(Self.me, false) },
                                resume: { try logind.setActive(Self.me, true) })
    }

    func testAOneTimeGrantEndsAtTheLock() throws {
        let agent = try agent("allow-once")
        let app = try stack.peer()
        XCTAssertEqual(try app.tap().get(), 4)
        try startUpdates(app)
        waitUntil("fixes flow") { !app.locations().isEmpty }
        let before = app.signals.count
        try logind.setLockedHint(Self.me, true)
        waitUntil("the grant ends at the lock") { changes(app, from: before) == [.restricted] }
        // A tap during the lock: answered as when location is off, without a prompt.
        XCTAssertEqual(try app.tap().get(), AuthorizationStatus.restricted.rawValue)
        XCTAssertEqual(agent.confirms.count, 1, "no prompt while locked")
        try logind.setLockedHint(Self.me, false)
        waitUntil("back to not determined, not to the grant") { changes(app, from: before) == [.restricted, .notDetermined] }
        let quiet = app.signals.count
        stack.peers.settle(1)
        XCTAssertEqual(app.locations(from: quiet).count, 0, "the stream ended with the grant")
        XCTAssertDBusError(app.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 60, timeout: 5))]),
                           GeoConsentAPI.ErrorName.notAuthorized)
        // The confirmation is stored: a tap after the unlock grants silently again.
        XCTAssertEqual(try app.tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 1)
    }

    func testAPromptOpenAtTheLockIsWithdrawn() throws {
        let agent = TestAgent(peer: try stack.peer(), behaviour: .never)
        XCTAssertNoThrow(try agent.register().get())
        let app = try stack.peer()
        let tap = app.geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions())])
        waitUntil("the prompt opens") { agent.confirms.count == 1 }
        try logind.setLockedHint(Self.me, true)
        waitUntil("the tap is answered at the lock") { tap.isDone }
        XCTAssertEqual(try tap.result?.get().first, .uint32(AuthorizationStatus.restricted.rawValue))
        waitUntil("the prompt is withdrawn") { agent.cancels.count == 1 }
        agent.answer(agent.confirms[0].requestID, "allow-once")
        stack.peers.settle(0.3)
        XCTAssertEqual(try control.consents().count, 0, "a late answer stores nothing")
    }

    func testGetSessionByPIDPlacesTheCaller() throws {
        // This process in session c9, which is locked; c1 (its uid's seat session) is not.
        try logind.addSession("c9", seat: "seat1", uid: getuid())
        try logind.mapPID(getpid(), to: "c9")
        try logind.setLockedHint("c9", true)
        _ = try agent("allow-while-using")
        let app = try stack.peer()
        XCTAssertEqual(try app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get().first,
                       .uint32(AuthorizationStatus.restricted.rawValue))
        try logind.setLockedHint("c9", false)
        waitUntil("in use again") { (try? app.authorization().status) == .notDetermined }
    }

    /// A process in a session's scope is placed in that session from its
    /// cgroup, by logind's own rule, without waiting for logind's answer; one
    /// in its user's manager's subtree (an app of the desktop) follows its
    /// user's display session. Here logind would answer "no session" for every
    /// PID, so only the cgroup can say c9, which is locked.
    func testACallersCgroupPlacesItAsLogindWould() throws {
        guard getuid() == 0, let root = Self.unifiedCgroupRoot() else {
            throw XCTSkip("needs root and a writable cgroup v2 hierarchy to lay out cgroups as systemd does")
        }
        try logind.addSession("c9", seat: "seat1", uid: getuid())
        try logind.mapPID(-1, to: "c9")   // GetSessionByPID: NoSessionForPID for every caller
        try logind.setLockedHint("c9", true)
        let uid = getuid()
        let sessionScope = "/user.slice/user-\(uid).slice/session-c9.scope"
        let appScope = "/user.slice/user-\(uid).slice/user@\(uid).service/app.slice/app-test-\(getpid()).scope"
        let made = [sessionScope, appScope].map { root + $0 }
        for dir in made { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        defer {
            // Innermost first; each is empty once its process has exited.
            for dir in made {
                var d = dir
                while d.count > root.count { rmdir(d); d = (d as NSString).deletingLastPathComponent }
            }
        }
        func status(in cgroup: String) throws -> String {
            let call = "echo $$ > '\(root + cgroup)/cgroup.procs' && exec busctl --address='\(stack.bus.address)' call " +
                "\(GeoConsentAPI.busName) \(GeoConsentAPI.objectPath) \(GeoConsentAPI.interfaceName) GetAuthorization"
            let r = try ChildProcess.run("/bin/sh", ["-c", call], timeout: 10)
            XCTAssertEqual(r.status, 0, r.output)
            return String(r.output.split(separator: " ").dropFirst().first ?? "")
        }
        XCTAssertEqual(try status(in: sessionScope), "1", "placed in c9 from its scope, and c9 is locked")
        XCTAssertEqual(try status(in: appScope), "0", "an app of the user's manager follows the user's display, c1, in use")
    }

    /// Where the cgroup v2 hierarchy is mounted, if this process may make cgroups in it.
    static func unifiedCgroupRoot() -> String? {
        guard let info = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in info.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
            let fields = halves[0].split(separator: " ")
            guard fields.count > 4, fields[3] == "/" else { continue }
            let mount = String(fields[4])
            return access(mount, W_OK) == 0 ? mount : nil
        }
        return nil
    }

    func testTheUsersDisplaySessionIsPreferred() throws {
        // Two seat sessions of this uid: c0 (first by id) in the background, c1 the
        // user's display. A caller in no session of its own follows the display.
        try logind.addSession("c0", uid: getuid(), active: false)
        try logind.setDisplay(uid: getuid(), Self.me)
        _ = try agent("allow-while-using")
        let app = try stack.peer()
        XCTAssertEqual(try app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get().first,
                       .uint32(AuthorizationStatus.whenInUse.rawValue), "c1 is in use")
        try logind.setActive(Self.me, false)
        waitUntil("paused with c1") { (try? app.authorization().status) == .restricted }
    }

    func testAnotherUsersSessionIsUnaffected() throws {
        guard getuid() == 0 else { throw XCTSkip("acts as another uid with setpriv: needs root") }
        let other: UInt32 = 65534
        // The other user switches in: this uid's session goes to the background.
        try logind.addSession("c2", uid: other, active: false)
        _ = try agent("allow-while-using")
        let app = try stack.peer()
        _ = try app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get()
        try logind.setActive(Self.me, false)
        try logind.setActive("c2", true)
        waitUntil("this uid is paused") { (try? app.authorization().status) == .restricted }
        XCTAssertDBusError(app.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 60, timeout: 5))]),
                           GeoConsentAPI.ErrorName.sessionInactive)
        // The other user, in the foreground, taps and gets fixes.
        try startAllowOnceAgent(asUID: other)
        let locate = try stack.ctl(["--json", "locate"], asUID: other, timeout: 30)
        XCTAssertEqual(locate.status, 0, locate.output)
        XCTAssertTrue(locate.output.contains("latitude"), locate.output)
        // And this uid is still paused.
        XCTAssertEqual(try app.authorization().status, .restricted)
    }

    func testLogindLeavingEndsThePauseAndItsReturnIsFollowed() throws {
        _ = try agent("allow-while-using")
        let app = try stack.peer()
        _ = try app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get()
        try logind.setLockedHint(Self.me, true)
        waitUntil("paused") { (try? app.authorization().status) == .restricted }
        // Nothing known without logind: as before, no pause.
        logind.stop()
        waitUntil("unpaused when logind left") { (try? app.authorization().status) == .whenInUse }
        // logind back, its session locked: followed again.
        logind = try LogindMock(address: stack.bus.address, peer: control, loop: stack.peers, logPath: work.file("logind2.log"))
        try logind.addSession(Self.me, uid: getuid())
        try logind.setLockedHint(Self.me, true)
        waitUntil("paused again") { (try? app.authorization().status) == .restricted }
    }

    func testNoLogindSessionForTheCallerBehavesAsBefore() throws {
        // A uid with no session at all: nothing is known, nothing pauses.
        try logind.setLockedHint(Self.me, true)
        guard getuid() == 0 else { throw XCTSkip("acts as another uid with setpriv: needs root") }
        let other: UInt32 = 65534
        try startAllowOnceAgent(asUID: other)
        let locate = try stack.ctl(["--json", "locate"], asUID: other, timeout: 30)
        XCTAssertEqual(locate.status, 0, locate.output)
    }

    /// `geoconsentctl agent --auto allow-once` as `uid`, registered when this returns.
    func startAllowOnceAgent(asUID uid: UInt32, file: StaticString = #filePath, line: UInt = #line) throws {
        let agentLog = work.file("agent-\(uid).log")
        children.append(try ChildProcess(executable: "/usr/bin/setpriv",
                                         arguments: ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                                     TestPaths.binDir + "/geoconsentctl", "--bus", stack.bus.address,
                                                     "agent", "--auto", "allow-once"], logPath: agentLog))
        XCTAssertNotNil(waitForLine(in: agentLog, timeout: 15) { $0.contains("registered for uid \(uid)") },
                        tailOf(agentLog), file: file, line: line)
    }
}

extension LoginSessionTests {
    /// logind cannot be asked at a connection's first call (its answer is
    /// `LimitsExceeded`, as when the daemon's pending calls were spent): the
    /// call goes on, and the placement is tried again instead of being taken
    /// for "no session", so a lock later pauses the connection. (Before, the
    /// failed placement fell through to the uid's seat session, `c1` here,
    /// and the connection never followed `c9`, the session logind names for it.)
    func testAPlacementWhoseCallsFailedIsTriedAgain() throws {
        try logind.addSession("c9", seat: "seat1", uid: getuid())
        let until = Date().timeIntervalSince1970 + 1.0
        try logind.failGetSessionByPID(until: until, then: "c9")
        let app = try streamingWithAStoredGrant()
        // The retry (2 s after the failure) has placed the connection by then.
        stack.peers.settle(max(0, until + 2.5 - Date().timeIntervalSince1970))
        let paused = app.signals.count
        try logind.setLockedHint("c9", true)
        waitUntil("LocationError at the lock of the session logind named on the retry") {
            !locationErrors(app, from: paused).isEmpty
        }
        XCTAssertEqual(locationErrors(app, from: paused).first?.name, GeoConsentAPI.ErrorName.sessionInactive)
    }

    /// The first read of a login session fails (logind names a session for the
    /// user's display that it cannot read): every connection placed there later
    /// goes on too, instead of waiting for a read that was never sent.
    func testAFailedSessionReadParksNoLaterCall() throws {
        try logind.setDisplay(uid: getuid(), "ghost")
        var peers: [BusPeer] = []   // all connected: placed in the same login session
        for i in 0..<3 {
            let p = try stack.peer()
            peers.append(p)
            // Within less than the 4 s placement bound: after a failed read, nobody waits for the next.
            let r = p.geo("GetAuthorization", timeout: 3)
            XCTAssertNoThrow(try r.get(), "connection \(i) got no answer; daemon log:\n\(stack.daemon.log().suffix(2000))")
        }
        XCTAssertEqual(peers.count, 3)
        XCTAssertTrue(stack.daemon.log().contains("cannot read the login session /org/freedesktop/login1/session/ghost"),
                      String(stack.daemon.log().suffix(2000)))
    }
}

/// What LogindWatch keeps between connections (so that a new connection asks
/// logind one question, not four) must never change what "In use" decides:
/// a login session no connection is in any more is still followed, and what
/// logind said of a uid's own session is asked again once a session comes,
/// goes or becomes the user's display.
extension LoginSessionTests {
    /// The last connection of c9 left; c9 is locked meanwhile; the next app
    /// placed there is paused at its first call, and after the unlock the one
    /// after it is not. (This process's connections are c9's alone: logind
    /// places its PID there, and nothing else connects from it.)
    func testALockWhileNobodyIsInTheSessionPausesTheNextApp() throws {
        try logind.addSession("c9", seat: "seat1", uid: getuid())
        try logind.mapPID(getpid(), to: "c9")
        let first = try stack.peer()
        XCTAssertEqual(try first.authorization().status, .notDetermined, "placed in c9, in use")
        first.connection.close()
        stack.peers.settle(0.3)
        try logind.setLockedHint("c9", true)
        stack.peers.settle(0.3)
        let next = try stack.peer()
        XCTAssertEqual(try next.authorization().status, .restricted, "placed in c9, locked while nobody was in it")
        try logind.setLockedHint("c9", false)
        waitUntil("in use again at the unlock") { (try? next.authorization().status) == .notDetermined }
        next.connection.close()
        stack.peers.settle(0.3)
        try logind.setLockedHint("c9", true)
        try logind.setLockedHint("c9", false)
        stack.peers.settle(0.3)
        let third = try stack.peer()
        XCTAssertEqual(try third.authorization().status, .notDetermined, "locked and unlocked while nobody was in it")
    }

    /// A caller in no session of its own follows its user's display: when
    /// another session becomes the display, the next app is placed there.
    func testANewDisplaySessionPlacesTheNextApp() throws {
        _ = try agent("allow-while-using")
        let first = try stack.peer()
        XCTAssertEqual(try first.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())]).get().first,
                       .uint32(AuthorizationStatus.whenInUse.rawValue), "placed in c1, in use")
        // A new login session of this uid, locked, becomes its display.
        try logind.addSession("c7", seat: "seat1", uid: getuid())
        try logind.setLockedHint("c7", true)
        try logind.setDisplay(uid: getuid(), "c7")
        stack.peers.settle(0.3)
        let next = try stack.peer()
        XCTAssertEqual(try next.authorization().status, .restricted, "placed in c7, the display now, which is locked")
        XCTAssertEqual(try first.authorization().status, .whenInUse, "the first app stays in c1")
    }
}
