import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Shipping geoconsent as a system service: the hardened unit, the
/// system bus policy on a real dbus-daemon, the gpsd lockdown as a property
/// (in a network namespace, without systemd), `make install`, the man pages and
/// the default config.
///
/// Parts that switch uids (`setpriv`) or create namespaces (`unshare`) need
/// root, as CI runs; elsewhere they are skipped with a message saying so. Tools
/// that are missing (systemd-analyze, gdbus, groff, make) skip only the part
/// that needs them.
final class ServiceTests: XCTestCase {
    static let root = TestPaths.sourceRoot
    static let unitFile = root + "/systemd/geoconsentd.service"
    static let policyFile = root + "/dbus-policy/org.geoconsent.GeoConsent1.conf"
    static let geoCluePolicyFile = root + "/dbus-policy/org.freedesktop.GeoClue2.geoconsent.conf"
    /// The daemon's side of the gpsd lockdown (make install LOCKDOWN=1, the package geoconsent-gpsd-lockdown).
    static let lockdownDropIn = root + "/systemd/geoconsentd.service.d/gpsd-lockdown.conf"
    /// Our bars for `systemd-analyze security`: the unit as shipped rates 1.6
    /// (the machine's network, loopback only: PrivateNetwork= is 0.5 of it),
    /// and 1.1 with the gpsd lockdown's drop-in.
    static let maxExposure = 1.7
    static let maxExposureWithLockdown = 1.5

    // MARK: - systemd-analyze

    func testUnitSecurityExposureWithAndWithoutTheGpsdLockdown() throws {
        let analyze = try requireTool("systemd-analyze")
        // The settings this design rests on must be what the assessment saw.
        let items = ["User=/DynamicUser=", "ProtectSystem=", "SystemCallFilter=~@debug",
                     "CapabilityBoundingSet=~CAP_SYS_ADMIN", "PrivateTmp=", "ProtectProc="]
        func assess(_ unit: String, max: Double, satisfied: [String], open: [String], _ what: String) throws {
            let r = try runLogged(analyze, ["security", "--offline=yes", "--no-pager", unit])
            let all = r.output + r.log
            guard let exposure = parseExposure(all) else {
                return XCTFail("\(what): no 'Overall exposure level' in systemd-analyze output:\n\(all)")
            }
            let lines = all.split(separator: "\n")
            let failing = lines.filter { $0.hasPrefix("✗") }.joined(separator: "\n")
            XCTAssertLessThanOrEqual(exposure, max, "\(what): exposure \(exposure) > \(max); open items:\n\(failing)")
            for item in satisfied {
                XCTAssertTrue(lines.contains { $0.hasPrefix("✓ " + item) }, "\(what): \(item) not satisfied:\n\(all)")
            }
            for item in open {
                XCTAssertTrue(lines.contains { $0.hasPrefix("✗ " + item) }, "\(what): \(item) unexpectedly satisfied:\n\(all)")
            }
        }
        // The offline assessment also reads the drop-ins in UNIT.d/ beside the unit, and
        // systemd/geoconsentd.service.d holds the optional ones: the unit goes to a directory
        // of its own, first alone, then with the lockdown's drop-in.
        let dir = try TempDir()
        try FileManager.default.copyItem(atPath: ServiceTests.unitFile, toPath: dir.file("geoconsentd.service"))
        // As shipped: gpsd as the distribution has it, reached on the machine's loopback.
        try assess(dir.file("geoconsentd.service"), max: ServiceTests.maxExposure, satisfied: items,
                   open: ["PrivateNetwork="], "geoconsentd.service")
        try makeDirs(dir.file("geoconsentd.service.d"))
        try FileManager.default.copyItem(atPath: ServiceTests.lockdownDropIn,
                                         toPath: dir.file("geoconsentd.service.d/gpsd-lockdown.conf"))
        try assess(dir.file("geoconsentd.service"), max: ServiceTests.maxExposureWithLockdown,
                   satisfied: items + ["PrivateNetwork="], open: [], "geoconsentd.service + gpsd-lockdown.conf")
    }

