import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Consent rules through the real bus: a private dbus-daemon, gpsd and the real
/// geoconsentd, with clients and agents as separate bus connections of this
/// process (so they all share one app-id: this test bundle's executable).
final class ConsentBusTests: XCTestCase {
    var stack: Stack!

    /// What the corrupt-state test puts into the state directory before the daemon starts.
    static let garbageConsents = "this is not\ta consents file\n\u{1}\u{2}garbage"
    static let garbageEnabled = "enabled=maybe\n"

    override func setUpWithError() throws {
        if name.contains("testPromptTimeout") {
            stack = try Stack(config: "[daemon]\nprompt-timeout = 1\n")
        } else if name.contains("testCorruptStateFailsClosed") {
            let dir = try TempDir()
            try Self.garbageConsents.write(toFile: dir.file("consents"), atomically: true, encoding: .utf8)
            try Self.garbageEnabled.write(toFile: dir.file("enabled"), atomically: true, encoding: .utf8)
            stack = try Stack(stateDir: dir)
        } else {
            stack = try Stack()
        }
    }

    override func tearDown() {
        stack?.stop()
        stack = nil
    }

    /// This process's app-id as the daemon resolves it (no Flatpak, Snap or app unit here).
    var selfAppID: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "?"
    }

    var ctlPath: String { TestPaths.binDir + "/geoconsentctl" }

    /// A peer serving a `TestAgent`, registered for this uid.
    func registeredAgent(_ behaviour: TestAgent.Behaviour, file: StaticString = #filePath,
                         line: UInt = #line) throws -> TestAgent {
        let agent = TestAgent(peer: try stack.peer(), behaviour: behaviour)
        XCTAssertNoThrow(try agent.register().get(), file: file, line: line)
        return agent
    }

    @discardableResult
    func waitForConfirms(_ agent: TestAgent, _ n: Int, timeout: Double = 10,
                         file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let ok = stack.peers.pump(timeout: timeout) { agent.confirms.count >= n }
        XCTAssertTrue(ok, "the agent got \(agent.confirms.count) Confirm calls, expected \(n)", file: file, line: line)
        return ok
    }

    @discardableResult
    func waitFor(_ call: BusPeer.PendingCall, timeout: Double = 10,
                 file: StaticString = #filePath, line: UInt = #line) -> Result<[DBusValue], DBusError>? {
        stack.peers.pump(timeout: timeout) { call.isDone }
        XCTAssertTrue(call.isDone, "no reply in \(timeout) s", file: file, line: line)
        return call.result
    }

    /// The status a `Request*Authorization` call came back with, once it has.
    func waitForStatus(_ call: BusPeer.PendingCall, timeout: Double = 10,
                       file: StaticString = #filePath, line: UInt = #line) throws -> AuthorizationStatus? {
        try waitFor(call, timeout: timeout, file: file, line: line).flatMap { StatusReply.decode(try $0.get()) }
    }

    /// The first PropertiesChanged carrying `Enabled` that `peer` received after index `from`.
    func waitForEnabledChange(_ peer: BusPeer, from: Int, timeout: Double = 5) -> Message? {
        func find() -> Message? {
            peer.signals.dropFirst(from).first {
                $0.changedProperties?[DaemonProperties.enabled] != nil
            }
        }
        stack.peers.pump(timeout: timeout) { find() != nil }
        return find()
    }

    func requireRoot() throws {
        guard getuid() == 0 else {
            throw XCTSkip("needs root: runs clients as uid 65534 with setpriv (run the tests as root to cover this)")
        }
    }

    // MARK: 1. Two connections of one app

    func testSecondConnectionOfTheSameAppTapsSilentlyAfterOneConfirmation() throws {
        let agent = try registeredAgent(.answer("allow-once"))
        let first = try stack.peer()
        let second = try stack.peer()
        XCTAssertNotEqual(first.uniqueName, second.uniqueName)

        let before = UInt64(Date().timeIntervalSince1970 * 1e6) - 1000
        XCTAssertEqual(try first.tap(AuthOptions(reason: "show the map", accuracy: .full, appName: "Consent Test App",
                                                  parentWindow: "x11:4711")).get(), 4)
        XCTAssertEqual(agent.confirms.count, 1)
        let c = try XCTUnwrap(agent.confirms.first)
        XCTAssertEqual(c.kind, .oneTime)
        XCTAssertEqual(c.appID, selfAppID)
        XCTAssertFalse(c.requestID.isEmpty)
        XCTAssertEqual(c.appName, "Consent Test App")
        XCTAssertEqual(c.reason, "show the map")
        XCTAssertEqual(c.accuracy, .full)
        XCTAssertEqual(c.pid, UInt32(getpid()))
        XCTAssertEqual(c.sandboxed, false)
        XCTAssertEqual(c.executable, selfAppID)
        XCTAssertEqual(c.parentWindow, "x11:4711")

        // The other connection is another session of the same app: the confirmation covers it.
        XCTAssertEqual(try second.tap(AuthOptions(reason: "again")).get(), 4)
        stack.peers.settle(0.1)
        XCTAssertEqual(agent.confirms.count, 1, "the second tap must not prompt")

        let list = try first.consents()
        XCTAssertEqual(list.count, 1)
        let e = try XCTUnwrap(list.first)
        XCTAssertEqual(e.uid, getuid())
        XCTAssertEqual(e.appID, selfAppID)
        XCTAssertEqual(e.record.oneTimeApproved, true)
        XCTAssertEqual(e.record.oneTimeAccuracy, .full)
        XCTAssertNil(e.record.decision)
        XCTAssertGreaterThanOrEqual(e.record.decidedAt, before)
        XCTAssertGreaterThanOrEqual(e.record.lastUsed, before)

        // Both sessions hold a temporary grant.
        for p in [first, second] {
            let a = try p.authorization()
            XCTAssertEqual(a.status, .whenInUse)
            XCTAssertEqual(a.temporary, true)
            XCTAssertEqual(a.oneTimeApproved, true)
        }
    }

    /// The grant journal: the daemon's log says when a grant began and why it
    /// ended, with the app, the uid and its identity kind, and no coordinate.
    func testTheJournalSaysEachGrantAndWhyItEnded() throws {
        let agent = try registeredAgent(.answer("allow-once"))
        let p = try stack.peer()
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: .full)).get(), 4)
        XCTAssertEqual(agent.confirms.count, 1)
        let began = "grant began: uid \(getuid()), executable, session \(p.uniqueName), one-time, full: app \"\(selfAppID)\""
        let ended = "grant ended: uid \(getuid()), executable, session \(p.uniqueName), the app left the bus: app \"\(selfAppID)\""
        stack.peers.pump(timeout: 5) { self.stack.daemon.log().contains(began) }
        XCTAssertTrue(stack.daemon.log().contains(began), stack.daemon.log().suffix(2000).description)
        p.connection.close()
        stack.peers.pump(timeout: 5) { self.stack.daemon.log().contains(ended) }
        let log = stack.daemon.log()
        XCTAssertTrue(log.contains(ended), log.suffix(2000).description)
        let grantLines = log.split(separator: "\n").filter { $0.contains("grant ") }
        XCTAssertEqual(grantLines.count, 2, "one line each: \(grantLines)")
    }

    // MARK: 2. A second user

    func testAnotherUserCannotSeeUseOrResetRootsConsent() throws {
        try requireRoot()
        let nobody: UInt32 = 65534
        // The harness must let that uid run the tool and reach the bus.
        let exeCheck = try ChildProcess.run("/usr/bin/setpriv", ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
                                                                 "/usr/bin/test", "-x", ctlPath])
        XCTAssertEqual(exeCheck.status, 0, "uid \(nobody) cannot execute \(ctlPath): check the directory permissions")

        let agent = try registeredAgent(.answer("allow-once"))
        let root = try stack.peer()
        XCTAssertEqual(try root.tap().get(), 4)
        XCTAssertEqual(try root.consents().count, 1)

        // Consents: root's stay invisible to the other uid.
        let rootJSON = try stack.ctl(["--json", "consents"])
        XCTAssertEqual(rootJSON.status, 0)
        XCTAssertTrue(rootJSON.output.contains(selfAppID), rootJSON.output)
        let theirs = try stack.ctl(["--json", "consents"], asUID: nobody)
        XCTAssertEqual(theirs.status, 0, "uid \(nobody) could not list consents (is the bus socket reachable?)")
        XCTAssertEqual(consentJSONArray(theirs.output)?.count, 0, theirs.output)

        // Sessions: root's session is not listed for them.
        let sessions = try stack.ctl(["--json", "sessions"], asUID: nobody)
        XCTAssertEqual(sessions.status, 0)
        let listed = try XCTUnwrap(consentJSONArray(sessions.output), sessions.output)
        XCTAssertFalse(listed.contains { ($0["uid"] as? Int) == 0 }, sessions.output)
        XCTAssertFalse(sessions.output.contains(root.uniqueName), sessions.output)

        // Root's agent does not answer for them.
        let locate = try stack.consentCtl(["locate", "--timeout", "2"], asUID: nobody)
        XCTAssertEqual(locate.status, 1, locate.stderr)
        XCTAssertTrue(locate.stderr.contains("no consent agent"), locate.stderr)
        stack.peers.settle(0.2)
        XCTAssertEqual(agent.confirms.count, 1, "root's agent must never be asked about another uid's app")

        // Nor may they reset root's record.
        let reset = try stack.consentCtl(["reset", selfAppID, "--uid", "0"], asUID: nobody)
        XCTAssertEqual(reset.status, 1, reset.stderr)
        XCTAssertEqual(reset.stderr, "geoconsentctl: not allowed: Only root may reset another user's consents " +
                       "(run it as root, for example with sudo)\n")
        XCTAssertEqual(try root.consents().count, 1, "root's record survives")
        XCTAssertEqual(try root.authorization().status, .whenInUse)

        // Root sees their session while it lives: their own agent grants their `watch`.
        let logs = try TempDir()
        let theirAgent = try ChildProcess(executable: "/usr/bin/setpriv",
                                          arguments: ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", ctlPath,
                                                      "--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                                          logPath: logs.file("agent.log"), captureStdout: true)
        defer { theirAgent.stop() }
        let registered = theirAgent.readStdoutLine(timeout: 10) ?? ""
        XCTAssertTrue(registered.contains("registered for uid \(nobody)"), registered + consentTail(logs.file("agent.log")))
        let watch = try ChildProcess(executable: "/usr/bin/setpriv",
                                     arguments: ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", ctlPath,
                                                 "--bus", stack.bus.address, "watch"],
                                     logPath: logs.file("watch.log"))
        defer { watch.stop() }
        var theirSession: SessionInfo?
        stack.peers.pump(timeout: 10) {
            theirSession = (try? root.sessions())?.first { $0.uid == nobody && $0.updates }
            return theirSession != nil
        }
        let s = try XCTUnwrap(theirSession, "root does not see uid \(nobody)'s session; watch log: "
                                            + consentTail(logs.file("watch.log")))
        XCTAssertEqual(s.appID, ctlPath)
        XCTAssertEqual(s.status, .whenInUse)
        XCTAssertEqual(agent.confirms.count, 1, "their prompt went to their agent")
        // Root's own view of root's sessions is still there too.
        XCTAssertTrue(try root.sessions().contains { $0.name == root.uniqueName })

        watch.stop()
        let gone = stack.peers.pump(timeout: 10) {
            !((try? root.sessions()) ?? []).contains { $0.name == s.name }
        }
        XCTAssertTrue(gone, "the session must end when its connection leaves the bus")
    }

    // MARK: 3. Client leaves mid-prompt

    func testClientDisconnectingMidPromptCancelsThePrompt() throws {
        let agent = try registeredAgent(.never)
        let client = try stack.peer()
        let tap = client.consentTapAsync(AuthOptions(reason: "leaving soon"))
        guard waitForConfirms(agent, 1) else { return }
        let id = agent.confirms[0].requestID
        XCTAssertFalse(tap.isDone, "the tap waits for the decision")

        client.connection.close()
        let cancelled = stack.peers.pump(timeout: 10) { agent.cancels.contains(id) }
        XCTAssertTrue(cancelled, "the agent was not told that request \(id) was withdrawn (cancels: \(agent.cancels))")
        // A late answer to the withdrawn prompt does nothing.
        agent.answer(id, "allow-once")
        // Asked on the agent's own connection, so the daemon has seen that answer first.
        XCTAssertEqual(try agent.peer.consents().count, 0)

        let other = try stack.peer()
        XCTAssertEqual(try other.consents().count, 0)
        XCTAssertFalse(try other.sessions().contains { $0.name == client.uniqueName })

        // Still serving: a new session prompts afresh, and gets its answer.
        agent.behaviour = .answer("allow-once")
        XCTAssertEqual(try other.tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 2)
        XCTAssertNotEqual(agent.confirms[1].requestID, id)
        XCTAssertTrue(stack.daemon.isRunning)
    }

    // MARK: 4. Eavesdropper

    func testAnotherConnectionCannotReceiveUnicastAuthorizationChanged() throws {
        let eavesdropper = try stack.peer()
        try eavesdropper.addMatch("type='signal'")
        try? eavesdropper.addMatch("type='signal',eavesdrop='true'")   // may be refused; must not help either way
        try? eavesdropper.addMatch("type='signal',interface='\(GeoConsentAPI.interfaceName)',eavesdrop='true'")

        let agent = try registeredAgent(.answer("allow-once"))
        let client = try stack.peer()
        XCTAssertEqual(try client.tap().get(), 4)
        let changed = client.waitForSignal("AuthorizationChanged", timeout: 5)
        XCTAssertEqual(changed?.changedStatus, .whenInUse)
        XCTAssertEqual(changed?.destination, client.uniqueName, "sent unicast")
        XCTAssertEqual(agent.confirms.count, 1)

        stack.peers.settle(0.5)
        // Control: the match rule works (it sees the bus's broadcast NameOwnerChanged).
        XCTAssertFalse(eavesdropper.signals(named: "NameOwnerChanged").isEmpty,
                       "the eavesdropper's match rule delivered nothing at all")
        XCTAssertEqual(eavesdropper.signals(named: "AuthorizationChanged").count, 0,
                       "another connection received a session's AuthorizationChanged")
        XCTAssertTrue(eavesdropper.signals.allSatisfy { $0.interface != GeoConsentAPI.interfaceName })
    }

    // MARK: 5. Prompt timeout

    func testPromptTimeoutReturnsNotDeterminedCancelsAndIgnoresLateAnswer() throws {
        let agent = try registeredAgent(.never)
        let client = try stack.peer()
        let start = Date()
        let tap = client.consentTapAsync(AuthOptions(reason: "nobody answers"))
        guard waitForConfirms(agent, 1) else { return }
        let id = agent.confirms[0].requestID
        let r = try waitForStatus(tap, timeout: 10)
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertEqual(r, .notDetermined)
        XCTAssertGreaterThan(elapsed, 0.8, "replied before the 1 s prompt timeout")
        XCTAssertLessThan(elapsed, 4, "the 1 s prompt timeout was not applied")
        let cancelled = stack.peers.pump(timeout: 5) { agent.cancels.contains(id) }
        XCTAssertTrue(cancelled, "no Cancel for timed-out request \(id)")
        XCTAssertEqual(try client.consents().count, 0)

        // The user answers after all: too late, nothing changes.
        agent.answer(id, "allow-once")
        // Asked on the agent's own connection, so the daemon has seen that answer first.
        XCTAssertEqual(try agent.peer.consents().count, 0)
        stack.peers.settle(0.1)
        XCTAssertEqual(try client.consents().count, 0)
        let a = try client.authorization()
        XCTAssertEqual(a.status, .notDetermined)
        XCTAssertNil(a.accuracy)
        XCTAssertEqual(client.signals(named: "AuthorizationChanged").count, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stack.stateDir.file("consents"))
                       && ((try? String(contentsOfFile: stack.stateDir.file("consents"), encoding: .utf8)) ?? "")
                           .contains(selfAppID), "a timed-out prompt stored something")
        XCTAssertTrue(stack.daemon.isRunning)

        // A prompt withdrawn because its client left is cancelled once, not again at its timeout.
        let leaving = try stack.peer()
        _ = leaving.consentTapAsync()
        guard waitForConfirms(agent, 2) else { return }
        let second = agent.confirms[1].requestID
        leaving.connection.close()
        XCTAssertTrue(stack.peers.pump(timeout: 5) { agent.cancels.contains(second) })
        stack.peers.settle(1.3)
        XCTAssertEqual(agent.cancels.filter { $0 == second }.count, 1, "Cancel sent twice for request \(second)")
        XCTAssertEqual(agent.cancels.count, 2)
    }

    // MARK: 6. Standard prompt, persistence, reset, deny, then the button

    func testStandardPromptPersistsAcrossRestartThenResetDenyAndOneTimeButton() throws {
        let agent = try registeredAgent(.answer("allow-while-using"))
        let client = try stack.peer()
        XCTAssertEqual(try client.consentWhenInUse(AuthOptions(reason: "navigation")).get(), 4)
        XCTAssertEqual(agent.confirms.last?.kind, .whenInUse)
        XCTAssertEqual(client.waitForSignal(AuthorizationChangedSignal.member, timeout: 5)?.changedStatus, .whenInUse)
        let file = try String(contentsOfFile: stack.stateDir.file("consents"), encoding: .utf8)
        XCTAssertTrue(file.contains("when-in-use"), file)
        XCTAssertTrue(file.contains(selfAppID), file)

        try stack.restartDaemon()
        let fresh = try stack.peer()
        let a = try fresh.authorization()
        XCTAssertEqual(a.status, .whenInUse, "the stored when-in-use decision applies after a restart, no agent needed")
        XCTAssertEqual(a.temporary, false)
        XCTAssertEqual(a.accuracy, .full)

        // Forget it: back to not determined, announced to the live session.
        let mark = fresh.signals.count
        XCTAssertNoThrow(try fresh.geo("ResetConsent", [.string(selfAppID), OptionDictionary.encodeReset(uid: nil)]).get())
        XCTAssertEqual(fresh.waitForSignal(AuthorizationChangedSignal.member, from: mark, timeout: 5)?.changedStatus, .notDetermined)
        XCTAssertEqual(try fresh.authorization().status, .notDetermined)
        XCTAssertEqual(try fresh.consents().count, 0)

        // Don't Allow on the standard prompt: persisted `denied`.
        agent.behaviour = .answer("deny")
        XCTAssertNoThrow(try agent.register().get(), "the restarted daemon knows no agent yet")
        XCTAssertEqual(try fresh.consentWhenInUse().get(), 2)
        XCTAssertEqual(agent.confirms.last?.kind, .whenInUse)
        let denied = try String(contentsOfFile: stack.stateDir.file("consents"), encoding: .utf8)
        XCTAssertTrue(denied.contains("denied"), denied)
        XCTAssertEqual(try fresh.consents().first?.record.decision, .denied)
        // Asking again is answered from the record, without a prompt.
        XCTAssertEqual(try fresh.consentWhenInUse().get(), 2)
        XCTAssertEqual(agent.confirms.count, 2)

        // The button after Don't Allow: a one-time grant for this session only.
        agent.behaviour = .answer("allow-once")
        XCTAssertEqual(try fresh.tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 3)
        XCTAssertEqual(agent.confirms.last?.kind, .oneTime)
        let t = try fresh.authorization()
        XCTAssertEqual(t.status, .whenInUse)
        XCTAssertEqual(t.temporary, true)
        XCTAssertEqual(t.oneTimeApproved, true)
        let record = try XCTUnwrap(fresh.consents().first?.record)
        XCTAssertEqual(record.decision, .denied, "denied and one-time-approved stand together")
        XCTAssertEqual(record.oneTimeApproved, true)
        let other = try stack.peer()
        XCTAssertEqual(try other.authorization().status, .denied, "another session is still denied")
    }

    // MARK: 7. Enabled

    func testDisablingLocationBroadcastsEndsGrantsAndPersists() throws {
        let agent = try registeredAgent(.answer("allow-once"))
        let client = try stack.peer()
        XCTAssertEqual(try client.tap().get(), 4)
        // The signal follows the reply: take it before watching for the next one.
        XCTAssertEqual(client.waitForSignal(AuthorizationChangedSignal.member, timeout: 5)?.changedStatus, .whenInUse)
        let watcher = try stack.peer()
        try watcher.addMatch("type='signal',interface='org.freedesktop.DBus.Properties'")
        let admin = try stack.peer()

        let mark = client.signals.count
        XCTAssertNoThrow(try admin.setEnabled(false).get())
        let pc = waitForEnabledChange(watcher, from: 0)
        XCTAssertEqual(pc?.changedProperties?[DaemonProperties.enabled], .bool(false), "about the daemon's interface")
        XCTAssertNotNil(pc, "no PropertiesChanged(Enabled) reached a peer that only added a match rule")
        XCTAssertNil(pc?.destination, "PropertiesChanged is a broadcast")
        XCTAssertEqual(client.waitForSignal(AuthorizationChangedSignal.member, from: mark, timeout: 5)?.changedStatus, .restricted)
        XCTAssertEqual(try client.authorization().status, .restricted)
        XCTAssertNil(try client.authorization().accuracy)
        XCTAssertEqual(try client.tap().get(), 1)
        XCTAssertEqual(try stack.peer().tap().get(), 1, "a new session is restricted too")
        XCTAssertEqual(agent.confirms.count, 1, "restricted: no prompt")
        XCTAssertDBusError(client.geo("StartUpdates", [.vardict([:])]), GeoConsentAPI.ErrorName.notAuthorized)

        try stack.restartDaemon()
        let after = try stack.peer()
        XCTAssertEqual(after.property("Enabled"), .bool(false), "Enabled is kept across restarts")
        XCTAssertEqual(try after.tap().get(), 1)

        let pcMark = watcher.signals.count
        XCTAssertNoThrow(try admin.setEnabled(true).get())
        XCTAssertEqual(after.property("Enabled"), .bool(true))
        XCTAssertEqual(waitForEnabledChange(watcher, from: pcMark)?.changedProperties?[DaemonProperties.enabled],
                       .bool(true), "switching on is broadcast too")
        // The stored confirmation applies again: a silent grant.
        XCTAssertEqual(try after.tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 1)
    }

    func testNonRootCannotSetEnabled() throws {
        try requireRoot()
        let p = try stack.peer()
        let r = try consentRun("/usr/bin/setpriv",
                               ["--reuid=65534", "--regid=65534", "--clear-groups",
                                TestPaths.findExecutable("busctl") ?? "/usr/bin/busctl", "--address=\(stack.bus.address)",
                                "set-property", GeoConsentAPI.busName, GeoConsentAPI.objectPath,
                                GeoConsentAPI.interfaceName, "Enabled", "b", "false"])
        XCTAssertNotNil(r.status)
        XCTAssertNotEqual(r.status, 0, "uid 65534 switched location off")
        XCTAssertTrue(r.stderr.contains("Only root") || r.stderr.contains("Access denied")
                      || r.stderr.contains("AccessDenied"), r.stderr)
        XCTAssertEqual(p.property("Enabled"), .bool(true))
        // geoconsentctl as that uid says it in words, with what to do.
        let ctl = try stack.consentCtl(["disable"], asUID: 65534)
        XCTAssertEqual(ctl.status, 1, ctl.stderr)
        // (No polkit on the test bus: the daemon says so. A real polkitd decides in tests/systemd.)
        XCTAssertEqual(ctl.stderr, "geoconsentctl: not allowed: Only root may switch location on or off (polkit could not be asked: The name org.freedesktop.PolicyKit1 was not provided by any .service files) (run it as root, for example with sudo)\n")
        XCTAssertEqual(p.property("Enabled"), .bool(true))
    }

    // MARK: 8. Corrupt state

    func testCorruptStateFailsClosed() throws {
        let p = try stack.peer()
        XCTAssertEqual(p.property("Enabled"), .bool(false), "an unreadable enabled file means location off")
        XCTAssertEqual(try p.consents().count, 0)
        XCTAssertEqual(try p.tap().get(), 1, "restricted while off")

        let names = try FileManager.default.contentsOfDirectory(atPath: stack.stateDir.path)
        let consentsAside = names.filter { $0.hasPrefix("consents.corrupt-") }
        let enabledAside = names.filter { $0.hasPrefix("enabled.corrupt-") }
        XCTAssertEqual(consentsAside.count, 1, "\(names)")
        XCTAssertEqual(enabledAside.count, 1, "\(names)")
        if let f = consentsAside.first {
            XCTAssertEqual(try String(contentsOfFile: stack.stateDir.file(f), encoding: .utf8), Self.garbageConsents)
        }
        if let f = enabledAside.first {
            XCTAssertEqual(try String(contentsOfFile: stack.stateDir.file(f), encoding: .utf8), Self.garbageEnabled)
        }
        let log = stack.daemon.log()
        XCTAssertTrue(log.contains("consents.corrupt-"), log)
        XCTAssertTrue(log.contains("enabled.corrupt-"), log)
        XCTAssertTrue(stack.daemon.isRunning)
    }

    // MARK: 9. Agent faults

    func testAgentWrongReplyTypeOrErrorGrantsNothing() throws {
        let agent = try registeredAgent(.wrongType)
        let client = try stack.peer()
        XCTAssertEqual(try client.tap().get(), 0)
        XCTAssertEqual(agent.confirms.count, 1)
        XCTAssertEqual(try client.consents().count, 0)
        XCTAssertEqual(try client.authorization().status, .notDetermined)
        XCTAssertEqual(try client.consentWhenInUse().get(), 0)
        XCTAssertEqual(agent.confirms.count, 2)

        agent.behaviour = .error
        XCTAssertEqual(try client.tap().get(), 0)
        XCTAssertEqual(try client.consentWhenInUse().get(), 0)
        XCTAssertEqual(agent.confirms.count, 4, "nothing stored: every request prompts again")
        XCTAssertEqual(try client.consents().count, 0)
        let a = try client.authorization()
        XCTAssertEqual(a.status, .notDetermined)
        XCTAssertNil(a.accuracy)
        XCTAssertEqual(a.oneTimeApproved, false)
        XCTAssertEqual(client.signals(named: "AuthorizationChanged").count, 0)
        XCTAssertDBusError(client.geo("RequestLocation", [.vardict([:])]), GeoConsentAPI.ErrorName.notAuthorized)
        // An answer that is not a decision for the kind counts as no answer too.
        agent.behaviour = .answer("allow-while-using")
        XCTAssertEqual(try client.tap().get(), 0, "allow-while-using is no answer to the button")
        agent.behaviour = .answer("yes please")
        XCTAssertEqual(try client.consentWhenInUse().get(), 0)
        XCTAssertEqual(try client.consents().count, 0)
    }

    func testAgentLeavingMidPromptAndReregistration() throws {
        let first = try registeredAgent(.never)
        let firstName = first.peer.uniqueName
        let client = try stack.peer()
        let tap = client.consentTapAsync()
        guard waitForConfirms(first, 1) else { return }

        let watcher = try stack.peer()
        try watcher.addMatch("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(firstName)'")
        first.peer.connection.close()
        XCTAssertEqual(try waitForStatus(tap, timeout: 10), .notDetermined, "a vanished agent is no answer")
        XCTAssertEqual(try client.consents().count, 0)
        XCTAssertEqual(try client.authorization().status, .notDetermined)
        // Once the bus has announced the departure, the uid is free for a new agent.
        XCTAssertNotNil(watcher.waitForSignal("NameOwnerChanged", timeout: 5))
        let second = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try second.register().get())
        XCTAssertEqual(try client.tap().get(), 4)
        XCTAssertEqual(second.confirms.count, 1)
    }

    func testOneAgentPerUidAndObjectPathChecked() throws {
        let first = try registeredAgent(.answer("allow-once"))
        let second = TestAgent(peer: try stack.peer(), behaviour: .answer("deny"))
        XCTAssertDBusError(second.register(), GeoConsentAPI.ErrorName.agentExists)
        // Registering again from the same connection and path is harmless.
        XCTAssertNoThrow(try first.register().get())
        // Not an object path (sent as a string): InvalidArgs, and nothing registered.
        let bad = try stack.peer()
        XCTAssertDBusError(bad.geo("RegisterAgent", [.string("not an object path")]), DBusError.invalidArgsName)
        XCTAssertDBusError(bad.geo("RegisterAgent", []), DBusError.invalidArgsName)
        // The first agent still answers.
        let client = try stack.peer()
        XCTAssertEqual(try client.tap().get(), 4)
        XCTAssertEqual(first.confirms.count, 1)
        XCTAssertEqual(second.confirms.count, 0)
        // Unregistering frees the uid.
        XCTAssertNoThrow(try first.peer.geo("UnregisterAgent", [.objectPath(TestAgent.path)]).get())
        XCTAssertNoThrow(try second.register().get())
    }

    // MARK: 10. Joined prompts

    func testJoinedPromptOneConfirmForTwoConnections() throws {
        let agent = try registeredAgent(.never)
        let a = try stack.peer()
        let b = try stack.peer()

        // A Don't Allow applies to every waiting session: a queued (not joined) request
        // would be evaluated afresh and prompt a second time.
        let denyA = a.consentTapAsync()
        guard waitForConfirms(agent, 1) else { return }
        let denyB = b.consentTapAsync()
        XCTAssertDBusError(b.tap(), GeoConsentAPI.ErrorName.promptPending)
        agent.answer(agent.confirms[0].requestID, "deny")
        XCTAssertEqual(try waitForStatus(denyA), .notDetermined)
        XCTAssertEqual(try waitForStatus(denyB), .notDetermined)
        stack.peers.settle(0.1)
        XCTAssertEqual(agent.confirms.count, 1, "one prompt for both sessions")
        XCTAssertEqual(try a.consents().count, 0, "Don't Allow on the button stores nothing")

        let tapA = a.consentTapAsync(AuthOptions(reason: "first"))
        guard waitForConfirms(agent, 2) else { return }
        let tapB = b.consentTapAsync(AuthOptions(reason: "second"))
        // b's second tap is processed after its first: PromptPending proves the first one joined.
        XCTAssertDBusError(b.tap(), GeoConsentAPI.ErrorName.promptPending)
        XCTAssertDBusError(a.tap(), GeoConsentAPI.ErrorName.promptPending)
        stack.peers.settle(0.2)
        XCTAssertEqual(agent.confirms.count, 2, "the second connection's tap must join the open prompt")
        XCTAssertFalse(tapA.isDone)
        XCTAssertFalse(tapB.isDone)

        agent.answer(agent.confirms[1].requestID, "allow-once")
        XCTAssertEqual(try waitForStatus(tapA), .whenInUse)
        XCTAssertEqual(try waitForStatus(tapB), .whenInUse)
        XCTAssertEqual(agent.confirms.count, 2)
        XCTAssertEqual(a.waitForSignal(AuthorizationChangedSignal.member, timeout: 5)?.changedStatus, .whenInUse)
        XCTAssertEqual(b.waitForSignal(AuthorizationChangedSignal.member, timeout: 5)?.changedStatus, .whenInUse)
        XCTAssertTrue(agent.cancels.isEmpty)
    }

    // MARK: 11. The command-line agent

    /// `geoconsentctl agent --auto WORD`, registered (its banner read: it says
    /// what it answers, as given).
    func ctlAgent(auto word: String, _ logs: TempDir) throws -> ChildProcess {
        let ctlAgent = try ChildProcess(executable: ctlPath,
                                        arguments: ["--bus", stack.bus.address, "agent", "--auto", word],
                                        logPath: logs.file("agent.log"), captureStdout: true)
        let banner = ctlAgent.readStdoutLine(timeout: 10) ?? ""
        XCTAssertEqual(banner, "Consent agent registered for uid \(getuid()), answering \(word); Ctrl-C to stop.",
                       consentTail(logs.file("agent.log")))
        return ctlAgent
    }

    func testTheAutoAgentsBannerSaysWhatItAnswers() throws {
        for word in ["allow-once-reduced", "allow-while-using-reduced", "deny"] {
            let logs = try TempDir()
            try ctlAgent(auto: word, logs).stop()
        }
    }

    func testCtlAgentAutoAllowOnceAnswersAndConsentsListsTheApp() throws {
        let logs = try TempDir()
        let ctlAgent = try ctlAgent(auto: "allow-once", logs)
        defer { ctlAgent.stop() }
        // It holds the uid's agent slot.
        XCTAssertDBusError(TestAgent(peer: try stack.peer(), behaviour: .never).register(),
                           GeoConsentAPI.ErrorName.agentExists)

        let client = try stack.peer()
        XCTAssertEqual(try client.tap(AuthOptions(accuracy: .reduced, appName: "Consent CLI Test")).get(), 4)
        let answered = ctlAgent.readStdoutLine(timeout: 5) ?? ""
        XCTAssertTrue(answered.contains(selfAppID) && answered.hasSuffix("-> allow-once"), answered)

        let out = try stack.ctl(["consents"])
        XCTAssertEqual(out.status, 0, out.output)
        let row = out.output.split(separator: "\n").first { $0.contains(selfAppID) }
        XCTAssertNotNil(row, out.output)
        XCTAssertTrue(row?.contains("reduced") ?? false, "the BUTTON column shows the confirmed accuracy: \(out.output)")
        XCTAssertTrue(out.output.hasPrefix("UID"), out.output)

        ctlAgent.stop()
        XCTAssertEqual(ctlAgent.exitCode, 0, "the agent exits 0 on SIGTERM")
        // Its slot is free again once it has left.
        let replacement = TestAgent(peer: try stack.peer(), behaviour: .never)
        var registered = false
        stack.peers.pump(timeout: 5) {
            registered = (try? replacement.register().get()) != nil
            return registered
        }
        XCTAssertTrue(registered)
    }

    /// An agent of the earlier contract (before `identity`, `identity-proven`
    /// and the `-reduced` words) still works: every detail it read is there
    /// with its type, and its plain `allow-once` grants what was asked.
    func testAnAgentOfTheEarlierContractStillWorks() throws {
        let old = try registeredAgent(.answer("allow-once"))
        let p = try stack.peer()
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: .full)).get(), 4)
        let details = try XCTUnwrap(old.rawDetails.first)
        let earlier = ["app-name": "s", "reason": "s", "accuracy": "s", "pid": "u", "sandboxed": "b",
                       "executable": "s", "parent-window": "s"]
        for (key, signature) in earlier { XCTAssertEqual(details[key], signature, key) }
        XCTAssertEqual(try p.authorization().accuracy, .full, "a plain word allows what was asked")
    }

    /// geoconsentctl speaks the user's language (gettext, po/ko.po, compiled to
    /// .build/locale by scripts/po-check.sh); numbers and JSON stay as they are.
    func testCtlSpeaksKoreanInAKoreanLocale() throws {
        let korean = ["LANG": "ko_KR.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": ""]
        let ko = try stack.ctl(["status"], environment: korean)
        XCTAssertEqual(ko.status, 0)
        XCTAssertTrue(ko.output.contains("위치 켜짐: 예"),
                      "with LANG=ko_KR.UTF-8 (deps.sh --desktop makes the locale): \(ko.output)")
        // Aligned by the columns a terminal gives each character (Hangul takes two).
        func columns(_ t: Substring) -> Int {
            t.unicodeScalars.reduce(0) { $0 + ((0xAC00...0xD7A3).contains($1.value) || (0x1100...0x115F).contains($1.value) ? 2 : 1) }
        }
        let colons = Set(ko.output.split(separator: "\n").compactMap { line in
            line.range(of: ": ").map { columns(line[..<$0.lowerBound]) }
        })
        XCTAssertEqual(colons.count, 1, "the labels' colons in one column:\n\(ko.output)")
        let en = try stack.ctl(["status"], environment: ["LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", "LANGUAGE": ""])
        XCTAssertTrue(en.output.contains("Location enabled: yes"), en.output)
        let json = try stack.ctl(["--json", "status"], environment: korean)
        XCTAssertTrue(json.output.contains("\"enabled\":true"), "JSON keys are not translated: \(json.output)")
        XCTAssertTrue(try stack.ctl(["consents"], environment: korean).output.contains("저장된 동의가 없습니다."))

        // A table's columns line up too: each column starts at the same
        // terminal column in the Korean header as in the rows below it.
        let agent = try registeredAgent(.answer("allow-once"))
        XCTAssertEqual(try stack.peer().tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, 1)
        let table = try stack.ctl(["consents"], environment: korean).output.split(separator: "\n")
        XCTAssertEqual(table.count, 2, "\(table)")
        func starts(_ line: Substring) -> [Int] {
            // Where a cell begins: after two blanks (the separator), counted in terminal columns.
            var out: [Int] = [], col = 0, blanks = 0
            for ch in line {
                if ch == " " { blanks += 1 } else { if blanks >= 2 { out.append(col) }; blanks = 0 }
                col += columns(Substring(String(ch)))
            }
            return out
        }
        XCTAssertTrue(table[0].contains("마지막 사용"), "the header is Korean: \(table[0])")
        XCTAssertEqual(starts(table[0]), starts(table[1]), "columns line up:\n\(table.joined(separator: "\n"))")
    }

    /// `geoconsentctl agent --auto allow-once-reduced`: Precise off for a
    /// request for full accuracy; the grant is reduced.
    func testCtlAgentAutoPreciseOffGrantsReduced() throws {
        let logs = try TempDir()
        let ctlAgent = try ctlAgent(auto: "allow-once-reduced", logs)
        defer { ctlAgent.stop() }
        let client = try stack.peer()
        XCTAssertEqual(try client.tap(AuthOptions(accuracy: .full)).get(), 4)
        let answered = ctlAgent.readStdoutLine(timeout: 5) ?? ""
        XCTAssertTrue(answered.hasSuffix("-> allow-once, approximate only"), answered)
        XCTAssertEqual(try client.authorization().accuracy, .reduced)
        let bad = try stack.ctl(["agent", "--auto", "deny-reduced"])
        XCTAssertEqual(bad.status, 2, "a usage error: \(bad.output)")
    }
}

