import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Consent agents that never answer, die mid-prompt, answer
/// with the wrong type, answer after `Cancel`, or register and vanish in a
/// loop. Never a grant, never a crash, no prompt state left behind.
final class HostileAgentTests: StackTestCase {
    static let promptTimeout = 0.4
    override var stackConfig: String { "[daemon]\nprompt-timeout = \(HostileAgentTests.promptTimeout)\n" }

    func newAgent(_ decide: @escaping (AgentPrompt) -> HostileAgent.Action) throws -> HostileAgent {
        let a = HostileAgent(peer: try stack.peer(), decide: decide)
        // The previous agent's departure may not have reached the daemon yet: AgentExists, retry.
        var r = a.register()
        let deadline = secondsNow() + 10
        while case .failure(let e) = r, e.name == GeoConsentAPI.ErrorName.agentExists, secondsNow() < deadline {
            stack.peers.settle(0.01)
            r = a.register()
        }
        XCTAssertNoThrow(try r.get())
        return a
    }

    /// Waits for a tap's reply; its status (999 for an error, which is acceptable but counted).
    func status(_ call: BusPeer.PendingCall, timeout: Double = 10) -> UInt32? {
        stack.peers.pump(timeout: timeout) { call.isDone }
        switch call.result {
        case .success(let v)?: return StatusReply.decode(v)?.rawValue ?? 998
        case .failure?: return 999
        case nil: return nil
        }
    }

