import XCTest
import Foundation
import GeoDBus
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// An unprivileged local user (uid 65534) tries to make the daemon hold more
/// than its share: descriptors and megabytes on calls that wait, prompts,
/// sessions, waiting taps, stored decisions, pending location requests. Each
/// runs on the local-user rig (shipped bus policy, real daemon) while a victim
/// of another uid keeps tapping and fetching fixes; every victim round must
/// succeed, and each attack must get the answer docs/dbus-api.md ("Limits")
/// gives. Root is exempt from the per-uid limits, which is why the attacker
/// here is a user of its own. Small counts in `make test`, the full ones with
/// `GEOCONSENT_STRESS=1` (`make stress`). Each case prints
/// `hostile: local-user …` with the victim's tap latencies.
final class LocalUserLimitTests: XCTestCase {
    var rig: LocalUserRig!
    private let attacker = LocalUserRig.attacker

    override func setUpWithError() throws {
        rig = try LocalUserRig(config: config(for: name))
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    private func config(for test: String) -> String {
        // 128 apps tapping at once are 128 sessions: the prompts case lifts
        // sessions-per-user so that it is the prompt limit that answers them.
        if test.contains("Prompts") { return "[limits]\nsessions-per-user = 256\n" }
        if test.contains("StoredDecisions") { return "[limits]\nconsents-per-user = 3\n" }
        return ""
    }

    /// A silent agent for the attacker (its prompts stay open), or one answering `answer`.
    private func attackerAgent(_ answer: String = "never") throws -> ChildProcess {
        try rig.startAgent(attacker, answer: answer, log: "attacker-agent.log")
    }

    private var attackerConfirms: [String] { rig.confirms(in: "attacker-agent.log") }

    /// `geoconsent-localuser ARGS` as the attacker, to completion; its output lines.
    private func attack(_ args: [String], log: String, timeout: Double = 90) throws -> [String] {
        let r = try rig.run(attacker, args, log: log, timeout: timeout)
        XCTAssertEqual(r.status, 0, "\(args.first ?? "") did not finish: \(tailOf(rig.work.file(log)))")
        return r.output.split(separator: "\n").map(String.init)
    }

    /// Waits up to `timeout` for the attacker's agent to have been asked `n` times.
    private func waitForConfirms(_ n: Int, timeout: Double) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while attackerConfirms.count < n && Date() < deadline { usleep(20_000) }
        return attackerConfirms.count
    }

    // MARK: what a waiting call could pin

    func testTapsCarryingFileDescriptorsAreRefusedAtOnce() throws {
        let agent = try attackerAgent()
        defer { agent.stop() }
        let calls = 66, fds = 16
        try rig.whileVictimTaps("\(calls) taps with \(fds) fds each") { _ in
            let pid = rig.daemon.process.pid
            let before = Hostile.fdCount(pid)
            let out = try attack(["taps", "--calls", "\(calls)", "--fds", "\(fds)"], log: "fd-taps.log")
            let replies = AttackReply.parse(out)
            XCTAssertEqual(replies.count, calls, "every tap must be answered: \(out.suffix(5))")
            for r in replies {
                XCTAssertEqual(r.error, DBusError.invalidArgsName, r.line)
                XCTAssertTrue(r.line.contains("RequestOneTimeAuthorization takes no file descriptors"), r.line)
            }
            XCTAssertLessThan(replies.maxMS, 5000, "answered at once")
            XCTAssertEqual(attackerConfirms.count, 0, "no prompt for them")
            // The descriptors close with the messages: back to what the daemon had.
            let deadline = Date().addingTimeInterval(5)
            while Hostile.fdCount(pid) > before, Date() < deadline { usleep(20_000) }
            let after = Hostile.fdCount(pid)
            XCTAssertLessThanOrEqual(after, before, "the daemon kept descriptors: \(before) before, \(after) after")
            return "\(calls * fds) fds on \(calls) taps: \(replies.count) InvalidArgs within \(replies.maxMS) ms; " +
                "daemon fds \(before) before, \(after) after"
        }
    }

