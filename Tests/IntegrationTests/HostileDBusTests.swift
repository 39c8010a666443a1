import XCTest
import Foundation
import GeoDBus
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
        var fuzz = DBusFuzzer(seed: seed)
        let total = Hostile.count(small: 2_000, full: 100_000)
        let batch = 250
        // The same daemon, with glibc's mmap threshold pinned at its default (128 KiB): otherwise
        // glibc raises it after the first huge message is freed, later megabyte messages come
        // from the heap, and RSS records the heap's high-water mark instead of what is kept.
        stack.daemon.stop()
        let daemon = try DaemonInstance(busAddress: stack.bus.address, gpsdPort: stack.gpsd.port,
                                        stateDir: stack.stateDir.path, environment: ["MALLOC_MMAP_THRESHOLD_": "131072"])
        defer { daemon.stop() }
        let pid = daemon.pid
        let fuzzer = try stack.peer()
        let victim = try stack.peer()
        XCTAssertEqual(try victim.hostileAuthorization().status, 0)
        fuzz.victim = victim.uniqueName
        fuzz.daemonUniqueName = try stack.peer().call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "GetNameOwner", [.string(GeoConsentAPI.busName)]).get().first?.stringValue

        var sent = 0, calls = 0, replies = 0, fireAndForget = 0, localRejects = 0, pings = 0
        var errors: [String: Int] = [:]
        var byCategory: [String: Int] = [:]
        var silent: [String] = []
        var rssAfterWarmup = 0, fdsAfterWarmup = 0
        var checkpoints: [Int] = [Hostile.rssKB(pid)]   // at 0, 25, 50, 75, 100 %
        let rssStart = Hostile.rssKB(pid), fdsStart = Hostile.fdCount(pid)
        let warmup = max(batch * 2, total / 10)
        let t0 = secondsNow()
        var batchNo = 0

        while sent < total {
            batchNo += 1
            var pending: [(BusPeer.PendingCall, String)] = []
            let n = min(batch, total - sent)
            for _ in 0..<n {
                // The first batch carries 8 huge strings, so the warm-up has grown malloc's
                // heap for them (glibc raises its mmap threshold after the first free).
                let item = fuzz.next(forceHuge: batchNo == 1 && pending.count < 8)
                byCategory[item.category, default: 0] += 1
                sent += 1
                switch item.kind {
                case .call(let dest, let path, let iface, let member, let args, let noReply):
                    if noReply {
                        if send(fuzzer, dest: dest, path: path, iface: iface, member: member, args, noReply: true) {
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
            waitAll(pending.map(\.0), on: stack.peers, timeout: 60)
            for (p, label) in pending {
                switch p.result {
                case .success?: replies += 1
                case .failure(let e)?:
                    errors[e.name, default: 0] += 1
                    if Hostile.silentErrors.contains(e.name) { silent.append("\(label): \(e)") }
                case nil: silent.append("\(label): no result within 60 s")
                }
            }
            XCTAssertTrue(fuzzer.connection.isConnected, "the bus dropped the fuzzing connection (seed \(seed))")
            XCTAssertTrue(victim.pingDaemon(), "the daemon stopped answering after batch \(batchNo) (seed \(seed))")
            pings += 1
            if !daemon.isRunning { break }
            if rssAfterWarmup == 0 && sent >= warmup {
                rssAfterWarmup = Hostile.rssKB(pid)
                fdsAfterWarmup = Hostile.fdCount(pid)
            }
            if sent * 4 / total > checkpoints.count - 1 { checkpoints.append(Hostile.rssKB(pid)) }
        }
        let elapsed = secondsNow() - t0
        let rssEnd = Hostile.rssKB(pid), fdsEnd = Hostile.fdCount(pid)

        // The forged NameOwnerChanged signals did not end the victim's session.
        let root = try stack.peer()
        let sessions = try root.hostileSessions()
        XCTAssertTrue(sessions.contains { $0.name == victim.uniqueName }, "a forged NameOwnerChanged ended a session")
        // Nothing the fuzzer did granted anything to anyone.
        let consents = try root.hostileConsents()
        XCTAssertTrue(consents.allSatisfy { $0.record["one-time-approved"] == .bool(false)
                && $0.record["decision"] == .string("") }, "\(consents)")
        XCTAssertEqual(try victim.hostileAuthorization().status == 4, false)
        XCTAssertTrue(daemon.isRunning)
        XCTAssertTrue(silent.isEmpty, "\(silent.count) calls got no answer (seed \(seed)): \(silent.prefix(5))")
        XCTAssertEqual(localRejects, 0, "the generator built messages our own layer refused (seed \(seed))")

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
        XCTAssertLessThanOrEqual(fdsEnd, fdsAfterWarmup + 2, "the daemon leaks descriptors")
        // Flat: huge strings pass through malloc, so allow some slack, but not per-message growth.
        XCTAssertLessThanOrEqual(growth, 1024, "RSS grew by \(growth) kB (seed \(seed))")
    }

    private func send(_ peer: BusPeer, dest: String, path: String, iface: String?, member: String,
                      _ args: [DBusValue], noReply: Bool) -> Bool {
        guard let m = try? Message.methodCall(destination: dest, path: path, interface: iface, member: member),
              (try? m.append(args)) != nil else { return false }
        m.noReplyExpected = noReply
        return peer.connection.send(m)
    }

    // MARK: Regression: pending calls of a connection the bus drops

    /// Found by this suite: when the bus dropped a connection (here for a message
    /// nested deeper than it accepts), libdbus finalized the connection's pending
    /// calls without calling their notify functions, so a `Connection.call`
    /// completion never ran, not even at its timeout. Now it gets `Disconnected`.
    func testPendingCallsCompleteWithDisconnectedWhenTheBusDropsTheConnection() throws {
        let holder = HostileAgent(peer: try stack.peer(), .hold)
        let p = try stack.peer()
        let held = p.callAsync(holder.peer.uniqueName, HostileAgent.path, GeoConsentAPI.agentInterfaceName, "Confirm",
                               [.string("1"), .string("a"), .string("one-time"), .vardict([:])], timeout: 20)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { holder.held.count == 1 })
        var v: DBusValue = .string("x")
        for _ in 0..<70 { v = .variant(v) }
        let t0 = secondsNow()
        let dropped = p.callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                  "GetAuthorization", [v], timeout: 20)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { held.isDone && dropped.isDone }, "pending calls never completed")
        let dt = secondsNow() - t0
        XCTAssertFalse(p.connection.isConnected)
        for c in [held, dropped] {
            if case .failure(let e)? = c.result { XCTAssertEqual(e.name, DBusError.disconnectedName) }
            else { XCTFail("expected Disconnected, got \(String(describing: c.result))") }
        }
        // Calls made after the drop fail at once too.
        let after = p.callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName, "GetAuthorization")
        XCTAssertTrue(stack.peers.pump(timeout: 2) { after.isDone })
        XCTAssertTrue(holder.peer.pingDaemon())
        Hostile.report("dbus-dropped-connection", "tried 2 pending calls on a connection the bus dropped (variant nesting 70), "
            + "saw both complete with Disconnected after \(Hostile.ms(dt)) (before the fix: never, not even at the 20 s timeout)")
    }

    // MARK: The edges, one by one

    /// Each case on its own connection, so one the bus drops (a message it
    /// finds invalid) cannot hide another; the daemon must answer or ignore
    /// each, and keep serving.
    func testEdgeCasesAtLibdbusLimits() throws {
        let pid = stack.daemon.pid
        let root = try stack.peer()
        XCTAssertTrue(root.pingDaemon())
        let fdsBefore = Hostile.fdCount(pid)
        var lines: [String] = []

        /// Sends one call on a fresh connection; returns what came back.
        func probe(_ label: String, path: String = GeoConsentAPI.objectPath, iface: String? = GeoConsentAPI.interfaceName,
                   _ member: String, _ args: [DBusValue], expect: Set<String>? = nil,
                   file: StaticString = #filePath, line: UInt = #line) {
            guard let p = try? stack.peer() else { return XCTFail("no connection", file: file, line: line) }
            let r = p.call(GeoConsentAPI.busName, path, iface, member, args, timeout: 30)
            let outcome: String
            switch r {
            case .success(let v): outcome = "reply '\(v.map(\.signature).joined())'"
            case .failure(let e):
                outcome = Hostile.shortError(e.name)
                XCTAssertFalse(Hostile.silentErrors.contains(e.name), "\(label): \(e)", file: file, line: line)
            }
            if let expect {
                let got: String
                switch r {
                case .success: got = "ok"
                case .failure(let e): got = e.name
                }
                XCTAssertTrue(expect.contains(got), "\(label): got \(got), expected one of \(expect)", file: file, line: line)
            }
            XCTAssertTrue(root.pingDaemon(), "daemon gone after \(label)", file: file, line: line)
            lines.append("\(label) -> \(outcome)")
        }
        let invalid = DBusError.invalidArgsName

        // Deep nesting at libdbus's limits (32 arrays, 32 structs in one signature).
        var arr: DBusValue = .uint32(7)
        for _ in 0..<32 { arr = .array(element: arr.signature, [arr]) }
        probe("array nesting 32", "GetAuthorization", [arr], expect: [invalid])
        var st: DBusValue = .string("deep")
        for _ in 0..<32 { st = .structure([st]) }
        probe("struct nesting 32", "RequestOneTimeAuthorization", [st], expect: [invalid])
        var mixed: DBusValue = .bool(true)
        for i in 0..<32 { mixed = i % 2 == 0 ? .array(element: mixed.signature, [mixed]) : .structure([mixed, .byte(1)]) }
        probe("array/struct nesting 32+16", "ResetConsent", [mixed], expect: [invalid])
        // 33 arrays cannot even be built: our own layer refuses it before libdbus would.
        var tooDeep: DBusValue = .uint32(7)
        for _ in 0..<33 { tooDeep = .array(element: tooDeep.signature, [tooDeep]) }
        let refused = (try? Message.methodCall(destination: GeoConsentAPI.busName, path: "/", interface: nil, member: "X"))
            .map { m in (try? m.append([tooDeep])) == nil } ?? false
        XCTAssertTrue(refused)
        lines.append("array nesting 33 -> refused locally (never sent)")
        // Options nested as a{sv} inside a{sv}: each level is an array, a dict entry and a
        // variant, 3 of the 64 levels of total nesting the bus accepts: 21 levels (63).
        var opts: DBusValue = .vardict(["reason": .string("x")])
        for _ in 0..<20 { opts = .vardict(["reason": opts, "accuracy": .string("full")]) }
        probe("a{sv} nested 21 deep as 'reason' (depth 63)", "RequestOneTimeAuthorization", [opts], expect: [invalid])
        var nestedUnknown: DBusValue = .vardict([:])
        for _ in 0..<21 { nestedUnknown = .vardict(["x-future": nestedUnknown]) }
        probe("a{sv} nested 21 deep under an unknown key (depth 63)", "RequestOneTimeAuthorization", [nestedUnknown],
              expect: [GeoConsentAPI.ErrorName.noAgent])
        // Variants in variants up to the bus's limit of 64 levels in all; past it the bus
        // drops the sender, and the daemon never sees the message.
        for depth in [32, 62, 63, 100] {
            var v: DBusValue = .string("core")
            for _ in 0..<depth { v = .variant(v) }
            let p = try stack.peer()
            let t0 = secondsNow()
            let r = p.call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                           "RequestOneTimeAuthorization", [.vardict(["reason": v])], timeout: 10)
            let outcome: String
            switch r {
            case .success: outcome = "reply"
            case .failure(let e):
                outcome = Hostile.shortError(e.name) + (p.connection.isConnected ? "" : " (the bus dropped the sender)")
                if depth + 2 <= 63 { XCTAssertEqual(e.name, invalid, "variant depth \(depth)") }
                else { XCTAssertEqual(e.name, DBusError.disconnectedName, "variant depth \(depth)") }
            }
            XCTAssertLessThan(secondsNow() - t0, 5, "variant depth \(depth): the call hung")
            XCTAssertTrue(root.pingDaemon(), "daemon gone after variant depth \(depth)")
            lines.append("variant nesting \(depth) in a{sv} (total depth \(depth + 2)) -> \(outcome)")
        }

        // Wrong value types for every known option key.
        for key in ["reason", "accuracy", "app-name", "parent-window"] {
            probe("RequestWhenInUse \(key)=u", "RequestWhenInUseAuthorization", [.vardict([key: .uint32(1)])], expect: [invalid])
        }
        for key in ["max-age", "timeout"] {
            probe("RequestLocation \(key)=s", "RequestLocation", [.vardict([key: .string("5")])], expect: [invalid])
        }
        for key in ["distance-filter", "min-interval"] {
            probe("StartUpdates \(key)=ad", "StartUpdates", [.vardict([key: .array(element: "d", [.double(1)])])], expect: [invalid])
        }
        probe("ResetConsent uid=i", "ResetConsent", [.string("x"), .vardict(["uid": .int32(0)])], expect: [invalid])
        probe("a{sv} with NaN/inf doubles", "RequestLocation",
              [.vardict(["max-age": .double(.nan), "timeout": .double(.infinity)])],
              expect: [invalid, GeoConsentAPI.ErrorName.notAuthorized])
        probe("a{ss} instead of a{sv}", "RequestOneTimeAuthorization",
              [.dict(key: "s", value: "s", [.init(.string("reason"), .string("x"))])], expect: [invalid])

        // Huge strings (1 MB and 8 MB).
        let mb = String(repeating: "\u{1F30D}geo", count: 1 << 18)   // ~1.75 MB of UTF-8
        probe("1.75 MB reason", "RequestOneTimeAuthorization", [.vardict(["reason": .string(mb)])],
              expect: [GeoConsentAPI.ErrorName.noAgent])
        probe("1.75 MB app-id to ResetConsent", "ResetConsent", [.string(mb), .vardict([:])], expect: ["ok"])
        probe("8 MB member-less junk to GetAuthorization", "GetAuthorization",
              [.string(String(repeating: "z", count: 8 << 20))], expect: [invalid])
        probe("1 MB interface name in Properties.Get", iface: ObjectServer.properties, "Get",
              [.string(String(repeating: "i", count: 1 << 20)), .string("Enabled")], expect: [DBusError.unknownPropertyName])

        // Invalid object paths to RegisterAgent (sent as 's': 'o' cannot carry them).
        for bad in ["", "not a path", "//", "/trailing/", "/a//b", "/\u{e4}", "relative/x", "/a-b", "/" + String(repeating: "a", count: 1 << 20)] {
            probe("RegisterAgent s'\(bad.prefix(12))\(bad.count > 12 ? "…(\(bad.count))" : "")'", "RegisterAgent",
                  [.string(bad)], expect: [invalid])
        }
        probe("RegisterAgent ao", "RegisterAgent", [.array(element: "o", [.objectPath("/a")])], expect: [invalid])
        probe("UnregisterAgent of a path never registered", "UnregisterAgent", [.objectPath("/nobody/here")], expect: [invalid])

        // The Agent interface on the daemon itself.
        probe("Agent.Confirm on the daemon", iface: GeoConsentAPI.agentInterfaceName, "Confirm",
              [.string("1"), .string("/usr/bin/x"), .string("one-time"), .vardict([:])], expect: [DBusError.unknownInterfaceName])
        probe("Agent.Cancel on the daemon", iface: GeoConsentAPI.agentInterfaceName, "Cancel", [.string("1")],
              expect: [DBusError.unknownInterfaceName])
        probe("Confirm without interface", iface: nil, "Confirm",
              [.string("1"), .string("x"), .string("one-time"), .vardict([:])], expect: [DBusError.unknownMethodName])

        // No interface, other paths.
        probe("GetAuthorization without interface", iface: nil, "GetAuthorization", [], expect: ["ok"])
        probe("Get without interface", iface: nil, "Get", [.string(""), .string("Enabled")], expect: [DBusError.unknownMethodName])
        probe("Introspect on /", path: "/", iface: ObjectServer.introspectable, "Introspect", [], expect: ["ok"])
        probe("GetAuthorization on /", path: "/", "GetAuthorization", [], expect: [DBusError.unknownObjectName])
        probe("GetAuthorization on a child path", path: GeoConsentAPI.objectPath + "/child", "GetAuthorization", [],
              expect: [DBusError.unknownObjectName])
        probe("Ping on a random path", path: "/x/y/z", iface: ObjectServer.peer, "Ping", [], expect: ["ok"])
        probe("Properties.Set Enabled to a string", iface: ObjectServer.properties, "Set",
              [.string(GeoConsentAPI.interfaceName), .string("Enabled"), .variant(.string("false"))], expect: [invalid])
        probe("Properties.GetAll of the Agent interface", iface: ObjectServer.properties, "GetAll",
              [.string(GeoConsentAPI.agentInterfaceName)], expect: [DBusError.unknownInterfaceName])

        // Unix fds: the daemon must close every descriptor it is handed.
        let devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(devnull) }
        let fdPeer = try stack.peer()
        var fdCalls: [BusPeer.PendingCall] = []
        for i in 0..<200 {
            let args: [DBusValue] = i % 2 == 0 ? [.unixFD(devnull)]
                : [.vardict(["reason": .unixFD(devnull), "x-fd": .unixFD(devnull)])]
            fdCalls.append(fdPeer.callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath,
                                            GeoConsentAPI.interfaceName, i % 4 < 2 ? "GetAuthorization" : "RequestOneTimeAuthorization",
                                            args, timeout: 30))
        }
        waitAll(fdCalls, on: stack.peers, timeout: 30)
        let fdErrors = fdCalls.compactMap { c -> String? in if case .failure(let e)? = c.result { return e.name } else { return nil } }
        XCTAssertEqual(fdErrors.count, 200, "every call carrying a descriptor is refused")
        XCTAssertTrue(fdErrors.allSatisfy { $0 == invalid || $0 == GeoConsentAPI.ErrorName.noAgent }, "\(Set(fdErrors))")
        lines.append("200 calls carrying unix fds -> \(Dictionary(grouping: fdErrors, by: { $0 }).mapValues(\.count))")

        // Signals to the daemon: a forged NameOwnerChanged (the bus sets the real
        // sender, so it must be ignored), and unknown signals.
        let victim = try stack.peer()
        XCTAssertEqual(try victim.hostileAuthorization().status, 0)
        let forger = try stack.peer()
        for dest in [GeoConsentAPI.busName, nil] as [String?] {
            if let m = try? Message.signal(path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                           member: "NameOwnerChanged", destination: dest) {
                try m.append([.string(victim.uniqueName), .string(victim.uniqueName), .string("")])
                XCTAssertTrue(forger.connection.send(m))
            }
        }
        if let m = try? Message.signal(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                       member: "AuthorizationChanged", destination: GeoConsentAPI.busName) {
            try m.append([.uint32(4)])
            forger.connection.send(m)
        }
        XCTAssertTrue(forger.pingDaemon())
        XCTAssertTrue(try root.hostileSessions().contains { $0.name == victim.uniqueName },
                      "a forged NameOwnerChanged ended a session")
        lines.append("forged NameOwnerChanged (unicast and broadcast) -> ignored, victim session kept")
        // The reserved Local interface and path: libdbus/the bus refuse them, whatever happens the daemon stays.
        let local = try stack.peer()
        let localBuilt = (try? Message.signal(path: "/org/freedesktop/DBus/Local", interface: "org.freedesktop.DBus.Local",
                                              member: "Disconnected", destination: GeoConsentAPI.busName))
        var localOutcome = "refused locally"
        if let m = localBuilt, local.connection.send(m) {
            stack.peers.settle(0.3)
            localOutcome = local.connection.isConnected ? "sent, ignored" : "sent, the bus dropped the sender"
        }
        XCTAssertTrue(root.pingDaemon(), "a Local.Disconnected signal from a client stopped the daemon")
        XCTAssertTrue(stack.daemon.isRunning)
        lines.append("org.freedesktop.DBus.Local.Disconnected signal from a client -> \(localOutcome); daemon serving")

        // No-reply-expected calls: nothing comes back, the daemon keeps serving.
        let quiet = try stack.peer()
        for member in ["ListConsents", "GetAuthorization", "RequestOneTimeAuthorization", "NoSuchMethod", "RegisterAgent"] {
            let args: [DBusValue] = member == "RequestOneTimeAuthorization" ? [.vardict([:])]
                : member == "RegisterAgent" ? [.string("bad path")] : []
            let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                           interface: GeoConsentAPI.interfaceName, member: member)
            try m.append(args)
            m.noReplyExpected = true
            XCTAssertTrue(quiet.connection.send(m))
        }
        stack.peers.settle(0.3)
        XCTAssertTrue(quiet.pingDaemon())
        lines.append("5 no-reply-expected calls -> no reply, daemon serving")

        let fdsAfter = Hostile.fdCount(pid)
        XCTAssertLessThanOrEqual(fdsAfter, fdsBefore + 1, "descriptors \(fdsBefore) -> \(fdsAfter)")
        XCTAssertTrue(stack.daemon.isRunning)
        for l in lines { Hostile.report("dbus-edges", l) }
        Hostile.report("dbus-edges", "tried \(lines.count) edge cases, saw the daemon answer or ignore each; "
            + "descriptors \(fdsBefore) -> \(fdsAfter), RSS \(Hostile.rssKB(pid)) kB")
    }
}

