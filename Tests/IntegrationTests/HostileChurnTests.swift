import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Client churn. Thousands of connect / tap / disconnect
/// cycles (some leaving before their reply, some in the middle of a prompt)
/// leave no session behind, and the daemon's RSS does not grow.
final class HostileChurnTests: XCTestCase {
    var stack: Stack!
    var agent: HostileAgent!

    override func setUpWithError() throws {
        stack = try Stack()
        // One-time prompts: allow (once; later taps are silent). Standard prompts: held
        // until cancelled, then answered "deny" (ignored: the prompt is gone), as an
        // agent closing its dialog would.
        agent = HostileAgent(peer: try stack.peer()) { c in c.kind == .oneTime ? .answer("allow-once") : .hold }
        agent.replyOnCancel = "deny"
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        agent = nil
        stack?.stop()
        stack = nil
    }

    struct Tally {
        var cycles = 0, granted = 0, updates = 0, leftEarly = 0, leftMidPrompt = 0, errors: [String: Int] = [:]
    }

    /// One wave of `n` clients at once: each connects, calls, and disconnects.
    func wave(_ n: Int, _ rng: inout SeededRNG, _ t: inout Tally, bigReason: Bool = false) throws {
        var peers: [BusPeer] = []
        var waitFor: [BusPeer.PendingCall] = []
        var midPrompt: [BusPeer] = []
        let reason = bigReason ? String(repeating: "r", count: 64 * 1024) : "churn"
        for _ in 0..<n {
            let p = try stack.peer()
            peers.append(p)
            let r = rng.int(0...99)
            if r < 55 {
                let tap = p.geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions(reason: reason))], timeout: 30)
                waitFor.append(tap)
                if rng.chance(0.25) {
                    waitFor.append(p.geoAsync("StartUpdates", [.vardict([:])], timeout: 30))
                    t.updates += 1
                }
            } else if r < 75 {
                // Pipelined: the tap is sent, and the connection closes at once.
                _ = p.geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions(reason: reason))], timeout: 30)
                p.connection.flush()
                p.connection.close()
                t.leftEarly += 1
            } else {
                // The standard prompt: held by the agent; the client leaves in the middle.
                _ = p.geoAsync("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions(reason: reason))], timeout: 30)
                midPrompt.append(p)
            }
        }
        stack.peers.pump(timeout: 30) { waitFor.allSatisfy(\.isDone) }
        for c in waitFor {
            switch c.result {
            case .success(let v)?: if StatusReply.decode(v) == .whenInUse { t.granted += 1 }
            case .failure(let e)?: t.errors[Hostile.shortError(e.name), default: 0] += 1
            case nil: t.errors["no reply", default: 0] += 1
            }
        }
        // Let the standard prompts reach the agent (or join the open one), then leave.
        if !midPrompt.isEmpty { stack.peers.settle(0.005) }
        t.leftMidPrompt += midPrompt.count
        for p in peers { p.connection.close() }
        t.cycles += n
    }

    /// Polls ListSessions (as root) until it is empty or `timeout`; returns what is left.
    func sessionsAfterSettling(_ root: BusPeer, timeout: Double = 5) throws -> [SessionInfo] {
        var left = try root.sessions()
        let deadline = secondsNow() + timeout
        while !left.isEmpty && secondsNow() < deadline {
            stack.peers.settle(0.05)
            left = try root.sessions()
        }
        return left
    }

    func testConnectTapDisconnectChurnLeavesNoSessionAndRSSFlat() throws {
        let seed = Hostile.seed()
        var rng = SeededRNG(seed: seed)
        let cycles = Hostile.count(small: 300, full: 10_000)
        let warmupCycles = Hostile.count(small: 100, full: 2_000)
        let waveSize = 20
        let pid = stack.daemon.pid
        let root = try stack.peer()
        // The first tap prompts once; later taps of this app are silent grants.
        try primeOneTimeApproval()

        var warm = Tally()
        while warm.cycles < warmupCycles { try wave(min(waveSize, warmupCycles - warm.cycles), &rng, &warm) }
        XCTAssertTrue(try sessionsAfterSettling(root).isEmpty)
        stack.peers.settle(Hostile.stress ? 2.5 : 0.3)   // (stress) the lazy last-used write (2 s) is done
        let rssBefore = Hostile.rssKB(pid), fdsBefore = Hostile.fdCount(pid)
        let t0 = secondsNow()
        var t = Tally()
        while t.cycles < cycles { try wave(min(waveSize, cycles - t.cycles), &rng, &t) }
        let elapsed = secondsNow() - t0
        let left = try sessionsAfterSettling(root)
        stack.peers.settle(Hostile.stress ? 2.5 : 0.3)
        let rssAfter = Hostile.rssKB(pid), fdsAfter = Hostile.fdCount(pid)
        let growth = rssAfter - rssBefore

        XCTAssertTrue(stack.daemon.isRunning)
        XCTAssertTrue(root.pingDaemon())
        XCTAssertEqual(left.count, 0, "sessions left behind: \(left.prefix(5))")
        XCTAssertEqual(t.errors["no reply"] ?? 0, 0)
        XCTAssertLessThanOrEqual(fdsAfter, fdsBefore + 1, "descriptors \(fdsBefore) -> \(fdsAfter)")
        let errs = t.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Hostile.report("churn", "seed \(seed), mode \(Hostile.mode): tried \(warm.cycles) warm-up + \(t.cycles) connect/call/disconnect "
            + "cycles in waves of \(waveSize) (\(String(format: "%.1f", elapsed)) s, \(Int(Double(t.cycles) / max(elapsed, 0.001))) cycles/s): "
            + "\(t.cycles - t.leftEarly - t.leftMidPrompt) taps answered before leaving (\(t.updates) with StartUpdates), "
            + "\(t.leftEarly) left before their reply, \(t.leftMidPrompt) left in the middle of a standard prompt")
        Hostile.report("churn", "saw \(t.granted) grants (status 4), errors: \(errs.isEmpty ? "none" : errs); "
            + "\(left.count) sessions left (ListSessions as root); \(agent.cancels.count) prompts cancelled; "
            + "daemon RSS \(rssBefore) kB after warm-up -> \(rssAfter) kB (\(growth >= 0 ? "+" : "")\(growth) kB), "
            + "descriptors \(fdsBefore) -> \(fdsAfter)")
        if Hostile.stress {
            XCTAssertLessThanOrEqual(growth, 256, "RSS grew \(growth) kB over \(t.cycles) cycles (seed \(seed))")
        }
    }

    /// Found by this suite: a client that left while waiting on a prompt left its
    /// call (message and arguments) in the daemon's table of unanswered calls for
    /// good. 64 KiB of options make each leaked call visible in the RSS.
    func testClientsLeavingMidPromptDoNotLeakTheirCalls() throws {
        let pid = stack.daemon.pid
        let root = try stack.peer()
        try primeOneTimeApproval()
        let rounds = Hostile.count(small: 15, full: 60)
        // Warm-up: the same traffic, so malloc has grown for 64 KiB messages.
        for _ in 0..<5 { try midPromptWave() }
        XCTAssertTrue(try sessionsAfterSettling(root).isEmpty)
        stack.peers.settle(0.3)
        let before = Hostile.rssKB(pid)
        for _ in 0..<rounds { try midPromptWave() }
        XCTAssertTrue(try sessionsAfterSettling(root).isEmpty)
        stack.peers.settle(0.3)
        let after = Hostile.rssKB(pid)
        let departed = rounds * 20
        Hostile.report("churn-mid-prompt-leak", "tried \(departed) clients leaving while their request with 64 KiB of options waited on "
            + "a standard prompt; saw daemon RSS \(before) -> \(after) kB (\(after - before >= 0 ? "+" : "")\(after - before) kB; "
            + "a leaked call would keep ~\(departed * 128 / 1024) MB)")
        XCTAssertLessThan(after - before, 2048, "the daemon keeps the calls of clients that left mid-prompt")
    }

    /// One tap from a client that then leaves: the app's one-time approval is stored.
    private func primeOneTimeApproval() throws {
        let primer = try stack.peer()
        XCTAssertEqual(try primer.tap().get(), 4)
        primer.connection.close()
    }

    private func midPromptWave() throws {
        // 64 KiB under a key the daemon ignores (a reason that long would be
        // refused at once, and the request would never wait on the prompt).
        let junk = String(repeating: "m", count: 64 * 1024)
        var peers: [BusPeer] = []
        for _ in 0..<20 {
            let p = try stack.peer()
            _ = p.geoAsync("RequestWhenInUseAuthorization", [.vardict(["reason": .string("mid-prompt"), "junk": .string(junk)])],
                           timeout: 30)
            peers.append(p)
        }
        let confirms = agent.confirms.count
        XCTAssertTrue(stack.peers.pump(timeout: 5) { agent.confirms.count > confirms }, "the wave opened no prompt")
        stack.peers.settle(0.02)
        for p in peers { p.connection.close() }
    }
}
