import XCTest
import Foundation
import GeoCore
@testable import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Malformed and hostile D-Bus input. Every call the daemon
/// receives gets an error or a valid reply (nothing for no-reply calls and
/// signals), the daemon keeps serving, and its RSS and descriptors stay flat.
final class HostileDBusTests: StackTestCase {

    // MARK: Random messages, pipelined

    func testRandomMessagesEachGetAnAnswerAndTheDaemonStaysFlat() throws {
        let seed = Hostile.seed()
        // The same daemon, with glibc's mmap threshold pinned at its default (128 KiB): otherwise
        // glibc raises it after the first huge message is freed, later megabyte messages come
        // from the heap, and RSS records the heap's high-water mark instead of what is kept.
        stack.daemon.stop()
        let daemon = try DaemonInstance(busAddress: stack.bus.address, gpsdPort: stack.gpsd.port,
                                        stateDir: stack.stateDir.path, environment: ["MALLOC_MMAP_THRESHOLD_": "131072"])
        defer { daemon.stop() }
        let victim = try stack.peer()
        XCTAssertEqual(try victim.authorization().status, .notDetermined)
        let run = try DBusFuzzRun(seed: seed, total: Hostile.count(small: 2_000, full: 100_000), daemon: daemon,
                                  stack: stack, victim: victim)
        run.run()

        // The forged NameOwnerChanged signals did not end the victim's session.
        let root = try stack.peer()
        let sessions = try root.sessions()
        XCTAssertTrue(sessions.contains { $0.name == victim.uniqueName }, "a forged NameOwnerChanged ended a session")
        // Nothing the fuzzer did granted anything to anyone.
        let consents = try root.consents()
        XCTAssertTrue(consents.allSatisfy { !$0.record.oneTimeApproved && $0.record.decision == nil }, "\(consents)")
        XCTAssertEqual(try victim.authorization().status == .whenInUse, false)
        XCTAssertTrue(daemon.isRunning)
        XCTAssertTrue(run.silent.isEmpty, "\(run.silent.count) calls got no answer (seed \(seed)): \(run.silent.prefix(5))")
        XCTAssertEqual(run.localRejects, 0, "the generator built messages our own layer refused (seed \(seed))")

        run.report()
        XCTAssertLessThanOrEqual(run.fdsEnd, run.fdsAfterWarmup + 2, "the daemon leaks descriptors")
        // Flat: huge strings pass through malloc, so allow some slack, but not per-message growth.
        let growth = run.rssEnd - run.rssAfterWarmup
        XCTAssertLessThanOrEqual(growth, 1024, "RSS grew by \(growth) kB (seed \(seed))")
    }

    // MARK: Regression: pending calls of a connection the bus drops

    /// Found by this suite: when the bus dropped a connection (here for a message
    /// nested deeper than it accepts), libdbus finalized the connection's pending
    /// calls without calling their notify functions, so a `Connection.call`
    /// completion never ran, not even at its timeout. Now it gets `Disconnected`.
    func testPendingCallsCompleteWithDisconnectedWhenTheBusDropsTheConnection() throws {
        let holder = HostileAgent(peer: try stack.peer(), .hold)
        let p = try stack.peer()
        let held = p.callAsync(holder.peer.uniqueName, HostileAgent.path, GeoConsentAPI.agentInterfaceName, ConfirmCall.member,
                               ConfirmCall.encode(ConfirmRequest(agentName: holder.peer.uniqueName, agentPath: HostileAgent.path,
                                                                 requestID: "1", appID: "a", kind: .oneTime, appName: "",
                                                                 reason: "", accuracy: .full, pid: 1, sandboxed: false,
                                                                 executable: "", parentWindow: "", timeout: 20)),
                               timeout: 20)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { holder.held.count == 1 })
        var v: DBusValue = .string("x")
        for _ in 0..<70 { v = .variant(v) }
        let t0 = secondsNow()
        // Past our own check (validateForWire refuses it before it is sent): the bus drops the sender.
        let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                       interface: GeoConsentAPI.interfaceName, member: "GetAuthorization")
        try m.append([v], nestingLimit: .max)
        var droppedResult: Result<[DBusValue], DBusError>?
        p.connection.call(m, timeout: 20) { r in droppedResult = r.map { $0.arguments() } }
        XCTAssertTrue(stack.peers.pump(timeout: 5) { held.isDone && droppedResult != nil }, "pending calls never completed")
        let dt = secondsNow() - t0
        XCTAssertFalse(p.connection.isConnected)
        for r in [held.result, droppedResult] {
            if case .failure(let e)? = r { XCTAssertEqual(e.name, DBusError.disconnectedName) }
            else { XCTFail("expected Disconnected, got \(String(describing: r))") }
        }
        // Calls made after the drop fail at once too.
        let after = p.callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName, "GetAuthorization")
        XCTAssertTrue(stack.peers.pump(timeout: 2) { after.isDone })
        XCTAssertTrue(holder.peer.pingDaemon())
        Hostile.report("dbus-dropped-connection", "tried 2 pending calls on a connection the bus dropped (variant nesting 70), "
            + "saw both complete with Disconnected after \(Hostile.ms(dt)) (before the fix: never, not even at the 20 s timeout)")
    }
}