// MARK: - The generator

/// Random D-Bus traffic for the daemon, from a seed.
struct DBusFuzzer {
    enum Kind {
        case call(dest: String, path: String, iface: String?, member: String, args: [DBusValue], noReply: Bool)
        case signal(path: String, iface: String, member: String, args: [DBusValue], dest: String?)
    }
    struct Item {
        var category: String
        var kind: Kind
    }

    var rng: SeededRNG
    var victim = ""
    var daemonUniqueName: String?
    private let huge: [String]

    init(seed: UInt64) {
        rng = SeededRNG(seed: seed)
        huge = [String(repeating: "x", count: 1 << 20), String(repeating: "\u{00e9}\u{4e16}", count: 1 << 18) + "\u{1F4CD}"]
    }

    static let clientMethods: [(String, String)] = GeoConsentAPI.client.methods.map { ($0.name, $0.inSignature) }
    static let optionKeys = ["reason", "accuracy", "app-name", "parent-window", "max-age", "timeout",
                             "distance-filter", "min-interval", "uid", "x-unknown", ""]

    mutating func next(forceHuge: Bool = false) -> Item {
        let dest = (rng.chance(0.2) ? daemonUniqueName : nil) ?? GeoConsentAPI.busName
        let here = GeoConsentAPI.objectPath
        let geo = GeoConsentAPI.interfaceName
        if forceHuge {
            return Item(category: "huge", kind: .call(dest: dest, path: here, iface: geo, member: "RequestOneTimeAuthorization",
                                                      args: [.vardict(["reason": .string(rng.pick(huge))])], noReply: false))
        }
        let r = rng.int(0...99)
        var item: Item
        switch r {
        case 0..<24:
            let (m, _) = rng.pick(Self.clientMethods)
            item = Item(category: "wrong-args", kind: .call(dest: dest, path: here, iface: geo, member: m,
                                                            args: randomArgs(), noReply: false))
        case 24..<50:
            item = fuzzedContent(dest)
        case 50..<57:
            let m = rng.pick(["Confirm", "Cancel", "Release", rngMember()])
            let args: [DBusValue] = m == "Confirm"
                ? [.string(randomString()), .string(randomString()), .string(rng.pick(["one-time", "when-in-use", "x"])), randomVardict()]
                : m == "Cancel" ? [.string(randomString())] : randomArgs()
            item = Item(category: "agent-iface-on-daemon",
                        kind: .call(dest: dest, path: here, iface: GeoConsentAPI.agentInterfaceName, member: m, args: args, noReply: false))
        case 57..<64:
            let m = rng.chance(0.6) ? rng.pick(Self.clientMethods).0 : rng.pick(["Ping", "Introspect", "Get", "GetAll", "Set", "GetMachineId", rngMember()])
            item = Item(category: "no-interface", kind: .call(dest: dest, path: here, iface: nil, member: m,
                                                              args: rng.chance(0.5) ? [] : randomArgs(), noReply: false))
        case 64..<71:
            let iface: String? = rng.chance(0.3) ? nil : rng.pick([geo, ObjectServer.peer, ObjectServer.introspectable,
                                                                    ObjectServer.properties, randomInterface()])
            let m = rng.chance(0.5) ? rng.pick(Self.clientMethods).0 : rng.pick(["Ping", "Introspect", "GetAll", rngMember()])
            item = Item(category: "other-path", kind: .call(dest: dest, path: randomPath(), iface: iface, member: m,
                                                            args: rng.chance(0.5) ? [] : randomArgs(), noReply: false))
        case 71..<78:
            item = Item(category: "random-member", kind: .call(dest: dest, path: here, iface: rng.chance(0.5) ? geo : randomInterface(),
                                                               member: rngMember(), args: randomArgs(), noReply: false))
        case 78..<84:
            item = randomSignal()
        case 84..<91:
            var inner = rng.chance(0.5) ? fuzzedContent(dest) : Item(category: "", kind: .call(
                dest: dest, path: here, iface: geo, member: rng.pick(Self.clientMethods).0, args: randomArgs(), noReply: false))
            if case .call(let d, let p, let i, let m, let a, _) = inner.kind {
                inner = Item(category: "no-reply", kind: .call(dest: d, path: p, iface: i, member: m, args: a, noReply: true))
            }
            item = inner
        case 91..<98:
            item = Item(category: "deep", kind: .call(dest: dest, path: here, iface: rng.chance(0.8) ? geo : nil,
                                                      member: rng.pick(Self.clientMethods).0, args: [deepValue()], noReply: false))
        default:
            let args: [DBusValue] = rng.chance(0.5) ? [.vardict(["reason": .string(rng.pick(huge))])] : [.string(rng.pick(huge))]
            item = Item(category: "huge", kind: .call(dest: dest, path: here, iface: geo,
                                                      member: rng.pick(["RequestOneTimeAuthorization", "ResetConsent", "RegisterAgent", "GetAuthorization"]),
                                                      args: args, noReply: false))
            if rng.chance(0.6) {   // most of this slot: cheaper edge values instead of another megabyte
                item = Item(category: "deep", kind: .call(dest: dest, path: here, iface: geo,
                                                          member: rng.pick(Self.clientMethods).0, args: [deepValue()], noReply: false))
            }
        }
        return item
    }

