import XCTest
import Foundation
import GeoDBus
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// An unprivileged local user (uid 65534) at the GeoClue2 facade's doors,
/// which make the daemon call the caller back (`AddAgent` reads the caller's
/// `MaxAccuracyLevel`) or keep something for it (client objects), while a
/// victim of another uid keeps tapping through its own agent and fetching
/// fixes (`whileVictimTaps`): every victim round must succeed. On the
/// local-user rig with `[geoclue] serve` and the facade's policy.
final class LocalUserGeoClueDoorTests: XCTestCase {
    var rig: LocalUserRig!
    private let attacker = LocalUserRig.attacker

    override func setUpWithError() throws {
        // The descriptor case runs the daemon with the unit's kind of limit, low
        // enough that one uid's connections could once take every pidfd.
        // The cap case lifts sessions-per-user, so that the uid could hold more
        // sessions (each with its process watched) than its pidfds.
        rig = try LocalUserRig(config: name.contains("Capped") ? "[limits]\nsessions-per-user = 256\n" : "",
                               geoclue: true, nofile: name.contains("Descriptor") ? 256 : nil)
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    /// `hand-over` as `user`: a tap (its agent allows once), then the tapping
    /// process exits while a child keeps the connection. Checks that exactly one
    /// `AuthorizationChanged` (not determined) followed the exit, and returns it.
    private func grantEndsWithTheTappingProcess(_ user: ServiceUser, log: String,
                                                file: StaticString = #filePath, line: UInt = #line) throws -> String {
        // An app of its own: the victim's rounds reset their app's consent, which ends its grants.
        let h = try rig.start(user, ["hand-over", "--linger", "20"], log: log, captureStdout: true,
                              binary: try rig.appCopy("hand-over-app"))
        defer { h.stop() }
        var lines: [String] = []
        while let l = h.readStdoutLine(timeout: 30) {
            lines.append(l)
            if l.hasPrefix("done") { break }
        }
        if let holder = lines.first(where: { $0.hasPrefix("holder pid=") }).flatMap({ pid_t($0.dropFirst("holder pid=".count)) }) {
            kill(holder, SIGKILL)   // our grandchild: it lingers with the connection
        }
        let context = lines.joined(separator: "\n") + "\n" + tailOf(rig.work.file(log))
        XCTAssertTrue(lines.contains("reply RequestOneTimeAuthorization ok status 4"), context, file: file, line: line)
        let changes = lines.filter { $0.hasPrefix("changed status 0 ") }
        XCTAssertEqual(changes.count, 1, "the grant ended with the tapping process: \(context)", file: file, line: line)
        return changes.first ?? "(none)"
    }

    /// The attacker's `geoclue-client-churn` on `connections` connections, kept
    /// open (stop the process to close them); its lines up to `done`.
    private func clientChurn(_ connections: Int, delete: Bool, log: String,
                             file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, [String]) {
        let a = try rig.start(attacker, ["geoclue-client-churn", "--connections", "\(connections)", "--hold", "120"] +
                              (delete ? ["--delete"] : []), log: log, captureStdout: true)
        var out: [String] = []
        while let l = a.readStdoutLine(timeout: 60) {
            out.append(l)
            if l.hasPrefix("done ") { break }
        }
        XCTAssertEqual(out.last, "done \(connections)", tailOf(rig.work.file(log)), file: file, line: line)
        return (a, out)
    }

    private func daemonLog() -> String {
        String(decoding: FileManager.default.contents(atPath: rig.daemon.logPath) ?? Data(), as: UTF8.self)
    }

    /// Every call the daemon made back to the attacker's agent connections
    /// stays unanswered: once it waited on 128 of them, the bus refused all its
    /// calls (the victim's `Confirm` among them) with `LimitsExceeded`. Two
    /// AddAgent on each of 130 connections: more connections than the bus's
    /// slots, so that the uid's budget of reads, not only one read per
    /// connection, is what holds.
    func testAPipelinedAddAgentBurstLeavesOtherUsersPromptsServed() throws {
        let connections = 130, calls = 2
        try rig.whileVictimTaps("\(connections) × \(calls) pipelined AddAgent, never read") { victim in
            let a = try rig.start(attacker, ["geoclue-agent-burst", "--connections", "\(connections)", "--calls", "\(calls)",
                                             "--hold", "120"], log: "agent-burst.log", captureStdout: true)
            defer { a.stop() }
            XCTAssertEqual(a.readStdoutLine(timeout: 30), "sent \(connections * calls)", tailOf(rig.work.file("agent-burst.log")))
            // Every AddAgent has reached the daemon: a bus round trip after them is answered.
            usleep(500_000)
            let held = victim.rounds.count
            XCTAssertTrue(victim.waitForRounds(held + 4, timeout: 60),
                          "the victim was not served while the burst held its calls: \(victim.rounds.suffix(3))\n" +
                          "daemon:\n\(rig.daemon.log())")
            let log = daemonLog()
            let said = log.split(separator: "\n").filter { $0.contains("said once for this connection") }
            XCTAssertGreaterThan(said.count, 0, "the attack is logged")
            // Once per connection at most, and within the uid's lines per window.
            XCTAssertLessThanOrEqual(said.count, 20, "\(said.prefix(3))")
            XCTAssertEqual(Set(said.compactMap { $0.split(separator: " ").first }).count, said.count, "one line per connection")
            XCTAssertFalse(log.contains(DBusError.limitsExceededName), "the bus refused a call of the daemon:\n\(log.suffix(3000))")
            return "\(connections * calls) AddAgent held; victim served \(victim.rounds.count - held) rounds meanwhile; " +
                "logged \(said.count)×"
        }
    }

    /// `AddAgent` again and again, on one connection and on a new one each
    /// time: the daemon's log grows by a bounded number of lines whatever the
    /// caller does (it once wrote a line, of the caller's 3.8 KB path, per call).
    func testAddAgentAgainAndAgainKeepsTheLogBounded() throws {
        try rig.whileVictimTaps("AddAgent in a loop, 2 × 4 s") { _ in
            let before = daemonLog()
            var calls: [Int] = []
            for fresh in [false, true] {
                let out = try rig.run(attacker, ["geoclue-agent-loop", "--seconds", "4"] + (fresh ? ["--fresh"] : []),
                                      log: "agent-loop-\(fresh).log", timeout: 60)
                XCTAssertEqual(out.status, 0, tailOf(rig.work.file("agent-loop-\(fresh).log")))
                let summary = out.output.split(separator: "\n").first { $0.hasPrefix("summary ") } ?? ""
                let n = summary.split(separator: " ").first { $0.hasPrefix("calls=") }.flatMap { Int($0.dropFirst(6)) } ?? 0
                let ok = summary.split(separator: " ").first { $0.hasPrefix("ok=") }.flatMap { Int($0.dropFirst(3)) } ?? 0
                XCTAssertGreaterThan(n, 40, "the loop ran: \(out.output)")
                XCTAssertGreaterThan(ok, 0, "AddAgent works for the caller: \(out.output)")
                calls.append(n)
            }
            let added = String(daemonLog().dropFirst(before.count))
            let lines = added.split(separator: "\n")
            let agentLines = lines.filter { $0.contains("GeoClue agent :") }
            // At most the callers' budget of one uid in a window; the two loops may span two windows.
            XCTAssertLessThanOrEqual(agentLines.count, 2 * 20, "\(agentLines.count) lines for \(calls) calls")
            XCTAssertLessThan(added.utf8.count, 64 << 10, "the log grew by \(added.utf8.count) bytes")
            return "\(calls[0]) AddAgent on one connection, \(calls[1]) on fresh ones: \(lines.count) log lines " +
                "(\(agentLines.count) about agents), \(added.utf8.count) bytes"
        }
    }

    /// CreateClient, a refused Start and DeleteClient on each of 200
    /// connections left a pidfd per connection for good; with the daemon's
    /// descriptors spent that way, a victim's one-time grant outlived its
    /// tapping process. Now the pidfd goes with the last session, one uid has
    /// at most 64, and the victim's grant still ends with its process.
    func testDeletedClientsHoldNoDescriptorAndTheVictimsProcessIsStillWatched() throws {
        let connections = 200
        try rig.whileVictimTaps("\(connections) connections: CreateClient, Start, DeleteClient") { _ in
            let pid = rig.daemon.process.pid
            let before = Hostile.fdCount(pid)
            let (a, out) = try clientChurn(connections, delete: true, log: "client-churn.log")
            defer { a.stop() }
            XCTAssertEqual(out.filter { $0.hasPrefix("reply delete-") && $0.hasSuffix(" ok") }.count, connections,
                           out.prefix(4).joined(separator: "\n"))
            let during = Hostile.fdCount(pid)
            XCTAssertLessThan(during, before + 16, "the daemon holds descriptors for connections with no session")

            // The victim's one-time grant ends when its tapping process exits.
            let ended = try grantEndsWithTheTappingProcess(LocalUserRig.victimUser, log: "hand-over.log")
            return "\(connections) deleted clients: daemon fds \(before) before, \(during) after; victim's grant " +
                "ended with its process (\(ended))"
        }
    }

    /// One uid's sessions beyond its 64 pidfds (sessions-per-user lifted to
    /// 256): the daemon's descriptors stay within the uid's share, and a
    /// process of that uid watched without a descriptor is still seen to exit
    /// (checked once a second): its one-time grant ends with it.
    func testDescriptorsPerUidAreCappedAndTheRestStillWatched() throws {
        let connections = 100
        try rig.whileVictimTaps("\(connections) client sessions of one uid") { _ in
            let pid = rig.daemon.process.pid
            let before = Hostile.fdCount(pid)
            let (a, out) = try clientChurn(connections, delete: false, log: "client-sessions.log")
            defer { a.stop() }
            XCTAssertEqual(out.filter { $0.hasPrefix("reply start-") }.count, connections, out.prefix(3).joined(separator: "\n"))
            let during = Hostile.fdCount(pid)
            XCTAssertLessThanOrEqual(during, before + 64 + 4, "one uid's pidfds are capped at 64")
            XCTAssertTrue(rig.daemon.log().contains("with no descriptor: uid \(attacker.uid) has 64 processes watched already"),
                          rig.daemon.log())

            // The same uid taps and hands its connection over: watched without a descriptor.
            let agent = try rig.startAgent(attacker, answer: "allow-once", log: "attacker-agent.log")
            defer { agent.stop() }
            let ended = try grantEndsWithTheTappingProcess(attacker, log: "attacker-hand-over.log")
            return "\(connections) sessions of uid \(attacker.uid): daemon fds \(before) before, \(during) with them; " +
                "its handed-over grant ended with its process (\(ended))"
        }
    }

    // MARK: a name to borrow another app's permission

    /// A sandbox installed by the user, whose uid has a GNOME-Shell-like
    /// GeoClue agent and no agent of ours, sets `DesktopId=org.gnome.Maps`:
    /// the agent once answered from Maps' stored permission, with no dialog,
    /// and the sandbox got a stored grant and fixes. It is named to the agent
    /// by its `.flatpak-info` name; a host app of the uid, which no desktop
    /// entry of the system names as the program of org.gnome.Maps, is not
    /// named to it at all. The agent is never asked about Maps.
    func testASandboxCannotBorrowAnotherAppsGeoClueAgentPermission() throws {
        let maps = "org.gnome.Maps", sandbox = "com.example.Sandbox"
        let shell = try rig.start(attacker, ["geoclue-shell-agent", "--allow", maps], log: "shell.log", captureStdout: true)
        defer { shell.stop() }
        XCTAssertEqual(shell.readStdoutLine(timeout: 15), "registered uid=\(attacker.uid)", tailOf(rig.work.file("shell.log")))
        try rig.whileVictimTaps("a sandbox and a host app naming \(maps) to a Shell-like GeoClue agent") { _ in
            let dir = try rig.directory("sandbox-root", ownedBy: attacker)
            let sandboxed = try rig.run(attacker, ["forge", "--how", "flatpak-root", "--dir", dir, "--app-id", sandbox,
                                                   "--bind-root", "--geoclue-desktop-id", maps],
                                        log: "sandbox.log", timeout: 60).output
            let hostApp = try rig.run(attacker, ["geoclue-start", "--desktop-id", maps], log: "host.log", timeout: 60).output
            let asked = (0..<2).compactMap { _ in shell.readStdoutLine(timeout: 2) }
            let sandboxStart = sandboxed.split(separator: "\n").first { $0.hasPrefix("reply Start") } ?? "(none)"
            let hostStart = hostApp.split(separator: "\n").first { $0.hasPrefix("reply Start") } ?? "(none)"
            XCTAssertEqual(asked, ["authorize \(hexOf(sandbox)) 8 no"], "asked once, under the sandbox's own name")
            XCTAssertTrue(sandboxStart.hasPrefix("reply Start error org.freedesktop.DBus.Error.AccessDenied"),
                          "\(sandboxStart)\n\(tailOf(rig.work.file("sandbox.log")))")
            XCTAssertTrue(hostStart.hasPrefix("reply Start error org.freedesktop.DBus.Error.AccessDenied") &&
                          hostStart.contains("desktop entry"), "\(hostStart)\n\(tailOf(rig.work.file("host.log")))")
            return "agent asked \(asked); sandbox: \(sandboxStart.prefix(80)); host app: \(hostStart.prefix(80))"
        }
    }
}

/// A string's UTF-8 as geoconsent-localuser prints it (lower-case hex).
func hexOf(_ s: String) -> String { s.utf8.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
