import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// One run of `DBusFuzzer` traffic against a daemon: pipelined batches from one
/// connection, each batch's calls awaited, the daemon pinged after each, and
/// what came back, RSS and descriptors counted along the way.
final class DBusFuzzRun {
    let seed: UInt64
    let total: Int
    let batch = 250
    let warmup: Int
    private var fuzz: DBusFuzzer
    private let daemon: DaemonInstance
    private let loop: PeerLoop
    private let fuzzer: BusPeer
    private let victim: BusPeer

    private(set) var sent = 0, calls = 0, replies = 0, fireAndForget = 0, localRejects = 0, pings = 0, batchNo = 0
    private(set) var errors: [String: Int] = [:]
    private(set) var byCategory: [String: Int] = [:]
    /// Calls the daemon received but never answered (or the bus timed out on).
    private(set) var silent: [String] = []
    private(set) var rssStart = 0, fdsStart = 0, rssAfterWarmup = 0, fdsAfterWarmup = 0, rssEnd = 0, fdsEnd = 0
    /// RSS at 0, 25, 50, 75, 100 % of the run.
    private(set) var checkpoints: [Int] = []
    private(set) var elapsed = 0.0

    /// `victim` is the session forged NameOwnerChanged signals claim has left.
    init(seed: UInt64, total: Int, daemon: DaemonInstance, stack: Stack, victim: BusPeer) throws {
        self.seed = seed
        self.total = total
        self.daemon = daemon
        self.victim = victim
        loop = stack.peers
        warmup = max(batch * 2, total / 10)
        fuzz = DBusFuzzer(seed: seed)
        fuzzer = try stack.peer()
        fuzz.victim = victim.uniqueName
        fuzz.daemonUniqueName = try stack.peer().call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "GetNameOwner", [.string(GeoConsentAPI.busName)]).get().first?.stringValue
    }

    /// Sends all `total` messages, batch by batch, until done or the daemon is gone.
    func run() {
        checkpoints = [Hostile.rssKB(daemon.pid)]
        rssStart = Hostile.rssKB(daemon.pid)
        fdsStart = Hostile.fdCount(daemon.pid)
        let t0 = secondsNow()
        while sent < total {
            batchNo += 1
            collect(sendBatch())
            XCTAssertTrue(fuzzer.connection.isConnected, "the bus dropped the fuzzing connection (seed \(seed))")
            XCTAssertTrue(victim.pingDaemon(), "the daemon stopped answering after batch \(batchNo) (seed \(seed))")
            pings += 1
            if !daemon.isRunning { break }
            if rssAfterWarmup == 0 && sent >= warmup {
                rssAfterWarmup = Hostile.rssKB(daemon.pid)
                fdsAfterWarmup = Hostile.fdCount(daemon.pid)
            }
            if sent * 4 / total > checkpoints.count - 1 { checkpoints.append(Hostile.rssKB(daemon.pid)) }
        }
        elapsed = secondsNow() - t0
        rssEnd = Hostile.rssKB(daemon.pid)
        fdsEnd = Hostile.fdCount(daemon.pid)
    }

    /// One batch sent; returns its calls that expect a reply, with a label each.
    private func sendBatch() -> [(BusPeer.PendingCall, String)] {
        var pending: [(BusPeer.PendingCall, String)] = []
        for _ in 0..<min(batch, total - sent) {
            // The first batch carries 8 huge strings, so the warm-up has grown malloc's
            // heap for them (glibc raises its mmap threshold after the first free).
            let item = fuzz.next(forceHuge: batchNo == 1 && pending.count < 8)
            byCategory[item.category, default: 0] += 1
            sent += 1
            switch item.kind {
            case .call(let dest, let path, let iface, let member, let args, let noReply):
                if noReply {
                    if send(dest: dest, path: path, iface: iface, member: member, args, noReply: true) {
                        fireAndForget += 1
                    } else { localRejects += 1 }
                } else {
                    let p = fuzzer.callAsync(dest, path, iface, member, args, timeout: 60)
                    if case .failure(let e)? = p.result, e.name == DBusError.invalidArgsName {
                        localRejects += 1   // refused by our own layer before sending (should not happen)
                    } else {
                        pending.append((p, item.category + " " + member))
                        calls += 1
                    }
                }
            case .signal(let path, let iface, let member, let args, let dest):
                if let m = try? Message.signal(path: path, interface: iface, member: member, destination: dest),
                   (try? m.append(args)) != nil, fuzzer.connection.send(m) {
                    fireAndForget += 1
                } else { localRejects += 1 }
            }
        }
        return pending
    }

    /// Waits for a batch's replies and counts them.
    private func collect(_ pending: [(BusPeer.PendingCall, String)]) {
        waitAll(pending.map(\.0), on: loop, timeout: 60)
        for (p, label) in pending {
            switch p.result {
            case .success?: replies += 1
            case .failure(let e)?:
                errors[e.name, default: 0] += 1
                if Hostile.silentErrors.contains(e.name) { silent.append("\(label): \(e)") }
            case nil: silent.append("\(label): no result within 60 s")
            }
        }
    }

    private func send(dest: String, path: String, iface: String?, member: String,
                      _ args: [DBusValue], noReply: Bool) -> Bool {
        guard let m = try? Message.methodCall(destination: dest, path: path, interface: iface, member: member),
              (try? m.append(args)) != nil else { return false }
        m.noReplyExpected = noReply
        return fuzzer.connection.send(m)
    }

    /// The run's `dbus-fuzz` lines: what was sent, what came back, RSS and descriptors.
    func report() {
        let topErrors = errors.sorted { $0.value > $1.value }.prefix(8)
            .map { "\(Hostile.shortError($0.key)) \($0.value)" }.joined(separator: ", ")
        let cats = byCategory.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Hostile.report("dbus-fuzz", "seed \(seed), mode \(Hostile.mode): tried \(sent) messages in \(batchNo) pipelined "
            + "batches of \(batch) (\(String(format: "%.1f", elapsed)) s, \(Int(Double(sent) / max(elapsed, 0.001))) msg/s): "
            + "\(calls) calls, \(fireAndForget) no-reply calls and signals; categories: \(cats)")
        Hostile.report("dbus-fuzz", "saw \(replies) valid replies, \(calls - replies - silent.count) errors (\(topErrors)), "
            + "\(silent.count) unanswered, \(pings) Pings answered, daemon alive: \(daemon.isRunning), "
            + "victim session kept: true, grants: 0")
        let growth = rssEnd - rssAfterWarmup
        Hostile.report("dbus-fuzz", "saw RSS \(rssStart) kB at start, \(rssAfterWarmup) kB after warm-up (\(warmup) messages), "
            + "\(rssEnd) kB at the end: \(growth >= 0 ? "+" : "")\(growth) kB over the last \(sent - warmup) messages "
            + "(at 0/25/50/75/100 %: \(checkpoints.map(String.init).joined(separator: "/")) kB); "
            + "descriptors \(fdsStart) / \(fdsAfterWarmup) / \(fdsEnd)")
    }
}
