import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Shipping the GeoClue2 facade (docs/geoclue.md, "Switching over"): what
/// `make install GEOCLUE=1` adds, and its bus policy on a real dbus-daemon.
extension ServiceTests {
    /// The facade's files, by installed path (PREFIX=/usr) and source.
    static let geoClueFiles = [
        ("/usr/share/dbus-1/system.d/org.freedesktop.GeoClue2.geoconsent.conf",
         "dbus-policy/org.freedesktop.GeoClue2.geoconsent.conf"),
        ("/usr/share/dbus-1/system-services/org.freedesktop.GeoClue2.service",
         "dbus-policy/org.freedesktop.GeoClue2.service"),
        ("/usr/lib/systemd/system/geoconsentd.service.d/geoclue.conf", "systemd/geoconsentd.service.d/geoclue.conf"),
    ]

    func testMakeInstallWithGeoClueShipsExactlyTheFacadeFiles() throws {
        let make = try requireTool("make")
        func install(_ extra: [String]) throws -> (dir: TempDir, files: Set<String>) {
            let stage = try TempDir()
            let log = stage.file("make.log")
            let r = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "install", "DESTDIR=\(stage.path)/root",
                                                "PREFIX=/usr", "BINDIR_SRC=\(TestPaths.binDir)"] + extra,
                                         timeout: 120, logPath: log, environment: cleanMake)
            XCTAssertEqual(r.status, 0, "make install \(extra) failed:\n\(r.output)\(tailOf(log))")
            return (stage, installedFiles(stage.path + "/root"))
        }
        let plain = try install([]), geoclue = try install(["GEOCLUE=1"]), off = try install(["GEOCLUE=0"])
        XCTAssertEqual(geoclue.files.subtracting(plain.files), Set(ServiceTests.geoClueFiles.map { $0.0 }))
        XCTAssertEqual(plain.files.subtracting(geoclue.files), [])
        XCTAssertEqual(off.files, plain.files, "GEOCLUE=0 must install what a plain install does")
        for (installed, source) in ServiceTests.geoClueFiles {
            XCTAssertTrue(FileManager.default.contentsEqual(atPath: ServiceTests.root + "/" + source,
                                                            andPath: geoclue.dir.path + "/root" + installed),
                          "\(installed) differs from \(source)")
        }
        // The activation file starts our unit; the unit drop-in switches the facade on.
        let activation = try String(contentsOfFile: ServiceTests.root + "/dbus-policy/org.freedesktop.GeoClue2.service", encoding: .utf8)
        for line in ["Name=\(GeoClueAPI.busName)", "Exec=/bin/false", "User=geoconsent", "SystemdService=geoconsentd.service"] {
            XCTAssertTrue(activation.split(separator: "\n").contains(Substring(line)), "activation file lacks \(line)")
        }

        // uninstall takes the facade's files too.
        let log = geoclue.dir.file("uninstall.log")
        let un = try ChildProcess.run(make, ["-s", "-C", ServiceTests.root, "uninstall", "DESTDIR=\(geoclue.dir.path)/root",
                                             "PREFIX=/usr"], timeout: 60, logPath: log, environment: cleanMake)
        XCTAssertEqual(un.status, 0, tailOf(log))
        XCTAssertEqual(installedFiles(geoclue.dir.path + "/root"), ["/etc/geoconsent/geoconsent.conf"])
    }

    /// The daemon serves GeoClue2 (`[geoclue] serve = true`, as `--geoclue` in
    /// the unit drop-in), as the service user with CAP_SYS_PTRACE, as the unit runs it.
    func testGeoCluePolicyOnlyServiceUserOwnsTheNameAndAnyoneCallsIt() throws {
        let (bus, user) = try policyBus(geoclue: true)
        defer { bus.stop() }
        let requestName = ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "RequestName", "su", GeoClueAPI.busName, "0"]
        let nobody = try bus.busctl(requestName, as: ServiceTests.nobody)
        XCTAssertNotEqual(nobody.status, 0, "nobody owned \(GeoClueAPI.busName): \(nobody.output)")
        XCTAssertTrue(nobody.log.contains("Access denied"), "expected AccessDenied, got: \(nobody.log)")
        for who in [user, ServiceTests.rootUser] {
            let r = try bus.busctl(requestName, as: who)
            XCTAssertEqual(r.output.trimmingCharacters(in: .whitespacesAndNewlines), "u 1", "\(who.name): \(r.log)")
        }

        let daemon = try bus.startDaemon(as: user, withPtrace: true, config: "[geoclue]\nserve = true\n")
        defer { daemon.stop() }
        let owner = try bus.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                    "NameHasOwner", "s", GeoClueAPI.busName], as: ServiceTests.nobody)
        XCTAssertEqual(owner.output.trimmingCharacters(in: .whitespacesAndNewlines), "b true", "\(owner.log)\n\(daemon.log())")

        // An unprivileged uid reaches the Manager, the standard interfaces and its own client object.
        let M = [GeoClueAPI.busName, GeoClueAPI.managerPath]
        let level = try bus.busctl(["get-property"] + M + [GeoClueAPI.managerInterfaceName, "AvailableAccuracyLevel"],
                                   as: ServiceTests.nobody)
        XCTAssertEqual(level.output.trimmingCharacters(in: .whitespacesAndNewlines), "u 8", "\(level.log)\n\(daemon.log())")
        let client = try bus.busctl(["call"] + M + [GeoClueAPI.managerInterfaceName, "GetClient"], as: ServiceTests.nobody)
        XCTAssertTrue(client.output.hasPrefix("o \"\(GeoClueAPI.clientsPath)/"), "GetClient as nobody: \(client.log)\n\(daemon.log())")
        let ping = try bus.busctl(["call"] + M + ["org.freedesktop.DBus.Peer", "Ping"], as: ServiceTests.nobody)
        XCTAssertEqual(ping.status, 0, ping.log)
        let introspect = try bus.busctl(["introspect", "--xml-interface"] + M, as: ServiceTests.nobody)
        XCTAssertTrue(introspect.output.contains("<interface name=\"\(GeoClueAPI.managerInterfaceName)\">"), introspect.log)
        // Any other interface is refused by the bus itself.
        let other = try bus.busctl(["call"] + M + ["org.example.NotAllowed", "Anything"], as: ServiceTests.nobody)
        XCTAssertNotEqual(other.status, 0)
        XCTAssertTrue(other.log.contains("Access denied"), other.log)
    }

    /// The unit drop-in as systemd reads it: beside the unit, ExecStart= replaced
    /// by the same binary with --geoclue, and nothing else.
    func testGeoClueUnitDropInPassesSystemdAnalyzeVerify() throws {
        let analyze = try requireTool("systemd-analyze")
        let dir = try TempDir()
        let units = dir.file("units")
        try makeDirs(units + "/geoconsentd.service.d")
        let daemon = TestPaths.binDir + "/geoconsentd"
        let source = "\nExecStart=/usr/bin/geoconsentd"
        let unit = try String(contentsOfFile: ServiceTests.unitFile, encoding: .utf8)
        let dropIn = try String(contentsOfFile: ServiceTests.root + "/systemd/geoconsentd.service.d/geoclue.conf", encoding: .utf8)
        XCTAssertTrue(dropIn.contains("\n[Service]\nExecStart=\nExecStart=/usr/bin/geoconsentd --geoclue\n"), dropIn)
        XCTAssertEqual(dropIn.split(separator: "\n").filter { !$0.hasPrefix("#") }, ["[Service]", "ExecStart=", "ExecStart=/usr/bin/geoconsentd --geoclue"])
        try unit.replacingOccurrences(of: source + "\n", with: "\nExecStart=\(daemon)\n")
            .write(toFile: units + "/geoconsentd.service", atomically: true, encoding: .utf8)
        try dropIn.replacingOccurrences(of: source + " ", with: "\nExecStart=\(daemon) ")
            .write(toFile: units + "/geoconsentd.service.d/geoclue.conf", atomically: true, encoding: .utf8)
        let r = try runLogged(analyze, ["verify", units + "/geoconsentd.service"],
                              environment: ["MANPATH": try manTree(in: dir) + ":", "SYSTEMD_LOG_COLOR": "0"], timeout: 60)
        let ours = (r.output + r.log).split(separator: "\n").filter { $0.contains("geoconsent") }
        XCTAssertEqual(r.status, 0, "systemd-analyze verify failed:\n\(r.output)\(r.log)")
        XCTAssertTrue(ours.isEmpty, "systemd-analyze verify complains:\n\(ours.joined(separator: "\n"))")
        // Canary: the same run must read the drop-in, or the clean result proves nothing about it.
        try (dropIn + "NoSuchSettingForTheCanary=1\n").write(toFile: units + "/geoconsentd.service.d/geoclue.conf",
                                                             atomically: true, encoding: .utf8)
        let c = try runLogged(analyze, ["verify", units + "/geoconsentd.service"],
                              environment: ["MANPATH": dir.file("man") + ":", "SYSTEMD_LOG_COLOR": "0"], timeout: 60)
        XCTAssertTrue((c.output + c.log).contains("NoSuchSettingForTheCanary"), "verify did not read the drop-in:\n\(c.log)")
        // And the daemon accepts the option the drop-in gives it.
        XCTAssertTrue(try ChildProcess.run(daemon, ["--geoclue", "--introspect"]).output.contains(GeoClueAPI.managerInterfaceName))
    }

    /// The daemon asks GNOME Shell's GeoClue agent (AuthorizeApp, Get MaxAccuracyLevel)
    /// as the service user; nobody else may call an agent.
    func testGeoCluePolicyOnlyServiceUserAndRootCallGeoClueAgents() throws {
        let (bus, user) = try policyBus(geoclue: true)
        defer { bus.stop() }
        let peers = PeerLoop()
        let peer = try peers.connect(bus.address)
        let agent = CountingGeoClueAgent()
        peer.server.export(agent, at: GeoClueAPI.agentPath, interfaces: [CountingGeoClueAgent.interface])
        func call(_ args: [String], as who: ServiceUser, _ tag: String) throws -> (status: Int32?, log: String) {
            let log = bus.dir.file("agent-\(tag).log")
            let p = try ChildProcess(executable: TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv",
                                     arguments: who.setprivArgs() + [bus.busctlPath, "--address=\(bus.address)", "call",
                                                                     peer.uniqueName, GeoClueAPI.agentPath] + args,
                                     logPath: log, captureStdout: true)
            // The agent lives in this thread: pump its loop while busctl waits.
            peers.pump(timeout: 15) { !p.isRunning }
            p.stop()
            return (p.exitCode, tailOf(log))
        }
        let authorize = [GeoClueAPI.agentInterfaceName, "AuthorizeApp", "su", "org.example.App", "8"]
        let get = [ObjectServer.properties, "Get", "ss", GeoClueAPI.agentInterfaceName, "MaxAccuracyLevel"]
        for (args, what) in [(authorize, "AuthorizeApp"), (get, "Get")] {
            let denied = try call(args, as: ServiceTests.nobody, "nobody-\(what)")
            XCTAssertNotEqual(denied.status, 0, "nobody called \(what)")
            XCTAssertTrue(denied.log.contains("Access denied"), denied.log)
            for who in [user, ServiceTests.rootUser] {
                XCTAssertEqual(try call(args, as: who, "\(who.name)-\(what)").status, 0, "\(who.name) \(what)")
            }
        }
        XCTAssertEqual(agent.authorizeCalls, 2)
        XCTAssertEqual(agent.gets, 2)
    }

    func testGeoCluePolicyOnlyServiceUserEmitsClientSignals() throws {
        let (bus, user) = try policyBus(geoclue: true)
        defer { bus.stop() }
        let gdbus = try requireTool("gdbus")
        let peers = PeerLoop()
        let app = try peers.connect(bus.address)
        try app.addMatch("type='signal',interface='\(GeoClueAPI.clientInterfaceName)'")
        func forge(as who: ServiceUser, location: String) throws -> Int32? {
            try runLogged(TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv",
                          who.setprivArgs() + [gdbus, "emit", "--address", bus.address, "--dest", app.uniqueName,
                                               "--object-path", GeoClueAPI.clientPath(1),
                                               "--signal", GeoClueAPI.clientInterfaceName + ".LocationUpdated",
                                               "@o '/'", "@o '\(location)'"],
                          environment: ["HOME": "/nonexistent"]).status
        }
        _ = try forge(as: ServiceTests.nobody, location: GeoClueAPI.locationPath(client: 1, 66))
        XCTAssertEqual(try forge(as: user, location: GeoClueAPI.locationPath(client: 1, 0)), 0)
        XCTAssertNotNil(app.waitForSignal("LocationUpdated", timeout: 10), "the service user's signal did not arrive")
        peers.settle(0.3)
        let news = app.signals(named: "LocationUpdated").compactMap { $0.arguments().last?.stringValue }
        XCTAssertEqual(news, [GeoClueAPI.locationPath(client: 1, 0)], "a forged LocationUpdated from nobody got through")
        XCTAssertTrue(bus.log().contains("Rejected send message"), bus.log())
    }
}

/// A GeoClue agent as GNOME Shell serves one: counts the calls that reach it.
final class CountingGeoClueAgent {
    var authorizeCalls = 0, gets = 0
    static let interface = Interface<CountingGeoClueAgent>(GeoClueAPI.agent, methods: [
        "AuthorizeApp": { a, call in a.authorizeCalls += 1; call.reply([.bool(true), .uint32(8)]) },
    ], getters: ["MaxAccuracyLevel": { a in a.gets += 1; return .uint32(8) }])
}

/// Every regular file under `root`, as absolute paths inside it (logs excluded).
fileprivate func installedFiles(_ root: String) -> Set<String> {
    Set((FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String } ?? [])
        .filter { !isDirectory(root + "/" + $0) && !$0.hasSuffix(".log") }
        .map { "/" + $0 })
}
