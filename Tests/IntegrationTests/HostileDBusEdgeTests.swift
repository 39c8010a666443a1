import XCTest
import Foundation
import GeoCore
@testable import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// D-Bus input at libdbus's limits, one group of edges per case. Each probe
/// goes on its own connection, so one the bus drops (a message it finds
/// invalid) cannot hide another; the daemon must answer or ignore each, keep
/// serving, and hold no more descriptors at the end of the case than at its start.
final class HostileDBusEdgeTests: StackTestCase {
    private var pid: pid_t = 0
    /// Pings the daemon after every probe.
    private var root: BusPeer!
    private var fdsBefore = 0
    /// One `label -> outcome` line per edge case tried.
    private var lines: [String] = []
    private let invalid = DBusError.invalidArgsName

    override func setUpWithError() throws {
        try super.setUpWithError()
        pid = stack.daemon.pid
        root = try stack.peer()
        XCTAssertTrue(root.pingDaemon())
        // A session of root's own first: a live session holds its process's
        // descriptor and the one epoll set they all sit in (SessionProcessWatch),
        // so the count starts with the set open and a case's one live session
        // (its "+ 1") adds its pidfd alone.
        // The ping after it: the watch begins after the reply is sent, and the
        // daemon answers a ping only once it has finished with the call before.
        XCTAssertEqual(try root.authorization().status, .notDetermined)
        XCTAssertTrue(root.pingDaemon())
        fdsBefore = Hostile.fdCount(pid)
        lines = []
    }

    override func tearDown() {
        root = nil
        super.tearDown()
    }