    func testHugeReasonsAreRefusedAtOnce() throws {
        let agent = try attackerAgent()
        defer { agent.stop() }
        let calls = Hostile.count(small: 5, full: 16), bytes = 16 << 20
        try rig.whileVictimTaps("\(calls) taps with 16 MiB reasons") { _ in
            let out = try attack(["taps", "--calls", "\(calls)", "--string", "reason", "--bytes", "\(bytes)", "--wait", "60"],
                                 log: "big-reasons.log")
            let replies = AttackReply.parse(out)
            XCTAssertEqual(replies.count, calls, "every tap must be answered: \(out.suffix(5))")
            // Sent faster than the daemon reads them, more than 127 MiB may
            // queue for it at the bus, which then refuses the sender's next
            // ones itself: an answer at once too, and one the daemon never sees.
            let byBus = replies.filter { $0.error == DBusError.limitsExceededName && $0.line.contains("destination has a full message queue") }
            let byDaemon = replies.filter { $0.error == DBusError.invalidArgsName }
            XCTAssertGreaterThan(byDaemon.count, 0)
            XCTAssertEqual(byDaemon.count + byBus.count, calls, "InvalidArgs expected: \(replies.map { $0.line.prefix(200) })")
            for r in byDaemon {
                XCTAssertTrue(r.line.contains("option 'reason' is \(bytes) bytes long, more than the 1024 allowed"), r.line)
            }
            XCTAssertEqual(attackerConfirms.count, 0, "no prompt for them")
            return "\(calls) × 16 MiB: \(byDaemon.count) InvalidArgs, \(byBus.count) refused by the bus (queue full), " +
                "within \(replies.maxMS) ms; daemon RSS \(Hostile.rssKB(rig.daemon.process.pid) / 1024) MiB"
        }
    }

    func testTapsHeldOnAPromptPinNoMegabytes() throws {
        let agent = try attackerAgent()
        defer { agent.stop() }
        let calls = Hostile.count(small: 20, full: 24), bytes = 4 << 20
        try rig.whileVictimTaps("\(calls) taps of 4 MiB held on a prompt") { victim in
            // Unknown option keys are ignored: these taps are valid, and wait.
            let a = try rig.start(attacker, ["taps", "--calls", "\(calls)", "--string", "junk", "--bytes", "\(bytes)",
                                             "--wait", "120"], log: "held-junk.log", captureStdout: true)
            defer { a.stop() }
            var lines: [String] = []
            while let l = a.readStdoutLine(timeout: 60) {
                lines.append(l)
                if l.hasPrefix("sent ") { break }
            }
            XCTAssertEqual(lines.last, "sent \(calls)", tailOf(rig.work.file("held-junk.log")))
            XCTAssertEqual(waitForConfirms(1, timeout: 15), 1, "the taps open one prompt")
            // While all of them wait on that prompt, the victim is served.
            let held = victim.rounds.count
            XCTAssertTrue(victim.waitForRounds(held + 3, timeout: 40),
                          "the victim was not served while the taps were held: \(victim.rounds.suffix(3))")
            let rss = Hostile.rssKB(rig.daemon.process.pid)
            a.signal(SIGTERM)
            lines += a.readAllStdout(timeout: 20).split(separator: "\n").map(String.init)
            XCTAssertEqual(AttackReply.parse(lines).count, 0, "a tap was answered while its prompt was open: \(lines.suffix(5))")
            XCTAssertEqual(lines.filter { $0.hasPrefix("unanswered ") }.count, calls, lines.suffix(3).joined(separator: "\n"))
            XCTAssertEqual(attackerConfirms.count, 1)
            XCTAssertLessThan(rss, 48 * 1024, "the daemon holds the waiting calls' messages (\(rss) KiB)")
            return "\(calls) × 4 MiB waiting on 1 prompt, victim served \(victim.rounds.count - held) rounds meanwhile; " +
                "daemon RSS \(rss / 1024) MiB"
        }
    }

    // MARK: per-uid limits