// MARK: - Helpers (private to this file)

private extension BusPeer {
    func consentTapAsync(_ options: AuthOptions = AuthOptions()) -> PendingCall {
        geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(options)])
    }

    func consentWhenInUse(_ options: AuthOptions = AuthOptions()) -> Result<UInt32, DBusError> {
        geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(options)]).map { StatusReply.decode($0)?.rawValue ?? 999 }
    }
}

private extension Stack {
    /// geoconsentctl as another uid, with its stderr too.
    func consentCtl(_ args: [String], asUID uid: UInt32, timeout: Double = 20) throws
        -> (status: Int32?, stdout: String, stderr: String) {
        try consentRun("/usr/bin/setpriv",
                       ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", TestPaths.binDir + "/geoconsentctl",
                        "--bus", bus.address] + args, timeout: timeout)
    }
}

/// Runs a program to completion: status (nil on timeout), stdout and stderr.
private func consentRun(_ exe: String, _ args: [String], timeout: Double = 20) throws
    -> (status: Int32?, stdout: String, stderr: String) {
    let dir = try TempDir()
    let log = dir.file("stderr")
    let r = try ChildProcess.run(exe, args, timeout: timeout, logPath: log)
    return (r.status, r.output, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
}

/// A JSON array of objects, as `geoconsentctl --json` prints lists; nil if it is not one.
private func consentJSONArray(_ text: String) -> [[String: Any]]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]]
}

private func consentTail(_ path: String) -> String {
    "\n--- \(path):\n" + ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "(unreadable)")
}
