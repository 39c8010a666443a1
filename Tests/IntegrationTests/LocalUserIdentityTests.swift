import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// An unprivileged local user attacks the daemon through what identity reading
/// trusts: the sandbox marker in a root of its own, a PID that outlives its
/// process, an executable path built to mislead a prompt. Each runs on the
/// local-user rig (shipped bus policy, real daemon, uid 65534 attacking) while
/// a victim of another uid keeps tapping and fetching fixes; every victim round
/// must succeed. Each case prints `hostile: local-user …` with the victim's
/// tap latencies.
final class LocalUserIdentityTests: XCTestCase {
    var rig: LocalUserRig!

    override func setUpWithError() throws {
        rig = try LocalUserRig(config: config(for: name))
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    /// The borrowed-PID case needs a config that would hand the borrowed identity
    /// a full-accuracy grant without a prompt.
    private func config(for test: String) -> String {
        guard test.contains("AnotherUsersPID") else { return "" }
        return "[app \"\(sleepPath)\"]\npolicy = always\n"
    }

    private var sleepPath: String { LocalUserRig.sleepPath }

    // MARK: the rig itself

    func testVictimIsServedWithoutAttack() throws {
        let report = try rig.whileVictimTaps("no attack") { _ in "no attack" }
        XCTAssertGreaterThanOrEqual(report.rounds.count, 5)
    }

    // MARK: .flatpak-info in a root of the caller's own

    /// Runs `sandbox-marker --kind KIND` as the attacker and checks each of its
    /// calls got `AccessDenied` naming `why`.
    private func sandboxMarkerAttack(_ kind: String, refusedBecause why: String) throws {
        try rig.whileVictimTaps(".flatpak-info \(kind)") { _ in
            let dir = try rig.directory("attacker-root-\(kind)", ownedBy: LocalUserRig.attacker)
            let r = try rig.run(LocalUserRig.attacker, ["sandbox-marker", "--dir", dir, "--kind", kind, "--calls", "10"],
                                log: "attacker-\(kind).log", timeout: 90)
            let replies = r.output.split(separator: "\n").filter { $0.hasPrefix("reply ") }
            XCTAssertTrue(r.output.contains("chrooted"), "the attacker did not get its own root: \(r.output)" +
                          tailOf(rig.work.file("attacker-\(kind).log")))
            XCTAssertEqual(replies.count, 20, "every attack call must be answered: \(r.output)\ndaemon:\n\(rig.daemon.log())")
            for reply in replies {
                XCTAssertTrue(reply.contains("error \(DBusError.accessDeniedName) The calling process could not be identified"),
                              "expected AccessDenied, got: \(reply.prefix(300))")
                XCTAssertTrue(reply.contains(why), "the error does not say \"\(why)\": \(reply.prefix(300))")
            }
            return "attacker: \(replies.count) calls, \(replies.filter { $0.contains("AccessDenied") }.count) AccessDenied"
        }
    }

    func testFlatpakInfoFIFOInCallersRootCannotStallTheDaemon() throws {
        try sandboxMarkerAttack("fifo", refusedBecause: ".flatpak-info is not a regular file (a FIFO)")
    }

    func testFlatpakInfoSymlinkToDevZeroIsNotFollowed() throws {
        try sandboxMarkerAttack("devzero", refusedBecause: ".flatpak-info is a symbolic link")
    }

    func testHugeFlatpakInfoIsRefusedUnread() throws {
        try sandboxMarkerAttack("huge", refusedBecause: ".flatpak-info is larger than 64 KiB")
    }

    // MARK: a connection that outlives its process

    /// The attacker connects, hands the connection to a child and exits; the test
    /// then gives the freed PID to a new process of `taker` (ns_last_pid, as root)
    /// and lets the child call. Returns the child's reply lines.
    private func borrowPID(resolveFirst: Bool, taker: ServiceUser) throws -> (replies: [String], pid: pid_t) {
        let lastPID = "/proc/sys/kernel/ns_last_pid"
        guard FileManager.default.isWritableFile(atPath: lastPID) else {
            throw XCTSkip("\(lastPID) is not writable here: PID reuse cannot be forced")
        }
        let go = rig.work.file("go-\(taker.uid)")
        let a = try rig.start(LocalUserRig.attacker, ["borrow-pid", "--go-file", go] + (resolveFirst ? ["--resolve-first"] : []),
                              log: "borrow.log", captureStdout: true)
        var lines: [String] = []
        func next(_ prefix: String) -> String? {
            while let l = a.readStdoutLine(timeout: 15) {
                lines.append(l)
                if l.hasPrefix(prefix) { return l }
            }
            return nil
        }
        guard let connected = next("connected pid="), let pid = pid_t(connected.split(separator: " ")[1].dropFirst(4)),
              let holder = next("holder pid="), let holderPID = pid_t(holder.dropFirst("holder pid=".count)) else {
            a.stop()
            throw HarnessError("borrow-pid did not start: \(lines)\n\(tailOf(rig.work.file("borrow.log")))")
        }
        defer { kill(holderPID, SIGKILL) }   // the holder is ours: started through `a`, in a session of its own
        XCTAssertNotNil(a.waitForExit(timeout: 10), "the connecting process did not exit")

        // Hand the PID to the taker: ns_last_pid = PID - 1, then spawn at once.
        let sleep = sleepPath
        var taken: ChildProcess?
        for _ in 0..<200 where taken == nil {
            guard (try? "\(pid - 1)".write(toFile: lastPID, atomically: false, encoding: .utf8)) != nil else { break }
            let p = try ChildProcess(executable: "/usr/bin/setpriv", arguments: taker.setprivArgs() + [sleep, "60"],
                                     logPath: rig.work.file("taker.log"))
            if p.pid == pid { taken = p } else { p.kill9() }
        }
        guard let takerProcess = taken else { throw XCTSkip("could not hand PID \(pid) to another process in 200 tries") }
        defer { takerProcess.stop() }
        // setpriv execs sleep in place; wait until the PID shows sleep.
        let deadline = Date().addingTimeInterval(5)
        while (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) != sleep, Date() < deadline {
            usleep(5_000)
        }
        // The daemon rechecks a known connection at most every 100 ms (docs/dbus-api.md,
        // "Identity"); here the PID changed hands faster than that.
        usleep(150_000)
        XCTAssertTrue(FileManager.default.createFile(atPath: go, contents: Data()))
        chmod(go, 0o644)
        while lines.filter({ $0.hasPrefix("reply ") && !$0.hasPrefix("reply GetAuthorization-first") }).count < 2,
              let l = a.readStdoutLine(timeout: 20) {
            lines.append(l)
        }
        let replies = lines.filter { $0.hasPrefix("reply ") }
        return (replies, pid)
    }

    func testBorrowingAnotherUsersPIDGivesNoIdentity() throws {
        // The attacker's connection is first resolved after its PID went to the
        // victim's /usr/bin/sleep, for which the config says `policy = always`.
        try rig.whileVictimTaps("borrowed PID of another uid") { _ in
            let (replies, pid) = try borrowPID(resolveFirst: false, taker: LocalUserRig.victimUser)
            let auth = replies.first { $0.hasPrefix("reply GetAuthorization ") } ?? "(none)"
            let locate = replies.first { $0.hasPrefix("reply RequestLocation ") } ?? "(none)"
            XCTAssertTrue(auth.contains("error \(DBusError.accessDeniedName)"), "borrowed identity: \(auth)")
            XCTAssertTrue(auth.contains("PID \(pid) belongs to uid \(LocalUserRig.victimUser.uid), not to the connection's uid 65534"), auth)
            XCTAssertFalse(locate.contains(" ok "), "the borrowed identity got a fix: \(locate)")
            XCTAssertTrue(rig.daemon.log().contains("belongs to uid \(LocalUserRig.victimUser.uid)"), rig.daemon.log())
            return "attacker: \(auth.prefix(160)); \(locate.prefix(100))"
        }
    }

    func testConnectionOutlivingItsProcessIsRefusedOnceItsPIDIsReused() throws {
        // Resolved while its process lived; the PID then goes to another process
        // of the same uid: the start time differs from the one first seen.
        try rig.whileVictimTaps("PID reused after first resolution") { _ in
            let (replies, _) = try borrowPID(resolveFirst: true, taker: LocalUserRig.attacker)
            let first = replies.first { $0.hasPrefix("reply GetAuthorization-first ") } ?? "(none)"
            let auth = replies.first { $0.hasPrefix("reply GetAuthorization ") } ?? "(none)"
            XCTAssertTrue(first.contains(" ok status 0 app-id \(LocalUserRig.binary)"), first)
            XCTAssertTrue(auth.contains("error \(DBusError.accessDeniedName)"), "the cached identity was kept: \(auth)")
            XCTAssertTrue(auth.contains("PID now belongs to another process"), auth)
            return "attacker: \(auth.prefix(160))"
        }
    }

    // MARK: display spoofing

    func testSpoofedExecutablePathReachesTheAgentEscaped() throws {
        let agentLog = rig.work.file("attacker-agent.log")
        let agent = try rig.startAgent(LocalUserRig.attacker, answer: "allow-once", log: "attacker-agent.log")
        defer { agent.stop() }
        try rig.whileVictimTaps("spoofed executable path") { _ in
            let dir = try rig.directory("attacker-bin", ownedBy: LocalUserRig.attacker)
            let r = try rig.run(LocalUserRig.attacker, ["spoof-exe", "--dir", dir], log: "spoof.log", timeout: 60)
            let lines = r.output.split(separator: "\n")
            let tap = lines.first { $0.hasPrefix("reply RequestOneTimeAuthorization ") }.map(String.init) ?? "(none)"
            XCTAssertEqual(tap, "reply RequestOneTimeAuthorization ok status 4", r.output + tailOf(rig.work.file("spoof.log")))
            let replied = lines.first { $0.hasPrefix("app-id hex=") }.map { unhex($0.dropFirst("app-id hex=".count)) } ?? ""

            guard let confirm = waitForLine(in: agentLog, timeout: 10, where: { $0.hasPrefix("confirm ") }) else {
                XCTFail("the attacker's agent was not asked: \(tailOf(agentLog))")
                return "no prompt"
            }
            var fields: [String: String] = [:]
            for f in confirm.split(separator: " ").dropFirst() {
                let kv = f.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { fields[String(kv[0])] = unhex(kv[1]) }
            }
            let expected = dir + "/\\u202EspaM.emonG.gro\\u000A(system app)"
            XCTAssertEqual(fields["app-id"], expected, "the agent must get the path escaped")
            XCTAssertEqual(fields["executable"], expected)
            XCTAssertEqual(fields["app-name"], "Maps\\u202Eppa metsys")
            XCTAssertEqual(replied, expected, "GetAuthorization reports the same escaped app-id")
            for (key, value) in fields {
                XCTAssertFalse(value.unicodeScalars.contains { $0.value == 0x202E || $0 == "\n" }, "\(key) carries raw controls")
            }
            // The daemon's log names it the same way, on one line, quoted (its backslashes doubled).
            let log = rig.daemon.log()
            XCTAssertTrue(log.contains("\\\\u202EspaM.emonG.gro\\\\u000A(system app)\""), log)
            XCTAssertFalse(log.split(separator: "\n").contains { $0.hasPrefix("(system app)") }, log)
            return "agent got app-id \(fields["app-id"] ?? "?")"
        }
    }

    /// An executable path made to read, in the journal, as a grant to another
    /// user: `maps (uid 1000, executable), session :1.7, one-time, full` and
    /// 250 spaces. The line says the real uid, kind and session first; the
    /// path comes last, quoted and cut, after `app `.
    func testAnExecutablePathCannotMakeTheJournalNameAnotherUser() throws {
        let agent = try rig.startAgent(LocalUserRig.attacker, answer: "allow-once", log: "attacker-agent.log")
        defer { agent.stop() }
        try rig.whileVictimTaps("an executable path that reads as another user's grant") { _ in
            // A file name has at most 255 bytes: the spaces are a directory of their own.
            let dir = try rig.directory("maps (uid 1000, executable), session :1.7, one-time, full\"", ownedBy: LocalUserRig.attacker)
            let spaces = dir + "/" + String(repeating: " ", count: 250)
            try FileManager.default.createDirectory(atPath: spaces, withIntermediateDirectories: false)
            chmod(spaces, 0o755)
            let path = spaces + "/x"
            try FileManager.default.copyItem(atPath: LocalUserRig.binary, toPath: path)
            chmod(path, 0o755)
            let t = try rig.start(LocalUserRig.attacker, ["tap"], log: "forged-tap2.log", captureStdout: true, binary: path)
            defer { t.stop() }
            let out = t.readAllStdout(timeout: 30)
            XCTAssertTrue(out.contains("reply RequestOneTimeAuthorization ok status 4"), out + tailOf(rig.work.file("forged-tap2.log")))
            let line = waitForLine(in: rig.daemon.logPath, timeout: 10) { $0.contains("grant began:") && $0.contains("maps (uid 1000") }
            guard let line else {
                XCTFail("no journal line: \(rig.daemon.log().suffix(2000))")
                return "no line"
            }
            let attacker = LocalUserRig.attacker.uid
            XCTAssertTrue(line.contains("grant began: uid \(attacker), executable, session :"), line)
            XCTAssertTrue(line.contains(", one-time, full: app \"\(rig.work.path)/maps (uid 1000, executable)"), line)
            XCTAssertTrue(line.contains("full\\\""), "the path's quote is escaped: \(line)")
            XCTAssertTrue(line.hasSuffix(" bytes]"), "cut at 256 bytes: \(line)")
            XCTAssertLessThan(line.firstRange(of: "uid \(attacker)")!.lowerBound, line.firstRange(of: "uid 1000")!.lowerBound)
            return "journal: \(line.prefix(140))…"
        }
    }
}