    func testOneUsersPromptsCannotBlockAnotherUsersTap() throws {
        let agent = try attackerAgent()
        defer { agent.stop() }
        let copies = Hostile.count(small: 16, full: 128), promptsPerUser = 4
        try rig.whileVictimTaps("\(copies) apps prompting") { _ in
            let dir = try rig.directory("attacker-apps", ownedBy: attacker)
            let out = try attack(["tap-copies", "--dir", dir, "--copies", "\(copies)", "--quiet", "3"],
                                 log: "prompts.log", timeout: 180)
            let taps = out.filter { $0.contains(" reply RequestOneTimeAuthorization ") }
            let atOnce = taps.filter { $0.hasSuffix(" ok status 0") }
            // "copy I tap-ms N", "copy I app-id hex=…"
            let tapMS = out.filter { $0.contains(" tap-ms ") }.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
            let appIDs = Set(out.filter { $0.contains(" app-id hex=") }.compactMap { $0.split(separator: " ").last })
            XCTAssertEqual(appIDs.count, copies, "each copy is an app of its own")
            XCTAssertEqual(waitForConfirms(promptsPerUser, timeout: 10), promptsPerUser,
                           "prompts-per-user prompts reach the attacker's agent")
            XCTAssertEqual(atOnce.count, copies - promptsPerUser,
                           "the others are answered at once with the status: \(taps.filter { !$0.hasSuffix(" ok status 0") })")
            XCTAssertEqual(out.filter { $0.hasSuffix(" unanswered") }.count, promptsPerUser, "the taps waiting on the prompts")
            XCTAssertLessThan(tapMS.max() ?? 0, 5000)
            usleep(500_000)
            XCTAssertEqual(attackerConfirms.count, promptsPerUser, "no more prompts later")
            return "\(copies) apps: \(attackerConfirms.count) prompts, \(atOnce.count) taps answered status 0 " +
                "(max \(tapMS.max() ?? -1) ms)"
        }
    }

    func testSessionsPerUserAreCapped() throws {
        let connections = Hostile.count(small: 72, full: 100), close = Hostile.count(small: 4, full: 10), limit = 64
        try rig.whileVictimTaps("\(connections) sessions") { _ in
            let out = try attack(["flood-sessions", "--connections", "\(connections)", "--close", "\(close)"],
                                 log: "sessions.log")
            let replies = AttackReply.parse(out)
            let first = replies.filter { $0.label.hasPrefix("auth-") }
            let retried = replies.filter { $0.label.hasPrefix("retry-") }
            XCTAssertEqual(first.count, connections, out.suffix(3).joined(separator: "\n"))
            XCTAssertEqual(first.filter { $0.error == nil }.count, limit, "sessions-per-user connections are served")
            let refused = first.filter { $0.error != nil }
            XCTAssertEqual(refused.count, connections - limit)
            for r in refused {
                XCTAssertEqual(r.error, DBusError.limitsExceededName, r.line)
                XCTAssertTrue(r.line.contains("uid \(attacker.uid) has \(limit) sessions") && r.line.contains("(sessions-per-user)"), r.line)
            }
            XCTAssertEqual(retried.count, close)
            XCTAssertTrue(retried.allSatisfy { $0.error == nil }, "closing sessions frees places: \(retried.map(\.line))")
            return "\(connections) connections: \(limit) served, \(refused.count) LimitsExceeded; " +
                "\(retried.filter { $0.error == nil }.count)/\(close) served again after \(close) closed"
        }
    }

    func testWaitingTapsPerUserAreCapped() throws {
        let agent = try attackerAgent()
        defer { agent.stop() }
        let calls = 40, limit = 32
        try rig.whileVictimTaps("\(calls) taps of one app waiting") { victim in
            let a = try rig.start(attacker, ["taps", "--calls", "\(calls)", "--wait", "120"], log: "waiting.log",
                                  captureStdout: true)
            defer { a.stop() }
            var lines: [String] = []
            while AttackReply.parse(lines).count < calls - limit, let l = a.readStdoutLine(timeout: 30) { lines.append(l) }
            let held = victim.rounds.count
            XCTAssertTrue(victim.waitForRounds(held + 2, timeout: 30), "the victim was not served while the taps waited")
            a.signal(SIGTERM)
            lines += a.readAllStdout(timeout: 20).split(separator: "\n").map(String.init)
            let replies = AttackReply.parse(lines)
            XCTAssertEqual(replies.count, calls - limit, "the taps beyond the limit, and no other: \(replies.map(\.line))")
            for r in replies {
                XCTAssertEqual(r.error, DBusError.limitsExceededName, r.line)
                XCTAssertTrue(r.line.contains("has \(limit) requests waiting on prompts, its limit (waiting-per-user)"), r.line)
            }
            XCTAssertLessThan(replies.maxMS, 5000, "answered at once")
            XCTAssertEqual(lines.filter { $0.hasPrefix("unanswered ") }.count, limit, "waiting on the prompt")
            XCTAssertEqual(attackerConfirms.count, 1)
            return "\(calls) taps: \(limit) waiting, \(replies.count) LimitsExceeded within \(replies.maxMS) ms"
        }
    }