    func testUnitAndGpsdDropInsPassSystemdAnalyzeVerify() throws {
        let analyze = try requireTool("systemd-analyze")
        let unit = try String(contentsOfFile: ServiceTests.unitFile, encoding: .utf8)
        // make install rewrites exactly this line; keep it that way.
        XCTAssertTrue(unit.contains("\nExecStart=/usr/bin/geoconsentd\n"), "ExecStart= must be /usr/bin/geoconsentd in the source unit")

        // verify wants ExecStart= to exist and runs `man` for Documentation=:
        // a copy pointing at the built daemon, and our man pages on MANPATH.
        let dir = try TempDir()
        let units = dir.file("units")
        try makeDirs(units + "/gpsd.service.d", units + "/gpsd.socket.d", units + "/geoconsentd.service.d")
        let daemon = TestPaths.binDir + "/geoconsentd"
        try unit.replacingOccurrences(of: "\nExecStart=/usr/bin/geoconsentd\n", with: "\nExecStart=\(daemon)\n")
            .write(toFile: units + "/geoconsentd.service", atomically: true, encoding: .utf8)
        for d in ["gpsd.service.d", "gpsd.socket.d"] {
            try FileManager.default.copyItem(atPath: ServiceTests.root + "/systemd/\(d)/geoconsent.conf",
                                             toPath: units + "/\(d)/geoconsent.conf")
        }
        // The lockdown's drop-in of the daemon's unit too.
        try FileManager.default.copyItem(atPath: ServiceTests.lockdownDropIn,
                                         toPath: units + "/geoconsentd.service.d/gpsd-lockdown.conf")
        let manPath = try manTree(in: dir)
        var targets = [units + "/geoconsentd.service"]
        // The drop-ins are checked together with gpsd's own units, when gpsd is installed.
        var gpsdUnits = 0
        for name in ["gpsd.service", "gpsd.socket"] {
            if let found = ["/lib/systemd/system/", "/usr/lib/systemd/system/"].map({ $0 + name })
                .first(where: { FileManager.default.fileExists(atPath: $0) }) {
                try FileManager.default.copyItem(atPath: found, toPath: units + "/" + name)
                targets.append(units + "/" + name)
                gpsdUnits += 1
            }
        }
        let env = ["MANPATH": manPath + ":", "SYSTEMD_LOG_COLOR": "0"]
        let r = try runLogged(analyze, ["verify"] + targets, environment: env, timeout: 60)
        let ours = (r.output + r.log).split(separator: "\n").filter {
            $0.contains("geoconsent") || $0.contains("gpsd")
        }
        XCTAssertEqual(r.status, 0, "systemd-analyze verify failed:\n\(r.output)\(r.log)")
        XCTAssertTrue(ours.isEmpty, "systemd-analyze verify complains about our units:\n\(ours.joined(separator: "\n"))")

        // Canary: the same run must notice a bad key in a drop-in, or the
        // clean result above would prove nothing about the drop-ins.
        if gpsdUnits == 2 {
            let dropIn = units + "/gpsd.socket.d/geoconsent.conf"
            let text = try String(contentsOfFile: dropIn, encoding: .utf8)
            try (text + "NoSuchSettingForTheCanary=1\n").write(toFile: dropIn, atomically: true, encoding: .utf8)
            let c = try runLogged(analyze, ["verify"] + targets, environment: env, timeout: 60)
            XCTAssertTrue((c.output + c.log).contains("NoSuchSettingForTheCanary"),
                          "verify did not read the gpsd.socket drop-in:\n\(c.output)\(c.log)")
        } else {
            print("ServiceTests: gpsd's units are not installed; verified geoconsentd.service alone")
        }
    }

    // MARK: - bus policy on a real dbus-daemon

