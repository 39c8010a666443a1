import XCTest
import Foundation
import GeoDBus
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Several local users together against budgets that all users share
/// (docs/dbus-api.md, "Limits"): six uids whose silent agents hold 8
/// withdrawn `Confirm`s each once filled the 48 prompts of all users, after
/// which every other uid had one prompt at a time and the log blamed that
/// uid's own agent. Each uid is guaranteed 4 prompts at once whatever others
/// hold; a withdrawn prompt's call stops counting against the total. On the
/// local-user rig (shipped bus policy, real daemon) while a victim of another
/// uid keeps tapping and fetching fixes.
final class LocalUserCollusionTests: XCTestCase {
    var rig: LocalUserRig!
    /// Accounts every Debian system has (base-passwd), other than the rig's
    /// service user, victim and attacker: the bus drops uids with no entry.
    private static let colluders: [ServiceUser] = {
        let taken: Set<String> = ["daemon", "geoconsent", LocalUserRig.victimUser.name, LocalUserRig.attacker.name]
        return ["bin", "sys", "sync", "mail", "uucp", "proxy", "www-data", "backup", "list", "irc", "news", "lp", "man"]
            .filter { !taken.contains($0) }
            .compactMap { name in getpwnam(name).map { ServiceUser(name: name, uid: $0.pointee.pw_uid, gid: $0.pointee.pw_gid) } }
    }()

    override func setUpWithError() throws {
        // The prompts' calls stay waiting through the whole test unless withdrawn.
        rig = try LocalUserRig(config: "[daemon]\nprompt-timeout = 120\n")
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    /// `tap-copies` of `copies` apps as `user`, its taps killed after a quiet
    /// second (so their prompts are withdrawn); its output lines.
    private func tapCopies(_ user: ServiceUser, copies: Int, round: Int) throws -> [String] {
        let dir = try rig.directory("apps-\(user.name)-\(round)", ownedBy: user)
        let r = try rig.run(user, ["tap-copies", "--dir", dir, "--copies", "\(copies)", "--quiet", "1"],
                            log: "copies-\(user.name)-\(round).log", timeout: 90)
        XCTAssertEqual(r.status, 0, tailOf(rig.work.file("copies-\(user.name)-\(round).log")))
        return r.output.split(separator: "\n").map(String.init)
    }

    private func waitForConfirms(_ log: String, _ n: Int, timeout: Double) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while rig.confirms(in: log).count < n && Date() < deadline { usleep(20_000) }
        return rig.confirms(in: log).count
    }

    func testColludingUidsCannotTakeAnotherUidsPrompts() throws {
        guard Self.colluders.count >= 7 else { throw XCTSkip("fewer than 7 spare system accounts: \(Self.colluders.map(\.name))") }
        let holders = Array(Self.colluders.prefix(6))
        let other = Self.colluders[6]
        var agents: [ChildProcess] = []
        defer { for a in agents { a.stop() } }
        try rig.whileVictimTaps("6 uids holding 8 withdrawn Confirms each") { _ in
            // Each colluder: a silent agent, and two rounds of 4 prompts (prompts-per-user)
            // withdrawn by their apps' exit, the Confirms still unanswered: 8 each.
            for u in holders {
                agents.append(try rig.startAgent(u, answer: "never", log: "agent-\(u.name).log"))
            }
            let group = DispatchGroup()
            let failures = LockedLines()
            for u in holders {
                DispatchQueue.global().async(group: group) {
                    do {
                        for round in 0..<2 {
                            let out = try self.tapCopies(u, copies: 4, round: round)
                            if out.filter({ $0.hasSuffix(" unanswered") }).count != 4 {
                                failures.append("\(u.name) round \(round): \(out.suffix(6))")
                            }
                        }
                    } catch {
                        failures.append("\(u.name): \(error)")
                    }
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 180), .success, "the colluders' taps did not finish")
            XCTAssertEqual(failures.lines, [], "each colluder's 8 prompts were opened and withdrawn")
            let held = holders.map { rig.confirms(in: "agent-\($0.name).log").count }
            XCTAssertEqual(held, Array(repeating: 8, count: 6), "8 Confirms each reached the silent agents, unanswered")

            // Another uid, whose agent is slow (holds its prompts): its four apps get four prompts at once.
            agents.append(try rig.startAgent(other, answer: "never", log: "agent-other.log"))
            let out = try tapCopies(other, copies: 4, round: 0)
            let atOnce = out.filter { $0.contains(" reply RequestOneTimeAuthorization ") }
            XCTAssertEqual(waitForConfirms("agent-other.log", 4, timeout: 10), 4,
                           "the other uid's four prompts reach its agent: \(atOnce)\n\(rig.daemon.log().suffix(3000))")
            XCTAssertEqual(atOnce, [], "none of its taps answered at once without a prompt")
            let log = rig.daemon.log()
            XCTAssertFalse(log.contains("(uid \(other.uid)): does not answer Confirm"),
                           "the other uid's agent is not blamed: \(log.suffix(2000))")
            return "6 uids × 8 withdrawn Confirms held; uid \(other.uid): \(rig.confirms(in: "agent-other.log").count) prompts at once, " +
                "\(atOnce.count) taps refused"
        }
    }
}

/// Lines appended from several threads.
final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return stored }
    func append(_ line: String) { lock.lock(); stored.append(line); lock.unlock() }
}
