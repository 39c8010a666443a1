import XCTest
@testable import GeoCore

final class ConfigParserTests: XCTestCase {
    private func parse(_ text: String, into base: Config = Config()) throws -> Config {
        var c = base
        try ConfigParser.parse(text, file: "test.conf", into: &c)
        return c
    }

    private func error(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ConfigError? {
        var c = Config()
        do {
            try ConfigParser.parse(text, file: "test.conf", into: &c)
            XCTFail("expected an error for:\n\(text)", file: file, line: line)
            return nil
        } catch let e as ConfigError {
            return e
        } catch {
            XCTFail("unexpected error type \(error)", file: file, line: line)
            return nil
        }
    }

    func testDefaults() throws {
        let c = Config()
        XCTAssertEqual(c.promptTimeout, 60)
        XCTAssertEqual(c.gpsdLinger, 10)
        XCTAssertEqual(c.reducedGrid, 5000)
        XCTAssertEqual(c.stateDir, "/var/lib/geoconsent")
        XCTAssertEqual(c.agentAllow, [])
        XCTAssertEqual(c.systemUIDMax, 999, "uids below 1000 are system uids")
        XCTAssertEqual(c.apps, [:])
        XCTAssertEqual(try parse(""), Config())
        XCTAssertEqual(try parse("\n\n   \n# only comments\n; here\n"), Config())
    }

    func testAPIExampleParses() throws {
        let text = """
        [daemon]
        prompt-timeout = 60        # seconds an agent has to answer
        gpsd-linger = 10           # seconds gpsd stays connected with no demand
        idle-exit = 60             # seconds idle before the daemon exits (0: never); see "Exit when idle"
        agent-wait = 20            # seconds after login a request waits for the user's agent (0: never); rule 4
        reduced-grid = 5000        # metres, cell size for reduced accuracy
        state-dir = /var/lib/geoconsent
        system-uid-max = 999       # highest uid whose executables config may name

        [agents]
        allow =                    # app-ids allowed to register (;-separated); empty: any unsandboxed app

        [limits]                   # per uid, see "Limits"
        sessions-per-user = 64
        waiting-per-user = 32
        prompts-per-user = 4
        consents-per-user = 1024
        location-requests-per-session = 8

        [app "APP_ID"]             # one section per app the admin rules on
        policy = always            # or: restricted
        """
        var expected = Config()
        expected.apps["APP_ID"] = .always
        XCTAssertEqual(try parse(text), expected)
    }

    func testEachKey() throws {
        struct Case { var text: String; var check: (Config) -> Bool }
        let cases: [Case] = [
            Case(text: "[daemon]\nprompt-timeout = 30") { $0.promptTimeout == 30 },
            Case(text: "[daemon]\nprompt-timeout=0.5") { $0.promptTimeout == 0.5 },
            Case(text: "[daemon]\nprompt-timeout = 86400") { $0.promptTimeout == 86400 },
            Case(text: "[daemon]\ngpsd-linger = 0") { $0.gpsdLinger == 0 },
            Case(text: "[daemon]\nidle-exit = 0") { $0.idleExit == 0 },
            Case(text: "[daemon]\nidle-exit = 0.25") { $0.idleExit == 0.25 },
            Case(text: "[daemon]\nagent-wait = 0") { $0.agentWait == 0 },
            Case(text: "[daemon]\nagent-wait = 5.5") { $0.agentWait == 5.5 },
            Case(text: "[daemon]\ngpsd-linger = 2.25") { $0.gpsdLinger == 2.25 },
            Case(text: "[daemon]\nreduced-grid = 1") { $0.reducedGrid == 1 },
            Case(text: "[daemon]\nreduced-grid = 1000000") { $0.reducedGrid == 1_000_000 },
            Case(text: "[daemon]\nreduced-grid = 2500.5") { $0.reducedGrid == 2500.5 },
            Case(text: "[daemon]\nstate-dir = /tmp/x y") { $0.stateDir == "/tmp/x y" },
            Case(text: "[daemon]\nstate-dir = /srv/a#b") { $0.stateDir == "/srv/a#b" },
            Case(text: "[daemon]\nsystem-uid-max = 0") { $0.systemUIDMax == 0 },
            Case(text: "[daemon]\nsystem-uid-max = 499") { $0.systemUIDMax == 499 },
            Case(text: "[daemon]\nsystem-uid-max = 4294967294") { $0.systemUIDMax == 4_294_967_294 },
            Case(text: "[agents]\nallow = org.gnome.Shell") { $0.agentAllow == ["org.gnome.Shell"] },
            Case(text: "[agents]\nallow = a;b ; /usr/bin/c d ;;") { $0.agentAllow == ["a", "b", "/usr/bin/c d"] },
            Case(text: "[agents]\nallow =") { $0.agentAllow == [] },
            Case(text: "[agents]\nallow = x\nallow = y") { $0.agentAllow == ["y"] },
            Case(text: "[app \"org.example.Maps\"]\npolicy = always") { $0.apps == ["org.example.Maps": .always] },
            Case(text: "[app \"/usr/bin/my tool\"]\npolicy = restricted") { $0.apps == ["/usr/bin/my tool": .restricted] },
            Case(text: "[app \"a\\\"b\\\\c\"]\npolicy = always") { $0.apps == ["a\"b\\c": .always] },
            Case(text: "[app \"x#y;z]\"]\npolicy = always") { $0.apps == ["x#y;z]": .always] },
            Case(text: "[ app   \"x\" ]\npolicy = always") { $0.apps == ["x": .always] },
            Case(text: "[app \"x\"]\n[app \"y\"]\npolicy = restricted\n[app \"x\"]\npolicy = always") {
                $0.apps == ["x": .always, "y": .restricted]
            },
            Case(text: "[app \"x\"]\npolicy = always\npolicy = restricted") { $0.apps == ["x": .restricted] },
            Case(text: "[daemon]\ndesktop-entries = /a; /b") { $0.desktopEntries == ["/a", "/b"] },
            Case(text: "[daemon]\nprompt-timeout = 5\n[daemon]\nprompt-timeout = 7") { $0.promptTimeout == 7 },
            Case(text: "[limits]\nsessions-per-user = 8") { $0.limits.sessionsPerUser == 8 },
            Case(text: "[limits]\nwaiting-per-user = 65536") { $0.limits.waitingPerUser == 65536 },
            Case(text: "[limits]\nprompts-per-user = 1") { $0.limits.promptsPerUser == 1 },
            Case(text: "[limits]\nconsents-per-user = 20") { $0.limits.consentsPerUser == 20 },
            Case(text: "[limits]\nlocation-requests-per-session = 3") { $0.limits.locationRequestsPerSession == 3 },
        ]
        for c in cases {
            let config = try parse(c.text)
            XCTAssertTrue(c.check(config), "case failed:\n\(c.text)\n→ \(config)")
        }
    }

    func testCommentsAndWhitespace() throws {
        let good = "# comment\n  ; indented comment\n\t[daemon]\t# trailing\r\n" +
            "  prompt-timeout\t=\t12 # twelve\r\n" +
            "state-dir = /a/b   ; not a comment after a value\n" +
            "[agents] ; comment after header\n" +
            "allow = a;b # comment\n" +
            "[app \"p\"]\n"
        // '#' without a blank before it is part of the value, which is then bad.
        XCTAssertEqual(error(good + "policy = always#notacomment\n")?.line, 9)

        let c = try parse(good)
        XCTAssertEqual(c.promptTimeout, 12)
        XCTAssertEqual(c.stateDir, "/a/b   ; not a comment after a value")
        XCTAssertEqual(c.agentAllow, ["a", "b"])
        XCTAssertEqual(c.apps, [:])  // section given, but no key
        XCTAssertEqual(try parse("[agents]\nallow =# comment").agentAllow, [])
    }

    func testMergesOnTopOfExistingConfig() throws {
        var base = Config()
        base.promptTimeout = 5
        base.apps["keep"] = .always
        let c = try parse("[app \"new\"]\npolicy = restricted", into: base)
        XCTAssertEqual(c.promptTimeout, 5)
        XCTAssertEqual(c.apps, ["keep": .always, "new": .restricted])
    }

    func testErrorLeavesConfigUntouched() {
        var c = Config()
        XCTAssertThrowsError(try ConfigParser.parse("[daemon]\nprompt-timeout = 3\nbogus = 1",
                                                    file: "f", into: &c))
        XCTAssertEqual(c, Config())
    }

    func testErrors() {
        let cases: [(text: String, line: Int, contains: String)] = [
            ("prompt-timeout = 5", 1, "outside of any section"),
            ("# c\n\n[bogus]", 3, "unknown section [bogus]"),
            ("[Daemon]", 1, "unknown section"),
            ("[daemon", 1, "malformed section header"),
            ("[daemon] x", 1, "unexpected text after section header"),
            ("[app]", 1, "needs a quoted app-id"),
            ("[app x]", 1, "malformed section header"),
            ("[app \"x]", 1, "unterminated quote"),
            ("[app \"\"]", 1, "empty app-id"),
            ("[app \"a\\nb\"]", 1, "bad escape"),
            ("[agents]\nallow = org.gnome.Shell, org.kde.plasmashell", 2,
             "allow separates app-ids with ';', not ',' ('org.gnome.Shell, org.kde.plasmashell')"),
            ("[daemon \"x\"]", 1, "unknown section 'daemon'"),
            ("[daemon]\nfoo = 1", 2, "unknown key 'foo' in [daemon]"),
            ("[agents]\ndeny = x", 2, "unknown key 'deny' in [agents]"),
            ("[limits]\nsessions = 3", 2, "unknown key 'sessions' in [limits]"),
            ("[limits]\nsessions-per-user = 0", 2, "from 1 to 65536"),
            ("[limits]\nsessions-per-user = -1", 2, "from 1 to 65536"),
            ("[limits]\nwaiting-per-user = 1.5", 2, "whole number"),
            ("[limits]\nconsents-per-user = 65537", 2, "from 1 to 65536"),
            ("[limits]\nprompts-per-user = 65", 2, "at most 64"),
            ("[app \"x\"]\nmode = always", 2, "unknown key 'mode' in [app \"x\"]"),
            ("[geoclue]\nserve = true", 1, "unknown section [geoclue]"),
            ("[daemon]\n\nprompt-timeout", 3, "expected 'key = value'"),
            ("[daemon]\n= 5", 2, "missing key"),
            ("[daemon]\nprompt-timeout = 0", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = -1", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = ", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = abc", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = inf", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = nan", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 1e3", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 0x10", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 86401", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 5s", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = .5", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 5.", 2, "prompt-timeout must be"),
            ("[daemon]\nprompt-timeout = 1.2.3", 2, "prompt-timeout must be"),
            ("[daemon]\ngpsd-linger = -0.1", 2, "gpsd-linger must be"),
            ("[daemon]\ngpsd-linger = 100000", 2, "gpsd-linger must be"),
            ("[daemon]\nreduced-grid = 0", 2, "reduced-grid must be"),
            ("[daemon]\nreduced-grid = 0.5", 2, "reduced-grid must be"),
            ("[daemon]\nreduced-grid = 1000001", 2, "reduced-grid must be"),
            ("[daemon]\nstate-dir = var/lib", 2, "state-dir must be an absolute path"),
            ("[daemon]\nstate-dir =", 2, "state-dir must be an absolute path"),
            ("[daemon]\nsystem-uid-max = -1", 2, "system-uid-max must be a uid"),
            ("[daemon]\nsystem-uid-max = 4294967295", 2, "system-uid-max must be a uid"),
            ("[daemon]\nsystem-uid-max = 99999999999", 2, "system-uid-max must be a uid"),
            ("[daemon]\nsystem-uid-max = 1e3", 2, "system-uid-max must be a uid"),
            ("[daemon]\nsystem-uid-max = games", 2, "system-uid-max must be a uid"),
            ("[daemon]\nsystem-uid-max =", 2, "system-uid-max must be a uid"),
            ("[app \"x\"]\npolicy = allow", 2, "policy must be 'always' or 'restricted'"),
            ("[app \"x\"]\npolicy = Always", 2, "policy must be"),
            ("[app \"x\"]\npolicy =", 2, "policy must be"),
            ("[app \"x\"]\npolicy = always\nusers = installed", 3, "unknown key 'users'"),
            ("[daemon]\ndesktop-entries = usr/share/applications", 2, "desktop-entries wants absolute directories"),
            ("[daemon]\r\nprompt-timeout = 5\r\nx\r\n", 3, "expected 'key = value'"),
        ]
        for c in cases {
            guard let e = error(c.text) else { continue }
            XCTAssertEqual(e.file, "test.conf")
            XCTAssertEqual(e.line, c.line, "line for:\n\(c.text)\n→ \(e)")
            XCTAssertTrue(e.reason.contains(c.contains), "reason for:\n\(c.text)\n→ \(e.reason)")
            XCTAssertEqual(e.description, "test.conf:\(c.line): \(e.reason)")
        }
    }

    func testInvalidUTF8IsReportedWithItsLine() {
        var c = Config()
        let bytes = Array("[daemon]\n# ok\n".utf8) + [0x23, 0xFF, 0x0A]
        XCTAssertThrowsError(try ConfigParser.parse(bytes: bytes, file: "f.conf", into: &c)) { e in
            XCTAssertEqual(e as? ConfigError, ConfigError(file: "f.conf", line: 3, reason: "not valid UTF-8"))
        }
    }

    func testDescriptionWithoutLine() {
        XCTAssertEqual(ConfigError(file: "/etc/x.conf", line: 0, reason: "cannot read: Permission denied").description,
                       "/etc/x.conf: cannot read: Permission denied")
    }

    /// A front end's section (`Config.frontEndSections`) is kept as written, in
    /// order and with where each line was, for the front end to check; any
    /// other unknown section is an error, as before.
    func testAFrontEndsSectionIsKeptForIt() throws {
        var base = Config()
        base.frontEndSections = ["other"]
        let c = try parse("[other]\nserve = true\n# c\nkey = a ; b # note\n[daemon]\nprompt-timeout = 5\n[other]\nserve = no", into: base)
        XCTAssertEqual(c.frontEndEntries["other"], [
            ConfigEntry(key: "serve", value: "true", file: "test.conf", line: 2),
            ConfigEntry(key: "key", value: "a ; b", file: "test.conf", line: 4),
            ConfigEntry(key: "serve", value: "no", file: "test.conf", line: 8),
        ])
        XCTAssertEqual(c.promptTimeout, 5)
        XCTAssertEqual(c.frontEndEntries["other"]?.last?.fail("bad").description, "test.conf:8: bad")
        var e: ConfigError?
        do { _ = try parse("[other \"x\"]", into: base) } catch let err as ConfigError { e = err }
        XCTAssertEqual(e?.reason, "unknown section 'other' (only [app \"…\"] takes a name)")
        do { _ = try parse("[daemon", into: base) } catch let err as ConfigError { e = err }
        XCTAssertTrue(e?.reason.hasSuffix("[app \"APP_ID\"] or [other]") == true, "\(String(describing: e))")
    }
}