    /// A known method with the right signature and random contents.
    private mutating func fuzzedContent(_ dest: String) -> Item {
        let here = GeoConsentAPI.objectPath
        let geo = GeoConsentAPI.interfaceName
        func call(_ m: String, _ args: [DBusValue], iface: String = GeoConsentAPI.interfaceName) -> Item {
            Item(category: "fuzzed-content", kind: .call(dest: dest, path: here, iface: iface, member: m, args: args, noReply: false))
        }
        switch rng.int(0...9) {
        case 0, 1: return call(rng.pick(["RequestOneTimeAuthorization", "RequestWhenInUseAuthorization"]), [randomVardict()])
        case 2: return call(rng.pick(["RequestLocation", "StartUpdates"]), [randomVardict()])
        case 3: return call("ResetConsent", [.string(randomString()), randomVardict()])
        case 4:
            // Mostly invalid paths as strings; rarely a valid path (the fuzzer then is this uid's "agent",
            // which answers nothing: every prompt is an error, never a grant).
            if rng.chance(0.05) { return call(rng.pick(["RegisterAgent", "UnregisterAgent"]), [.objectPath(randomPath())]) }
            return call("RegisterAgent", [.string(rng.pick(["", "x", "//", "/a/", "no/slash", "/a b", randomString()]))])
        case 5: return call(rng.pick(["GetAuthorization", "ListConsents", "ListSessions", "StopUpdates", "Revoke"]), [])
        case 6:
            let iface = rng.pick([geo, "", GeoConsentAPI.agentInterfaceName, randomString()])
            let prop = rng.pick(["Version", "Enabled", "GpsdConnected", "InUse", "", randomString()])
            return call("Get", [.string(iface), .string(prop)], iface: ObjectServer.properties)
        case 7: return call("GetAll", [.string(rng.pick([geo, "", ObjectServer.peer, randomString()]))], iface: ObjectServer.properties)
        case 8:
            let prop = rng.pick(["Version", "Enabled", "GpsdConnected", "InUse", randomString()])
            // Enabled set to true only (a false would make the rest of the run "restricted").
            let value: DBusValue = prop == "Enabled" && rng.chance(0.5) ? .bool(true) : randomValue(depth: 2)
            return call("Set", [.string(rng.pick([geo, ""])), .string(prop), .variant(value)], iface: ObjectServer.properties)
        default:
            return call(rng.pick(["Introspect", "Ping", "GetMachineId"]), [],
                        iface: rng.pick([ObjectServer.introspectable, ObjectServer.peer]))
        }
    }