    func testPolicyOnlyServiceUserAndRootOwnTheName() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        let name = GeoConsentAPI.busName
        let requestName = ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "RequestName", "su", name, "0"]
        let nobody = try bus.busctl(requestName, as: ServiceTests.nobody)
        XCTAssertNotEqual(nobody.status, 0, "nobody owned \(name): \(nobody.output)")
        XCTAssertTrue(nobody.log.contains("Access denied"), "expected AccessDenied, got: \(nobody.log)")
        // gdbus too (a second client library), when installed.
        if let gdbus = TestPaths.findExecutable("gdbus") {
            let g = try runLogged(setpriv, ServiceTests.nobody.setprivArgs() +
                                  [gdbus, "call", "--address", bus.address, "--dest", "org.freedesktop.DBus",
                                   "--object-path", "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.RequestName",
                                   name, "0"])
            XCTAssertNotEqual(g.status, 0)
            XCTAssertTrue(g.log.contains("org.freedesktop.DBus.Error.AccessDenied")
                          && g.log.contains("is not allowed to own the service \"\(name)\" due to security policies"), g.log)
        }
        // The service user and root may (1 = primary owner).
        for who in [user, ServiceTests.rootUser] {
            let r = try bus.busctl(requestName, as: who)
            XCTAssertEqual(r.status, 0, "\(who.name): \(r.log)")
            XCTAssertEqual(r.output.trimmingCharacters(in: .whitespacesAndNewlines), "u 1", who.name)
        }
    }

    func testPolicyAnyoneCallsTheDaemonRunningAsTheServiceUser() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        // The real daemon, as the service user with CAP_SYS_PTRACE only, as the unit runs it.
        let daemon = try bus.startDaemon(as: user, withPtrace: true)
        defer { daemon.stop() }
        let G = [GeoConsentAPI.busName, GeoConsentAPI.objectPath]

        // nobody: the client interface and the standard ones go through.
        let auth = try bus.busctl(["call"] + G + [GeoConsentAPI.interfaceName, "GetAuthorization"], as: ServiceTests.nobody)
        XCTAssertEqual(auth.status, 0, "GetAuthorization as nobody: \(auth.log)\ndaemon:\n\(daemon.log())")
        XCTAssertTrue(auth.output.hasPrefix("ua{sv} 0 "), auth.output)
        // Identified from /proc across uids: needs the capability (see below).
        let busctl = (try? FileManager.default.destinationOfSymbolicLink(atPath: bus.busctlPath)) ?? bus.busctlPath
        XCTAssertTrue(auth.output.contains("\"app-id\" s \"") && auth.output.contains("busctl\""),
                      "app-id should be busctl's path (\(busctl)): \(auth.output)")
        let version = try bus.busctl(["get-property"] + G + [GeoConsentAPI.interfaceName, "Version"], as: ServiceTests.nobody)
        XCTAssertEqual(version.output.trimmingCharacters(in: .whitespacesAndNewlines), "s \"0.1.0\"", version.log)
        let ping = try bus.busctl(["call"] + G + ["org.freedesktop.DBus.Peer", "Ping"], as: ServiceTests.nobody)
        XCTAssertEqual(ping.status, 0, ping.log)
        let introspect = try bus.busctl(["introspect", "--xml-interface"] + G, as: ServiceTests.nobody)
        XCTAssertTrue(introspect.output.contains("<interface name=\"org.geoconsent.GeoConsent1\">"), introspect.log)
        // Any other interface is refused by the bus itself (default deny), not by the daemon.
        let other = try bus.busctl(["call"] + G + ["org.example.NotAllowed", "Anything"], as: ServiceTests.nobody)
        XCTAssertNotEqual(other.status, 0)
        XCTAssertTrue(other.log.contains("Access denied"), other.log)

        // The daemon (service user) may call nobody's consent agent: the whole
        // button flow works under the policy.
        let agent = try ChildProcess(executable: setpriv,
                                     arguments: ServiceTests.nobody.setprivArgs() +
                                        [TestPaths.binDir + "/geoconsentctl", "--bus", bus.address, "agent", "--auto", "allow-once"],
                                     logPath: bus.dir.file("agent.log"), captureStdout: true)
        defer { agent.stop() }
        XCTAssertTrue(agent.readStdoutLine(timeout: 10)?.contains("registered") ?? false,
                      "agent did not register: \(tailOf(bus.dir.file("agent.log")))")
        let tap = try bus.busctl(["--timeout=30", "call"] + G + [GeoConsentAPI.interfaceName, "RequestOneTimeAuthorization", "a{sv}", "0"],
                                 as: ServiceTests.nobody, timeout: 40)
        XCTAssertEqual(tap.output.trimmingCharacters(in: .whitespacesAndNewlines), "u 4",
                       "tap: \(tap.log)\ndaemon:\n\(daemon.log())")
        XCTAssertTrue(agent.readStdoutLine(timeout: 5)?.contains("allow-once") ?? false, "the agent was not asked")
    }

    /// Why the unit keeps CAP_SYS_PTRACE: without it the daemon cannot read
    /// another uid's /proc/PID/exe and refuses the caller.
    func testWithoutCapSysPtraceCallersOfOtherUsersAreRefused() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        let daemon = try bus.startDaemon(as: user, withPtrace: false)
        defer { daemon.stop() }
        let r = try bus.busctl(["call", GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                "GetAuthorization"], as: ServiceTests.nobody)
        XCTAssertNotEqual(r.status, 0, "resolved nobody's caller without CAP_SYS_PTRACE? \(r.output)")
        XCTAssertTrue(r.log.contains("Access denied") || r.log.contains("AccessDenied"), r.log)
    }

    func testPolicyOnlyServiceUserAndRootCallConsentAgents() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        let peers = PeerLoop()
        let peer = try peers.connect(bus.address)
        let agent = TestAgent(peer: peer, behaviour: .answer("deny"))
        func cancel(_ id: String, as who: ServiceUser) throws -> (status: Int32?, log: String) {
            let log = bus.dir.file("cancel-\(id).log")
            let p = try ChildProcess(executable: setpriv,
                                     arguments: who.setprivArgs() + [bus.busctlPath, "--address=\(bus.address)", "call",
                                        peer.uniqueName, TestAgent.path, GeoConsentAPI.agentInterfaceName, "Cancel", "s", id],
                                     logPath: log, captureStdout: true)
            // The agent lives in this thread: pump its loop while busctl waits.
            peers.pump(timeout: 15) { !p.isRunning }
            p.stop()
            return (p.exitCode, tailOf(log))
        }
        let denied = try cancel("from-nobody", as: ServiceTests.nobody)
        XCTAssertNotEqual(denied.status, 0)
        XCTAssertTrue(denied.log.contains("Access denied"), denied.log)
        let allowed = try cancel("from-service-user", as: user)
        XCTAssertEqual(allowed.status, 0, allowed.log)
        let fromRoot = try cancel("from-root", as: ServiceTests.rootUser)
        XCTAssertEqual(fromRoot.status, 0, fromRoot.log)
        XCTAssertEqual(agent.cancels, ["from-service-user", "from-root"])
    }

    /// dbus-daemon matches a rule's `send_interface` against messages that carry
    /// no interface too: a default-context deny with `send_interface` alone would
    /// refuse every interface-less call to every other service once our file is
    /// installed. Such a call, from an unprivileged uid, must still get through;
    /// an interface-less call to a consent agent must still be refused.
    func testPolicyLetsCallsWithoutInterfaceReachOtherServices() throws {
        let (bus, _) = try policyBus()
        defer { bus.stop() }
        // Debian's python3 with PyGObject (scripts/deps.sh): GDBus sends a method
        // call without an interface field when given None.
        let script = """
        import sys
        from gi.repository import Gio
        c = Gio.DBusConnection.new_for_address_sync(sys.argv[1], Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
                                                    | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        m = Gio.DBusMessage.new_method_call(sys.argv[2], sys.argv[3], None, sys.argv[4])
        r, _ = c.send_message_with_reply_sync(m, 0, 10000, None)
        print(r.get_error_name() or "ok", r.get_body())
        """
        // The bus driver is no such service: system.conf itself denies interface-less
        // calls to it (its deny of org.freedesktop.DBus.Debug.Stats matches them).
        let peers = PeerLoop()
        let other = try peers.connect(bus.address)
        XCTAssertEqual(try other.requestName(PolicyBus.otherService), .primaryOwner)
        // Any object will do for the other service; it serves one at TestAgent.path.
        _ = TestAgent(peer: other, behaviour: .never)
        func callPumping(_ dest: String, _ path: String, _ member: String) throws -> String {
            let p = try ChildProcess(executable: setpriv,
                                     arguments: ServiceTests.nobody.setprivArgs() +
                                        ["/usr/bin/python3", "-c", script, bus.address, dest, path, member],
                                     logPath: bus.dir.file("call-\(member).log"), captureStdout: true)
            defer { p.stop() }
            // The callee lives in this thread: pump its loop while the child waits.
            peers.pump(timeout: 15) { !p.isRunning }
            return (p.readStdoutLine(timeout: 1) ?? "") + tailOf(bus.dir.file("call-\(member).log"))
        }
        let reached = try callPumping(PolicyBus.otherService, TestAgent.path, "Introspect")
        XCTAssertTrue(reached.hasPrefix("ok ('<!DOCTYPE"), "an interface-less call to another service was refused: \(reached)")
        // A consent agent (a connection serving the Agent interface) stays unreachable.
        let agent = TestAgent(peer: try peers.connect(bus.address), behaviour: .answer("deny"))
        let answer = try callPumping(agent.peer.uniqueName, TestAgent.path, "Cancel")
        XCTAssertTrue(answer.hasPrefix("org.freedesktop.DBus.Error.AccessDenied"), "agent reached without interface: \(answer)")
        XCTAssertEqual(agent.cancels, [])
    }

    func testPolicyGpsdSignalsReachOnlyServiceUserAndRoot() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        let gdbus = try requireTool("gdbus")
        let peers = PeerLoop()
        // The emitter stands in for gpsd (any process may send signals); one
        // connection, so the marker after the fix is delivered after it.
        let gpsd = try peers.connect(bus.address)
        let rootListener = try peers.connect(bus.address)
        try rootListener.addMatch("type='signal',interface='org.gpsd'")

        func listen(_ who: ServiceUser) throws -> ChildProcess {
            try ChildProcess(executable: setpriv,
                             arguments: who.setprivArgs() + [gdbus, "monitor", "--address", bus.address, "--dest", gpsd.uniqueName],
                             logPath: bus.dir.file("monitor-\(who.name).log"), captureStdout: true,
                             environment: ["HOME": "/nonexistent"])
        }
        let listeners = [(user.name, try listen(user)), ("nobody", try listen(ServiceTests.nobody))]
        defer { for (_, l) in listeners { l.stop() } }
        var lines: [String: [String]] = [:]
        func drain() {
            for (name, l) in listeners {
                while let line = l.readStdoutLine(timeout: 0.01) { lines[name, default: []].append(line) }
            }
        }
        func seen(_ token: String, by name: String) -> Bool { lines[name, default: []].contains { $0.contains(token) } }
        func emit(_ interface: String, _ member: String, _ args: [DBusValue]) {
            gpsd.server.emit(path: "/org/gpsd", interface: interface, member: member, args)
            gpsd.connection.flush()
        }

        // Both listeners are subscribed once they see a marker.
        let deadline = Date().addingTimeInterval(15)
        while !(seen("'ready'", by: user.name) && seen("'ready'", by: "nobody")) {
            XCTAssertLessThan(Date(), deadline, "listeners never subscribed: \(lines)\n\(bus.log())")
            if Date() > deadline { return }
            emit("org.geoconsent.Test", "Marker", [.string("ready")])
            peers.pump(timeout: 0.1) { false }
            drain()
        }
        emit("org.gpsd", "fix", [.double(1796219748), .double(52.52), .double(13.40)])
        emit("org.geoconsent.Test", "Marker", [.string("after-fix")])
        let gotAll = peers.pump(timeout: 15) {
            drain()
            return seen("'after-fix'", by: user.name) && seen("'after-fix'", by: "nobody")
                && !rootListener.signals(named: "fix").isEmpty
        }
        XCTAssertTrue(gotAll, "markers missing: \(lines)")
        XCTAssertTrue(seen("org.gpsd.fix", by: user.name), "the service user must receive org.gpsd: \(lines[user.name] ?? [])")
        XCTAssertFalse(seen("org.gpsd.fix", by: "nobody"), "nobody received org.gpsd: \(lines["nobody"] ?? [])")
        XCTAssertEqual(rootListener.signals(named: "fix").count, 1, "root must receive org.gpsd")
    }

    func testPolicyOnlyServiceUserEmitsClientInterfaceSignals() throws {
        let (bus, user) = try policyBus()
        defer { bus.stop() }
        let gdbus = try requireTool("gdbus")
        let peers = PeerLoop()
        let app = try peers.connect(bus.address)
        try app.addMatch("type='signal',interface='\(GeoConsentAPI.interfaceName)'")
        func forge(as who: ServiceUser, latitude: Double) throws -> (status: Int32?, log: String) {
            try runLogged(setpriv, who.setprivArgs() + [gdbus, "emit", "--address", bus.address, "--dest", app.uniqueName,
                                                         "--object-path", GeoConsentAPI.objectPath,
                                                         "--signal", GeoConsentAPI.interfaceName + ".LocationUpdated",
                                                         "{'latitude': <\(latitude)>}"],
                          environment: ["HOME": "/nonexistent"]).asStatusAndLog
        }
        _ = try forge(as: ServiceTests.nobody, latitude: 66.6)
        XCTAssertEqual(try forge(as: user, latitude: 1.5).status, 0)
        XCTAssertNotNil(app.waitForSignal("LocationUpdated", timeout: 10), "the service user's signal did not arrive")
        peers.settle(0.3)
        let latitudes = app.signals(named: "LocationUpdated").compactMap { $0.arguments().first?.vardictValue?["latitude"] }
        XCTAssertEqual(latitudes, [.double(1.5)], "a forged LocationUpdated from nobody got through")
        XCTAssertTrue(bus.log().contains("Rejected send message"), bus.log())
    }

    // MARK: - gpsd lockdown, without systemd

    /// What `PrivateNetwork=`/`PrivateIPC=` + `JoinsNamespaceOf=` do for gpsd
    /// and geoconsentd, rebuilt by hand: both in a network (and IPC) namespace
    /// of their own, the bus reachable because it is a file-system socket.
    func testGpsdInPrivateNetworkNamespaceIsReachableOnlyThroughTheBus() throws {
        try requireRoot("creating network namespaces")
        let unshare = try requireTool("unshare"), nsenter = try requireTool("nsenter")
        let ip = try requireTool("ip")
        let gpsdExe = try requireTool("gpsd", candidates: ["/usr/sbin/gpsd"])
        let dir = try TempDir()
        let bus = try TestBus()
        defer { bus.stop() }
        XCTAssertTrue(bus.address.hasPrefix("unix:path="), "the bus must be a file-system socket: \(bus.address)")

        // The namespace holder: a process that only keeps the namespaces alive.
        // They vanish with the last process in them, so stopping the children
        // (also on failure, by the harness's registry) cleans up everything.
        let holder = try ChildProcess(executable: unshare,
                                      arguments: ["--net", "--ipc", "--", "/bin/sh", "-c",
                                                  "\(ip) link set lo up && echo up && exec sleep 600"],
                                      logPath: dir.file("holder.log"), captureStdout: true)
        defer { holder.stop() }
        guard holder.readStdoutLine(timeout: 10) == "up" else {
            throw XCTSkip("cannot create a network namespace here (unshare --net): \(tailOf(dir.file("holder.log")))")
        }
        let ns = ["--net=/proc/\(holder.pid)/ns/net", "--ipc=/proc/\(holder.pid)/ns/ipc", "--"]
        func inside(_ args: [String], log: String, stdout: Bool = false) throws -> ChildProcess {
            try ChildProcess(executable: nsenter, arguments: ns + args, logPath: dir.file(log), captureStdout: stdout)
        }

        let port = try FreePort.pick(), udp = try FreePort.pick()
        let gpsd = try inside([gpsdExe, "-N", "-n", "-b", "-S", String(port), "udp://127.0.0.1:\(udp)"], log: "gpsd.log")
        defer { gpsd.stop() }
        // Positive control: inside the namespace gpsd's port answers...
        var listening = false
        for _ in 0..<200 where !listening {
            let probe = try ChildProcess.run(nsenter, ns + ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"], timeout: 5)
            listening = probe.status == 0
            if !listening { usleep(20_000) }
        }
        XCTAssertTrue(listening, "gpsd never listened inside the namespace: \(tailOf(dir.file("gpsd.log")))")
        // ...and from here, outside, it does not.
        XCTAssertFalse(tcpConnects(port: port), "gpsd's port \(port) is reachable from outside the namespace")
        // Its shared-memory export exists only in its IPC namespace (PrivateIPC=).
        var insideSegments = ""
        for _ in 0..<100 {
            insideSegments = try ChildProcess.run(nsenter, ns + ["/bin/cat", "/proc/sysvipc/shm"]).output
            if shmSegments(insideSegments, createdBy: gpsd.pid) > 0 { break }
            usleep(20_000)
        }
        if shmSegments(insideSegments, createdBy: gpsd.pid) > 0 {
            let outside = (try? String(contentsOfFile: "/proc/sysvipc/shm", encoding: .utf8)) ?? ""
            XCTAssertEqual(shmSegments(outside, createdBy: gpsd.pid), 0, "gpsd's shared memory is visible outside")
        } else {
            print("ServiceTests: this gpsd exports no shared memory; IPC isolation not checked")
        }

        // NMEA comes from inside too (gpsd's UDP source is on the private loopback).
        let replay = try inside([TestPaths.binDir + "/nmea-replay", "--loop", "--now", "--rate", "5", "--quiet",
                                 "127.0.0.1:\(udp)", TestPaths.trackFile], log: "replay.log")
        defer { replay.stop() }

        // geoconsentd inside, on the bus outside.
        let state = dir.file("state")
        mkdir(state, 0o700)
        try "".write(toFile: dir.file("geoconsent.conf"), atomically: true, encoding: .utf8)
        let daemon = try inside([TestPaths.binDir + "/geoconsentd", "--bus", bus.address, "--gpsd", "127.0.0.1:\(port)",
                                 "--config", dir.file("geoconsent.conf"), "--state-dir", state], log: "geoconsentd.log")
        defer { daemon.stop() }
        try waitForName(bus.address, process: daemon, log: dir.file("geoconsentd.log"))
        let ourNet = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")
        let daemonNet = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon.pid)/ns/net")
        XCTAssertNotEqual(ourNet, daemonNet, "the daemon is not in its own network namespace")

        // A client outside gets fixes through the bus, with consent.
        let agent = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                     arguments: ["--bus", bus.address, "agent", "--auto", "allow-once"],
                                     logPath: dir.file("agent.log"), captureStdout: true)
        defer { agent.stop() }
        XCTAssertTrue(agent.readStdoutLine(timeout: 10)?.contains("registered") ?? false, tailOf(dir.file("agent.log")))
        let ctlLog = dir.file("locate.log")
        let locate = try ChildProcess.run(TestPaths.binDir + "/geoconsentctl",
                                          ["--bus", bus.address, "--json", "locate", "--timeout", "20"],
                                          timeout: 40, logPath: ctlLog)
        XCTAssertEqual(locate.status, 0, "locate failed: \(tailOf(ctlLog))\ndaemon:\n\(tailOf(dir.file("geoconsentd.log")))")
        let fix = (try? JSONSerialization.jsonObject(with: Data(locate.output.utf8))) as? [String: Any]
        XCTAssertNotNil(fix?["latitude"] as? Double, "no latitude in: \(locate.output)")
        XCTAssertEqual(fix?["accuracy-authorization"] as? String, "full")
        // gpsd is still out of reach from here while the daemon is connected to it.
        XCTAssertFalse(tcpConnects(port: port))
    }

    // MARK: - make install

    func testMakeInstallIntoDestdirShipsTheWholeTree() throws {
        let make = try requireTool("make")
        let stage = try TempDir()
        let dest = stage.path
        let log = stage.file("make.log")
        let r = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "install", "DESTDIR=\(dest)", "PREFIX=/usr",
                                            "BINDIR_SRC=\(TestPaths.binDir)"], timeout: 120, logPath: log, environment: cleanMake)
        XCTAssertEqual(r.status, 0, "make install failed:\n\(r.output)\(tailOf(log))")

        let expected = [
            "/usr/bin/geoconsentd", "/usr/bin/geoconsentctl",
            "/usr/lib/systemd/system/geoconsentd.service",
            "/usr/lib/sysusers.d/geoconsent.conf",
            "/usr/share/dbus-1/system.d/org.geoconsent.GeoConsent1.conf",
            "/usr/share/dbus-1/system-services/org.geoconsent.GeoConsent1.service",
            "/usr/share/dbus-1/interfaces/org.geoconsent.GeoConsent1.xml",
            "/etc/geoconsent/geoconsent.conf",
            "/usr/share/man/man8/geoconsentd.8", "/usr/share/man/man1/geoconsentctl.1",
            "/usr/share/man/man5/geoconsent.conf.5",
            "/usr/libexec/geoconsent/geoconsent-wifi-helper",
            "/usr/lib/systemd/system/geoconsent-wifi.socket", "/usr/lib/systemd/system/geoconsent-wifi@.service",
            "/usr/share/man/man8/geoconsent-wifi-helper.8",
            "/usr/share/locale/ko/LC_MESSAGES/geoconsent.mo", "/usr/share/locale/de/LC_MESSAGES/geoconsent.mo",
        ]
        for f in expected {
            XCTAssertTrue(FileManager.default.fileExists(atPath: dest + f), "missing \(f)")
        }
        // The gpsd lockdown only with LOCKDOWN=1: without it gpsd is left as it is.
        let lockdown = [("systemd/gpsd.service.d/geoconsent.conf", "/usr/lib/systemd/system/gpsd.service.d/geoconsent.conf"),
                        ("systemd/gpsd.socket.d/geoconsent.conf", "/usr/lib/systemd/system/gpsd.socket.d/geoconsent.conf"),
                        ("systemd/geoconsentd.service.d/gpsd-lockdown.conf",
                         "/usr/lib/systemd/system/geoconsentd.service.d/gpsd-lockdown.conf")]
        for (_, dst) in lockdown {
            XCTAssertFalse(FileManager.default.fileExists(atPath: dest + dst), "\(dst) installed without LOCKDOWN=1")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dest + "/usr/lib/systemd/system/gpsd.service.d"),
                       "make install made gpsd.service.d without LOCKDOWN=1")
        let fm = FileManager.default
        for exe in ["/usr/bin/geoconsentd", "/usr/bin/geoconsentctl", "/usr/libexec/geoconsent/geoconsent-wifi-helper"] {
            XCTAssertEqual(access(dest + exe, X_OK), 0, "\(exe) not executable")
        }
        // Shipped files are installed unchanged, except the unit's ExecStart=.
        let same = [("dbus-policy/org.geoconsent.GeoConsent1.conf", "/usr/share/dbus-1/system.d/org.geoconsent.GeoConsent1.conf"),
                    ("dbus-policy/org.geoconsent.GeoConsent1.service", "/usr/share/dbus-1/system-services/org.geoconsent.GeoConsent1.service"),
                    ("interfaces/org.geoconsent.GeoConsent1.xml", "/usr/share/dbus-1/interfaces/org.geoconsent.GeoConsent1.xml"),
                    ("systemd/geoconsent.sysusers", "/usr/lib/sysusers.d/geoconsent.conf"),
                    ("systemd/geoconsent-wifi.socket", "/usr/lib/systemd/system/geoconsent-wifi.socket"),
                    ("systemd/geoconsent-wifi@.service", "/usr/lib/systemd/system/geoconsent-wifi@.service"),
                    ("config/geoconsent.conf", "/etc/geoconsent/geoconsent.conf")]
        for (src, dst) in same {
            XCTAssertTrue(fm.contentsEqual(atPath: ServiceTests.root + "/" + src, andPath: dest + dst), "\(dst) differs from \(src)")
        }
        let unit = try String(contentsOfFile: dest + "/usr/lib/systemd/system/geoconsentd.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("\nExecStart=/usr/bin/geoconsentd\n"), "ExecStart= should be PREFIX/bin/geoconsentd")
        let activation = try String(contentsOfFile: dest + "/usr/share/dbus-1/system-services/org.geoconsent.GeoConsent1.service",
                                    encoding: .utf8)
        for line in ["Name=org.geoconsent.GeoConsent1", "Exec=/bin/false", "User=geoconsent", "SystemdService=geoconsentd.service"] {
            XCTAssertTrue(activation.split(separator: "\n").contains(Substring(line)), "activation file lacks \(line)")
        }
        XCTAssertTrue(unit.contains("\nBusName=org.geoconsent.GeoConsent1\n") && unit.contains("\nUser=geoconsent\n"))

        // The installed daemon runs.
        let version = try ChildProcess.run(dest + "/usr/bin/geoconsentd", ["--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.output, "geoconsentd 0.1.0\n")
        XCTAssertEqual(try ChildProcess.run(dest + "/usr/bin/geoconsentctl", ["--help"]).status, 0)
        XCTAssertEqual(try ChildProcess.run(dest + "/usr/libexec/geoconsent/geoconsent-wifi-helper", ["--version"]).output,
                       "geoconsent-wifi-helper 0.1.0\n")

        // The man pages render without warnings and have a NAME line mandb can index.
        for page in ["man8/geoconsentd.8", "man1/geoconsentctl.1", "man5/geoconsent.conf.5", "man8/geoconsent-wifi-helper.8"] {
            try checkManPage(dest + "/usr/share/man/" + page)
        }
        // sysusers.d entry: systemd-sysusers would create the user.
        if let sysusers = TestPaths.findExecutable("systemd-sysusers") {
            let root = stage.file("sysroot")
            try makeDirs(root + "/etc")
            let s = try runLogged(sysusers, ["--root=\(root)", "--dry-run", dest + "/usr/lib/sysusers.d/geoconsent.conf"])
            XCTAssertEqual(s.status, 0, s.log)
            XCTAssertTrue((s.output + s.log).contains("Creating user 'geoconsent'"), s.output + s.log)
        }

        // A second install keeps the admin's config.
        try "[daemon]\nprompt-timeout = 5\n".write(toFile: dest + "/etc/geoconsent/geoconsent.conf", atomically: true, encoding: .utf8)
        let again = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "install", "DESTDIR=\(dest)", "PREFIX=/usr",
                                                "BINDIR_SRC=\(TestPaths.binDir)"], timeout: 120, logPath: log, environment: cleanMake)
        XCTAssertEqual(again.status, 0, tailOf(log))
        XCTAssertEqual(try String(contentsOfFile: dest + "/etc/geoconsent/geoconsent.conf", encoding: .utf8),
                       "[daemon]\nprompt-timeout = 5\n")

        // LOCKDOWN=1 adds the gpsd lockdown's three drop-ins, unchanged.
        let locked = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "install", "DESTDIR=\(dest)", "PREFIX=/usr",
                                                 "BINDIR_SRC=\(TestPaths.binDir)", "LOCKDOWN=1"],
                                          timeout: 120, logPath: log, environment: cleanMake)
        XCTAssertEqual(locked.status, 0, tailOf(log))
        for (src, dst) in lockdown {
            XCTAssertTrue(fm.contentsEqual(atPath: ServiceTests.root + "/" + src, andPath: dest + dst), "\(dst) differs from \(src)")
        }

        // uninstall removes everything but the config, the lockdown too.
        let un = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "uninstall", "DESTDIR=\(dest)", "PREFIX=/usr"],
                                      timeout: 60, logPath: log, environment: cleanMake)
        XCTAssertEqual(un.status, 0, tailOf(log))
        let left = fm.enumerator(atPath: dest)?.compactMap { $0 as? String }
            .filter { !isDirectory(dest + "/" + $0) && !$0.hasPrefix("sysroot") && !$0.hasSuffix(".log") } ?? []
        XCTAssertEqual(left, ["etc/geoconsent/geoconsent.conf"])
    }

    /// With the default PREFIX=/usr/local: the unit points there, and the bus
    /// policy goes to /etc/dbus-1/system.d, the only other place the system bus reads.
    func testMakeInstallWithLocalPrefix() throws {
        let make = try requireTool("make")
        let stage = try TempDir()
        let log = stage.file("make.log")
        let r = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "install", "DESTDIR=\(stage.path)",
                                            "BINDIR_SRC=\(TestPaths.binDir)"], timeout: 120, logPath: log, environment: cleanMake)
        XCTAssertEqual(r.status, 0, tailOf(log))
        let unit = try String(contentsOfFile: stage.path + "/usr/local/lib/systemd/system/geoconsentd.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("\nExecStart=/usr/local/bin/geoconsentd\n"))
        for f in ["/usr/local/bin/geoconsentd", "/etc/dbus-1/system.d/org.geoconsent.GeoConsent1.conf",
                  "/usr/local/share/dbus-1/system-services/org.geoconsent.GeoConsent1.service",
                  "/usr/local/lib/sysusers.d/geoconsent.conf", "/usr/local/share/man/man8/geoconsentd.8",
                  "/etc/geoconsent/geoconsent.conf"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: stage.path + f), "missing \(f)")
        }
    }

    // MARK: - man pages and default config against the code

    func testManPagesDocumentEveryOptionCommandAndKey() throws {
        func page(_ p: String) throws -> String {
            try String(contentsOfFile: ServiceTests.root + "/man/" + p, encoding: .utf8).replacingOccurrences(of: "\\-", with: "-")
        }
        let d8 = try page("geoconsentd.8"), ctl1 = try page("geoconsentctl.1"), conf5 = try page("geoconsent.conf.5")
        let daemonHelp = try ChildProcess.run(TestPaths.binDir + "/geoconsentd", ["--help"]).output
        for option in options(in: daemonHelp) {
            XCTAssertTrue(d8.contains(option), "geoconsentd(8) does not document \(option)")
        }
        let helper8 = try page("geoconsent-wifi-helper.8")
        for option in options(in: try ChildProcess.run(TestPaths.binDir + "/geoconsent-wifi-helper", ["--help"]).output) {
            XCTAssertTrue(helper8.contains(option), "geoconsent-wifi-helper(8) does not document \(option)")
        }
        let ctlHelp = try ChildProcess.run(TestPaths.binDir + "/geoconsentctl", ["--help"]).output
        for option in options(in: ctlHelp) {
            XCTAssertTrue(ctl1.contains(option), "geoconsentctl(1) does not document \(option)")
        }
        // Command lines of the usage text: two spaces, then the name ("enable | disable": both).
        let commands = ctlHelp.split(separator: "\n").flatMap { line -> [String] in
            guard line.hasPrefix("  "), line.dropFirst(2).first?.isLetter == true else { return [] }
            let words = line.split(separator: " ").map(String.init)
            return words.count > 2 && words[1] == "|" ? [words[0], words[2]] : [words[0]]
        }
        XCTAssertTrue(commands.contains("locate") && commands.contains("agent"), "could not read commands from --help")
        let boldLines = ctl1.split(separator: "\n").filter { $0.hasPrefix(".B") }
        for c in commands {
            XCTAssertTrue(boldLines.contains { $0.split(whereSeparator: { " \t\"".contains($0) }).contains(Substring(c)) },
                          "geoconsentctl(1) does not document '\(c)'")
        }
        let config = try String(contentsOfFile: ServiceTests.root + "/config/geoconsent.conf", encoding: .utf8)
        for key in ["prompt-timeout", "gpsd-linger", "idle-exit", "reduced-grid", "state-dir", "system-uid-max", "allow",
                    "policy", "sessions-per-user",
                    "waiting-per-user", "prompts-per-user", "consents-per-user", "location-requests-per-session",
                    "serve", "gps", "gps-wait", "static-file", "wifi-url", "wifi-ca-file", "wifi-interval"] {
            XCTAssertTrue(conf5.contains(key), "geoconsent.conf(5) does not document \(key)")
            XCTAssertTrue(config.contains("#\(key) ="), "config/geoconsent.conf does not list \(key)")
        }
    }

    func testShippedConfigAndManPageExampleAreAccepted() throws {
        let bus = try TestBus()
        defer { bus.stop() }
        let port = try FreePort.pick()
        let shipped = try String(contentsOfFile: ServiceTests.root + "/config/geoconsent.conf", encoding: .utf8)
        // As shipped (all commented out), and with every example uncommented.
        let uncommented = shipped.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            let l = line.dropFirst()
            if line.hasPrefix("#"), l.hasPrefix("[app ") || l.range(of: "^[a-z-]+ =", options: .regularExpression) != nil { return l }
            return line
        }.joined(separator: "\n")
        XCTAssertNotEqual(uncommented, shipped)
        XCTAssertTrue(uncommented.contains("\nprompt-timeout = 60\n") && uncommented.contains("\npolicy = always\n"), uncommented)
        // The EXAMPLE of geoconsent.conf(5).
        let man = try String(contentsOfFile: ServiceTests.root + "/man/geoconsent.conf.5", encoding: .utf8)
        let example = man.components(separatedBy: ".SH EXAMPLE\n.nf\n.RS\n").last?.components(separatedBy: ".RE\n.fi").first?
            .replacingOccurrences(of: "\\-", with: "-") ?? ""
        XCTAssertTrue(example.contains("[daemon]"), "no example found in geoconsent.conf(5)")
        for (name, text) in [("shipped", shipped), ("uncommented", uncommented), ("man example", example)] {
            do {
                let d = try DaemonInstance(busAddress: bus.address, gpsdPort: port, configText: text)
                d.stop()
            } catch {
                XCTFail("the daemon refused the \(name) config: \(error)")
            }
        }
        // And the installed path is the file the daemon reads by default.
        XCTAssertTrue(try ChildProcess.run(TestPaths.binDir + "/geoconsentd", ["--help"]).output
            .contains("/etc/geoconsent/geoconsent.conf"))
    }

    // MARK: - helpers

    private var setpriv: String { TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv" }

    /// `make` run from inside `make test` must not inherit the outer make's flags and variables.
    let cleanMake = ["MAKEFLAGS": "", "MAKELEVEL": "", "MFLAGS": ""]

    static let nobody = ServiceUser(name: "nobody", uid: 65534, gid: 65534)
    static let rootUser = ServiceUser(name: "root", uid: 0, gid: 0)

    func requireRoot(_ what: String) throws {
        guard getuid() == 0 else { throw XCTSkip("\(what) needs root (CI runs as root); skipped") }
    }

    func requireTool(_ name: String, candidates: [String] = []) throws -> String {
        guard let path = TestPaths.findExecutable(name, candidates: candidates) else {
            throw XCTSkip("\(name) is not installed; skipped")
        }
        return path
    }

    /// A system-style bus including the shipped policy (see `PolicyBus`; with
    /// `geoclue`, the GeoClue2 facade's too), for a test that switches uids;
    /// and the user that stands for `geoconsent`.
    func policyBus(geoclue: Bool = false) throws -> (PolicyBus, ServiceUser) {
        try requireRoot("acting as other users (setpriv)")
        _ = try requireTool("setpriv")
        _ = try requireTool("dbus-daemon")
        let user = try ServiceUser.standIn()
        return (try PolicyBus(serviceUser: user, geoclue: geoclue), user)
    }

    func manTree(in dir: TempDir) throws -> String {
        let man = dir.file("man")
        for (file, section) in [("geoconsentd.8", "8"), ("geoconsentctl.1", "1"), ("geoconsent.conf.5", "5")] {
            try makeDirs(man + "/man" + section)
            try FileManager.default.copyItem(atPath: ServiceTests.root + "/man/" + file, toPath: man + "/man\(section)/" + file)
        }
        return man
    }

    func checkManPage(_ path: String) throws {
        guard let groff = TestPaths.findExecutable("groff") else {
            print("ServiceTests: groff not installed; \(path) not rendered")
            return
        }
        let r = try runLogged(groff, ["-man", "-Tutf8", "-ww", "-z", path])
        XCTAssertEqual(r.status, 0, "\(path): \(r.log)")
        XCTAssertEqual(r.log, "", "\(path) renders with warnings:\n\(r.log)")
        if let lexgrog = TestPaths.findExecutable("lexgrog") {
            let l = try runLogged(lexgrog, [path])
            XCTAssertEqual(l.status, 0, "\(path): no whatis entry: \(l.output)\(l.log)")
            XCTAssertTrue(l.output.contains(" - "), l.output)
        }
    }

    func options(in help: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: "--[a-z][a-z-]*")
        let ns = help as NSString
        return Array(Set(regex.matches(in: help, range: NSRange(location: 0, length: ns.length)).map { ns.substring(with: $0.range) })).sorted()
    }
}

// MARK: - test fixtures

/// "Overall exposure level for geoconsentd.service: 1.2 OK".
fileprivate func parseExposure(_ text: String) -> Double? {
    for line in text.split(separator: "\n") where line.contains("Overall exposure level") {
        guard let colon = line.lastIndex(of: ":") else { continue }
        let rest = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        if let v = Double(rest.prefix { $0.isNumber || $0 == "." }) { return v }
    }
    return nil
}

/// True if a TCP connection to 127.0.0.1:`port` succeeds (in this process's network namespace).
fileprivate func tcpConnects(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Number of SysV shm segments in `/proc/sysvipc/shm` text created by `pid` (column cpid).
fileprivate func shmSegments(_ table: String, createdBy pid: pid_t) -> Int {
    let lines = table.split(separator: "\n")
    guard let header = lines.first?.split(separator: " ", omittingEmptySubsequences: true),
          let col = header.firstIndex(of: "cpid") else { return 0 }
    return lines.dropFirst().filter { line in
        let f = line.split(separator: " ", omittingEmptySubsequences: true)
        return f.count > col && f[col] == Substring(String(pid))
    }.count
}