    func testStoredDecisionsPerUserAreCapped() throws {
        let agent = try attackerAgent("allow-once")
        defer { agent.stop() }
        try rig.whileVictimTaps("4 apps' decisions, 3 storable") { _ in
            let dir = try rig.directory("attacker-apps", ownedBy: attacker)
            let out = try attack(["tap-copies", "--dir", dir, "--copies", "4", "--one-by-one"], log: "consents.log", timeout: 150)
            let taps = (0..<4).map { i in out.first { $0.hasPrefix("copy \(i) reply RequestOneTimeAuthorization ") } ?? "copy \(i) (none)" }
            for i in 0..<3 { XCTAssertTrue(taps[i].hasSuffix(" ok status 4"), "stored and granted: \(taps[i])") }
            XCTAssertTrue(taps[3].contains("error \(DBusError.limitsExceededName) uid \(attacker.uid) has 3 stored decisions, " +
                                           "its limit (consents-per-user)"), taps[3])
            XCTAssertEqual(attackerConfirms.count, 3, "refused before any prompt")
            let fourth = taps[3].contains(DBusError.limitsExceededName) ? "LimitsExceeded (consents-per-user)" : taps[3]
            return "4 apps: \(taps.filter { $0.hasSuffix(" ok status 4") }.count) stored, the 4th: \(fourth)"
        }
    }

    func testLocationRequestsPerSessionAreCapped() throws {
        let agent = try attackerAgent("allow-once")
        defer { agent.stop() }
        let requests = 20, limit = 8
        try rig.whileVictimTaps("\(requests) RequestLocation at once") { _ in
            let out = try attack(["flood-locate", "--requests", "\(requests)"], log: "locate.log")
            let replies = AttackReply.parse(out)
            XCTAssertEqual(replies.first { $0.label == "tap" }?.line, "reply tap ok status 4", out.prefix(3).joined(separator: "\n"))
            XCTAssertEqual(replies.first { $0.label == "first-fix" }?.line, "reply first-fix ok fix")
            let burst = replies.filter { $0.label.hasPrefix("locate-") }
            XCTAssertEqual(burst.count, requests, "every request answered: \(out.suffix(3))")
            // The next fix is a whole fix interval away: the first `limit` wait for it.
            XCTAssertEqual(burst.filter { $0.line.hasSuffix(" ok fix") }.count, limit)
            let refused = burst.filter { $0.error != nil }
            XCTAssertEqual(refused.count, requests - limit)
            for r in refused {
                XCTAssertEqual(r.error, DBusError.limitsExceededName, r.line)
                XCTAssertTrue(r.line.contains("This session has \(limit) RequestLocation calls waiting, its limit " +
                                              "(location-requests-per-session)"), r.line)
            }
            return "\(requests) requests: \(requests - refused.count) fixes, \(refused.count) LimitsExceeded " +
                "within \(refused.maxMS) ms"
        }
    }
}

/// One `reply LABEL [+MSms] ok …` / `reply LABEL [+MSms] error NAME …` line of
/// geoconsent-localuser.
struct AttackReply {
    var line: String
    var label: String
    var ms: Int
    /// The error name, nil for a successful reply.
    var error: String?

    init?(_ line: String) {
        let f = line.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
        guard f.count >= 3, f[0] == "reply" else { return nil }
        self.line = line
        label = f[1]
        var i = 2
        ms = 0
        if f[2].hasPrefix("+"), f[2].hasSuffix("ms") {
            ms = Int(f[2].dropFirst().dropLast(2)) ?? 0
            i = 3
        }
        guard i < f.count else { return nil }
        let words = line.split(separator: " ")
        error = f[i] == "error" && words.count > i + 1 ? String(words[i + 1]) : nil
    }

    static func parse(_ lines: [String]) -> [AttackReply] { lines.compactMap(AttackReply.init) }
}

extension Array where Element == AttackReply {
    /// The slowest answer, in ms.
    var maxMS: Int { map(\.ms).max() ?? 0 }
}