    private mutating func randomSignal() -> Item {
        if rng.chance(0.3) {
            // A forged NameOwnerChanged: claims the victim left.
            return Item(category: "signal", kind: .signal(path: "/org/freedesktop/DBus", iface: "org.freedesktop.DBus",
                                                          member: "NameOwnerChanged",
                                                          args: [.string(victim), .string(victim), .string("")],
                                                          dest: rng.chance(0.5) ? GeoConsentAPI.busName : nil))
        }
        return Item(category: "signal", kind: .signal(path: rng.chance(0.5) ? GeoConsentAPI.objectPath : randomPath(),
                                                      iface: rng.pick([GeoConsentAPI.interfaceName, randomInterface(), ObjectServer.properties]),
                                                      member: rng.pick(["LocationUpdated", "AuthorizationChanged", "PropertiesChanged", rngMember()]),
                                                      args: randomArgs(), dest: rng.chance(0.8) ? GeoConsentAPI.busName : nil))
    }

    private mutating func randomArgs() -> [DBusValue] {
        (0..<rng.int(0...3)).map { _ in randomValue(depth: 3) }
    }

    private mutating func randomVardict() -> DBusValue {
        var d: [String: DBusValue] = [:]
        for _ in 0..<rng.int(0...5) {
            let key = rng.chance(0.8) ? rng.pick(Self.optionKeys) : randomString()
            d[key] = knownishValue(for: key)
        }
        return .vardict(d)
    }