    /// Sends one call on a fresh connection; records what came back.
    private func probe(_ label: String, path: String = GeoConsentAPI.objectPath, iface: String? = GeoConsentAPI.interfaceName,
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

    /// The end of every case: descriptors flat, the daemon running; prints the case's `dbus-edges` lines.
    private func checkDaemonFlat(_ group: String, file: StaticString = #filePath, line: UInt = #line) {
        let fdsAfter = Hostile.fdCount(pid)
        XCTAssertLessThanOrEqual(fdsAfter, fdsBefore + 1, "descriptors \(fdsBefore) -> \(fdsAfter)", file: file, line: line)
        XCTAssertTrue(stack.daemon.isRunning, file: file, line: line)
        for l in lines { Hostile.report("dbus-edges", l) }
        Hostile.report("dbus-edges", "\(group): tried \(lines.count) edge cases, saw the daemon answer or ignore each; "
            + "descriptors \(fdsBefore) -> \(fdsAfter), RSS \(Hostile.rssKB(pid)) kB")
    }

    func testNestingAtLibdbusLimits() throws {
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
        checkDaemonFlat("nesting")
    }

    func testVariantNestingUpToAndPastTheBusLimit() throws {
        // Variants in variants up to the bus's limit of 64 levels in all (the a{sv}, its
        // entry and the option's variant are 3 of them). Past it our own layer refuses
        // the value and the sender keeps its connection; built without that check, the
        // bus drops the sender, and the daemon never sees the message.
        for depth in [32, 61, 62, 63, 100] {
            var v: DBusValue = .string("core")
            for _ in 0..<depth { v = .variant(v) }
            let args: [DBusValue] = [.vardict(["reason": v])]
            let p = try stack.peer()
            let t0 = secondsNow()
            let r = p.call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                           "RequestOneTimeAuthorization", args, timeout: 10)
            var outcome: String
            switch r {
            case .success: outcome = "reply"
            case .failure(let e):
                outcome = Hostile.shortError(e.name) + (depth + 3 <= 64 ? "" : " (refused locally)")
                XCTAssertEqual(e.name, invalid, "variant depth \(depth)")
                XCTAssertTrue(p.connection.isConnected, "variant depth \(depth)")
            }
            if depth + 3 > 64 {
                let unchecked = try stack.peer()
                let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                               interface: GeoConsentAPI.interfaceName, member: "RequestOneTimeAuthorization")
                try m.append(args, nestingLimit: .max)
                var sent: Result<Message, DBusError>?
                unchecked.connection.call(m, timeout: 10) { sent = $0 }
                stack.peers.pump(timeout: 15) { sent != nil }
                if case .failure(let e) = sent {
                    XCTAssertEqual(e.name, DBusError.disconnectedName, "variant depth \(depth), unchecked")
                    outcome += "; sent unchecked: " + Hostile.shortError(e.name)
                        + (unchecked.connection.isConnected ? "" : " (the bus dropped the sender)")
                } else {
                    XCTFail("variant depth \(depth), unchecked: \(String(describing: sent))")
                }
            }
            XCTAssertLessThan(secondsNow() - t0, 5, "variant depth \(depth): the call hung")
            XCTAssertTrue(root.pingDaemon(), "daemon gone after variant depth \(depth)")
            lines.append("variant nesting \(depth) in a{sv} (total depth \(depth + 3)) -> \(outcome)")
        }
        checkDaemonFlat("variant nesting")
    }

    func testWrongValueTypesForEveryKnownOptionKey() throws {
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
        checkDaemonFlat("option types")
    }

    func testHugeStrings() throws {
        // 1 MB and 8 MB.
        let mb = String(repeating: "\u{1F30D}geo", count: 1 << 18)   // ~1.75 MB of UTF-8
        // Strings a waiting call would keep, or a prompt would show, are refused past their caps.
        probe("1.75 MB reason", "RequestOneTimeAuthorization", [.vardict(["reason": .string(mb)])], expect: [invalid])
        probe("1.75 MB app-id to ResetConsent", "ResetConsent", [.string(mb), .vardict([:])], expect: [invalid])
        let caps = [("reason", OptionDictionary.MaxBytes.reason), ("app-name", OptionDictionary.MaxBytes.appName),
                    ("parent-window", OptionDictionary.MaxBytes.parentWindow)]
        for (key, max) in caps {
            probe("\(key) of \(max) bytes", "RequestOneTimeAuthorization",
                  [.vardict([key: .string(String(repeating: "r", count: max))])], expect: [GeoConsentAPI.ErrorName.noAgent])
            probe("\(key) of \(max + 1) bytes", "RequestOneTimeAuthorization",
                  [.vardict([key: .string(String(repeating: "r", count: max + 1))])], expect: [invalid])
        }
        probe("app id of 4096 bytes to ResetConsent", "ResetConsent",
              [.string(String(repeating: "a", count: OptionDictionary.MaxBytes.appID)), .vardict([:])], expect: ["ok"])
        probe("app id of 4097 bytes to ResetConsent", "ResetConsent",
              [.string(String(repeating: "a", count: OptionDictionary.MaxBytes.appID + 1)), .vardict([:])], expect: [invalid])
        probe("8 MB member-less junk to GetAuthorization", "GetAuthorization",
              [.string(String(repeating: "z", count: 8 << 20))], expect: [invalid])
        probe("1 MB interface name in Properties.Get", iface: ObjectServer.properties, "Get",
              [.string(String(repeating: "i", count: 1 << 20)), .string("Enabled")], expect: [DBusError.unknownPropertyName])
        checkDaemonFlat("huge strings")
    }

    func testInvalidAgentObjectPaths() throws {
        // Sent as 's': 'o' cannot carry them.
        for bad in ["", "not a path", "//", "/trailing/", "/a//b", "/\u{e4}", "relative/x", "/a-b", "/" + String(repeating: "a", count: 1 << 20)] {
            probe("RegisterAgent s'\(bad.prefix(12))\(bad.count > 12 ? "…(\(bad.count))" : "")'", "RegisterAgent",
                  [.string(bad)], expect: [invalid])
        }
        probe("RegisterAgent ao", "RegisterAgent", [.array(element: "o", [.objectPath("/a")])], expect: [invalid])
        probe("UnregisterAgent of a path never registered", "UnregisterAgent", [.objectPath("/nobody/here")], expect: [invalid])
        checkDaemonFlat("agent paths")
    }

    func testAgentInterfaceMissingInterfaceAndOtherPaths() throws {
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
        checkDaemonFlat("interfaces and paths")
    }

    func testUnixFDsAreRefusedAndClosed() throws {
        // The daemon must close every descriptor it is handed.
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
        checkDaemonFlat("unix fds")
    }

    func testForgedAndReservedSignalsAreIgnored() throws {
        // A forged NameOwnerChanged (the bus sets the real sender, so it must be
        // ignored), and unknown signals.
        let victim = try stack.peer()
        XCTAssertEqual(try victim.authorization().status, .notDetermined)
        let forger = try stack.peer()
        for dest in [GeoConsentAPI.busName, nil] as [String?] {
            if let m = try? Message.signal(path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                           member: "NameOwnerChanged", destination: dest) {
                try m.append([.string(victim.uniqueName), .string(victim.uniqueName), .string("")])
                XCTAssertTrue(forger.connection.send(m))
            }
        }
        if let m = try? Message.signal(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                       member: AuthorizationChangedSignal.member, destination: GeoConsentAPI.busName) {
            try m.append([.uint32(4)])
            forger.connection.send(m)
        }
        XCTAssertTrue(forger.pingDaemon())
        XCTAssertTrue(try root.sessions().contains { $0.name == victim.uniqueName },
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
        checkDaemonFlat("signals")
    }

    func testNoReplyExpectedCallsGetNothingBack() throws {
        // Nothing comes back, the daemon keeps serving.
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
        checkDaemonFlat("no-reply calls")
    }
}