    /// Found by this suite: the daemon logged an agent's answer (or its error
    /// message) verbatim, so an agent answering with megabytes wrote megabytes
    /// per prompt into the journal. Now the logged text is cut short.
    func testHugeAgentAnswersDoNotFloodTheLog() throws {
        let huge = String(repeating: "y", count: 1 << 20)
        var n = 0
        let agent = try newAgent { _ in
            n += 1
            return n % 2 == 1 ? .raw([.string(huge)]) : .raw([.array(element: "s", [.string(huge)])])
        }
        let before = stack.daemon.log().utf8.count
        let client = try stack.peer()
        for _ in 0..<4 { XCTAssertEqual(try client.tap().get(), 0) }
        agent.peer.connection.close()
        // An agent failing with a megabyte of error message.
        let failing = try newAgent { _ in .hold }
        let tap = client.geoAsync("RequestOneTimeAuthorization", [.vardict([:])])
        XCTAssertTrue(stack.peers.pump(timeout: 5) { failing.held.count == 1 })
        failing.held.values.first?.fail(DBusError(DBusError.failedName, huge))
        XCTAssertEqual(status(tap), 0)
        let grown = stack.daemon.log().utf8.count - before
        Hostile.report("agent-log-flood", "tried 4 answers of 1 MiB (as s and as) and a 1 MiB error message from agents; "
            + "saw the daemon log grow by \(grown) bytes, 5 taps -> 0, no grant")
        XCTAssertLessThan(grown, 64 * 1024, "agent answers are logged verbatim")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    // MARK: Misbehaving agents, one fault per case
    //
    // Each case drives one kind of fault against a fresh stack, then checks the
    // same outcome: never a grant, nothing stored, no session or prompt state left.

    /// The run's seed (`GEOCONSENT_SEED` or the clock) and its RNG, per case.
    private var seed: UInt64 = 0
    private var rng = SeededRNG(seed: 0)
    /// Reply status of every tap, by fault (999: an error, 997: no reply).
    private var statuses: [String: [UInt32]] = [:]
    /// Client connections the taps came from; they leave before the final checks.
    private var clients: [BusPeer] = []
    private var startTime = 0.0
    private let perFault = Hostile.count(small: 3, full: 30)

    override func setUpWithError() throws {
        try super.setUpWithError()
        seed = Hostile.seed()
        rng = SeededRNG(seed: seed)
        statuses = [:]
        clients = []
        startTime = secondsNow()
    }

    private func note(_ fault: String, _ s: UInt32?) {
        statuses[fault, default: []].append(s ?? 997)
    }

    /// A tap (or `kind` of request) from a new client connection.
    private func tapAsync(_ kind: String = "RequestOneTimeAuthorization") throws -> (BusPeer, BusPeer.PendingCall) {
        let c = try stack.peer()
        clients.append(c)
        return (c, c.geoAsync(kind, [OptionDictionary.encode(AuthOptions(reason: "hostile"))], timeout: 30))
    }

    /// A one-time or a when-in-use request, at random.
    private func randomKind() -> String {
        rng.chance(0.5) ? "RequestOneTimeAuthorization" : "RequestWhenInUseAuthorization"
    }

    func testAgentThatNeverAnswersTimesOutAndALateAnswerIsIgnored() throws {
        // The prompt times out (and is cancelled), a late answer is ignored.
        let silent = try newAgent { _ in .hold }
        var timeoutDelays: [Double] = []
        for _ in 0..<perFault {
            let tStart = secondsNow()
            let (_, call) = try tapAsync(randomKind())
            let s = status(call)
            timeoutDelays.append(secondsNow() - tStart)
            note("never-answers", s)
            // The late answer: after the timeout and the Cancel.
            stack.peers.pump(timeout: 2) { silent.cancels.count >= silent.confirms.count }
            for id in silent.held.keys { silent.answer(id, rng.pick(["allow-once", "allow-while-using"])) }
        }
        let silentCancels = silent.cancels.count
        XCTAssertEqual(silentCancels, perFault, "every timed-out prompt is cancelled once")
        silent.peer.connection.close()
        try checkNothingGrantedAndNoPromptLeft(
            tried: "\(perFault) silent prompts (late answers after the Cancel)",
            saw: "\(silentCancels) Cancel for \(perFault) timed-out prompts, "
                + "timeout replies after p50 \(Hostile.ms(percentile(timeoutDelays, 50)))")
    }

    func testAgentDyingMidPromptIsAnsweredAsNoDecision() throws {
        var deathDelays: [Double] = []
        for _ in 0..<perFault {
            let dying = try newAgent { _ in .hold }
            let (_, call) = try tapAsync(randomKind())
            XCTAssertTrue(stack.peers.pump(timeout: 5) { dying.confirms.count == 1 })
            let tDeath = secondsNow()
            dying.peer.connection.close()
            note("dies-mid-prompt", status(call))
            deathDelays.append(secondsNow() - tDeath)
        }
        try checkNothingGrantedAndNoPromptLeft(
            tried: "\(perFault) agent deaths mid-prompt",
            saw: "agent death answered after p50 \(Hostile.ms(percentile(deathDelays, 50)))")
    }

    func testAgentAnsweringWithTheWrongTypeOrAnErrorGrantsNothing() throws {
        // Wrong types, then strings that are not a decision for a one-time prompt, then an error.
        let wrongReplies: [[DBusValue]] = [[.uint32(4)], [], [.string("allow-once"), .string("allow-once")],
                                           [.objectPath("/allow/once")], [.variant(.string("allow-once"))],
                                           [.array(element: "s", [.string("allow-once")])],
                                           [.string("allow-while-using")], [.string("ALLOW-ONCE")],
                                           [.string("allow-once ")], [.string("")]]
        var wrongIndex = 0
        let wrong = try newAgent { _ in
            defer { wrongIndex += 1 }
            let i = wrongIndex % (wrongReplies.count + 1)
            return i == wrongReplies.count ? .error : .raw(wrongReplies[i])
        }
        let wrongCount = max(perFault, wrongReplies.count + 1)
        for _ in 0..<wrongCount {
            let (_, call) = try tapAsync("RequestOneTimeAuthorization")
            note("wrong-type-or-error", status(call))
        }
        wrong.peer.connection.close()
        try checkNothingGrantedAndNoPromptLeft(tried: "\(wrongCount) wrong-type/invalid/error answers")
    }

    func testAgentAnsweringAfterCancelDoesNotCompleteAnotherPrompt() throws {
        // The client leaves, Cancel arrives, then "allow-once"; meanwhile a new prompt
        // is open for a new client and must not pick that answer up.
        let late = try newAgent { _ in .hold }
        var lateIgnored = 0
        for _ in 0..<perFault {
            let (leaver, _) = try tapAsync("RequestOneTimeAuthorization")
            XCTAssertTrue(stack.peers.pump(timeout: 5) { late.held.count == 1 })
            let oldID = late.held.keys.first!
            leaver.connection.close()
            XCTAssertTrue(stack.peers.pump(timeout: 5) { late.cancels.contains(oldID) }, "no Cancel after the client left")
            let (_, next) = try tapAsync("RequestOneTimeAuthorization")
            XCTAssertTrue(stack.peers.pump(timeout: 5) { late.held.count == 2 })
            late.answer(oldID, "allow-once")
            stack.peers.settle(0.05)
            if !next.isDone { lateIgnored += 1 }
            // The open prompt is answered "deny": nothing for anyone.
            for id in late.held.keys { late.answer(id, "deny") }
            note("answers-after-cancel", status(next))
        }
        XCTAssertEqual(lateIgnored, perFault, "a late answer to a cancelled prompt completed another prompt")
        late.peer.connection.close()
        try checkNothingGrantedAndNoPromptLeft(tried: "\(perFault) answers after Cancel with a new prompt open")
    }

    func testAgentsRegisteringAndVanishingInALoopLeaveNoPromptBehind() throws {
        // Sometimes with a prompt open.
        let vanishLoops = Hostile.count(small: 120, full: 1_000)
        var retries = 0, withPrompt = 0
        var pendingTaps: [BusPeer.PendingCall] = []
        for i in 0..<vanishLoops {
            let a = HostileAgent(peer: try stack.peer()) { _ in .hold }
            var r = a.register()
            while case .failure(let e) = r, e.name == GeoConsentAPI.ErrorName.agentExists {
                retries += 1
                stack.peers.settle(0.002)
                r = a.register()
                if retries > vanishLoops * 50 { break }
            }
            XCTAssertNoThrow(try r.get())
            if i % 3 == 0 {
                let (_, call) = try tapAsync(randomKind())
                pendingTaps.append(call)
                stack.peers.pump(timeout: 5) { a.confirms.count == 1 || call.isDone }
                if a.confirms.count == 1 { withPrompt += 1 }
            }
            if rng.chance(0.3) {
                // Vanish without a word; otherwise unregister first, half the time.
            } else if rng.chance(0.5) {
                _ = a.peer.geo("UnregisterAgent", [.objectPath(HostileAgent.path)])
            }
            a.peer.connection.close()
        }
        waitAll(pendingTaps, on: stack.peers, timeout: 20)
        for c in pendingTaps { note("register-and-vanish", c.result.map { r in (try? StatusReply.decode(r.get())?.rawValue ?? 998) ?? 999 }) }
        try checkNothingGrantedAndNoPromptLeft(
            tried: "\(vanishLoops) register-and-vanish agents (\(withPrompt) with a prompt open, "
                + "\(retries) AgentExists retries while the previous one left)")
    }

    /// The outcome every fault case must end in: every client leaves, the daemon
    /// runs, no tap was granted, nothing is stored, no session is left, and a fresh
    /// agent gets exactly one Confirm for a new tap (no prompt state left behind).
    /// Prints the case's `agent-faults` lines: what was `tried`, the statuses, and what was seen.
    private func checkNothingGrantedAndNoPromptLeft(tried: String, saw extra: String? = nil,
                                                    file: StaticString = #filePath, line: UInt = #line) throws {
        let root = try stack.peer()
        for c in clients { c.connection.close() }
        stack.peers.settle(0.3)
        XCTAssertTrue(stack.daemon.isRunning, "the daemon died\n\(stack.daemon.log().suffix(3000))", file: file, line: line)

        // Never a grant.
        let all = statuses.values.flatMap { $0 }
        let grants = all.filter { $0 == 4 }.count
        XCTAssertEqual(grants, 0, "\(statuses)", file: file, line: line)
        XCTAssertTrue(all.allSatisfy { $0 == 0 || $0 == 999 }, "\(statuses)", file: file, line: line)
        let consents = try root.consents()
        XCTAssertEqual(consents.count, 0, "something was stored: \(consents)", file: file, line: line)
        let sessionsLeft = try root.sessions()
        XCTAssertEqual(sessionsLeft.count, 0, "sessions left behind: \(sessionsLeft)", file: file, line: line)

        // No prompt state left: a fresh agent gets exactly one Confirm for a new tap.
        let fresh = try newAgent { _ in .answer("deny") }
        let probe = try stack.peer()
        XCTAssertEqual(try probe.tap().get(), 0, file: file, line: line)
        stack.peers.settle(0.2)
        XCTAssertEqual(fresh.confirms.count, 1, "a fresh agent saw \(fresh.confirms.count) Confirm calls for one tap",
                       file: file, line: line)
        let auth = try probe.authorization()
        XCTAssertEqual(auth.status, .notDetermined, file: file, line: line)
        XCTAssertFalse(auth.oneTimeApproved, file: file, line: line)
        XCTAssertEqual(try root.sessions().map(\.name), [probe.uniqueName], file: file, line: line)
        XCTAssertTrue(stack.daemon.isRunning, file: file, line: line)

        let summary = statuses.sorted { $0.key < $1.key }.map { k, v in
            "\(k): \(v.count) taps -> \(Dictionary(grouping: v, by: { $0 == 999 ? "error" : "status \($0)" }).mapValues(\.count).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))"
        }.joined(separator: "; ")
        Hostile.report("agent-faults", "seed \(seed), mode \(Hostile.mode), prompt-timeout \(HostileAgentTests.promptTimeout) s: tried "
            + "\(tried) in \(String(format: "%.1f", secondsNow() - startTime)) s")
        Hostile.report("agent-faults", "saw \(summary)")
        Hostile.report("agent-faults", "saw 0 grants, \(consents.count) stored records, \(sessionsLeft.count) sessions left, "
            + (extra.map { $0 + ", " } ?? "") + "a fresh agent got exactly "
            + "\(fresh.confirms.count) Confirm for a new tap; daemon RSS \(Hostile.rssKB(stack.daemon.pid)) kB")
    }
}