    /// Usually the right type with odd values; often the wrong type.
    private mutating func knownishValue(for key: String) -> DBusValue {
        if rng.chance(0.45) { return randomValue(depth: 2) }
        switch key {
        case "reason", "app-name", "parent-window": return .string(randomString())
        case "accuracy": return .string(rng.pick(["full", "reduced", "", "FULL", "exact", randomString()]))
        case "max-age", "timeout", "distance-filter", "min-interval":
            return .double(rng.pick([0, -1, 1e-300, 5, 1e308, .infinity, -.infinity, .nan, Double.random(in: -1e6...1e6, using: &rng)]))
        case "uid": return .uint32(rng.pick([0, 65534, UInt32.max, UInt32.random(in: 0...UInt32.max, using: &rng)]))
        default: return randomValue(depth: 2)
        }
    }

    mutating func randomValue(depth: Int) -> DBusValue {
        let k = rng.int(0...(depth > 0 ? 17 : 12))
        switch k {
        case 0: return .byte(UInt8.random(in: 0...255, using: &rng))
        case 1: return .bool(rng.chance(0.5))
        case 2: return .int16(Int16.random(in: .min ... .max, using: &rng))
        case 3: return .uint16(UInt16.random(in: 0 ... .max, using: &rng))
        case 4: return .int32(Int32.random(in: .min ... .max, using: &rng))
        case 5: return .uint32(UInt32.random(in: 0 ... .max, using: &rng))
        case 6: return .int64(Int64.random(in: .min ... .max, using: &rng))
        case 7: return .uint64(UInt64.random(in: 0 ... .max, using: &rng))
        case 8: return .double(rng.pick([0, -0.0, .nan, .infinity, 1e308, Double.random(in: -1e9...1e9, using: &rng)]))
        case 9, 10: return .string(randomString())
        case 11: return .objectPath(randomPath())
        case 12: return .signature(rng.pick(["", "s", "a{sv}", "(ii)", "aaai", "v"]))
        case 13:
            let proto = randomValue(depth: depth - 1)
            return .array(element: proto.signature, Array(repeating: proto, count: rng.int(0...4)))
        case 14:
            let key = randomBasic()
            let val = randomValue(depth: depth - 1)
            return .dict(key: key.signature, value: val.signature,
                         rng.chance(0.5) ? [] : [.init(key, val)])
        case 15: return .structure((0..<rng.int(1...4)).map { _ in randomValue(depth: depth - 1) })
        case 16: return .variant(randomValue(depth: depth - 1))
        default: return randomVardict()
        }
    }

