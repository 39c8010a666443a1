import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// Exit when idle (`idle-exit`): the daemon gives up its name and exits when
/// nothing needs it, stays while anything does, and loses no call that races
/// its exit: on a bus that activates it again (as the system bus does through
/// systemd), every call is answered, by the old daemon or the new one.
final class IdleExitTests: XCTestCase {
    private func nameHasOwner(_ peer: BusPeer) -> Bool {
        let r = peer.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                          [.string(GeoConsentAPI.busName)], timeout: 5)
        return (try? r.get().first) == .bool(true)
    }

    func testAnIdleDaemonGivesUpItsNameAndExits() throws {
        let stack = try Stack(config: "[daemon]\nidle-exit = 0.5\n")
        defer { stack.stop() }
        let peer = try stack.peer()
        XCTAssertTrue(nameHasOwner(peer))
        let status = stack.daemon.process.waitForExit(timeout: 10)
        XCTAssertEqual(status, 0, "the idle daemon did not exit cleanly:\n\(stack.daemon.log())")
        XCTAssertFalse(nameHasOwner(peer), "the name still has an owner")
        XCTAssertTrue(stack.daemon.log().contains("idle for 0.5 s: giving up"), stack.daemon.log())
    }

    func testASessionOrAnAgentKeepsItRunning() throws {
        let stack = try Stack(config: "[daemon]\nidle-exit = 0.3\n")
        defer { stack.stop() }
        // A session: a client that has called and is still connected.
        let client = try stack.peer()
        XCTAssertNoThrow(try client.geo("GetAuthorization").get())
        stack.peers.settle(1.2)
        XCTAssertTrue(stack.daemon.isRunning, "exited with a session open")
        // An agent: registered, no session.
        let agent = TestAgent(peer: try stack.peer(), behaviour: .never)
        XCTAssertNoThrow(try agent.register().get())
        client.connection.close()
        stack.peers.settle(1.2)
        XCTAssertTrue(stack.daemon.isRunning, "exited with an agent registered")
        // A prompt open: a tap waiting on the agent that never answers.
        let tapper = try stack.peer()
        let tap = tapper.geoAsync("RequestOneTimeAuthorization", [.vardict([:])], timeout: 30)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { agent.confirms.count == 1 })
        agent.peer.connection.close()   // the prompt now ends as "no answer"...
        XCTAssertTrue(stack.peers.pump(timeout: 5) { tap.isDone })
        tapper.connection.close()       // ...and the last session leaves
        XCTAssertEqual(stack.daemon.process.waitForExit(timeout: 10), 0,
                       "the daemon did not exit once nothing needed it:\n\(stack.daemon.log())")
    }

    /// A settings window watching sessions (`WatchSessions`) is told until its
    /// connection leaves: it keeps the daemon running, as an agent does.
    func testASessionWatcherKeepsItRunningUntilItLeaves() throws {
        let stack = try Stack(config: "[daemon]\nidle-exit = 0.3\n")
        defer { stack.stop() }
        let settings = try stack.peer()
        XCTAssertNoThrow(try settings.geo("WatchSessions").get())
        stack.peers.settle(1.2)
        XCTAssertTrue(stack.daemon.isRunning, "exited with a watcher connected")
        settings.connection.close()
        XCTAssertEqual(stack.daemon.process.waitForExit(timeout: 10), 0,
                       "the daemon did not exit once the watcher left:\n\(stack.daemon.log())")
    }

    /// `AddAgent` makes the daemon read the caller's `MaxAccuracyLevel`: while
    /// that read waits (the caller does not read its socket for a while), the
    /// daemon is busy, and the call is answered by it, not dropped with the
    /// daemon's exit (`NoReply`).
    func testAnAddAgentWhoseReadRacesTheIdleExitIsAnswered() throws {
        let stack = try Stack(config: "[daemon]\nidle-exit = 0.3\n[geoclue]\nserve = true\n")
        defer { stack.stop() }
        // A session keeps the daemon up until the AddAgent is in; then only the read does.
        let keeper = try stack.peer()
        XCTAssertNoThrow(try keeper.geo("GetAuthorization").get())
        let loop = EventLoop()
        let c = try Connection(bus: BusAddress(argument: stack.bus.address))
        defer { c.close() }
        c.attach(to: loop)
        let server = ObjectServer(connection: c)
        let agent = CountingGeoClueAgent()   // exported objects are held weakly
        defer { withExtendedLifetime(agent) {} }
        server.export(agent, at: GeoClueAPI.agentPath, interfaces: [CountingGeoClueAgent.interface])
        let m = try Message.methodCall(destination: GeoClueAPI.busName, path: GeoClueAPI.managerPath,
                                       interface: GeoClueAPI.managerInterfaceName, member: "AddAgent")
        try m.append([.string("idle-race")])
        var result: Result<Message, DBusError>?
        c.call(m, timeout: 15) { result = $0 }
        c.flush()
        // The AddAgent is in once a call sent after it is answered; then the session goes.
        XCTAssertNoThrow(try keeper.geo("GetAuthorization").get())
        keeper.connection.close()
        // The daemon's read of our level waits in our socket for longer than idle-exit.
        usleep(1_500_000)
        let deadline = Date().addingTimeInterval(15)
        while result == nil && Date() < deadline { loop.runOnce(timeoutMillis: 50) }
        switch result {
        case .success?: break
        case .failure(let e)?: XCTFail("AddAgent was not answered by the daemon: \(e.name) \(e.message)\n\(stack.daemon.log())")
        case nil: XCTFail("no answer")
        }
        XCTAssertTrue(stack.daemon.isRunning, "the daemon exited with an agent registered:\n\(stack.daemon.log())")
        XCTAssertEqual(agent.gets, 1, "the daemon read the agent's level once")
    }

    func testCallsRacingTheExitAreAllAnsweredAcrossActivation() throws {
        let services = try TempDir()
        let bus = try TestBus(serviceDirectory: services.path)
        defer { bus.stop() }
        let state = try TempDir()
        let config = state.file("geoconsent.conf")
        try "[daemon]\nidle-exit = 0.05\n".write(toFile: config, atomically: true, encoding: .utf8)
        let log = state.file("activated.log")
        // What the bus runs to activate the name (stderr, where the daemon logs, to one file).
        try """
        [D-BUS Service]
        Name=\(GeoConsentAPI.busName)
        Exec=/bin/sh -c 'exec \(TestPaths.binDir)/geoconsentd --bus \(bus.address) --gpsd 127.0.0.1:\(try FreePort.pick()) --config \(config) --state-dir \(state.path)/state 2>>\(log)'
        """.write(toFile: services.file("\(GeoConsentAPI.busName).service"), atomically: true, encoding: .utf8)

        let peers = PeerLoop()
        var daemons: [UInt32] = []   // PIDs of the daemons that answered, in order
        var failures: [String] = []
        var answered = 0
        var coldMillis: [Double] = []
        var warmMillis: [Double] = []
        defer {
            // Every daemon the bus started is ours to stop, even if the test failed.
            for pid in Set(daemons) where kill(pid_t(pid), 0) == 0 { kill(pid_t(pid), SIGTERM) }
        }
        let deadline = secondsNow() + 8
        var round = 0
        var daemonPID: UInt32?
        while secondsNow() < deadline {
            round += 1
            let p = try peers.connect(bus.address)
            // The previous client left the daemon idle; this call goes out when its idle
            // timer (50 ms) fires, give or take: a sweep over 42-58 ms in 0.2 ms steps
            // meets the daemon before, during and after it gives up its name.
            peers.settle(0.042 + Double(round % 80) * 0.0002)
            let t0 = secondsNow()
            let r = p.geo("GetAuthorization", timeout: 20)
            let ms = (secondsNow() - t0) * 1000
            switch r {
            case .success:
                answered += 1
                // Which instance answered: the name's owner's pid, asked of the bus.
                let pidReply = p.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                      "GetConnectionUnixProcessID", [.string(GeoConsentAPI.busName)], timeout: 5)
                if case .success(let v) = pidReply, let pid = v.first?.uint32Value {
                    if pid == daemonPID { warmMillis.append(ms) } else { coldMillis.append(ms) }
                    if daemons.last != pid { daemons.append(pid) }
                    daemonPID = pid
                }
            case .failure(let e):
                failures.append("round \(round): \(e.name): \(e.message)")
            }
            p.connection.close()
            peers.settle(0.001)
        }
        XCTAssertEqual(failures, [], "calls lost in the race with the idle exit; log:\n\(tailOf(log))")
        XCTAssertGreaterThanOrEqual(Set(daemons).count, 3, "the daemon did not exit and come back often enough to test the race")
        XCTAssertTrue((try? String(contentsOfFile: log, encoding: .utf8))?.contains("giving up") ?? false)
        func p50(_ a: [Double]) -> String { a.isEmpty ? "-" : String(format: "%.1f", a.sorted()[a.count / 2]) }
        print("IdleExitTests: \(answered) calls answered by \(Set(daemons).count) daemons in turn; "
              + "GetAuthorization p50 \(p50(coldMillis)) ms via activation (\(coldMillis.count)), "
              + "\(p50(warmMillis)) ms warm (\(warmMillis.count))")
    }
}

