import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The walking skeleton through a real dbus-daemon: name, properties, the
/// standard interfaces, argument checking, command line and exit behaviour.
final class SkeletonTests: StackTestCase {

    func testIntrospectOutputMatchesCommittedXML() throws {
        let committed = try String(contentsOfFile: TestPaths.sourceRoot + "/interfaces/org.geoconsent.GeoConsent1.xml",
                                   encoding: .utf8)
        let r = try ChildProcess.run(TestPaths.binDir + "/geoconsentd", ["--introspect"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.output, committed,
                       "interfaces/org.geoconsent.GeoConsent1.xml drifted: regenerate with geoconsentd --introspect")
        // The live object serves the same client interface, plus the standard ones.
        let p = try stack.peer()
        let xml = try p.geo("Introspect", interface: ObjectServer.introspectable).get().first?.stringValue ?? ""
        let start = committed.range(of: "  <interface name=\"org.geoconsent.GeoConsent1\">")!
        let end = committed.range(of: "  </interface>\n", range: start.upperBound..<committed.endIndex)!
        XCTAssertTrue(xml.contains(String(committed[start.lowerBound..<end.upperBound])))
        for std in ["org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable"] {
            XCTAssertTrue(xml.contains("<interface name=\"\(std)\">"), std)
        }
        // Parents list their children, so `busctl tree` finds the object.
        let root = try p.call(GeoConsentAPI.busName, "/", ObjectServer.introspectable, "Introspect").get()
        XCTAssertTrue(root.first?.stringValue?.contains("<node name=\"org\"/>") ?? false)
    }

    func testBusctlIntrospectShowsInterfaceAndProperties() throws {
        let r = try stack.bus.busctl(["introspect", GeoConsentAPI.busName, GeoConsentAPI.objectPath])
        XCTAssertEqual(r.status, 0, r.output)
        for word in ["org.geoconsent.GeoConsent1", ".RequestOneTimeAuthorization", ".Version", ".Enabled",
                     ".GpsdConnected", ".InUse", ".LocationUpdated", "emits-change writable"] {
            XCTAssertTrue(r.output.contains(word), "missing \(word) in:\n\(r.output)")
        }
    }

    func testProperties() throws {
        let p = try stack.peer()
        let all = try p.geo("GetAll", [.string(GeoConsentAPI.interfaceName)], interface: ObjectServer.properties).get()
        let dict = try XCTUnwrap(all.first?.vardictValue)
        XCTAssertEqual(Set(dict.keys), Set(GeoConsentAPI.interface.properties.map(\.name)), "every property")
        var expected = DaemonStatus(version: "0.1.0", enabled: true, gpsdConnected: false, inUse: false)
        expected.sources = [.gps]
        XCTAssertEqual(DaemonProperties.decode(dict), expected,
                       "no session needs gpsd yet; GPS the one source (no static file, no Wi-Fi configured)")
        XCTAssertDBusError(p.geo("Set", [.string(GeoConsentAPI.interfaceName), .string("WiFiEnabled"), .variant(.bool(true))],
                                 interface: ObjectServer.properties), DBusError.invalidArgsName)
        XCTAssertEqual(p.property("Version"), .string("0.1.0"))
        XCTAssertDBusError(p.geo("Set", [.string(GeoConsentAPI.interfaceName), .string("GpsdConnected"), .variant(.bool(true))],
                                 interface: ObjectServer.properties), DBusError.propertyReadOnlyName)
        XCTAssertDBusError(p.geo("Get", [.string(GeoConsentAPI.interfaceName), .string("Nope")], interface: ObjectServer.properties),
                           DBusError.unknownPropertyName)
        XCTAssertDBusError(p.geo("Set", [.string(GeoConsentAPI.interfaceName), .string("Enabled"), .variant(.string("no"))],
                                 interface: ObjectServer.properties), DBusError.invalidArgsName)
        XCTAssertNoThrow(try p.geo("Ping", interface: ObjectServer.peer).get())
    }

    func testWrongSignatureAndUnknownMethodGetStandardErrorsAndDaemonKeepsServing() throws {
        let p = try stack.peer()
        XCTAssertDBusError(p.geo("RequestOneTimeAuthorization", [.string("x")]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("RequestOneTimeAuthorization"), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("GetAuthorization", [.uint32(1)]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("NoSuchMethod"), DBusError.unknownMethodName)
        XCTAssertDBusError(p.geo("GetAuthorization", interface: "org.example.Nope"), DBusError.unknownInterfaceName)
        XCTAssertDBusError(p.call(GeoConsentAPI.busName, "/no/such/object", GeoConsentAPI.interfaceName, "GetAuthorization"),
                           DBusError.unknownObjectName)
        // Known option keys of the wrong type, or a bad value: InvalidArgs. Unknown keys: ignored.
        XCTAssertDBusError(p.tap(["accuracy": .uint32(1)]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.tap(["accuracy": .string("exact")]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.tap(["reason": .bool(true)]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("RequestLocation", [.vardict(["timeout": .string("5")])]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("StartUpdates", [.vardict(["distance-filter": .double(-1)])]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.geo("ResetConsent", [.string("x"), .vardict(["uid": .string("0")])]), DBusError.invalidArgsName)
        XCTAssertDBusError(p.tap(["some-future-key": .uint32(7)]), GeoConsentAPI.ErrorName.noAgent)
        // Still serving, and still the same process.
        XCTAssertEqual(try p.authorization().status, .notDetermined)
        XCTAssertTrue(stack.daemon.isRunning)
    }

    /// On a terminal the daemon's lines carry no journald priority prefix
    /// (`<3>`); in a pipe or the journal they do. And a --config FILE that is
    /// not there is an error, said in one line.
    func testATerminalGetsTheTextAloneAndAMissingConfigIsAnError() throws {
        let exe = TestPaths.binDir + "/geoconsentd"
        let onTerminal = try ChildProcess.run("/usr/bin/script", ["-qec", "\(exe) --config /nonexistent/geoconsent.conf", "/dev/null"])
        XCTAssertEqual(onTerminal.status, 1)
        XCTAssertEqual(onTerminal.output.replacingOccurrences(of: "\r", with: ""),
                       "geoconsentd: /nonexistent/geoconsent.conf: does not exist (named by --config)\n")
        let dir = try TempDir()
        let piped = try ChildProcess.run(exe, ["--config", "/nonexistent/geoconsent.conf"], logPath: dir.file("stderr"))
        XCTAssertEqual(piped.status, 1)
        XCTAssertEqual(try String(contentsOfFile: dir.file("stderr"), encoding: .utf8),
                       "<3>geoconsentd: /nonexistent/geoconsent.conf: does not exist (named by --config)\n")
    }

    /// The terminal agent, answered by typing: one letter per answer whatever
    /// the prompt (o, w, d), another letter asked again, and the identity in
    /// the same words as the dialog's ("verified", "NOT VERIFIED").
    func testTheTerminalAgentTakesOneLetterPerAnswer() throws {
        let dir = try TempDir()
        let fifo = dir.file("typed")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // Held open for writing (O_RDWR does not wait for a reader), so the agent's input stays open.
        let keyboard = open(fifo, O_RDWR)
        XCTAssertGreaterThanOrEqual(keyboard, 0)
        defer { close(keyboard) }
        let agent = try ChildProcess(executable: "/bin/sh",
                                     arguments: ["-c", "exec \"$0\" --bus \"$1\" agent < \"$2\"",
                                                 TestPaths.binDir + "/geoconsentctl", stack.bus.address, fifo],
                                     logPath: dir.file("agent.err"), captureStdout: true)
        defer { agent.stop() }
        var seen: [String] = []
        func waitFor(_ text: String) -> Bool {
            let deadline = Date().addingTimeInterval(15)
            while Date() < deadline {
                stack.peers.settle(0.01)
                guard let l = agent.readStdoutLine(timeout: 0.05) else { continue }
                seen.append(l)
                if l.contains(text) { return true }
            }
            return false
        }
        func type(_ line: String) { _ = line.withCString { Glibc.write(keyboard, $0, strlen($0)) } }
        XCTAssertTrue(waitFor("Consent agent registered for uid"), "\(seen)")
        let app = try stack.peer()
        let tap = app.geoAsync("RequestOneTimeAuthorization", [OptionDictionary.encode(AuthOptions())])
        XCTAssertTrue(waitFor("[o] Allow Once   [d] Don't Allow"), "\(seen)")
        XCTAssertTrue(seen.contains { $0 == "Identity: program of a system user, verified" || $0.hasPrefix("Identity: program path, NOT VERIFIED") },
                      "\(seen)")
        type("a\n")
        XCTAssertTrue(waitFor("Please answer with one of the letters shown."), "a letter of no answer: \(seen)")
        type("o\n")
        XCTAssertTrue(waitFor("Answered allow-once."), "\(seen)")
        stack.peers.pump(timeout: 10) { tap.isDone }
        XCTAssertEqual(tap.result.flatMap { try? $0.get() }.flatMap(StatusReply.decode), .whenInUse)
    }

    /// geoconsentctl as timedatectl: no command shows the status, --version
    /// says the version, and a reset of an app it knows nothing of says so
    /// (exit 1) instead of "forgotten".
    func testGeoconsentctlWithNoCommandVersionAndAnUnknownReset() throws {
        let plain = try stack.ctl([])
        XCTAssertEqual(plain.status, 0, plain.output)
        XCTAssertTrue(plain.output.contains("Location enabled:") && plain.output.contains("Sources:"), plain.output)
        XCTAssertTrue(plain.output.contains("Consent agent:   none: start geoconsent-agent, or 'geoconsentctl agent'")
                      || plain.output.contains("Consent agent: none: start geoconsent-agent, or 'geoconsentctl agent'"),
                      "no agent for this uid, and what to do:\n\(plain.output)")
        // With one registered, status says so.
        let agent = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                     arguments: ["--bus", stack.bus.address, "agent", "--auto", "deny"],
                                     logPath: "/dev/null", captureStdout: true)
        defer { agent.stop() }
        XCTAssertTrue(agent.readStdoutLine(timeout: 10)?.contains("registered") ?? false)
        let json = try stack.ctl(["--json", "status"])
        XCTAssertTrue(json.output.contains("\"agent_registered\":true"), json.output)
        let version = try ChildProcess.run(TestPaths.binDir + "/geoconsentctl", ["--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.output, "geoconsentctl 0.1.0\n")
        let dir = try TempDir()
        let r = try ChildProcess.run(TestPaths.binDir + "/geoconsentctl", ["--bus", stack.bus.address, "reset", "org.example.Nope"],
                                     logPath: dir.file("stderr"))
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(try String(contentsOfFile: dir.file("stderr"), encoding: .utf8),
                       "geoconsentctl: no consent or session of org.example.Nope for uid \(getuid()): see 'geoconsentctl consents'\n")
    }

    /// Every error geoconsentctl shows says what it means and what to do, in
    /// words, never a D-Bus error name (the exact wording of each).
    func testEachErrorSaysWhatToDo() throws {
        let dir = try TempDir()
        let ctl = TestPaths.binDir + "/geoconsentctl"
        /// Runs geoconsentctl (as `uid`, if given); its exit status and what it said on stderr.
        func run(_ args: [String], bus: String? = nil, uid: UInt32? = nil) throws -> (Int32?, String) {
            let err = dir.file("stderr")
            unlink(err)
            let command = [ctl, "--bus", bus ?? stack.bus.address] + args
            let r = uid.map { u in
                try? ChildProcess.run("/usr/bin/setpriv", ["--reuid=\(u)", "--regid=\(u)", "--clear-groups"] + command,
                                      timeout: 40, logPath: err)
            } ?? (try? ChildProcess.run(ctl, Array(command.dropFirst()), timeout: 40, logPath: err))
            return (r?.status, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
        }

        // No daemon on the bus.
        let empty = try TestBus()
        defer { empty.stop() }
        let (s1, noDaemon) = try run(["status"], bus: empty.address)
        XCTAssertEqual(s1, 1)
        XCTAssertTrue(noDaemon.hasPrefix("geoconsentctl: geoconsentd is not running on this bus (") &&
                      noDaemon.hasSuffix("): is the geoconsent package installed? 'systemctl status geoconsentd' says why it does not start\n"),
                      noDaemon)
        XCTAssertFalse(noDaemon.contains("org.freedesktop.DBus.Error"), "no error name: \(noDaemon)")

        // The user says no (a one-time prompt stores nothing).
        let agent = try ChildProcess(executable: ctl, arguments: ["--bus", stack.bus.address, "agent", "--auto", "deny"],
                                     logPath: "/dev/null", captureStdout: true)
        defer { agent.stop() }
        XCTAssertTrue(agent.readStdoutLine(timeout: 10)?.contains("registered") ?? false)
        XCTAssertEqual(try run(["locate"]).1, "geoconsentctl: location was not allowed this time: " +
                       "Don't Allow was chosen, or the prompt was closed or timed out\n")

        guard getuid() == 0 else { throw XCTSkip("switching location off, and another uid, need root") }
        // Only root switches location; once it is off, why nothing is granted.
        XCTAssertEqual(try run(["disable"], uid: 65534).1, "geoconsentctl: not allowed: Only root may switch location on or off (polkit could not be asked: The name org.freedesktop.PolicyKit1 was not provided by any .service files) (run it as root, for example with sudo)\n")
        XCTAssertEqual(try run(["disable"]).0, 0)
        XCTAssertEqual(try run(["locate"]).1,
                       "geoconsentctl: location is switched off for everyone: 'geoconsentctl enable' as root switches it on\n")
        XCTAssertEqual(try run(["enable"]).0, 0)

        // No receiver: gpsd is gone, and nothing else can answer.
        agent.stop()
        let allowing = try ChildProcess(executable: ctl, arguments: ["--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                                        logPath: "/dev/null", captureStdout: true)
        defer { allowing.stop() }
        XCTAssertTrue(allowing.readStdoutLine(timeout: 10)?.contains("registered") ?? false)
        stack.gpsd.stop()
        let (s2, noGPS) = try run(["locate", "--timeout", "20"])
        XCTAssertEqual(s2, 1)
        XCTAssertTrue(noGPS.hasPrefix("geoconsentctl: no GPS: ") && noGPS.hasSuffix(
            ". Is a receiver attached? 'systemctl status gpsd' shows gpsd; without a receiver, Wi-Fi positioning or a fixed position can answer (geoconsent.conf(5), [sources])\n"),
            noGPS)
        XCTAssertFalse(noGPS.contains("GpsUnavailable"), noGPS)
    }

    /// A non-empty `[agents] allow` locks every user's own agent out: the
    /// daemon says so once when it starts, and says nothing of it without one.
    func testAnAllowListThatLocksOutDesktopAgentsIsLoggedAtStart() throws {
        XCTAssertFalse(stack.daemon.log().contains("[agents] allow"), stack.daemon.log())
        try stack.restartDaemon(config: "[agents]\nallow = /usr/libexec/site-agent; org.example.Agent\n")
        let said = "[agents] allow names 2 app-id(s): only such programs of system uids (up to system-uid-max 999) " +
            "may register consent agents, so no user's own agent (geoconsent-agent, geoconsentctl agent, a desktop's GeoClue agent) can register, " +
            "and a user's first request fails with NoAgent; leave allow empty to let each user's agent answer for that user"
        stack.peers.pump(timeout: 10) { self.stack.daemon.log().contains(said) }
        XCTAssertTrue(stack.daemon.log().contains(said), stack.daemon.log())
    }

    func testGetAuthorizationNamesTheCallerFromCredentials() throws {
        let p = try stack.peer()
        // The test process has no Flatpak, Snap or app unit: its executable's absolute path.
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        XCTAssertEqual(try p.authorization(),
                       AuthorizationInfo(status: .notDetermined, temporary: false, accuracy: nil, appID: exe,
                                         oneTimeApproved: false))
    }

    func testCtlStatusTextAndJSON() throws {
        let text = try stack.ctl(["status"])
        XCTAssertEqual(text.status, 0, text.output)
        XCTAssertTrue(text.output.contains("Version: 0.1.0"), text.output)
        XCTAssertTrue(text.output.contains("gpsd connected: no"), text.output)
        let json = try stack.ctl(["--json", "status"])
        XCTAssertEqual(json.status, 0, json.output)
        let obj = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        XCTAssertEqual(obj?["version"] as? String, "0.1.0")
        XCTAssertEqual(obj?["enabled"] as? Bool, true)
        XCTAssertEqual(obj?["gpsd_connected"] as? Bool, false)
        let usage = try stack.ctl(["frobnicate"])
        XCTAssertEqual(usage.status, 2)
    }

    func testExitsZeroOnSIGTERMAndSIGINT() throws {
        stack.daemon.signal(SIGTERM)
        XCTAssertEqual(stack.daemon.waitForExit(timeout: 5), 0)
        try stack.restartDaemon()
        stack.daemon.signal(SIGINT)
        XCTAssertEqual(stack.daemon.waitForExit(timeout: 5), 0)
        XCTAssertTrue(stack.daemon.log().contains("<6>"), "sd-daemon priority prefixes")
    }

    func testNameTakenBusUnreachableAndBadConfigEachExitWithOneClearLine() throws {
        let exe = TestPaths.binDir + "/geoconsentd"
        let dir = try TempDir()
        let taken = try runWithStderr(exe, ["--bus", stack.bus.address, "--config", "/dev/null", "--state-dir", dir.path])
        XCTAssertEqual(taken.status, 1)
        XCTAssertTrue(taken.output.contains("already owned"), taken.output)
        XCTAssertEqual(taken.output.split(separator: "\n").count, 1, taken.output)

        let unreachable = try runWithStderr(exe, ["--bus", "unix:path=\(dir.path)/no-bus", "--config", "/dev/null",
                                                     "--state-dir", dir.path])
        XCTAssertEqual(unreachable.status, 1)
        XCTAssertTrue(unreachable.output.contains("cannot connect"), unreachable.output)
        XCTAssertEqual(unreachable.output.split(separator: "\n").count, 1, unreachable.output)

        let conf = dir.file("bad.conf")
        try "[daemon]\nprompt-timeout = 30\nfrobnicate = yes\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let bad = try runWithStderr(exe, ["--bus", stack.bus.address, "--config", conf, "--state-dir", dir.path])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.output.contains("\(conf):3:"), bad.output)
        XCTAssertEqual(bad.output.split(separator: "\n").count, 1, bad.output)

        let usage = try ChildProcess.run(exe, ["--frobnicate"])
        XCTAssertEqual(usage.status, 2)
        let help = try ChildProcess.run(exe, ["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.output.contains("--bus system|session|ADDRESS"))
        XCTAssertTrue(stack.daemon.isRunning, "the first daemon kept its name")
    }
}

/// Runs a program to completion; returns its status and what it wrote to stderr.
func runWithStderr(_ exe: String, _ args: [String], timeout: Double = 10) throws -> (status: Int32?, output: String) {
    let dir = try TempDir()
    let log = dir.file("stderr")
    let r = try ChildProcess.run(exe, args, timeout: timeout, logPath: log)
    return (r.status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
}