    private mutating func randomBasic() -> DBusValue {
        switch rng.int(0...4) {
        case 0: return .string(randomString())
        case 1: return .uint32(UInt32.random(in: 0 ... .max, using: &rng))
        case 2: return .int64(Int64.random(in: .min ... .max, using: &rng))
        case 3: return .objectPath(randomPath())
        default: return .byte(UInt8.random(in: 0...255, using: &rng))
        }
    }

    /// Nesting near libdbus's limits: up to 32 arrays, 32 structs, 60 variants, or 20 a{sv} in a{sv}
    /// (the bus accepts 64 levels in all, counting variants; past that it drops the sender).
    private mutating func deepValue() -> DBusValue {
        var v: DBusValue = randomBasic()
        switch rng.int(0...3) {
        case 0: for _ in 0..<rng.int(1...32) { v = .array(element: v.signature, rng.chance(0.3) ? [] : [v]) }
        case 1: for _ in 0..<rng.int(1...32) { v = .structure(rng.chance(0.5) ? [v] : [v, randomBasic()]) }
        case 2: for _ in 0..<rng.int(1...60) { v = .variant(v) }
        default: for _ in 0..<rng.int(1...20) { v = .vardict([rng.pick(Self.optionKeys): v]) }
        }
        return v
    }

    mutating func randomString() -> String {
        switch rng.int(0...9) {
        case 0: return ""
        case 1: return String(repeating: rng.pick(["a", "\u{202E}", "\u{1F4CD}", "%", "\t", "\u{7F}"]), count: rng.int(1...4096))
        case 2: return "/usr/bin/" + String((0..<rng.int(1...20)).map { _ in rng.pick(Array("abc.-_/\\\"'$;`")) })
        default:
            let alphabet = Array("abcXYZ019 -_./:%\n\r\t\u{1}\u{1f}\u{7f}\u{e9}\u{4e16}\u{1F30D}\u{FFFD}\u{200B}\"'<>&{}[]")
            return String((0..<rng.int(1...40)).map { _ in rng.pick(alphabet) })
        }
    }

    private mutating func randomPath() -> String {
        if rng.chance(0.1) { return "/" }
        let parts = (0..<rng.int(1...6)).map { _ in
            String((0..<rng.int(1...12)).map { _ in rng.pick(Array("abcdefgXYZ0123456789_")) })
        }
        return "/" + parts.joined(separator: "/")
    }

    private mutating func rngMember() -> String {
        let first = Array("abcXYZ_")
        let rest = Array("abcXYZ_0123456789")
        return String(rng.pick(first)) + String((0..<rng.int(0...40)).map { _ in rng.pick(rest) })
    }

    private mutating func randomInterface() -> String {
        (0..<rng.int(2...5)).map { _ in
            String(rng.pick(Array("abcXYZ_"))) + String((0..<rng.int(0...10)).map { _ in rng.pick(Array("abcXYZ_09")) })
        }.joined(separator: ".")
    }
}
