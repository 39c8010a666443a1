import Foundation
import XCTest
@testable import GeoSystem
import GeoCore

final class AppIdentityTests: XCTestCase {
    /// Resolves as the fixture's owner (this process's uid) would be; the start
    /// time is checked by the tests that care and left out of the comparison here.
    private func resolve(_ fake: FakeProc, _ pid: UInt32 = 100) -> Result<ResolvedApp, IdentityError> {
        AppIdentityResolver(procRoot: fake.root).resolve(pid: pid, uid: getuid()).map {
            var app = $0
            app.startTime = 0
            app.cgroup = nil   // testTheUnifiedCgroupIsReportedForPlacement
            return app
        }
    }

    /// The `0::` path comes with the identity (rules 3 and 4), for LogindWatch's
    /// placements by cgroup; none from a cgroup v1 file, none over its bound.
    func testTheUnifiedCgroupIsReportedForPlacement() {
        func cgroup(_ text: String?) -> String?? {
            let fake = FakeProc().process(100, cgroup: text)
            return try? AppIdentityResolver(procRoot: fake.root).resolve(pid: 100, uid: getuid()).get().cgroup
        }
        XCTAssertEqual(cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), .some("/user.slice/user-1000.slice/session-3.scope"))
        XCTAssertEqual(cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.example.Foo-77.scope\n"),
                       .some("/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.example.Foo-77.scope"))
        XCTAssertEqual(cgroup("1:name=systemd:/user.slice/session-3.scope\n"), .some(nil))
        XCTAssertEqual(cgroup("0::/" + String(repeating: "a", count: ResolvedApp.cgroupBytes) + "\n"), .some(nil))
    }

    /// The app expected: by default an executable path for an id starting with
    /// "/", a systemd unit's id otherwise.
    private func app(_ id: String, _ kind: IdentityKind? = nil, exe: String = "/usr/bin/app",
                     notVerified: String? = nil) -> Result<ResolvedApp, IdentityError> {
        .success(ResolvedApp(appID: id, identity: kind ?? (id.hasPrefix("/") ? .executable : .systemdUnit),
                             executable: exe, notVerified: notVerified))
    }

    // MARK: fallbacks and exe

    /// An interpreter's script is the app (rule 4): two Python apps are two
    /// apps. A command line of no script leaves the interpreter's path.
    func testAnInterpretersScriptIsTheApp() {
        let python = "/usr/bin/python3"
        let fake = FakeProc()
            .process(100, exe: python, cmdline: [python, "/usr/bin/env"])
            .process(101, exe: python, cmdline: ["python3", "tools/maps.py"], cwd: "/home/ann")
            .process(102, exe: python, cmdline: ["python3", "-c", "import maps"])
            .process(103, exe: "/usr/bin/app", cmdline: ["app", "/usr/bin/env"])
        XCTAssertEqual(resolve(fake, 100), .success(ResolvedApp(appID: "/usr/bin/env", identity: .script, executable: python,
                                                               script: "/usr/bin/env", installed: true)),
                       "a root-owned interpreter running a root-owned file under /usr: installed")
        XCTAssertEqual(resolve(fake, 101), .success(ResolvedApp(appID: "/home/ann/tools/maps.py", identity: .script,
                                                               executable: python, script: "/home/ann/tools/maps.py")),
                       "relative to its working directory; not under /usr, so not installed")
        XCTAssertEqual(resolve(fake, 102), .success(ResolvedApp(appID: python, identity: .executable, executable: python)),
                       "code of no file: the interpreter, running code that is not the administrator's")
        XCTAssertEqual(resolve(fake, 103), app("/usr/bin/app"), "no interpreter: its operands are no script")
    }

    /// A systemd unit's id stays the app's, and the script comes with it, to
    /// find the app's desktop entry.
    func testAUnitsScriptComesWithItsID() {
        let fake = FakeProc().process(100, cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Maps-77.scope\n",
                                      exe: "/usr/bin/gjs-console", cmdline: ["gjs", "/usr/bin/env"])
        XCTAssertEqual(resolve(fake), .success(ResolvedApp(appID: "org.gnome.Maps", identity: .systemdUnit,
                                                          executable: "/usr/bin/gjs-console", script: "/usr/bin/env",
                                                          installed: FileManager.default.fileExists(atPath: "/usr/bin/gjs-console"))))
    }

    func testPlainProcessResolvesToExecutable() {
        let fake = FakeProc().process(100)
        XCTAssertEqual(resolve(fake), app("/usr/bin/app"))
    }

    func testDeletedExecutableSuffixIsStripped() {
        let fake = FakeProc().process(100, exe: "/usr/bin/updated app (deleted)")
        XCTAssertEqual(resolve(fake), app("/usr/bin/updated app", exe: "/usr/bin/updated app"))
    }

    func testCgroupV1OnlyFallsBackToExecutable() {
        let v1 = """
        12:pids:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Maps-1234.scope
        5:cpu,cpuacct:/user.slice
        1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Maps-1234.scope

        """
        let fake = FakeProc().process(100, cgroup: v1)
        XCTAssertEqual(resolve(fake), app("/usr/bin/app"))
    }

    func testMissingCgroupFileMeansGone() {
        let fake = FakeProc().process(100, cgroup: nil)
        XCTAssertEqual(resolve(fake), .failure(.processGone))
    }

    func testZombieWithoutExeIsGone() {
        let fake = FakeProc().process(100, exe: nil)
        XCTAssertEqual(resolve(fake), .failure(.processGone))
    }

    func testExeUnreadableButAppUnitStillResolves() {
        let fake = FakeProc().process(100, cgroup: "0::/app.slice/app-org.example.Foo-77.scope\n", exe: nil)
        XCTAssertEqual(resolve(fake), app("org.example.Foo", exe: ""))
    }

    // MARK: systemd app units

    func testSystemdUnits() {
        let prefix = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
        let cases: [(unit: String, id: String?)] = [
            // scope with and without launcher
            ("app-gnome-org.gnome.Maps-1234.scope", "org.gnome.Maps"),
            ("app-org.gnome.Maps-1234.scope", "org.gnome.Maps"),
            ("app-kde-org.kde.marble-a1b2c3.scope", "org.kde.marble"),
            ("app-firefox-88.scope", "firefox"),
            ("app-gnome-firefox-88.scope", "firefox"),
            // escapes, undone after splitting
            ("app-gnome-google\\x2dchrome-4242.scope", "google-chrome"),
            ("app-google\\x2dchrome-4242.scope", "google-chrome"),
            ("app-gnome-my\\x20app\\x2d2-9.scope", "my app-2"),
            ("app-gnome-\\xc3\\xa9t\\xc3\\xa9-9.scope", "été"),
            // services, with and without instance
            ("app-gnome-org.gnome.Evince@12345.service", "org.gnome.Evince"),
            ("app-org.gnome.Evince@abc.service", "org.gnome.Evince"),
            ("app-org.gnome.Evince.service", "org.gnome.Evince"),
            ("app-gnome-org.gnome.Evince.service", "org.gnome.Evince"),
            ("app-firefox.service", "firefox"),
            ("app-gnome-gnome\\x2dterminal\\x2dserver.service", "gnome-terminal-server"),
            ("app-flatpak-org.foo.Bar@1.service", "org.foo.Bar"),
            // lenient with unescaped dashes in a dotted id
            ("app-org.example.My-App-1234.scope", "org.example.My-App"),
            // not app units → exe
            ("session-2.scope", nil),
            ("app.slice", nil),
            ("app-org.gnome.Maps.slice", nil),
            ("app-org.gnome.Maps.scope", nil),           // scope needs RANDOM
            ("app--1234.scope", nil),                     // empty id
            ("app-gnome-x-12\\x.scope", nil),             // bad escape in RANDOM
            ("app-gnome-bad\\xZZ-1.scope", nil),          // bad escape in id
            ("app-gnome-\\x2fusr\\x2fbin\\x2fx-1.scope", nil), // path-like id rejected
            ("app-gnome-\\xff-1.scope", nil),             // not UTF-8
            ("app@.service", nil),
            ("application-x-1.scope", nil),
            ("dbus-:1.2-org.gnome.Maps@0.service", nil),
        ]
        for c in cases {
            let fake = FakeProc().process(100, cgroup: prefix + c.unit + "\n")
            let expected = c.id.map { app($0) } ?? app("/usr/bin/app")
            XCTAssertEqual(resolve(fake), expected, c.unit)
        }
    }

    func testLastMatchingComponentWins() {
        let cg = "0::/user.slice/user@1000.service/app.slice/app-gnome-org.outer.App-1.scope/app-org.inner.App@2.service/sub\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: cg)), app("org.inner.App"))
    }

    func testUnifiedLineAmongHybridLines() {
        let cg = "12:pids:/user.slice\n1:name=systemd:/user.slice/app-v1.only-1.scope\n0::/user.slice/app.slice/app-org.unified.App-5.scope\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: cg)), app("org.unified.App"))
    }

    func testCgroupPathWithColons() {
        let cg = "0::/app.slice/app-dbus\\x2d:1.2\\x2dorg.x.slice/app-org.colon:id-3.scope\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: cg)), app("org.colon:id"))
    }

    // MARK: snap and flatpak

    func testSnapCgroupIsNoSnap() {
        // Any process can be put in a cgroup named so: only the AppArmor label
        // the bus reports makes a Snap (SandboxVerificationTests).
        let cg = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-c1b9d2c6-7d0e-4a7b.scope\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: cg, exe: "/snap/firefox/123/usr/lib/firefox/firefox")),
                       app("/snap/firefox/123/usr/lib/firefox/firefox", exe: "/snap/firefox/123/usr/lib/firefox/firefox"))
        let svc = "0::/system.slice/snap.my-daemon.daemon.service\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: svc)), app("/usr/bin/app"))
        // An app unit around it is still a unit.
        let both = "0::/app.slice/app-gnome-org.x.Y-1.scope/snap.foo.bar-2.scope\n"
        XCTAssertEqual(resolve(FakeProc().process(100, cgroup: both)), app("org.x.Y"))
    }

    func testFlatpakWinsOverCgroup() {
        let info = """
        [Application]
        name=org.gnome.Maps
        runtime=runtime/org.gnome.Platform/x86_64/46

        [Instance]
        instance-id=1234
        """
        let cg = "0::/user.slice/app.slice/app-flatpak-org.gnome.Maps-1234.scope\n"
        let fake = FakeProc().process(100, cgroup: cg, exe: "/app/bin/gnome-maps", flatpakInfo: info)
        // The fixture has no mount namespaces to compare: a claim, not verified.
        guard case .success(let maps) = resolve(fake) else { return XCTFail("\(resolve(fake))") }
        XCTAssertEqual(maps.appID, "org.gnome.Maps")
        XCTAssertEqual(maps.identity, .unverifiedFlatpak)
        XCTAssertEqual(maps.executable, "/app/bin/gnome-maps")
    }

    func testFlatpakInfoParsing() {
        let cases: [(String, String?)] = [
            ("[Application]\nname=a.b.C\n", "a.b.C"),
            ("[Application]\n  name = a.b.C  \n", "a.b.C"),
            ("[Context]\nname=wrong\n[Application]\nruntime=x\nname=org.right.App\n", "org.right.App"),
            ("[Runtime]\nname=org.freedesktop.Platform\n", nil),
            ("[Application]\nname=\n", nil),
            ("", nil),
        ]
        for (text, expected) in cases {
            let fake = FakeProc().process(100, flatpakInfo: text)
            if let expected {
                guard case .success(let got) = resolve(fake) else { XCTFail(text); continue }
                XCTAssertEqual(got.appID, expected, text)
                XCTAssertEqual(got.identity, .unverifiedFlatpak, text)
            } else {
                // A sandbox marker we cannot understand refuses rather than guesses.
                guard case .failure(.refused) = resolve(fake) else {
                    XCTFail("expected unreadable for \(text.debugDescription)"); continue
                }
            }
        }
    }

    // MARK: stat and PID reuse

    func testCommWithParensAndSpaces() {
        let fake = FakeProc().process(100, comm: "evil) (S 1 2 3) 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9", start: 777)
        XCTAssertEqual(AppIdentityResolver.parseStartTime(Array(FakeProc.stat(pid: 1, comm: "a) (b", start: 31).utf8)), 31)
        XCTAssertEqual(resolve(fake), app("/usr/bin/app"))
    }

    func testMissingPidIsGone() {
        let fake = FakeProc().process(100)
        XCTAssertEqual(resolve(fake, 101), .failure(.processGone))
        XCTAssertEqual(AppIdentityResolver(procRoot: "/proc").resolve(pid: 0x7FFF_FFF0, uid: getuid()), .failure(.processGone))
    }

    /// A zombie has exited (its pidfd is readable), however long its parent
    /// leaves it unreaped: it is gone, for `resolve` and for `verify` alike.
    func testAZombieIsGone() {
        let fake = FakeProc().process(100, start: 31)
        XCTAssertEqual(AppIdentityResolver(procRoot: fake.root).verify(pid: 100, uid: getuid(), startTime: 31).map { "ok" },
                       .success("ok"))
        for state in ["Z", "X"] {
            fake.dir.write("100/stat", FakeProc.stat(pid: 100, comm: "app", start: 31).replacingOccurrences(of: ") S ", with: ") \(state) "))
            XCTAssertEqual(resolve(fake), .failure(.processGone), state)
            XCTAssertEqual(AppIdentityResolver(procRoot: fake.root).verify(pid: 100, uid: getuid(), startTime: 31).map { "ok" },
                           .failure(.processGone), state)
        }
    }

    func testMalformedStatIsUnreadable() {
        let fake = FakeProc().process(100)
        fake.dir.write("100/stat", "100 (x) S 1 2\n")
        guard case .failure(.unreadable) = resolve(fake) else { return XCTFail("expected unreadable") }
    }

    func testPidReuseIsDetected() {
        let fake = FakeProc().process(100, start: 1000)
        var resolver = AppIdentityResolver(procRoot: fake.root)
        resolver.betweenReads = { fake.setStart(100, 2000) }
        XCTAssertEqual(resolver.resolve(pid: 100, uid: getuid()), .failure(.pidReused))
    }

    func testProcessVanishingDuringResolveIsGone() {
        let fake = FakeProc().process(100)
        var resolver = AppIdentityResolver(procRoot: fake.root)
        resolver.betweenReads = { try? FileManager.default.removeItem(atPath: fake.dir.sub("100")) }
        XCTAssertEqual(resolver.resolve(pid: 100, uid: getuid()), .failure(.processGone))
    }

    // MARK: the real /proc

    func testRealProcSelf() throws {
        let result = AppIdentityResolver().resolve(pid: UInt32(getpid()), uid: getuid())
        let resolved = try result.get()
        let exe = try readLink("/proc/self/exe")
        XCTAssertEqual(resolved.executable, exe)
        XCTAssertFalse(resolved.sandboxed)
        let cgroup = (try readFileString("/proc/self/cgroup")) ?? ""
        if resolved.appID.hasPrefix("/") {
            XCTAssertEqual(resolved.appID, exe)
        } else {
            // Running inside a desktop session's app unit.
            XCTAssertTrue(cgroup.contains("app-"), cgroup)
        }
        let stat = try XCTUnwrap(try readFileBytes("/proc/self/stat"))
        XCTAssertNotNil(AppIdentityResolver.parseStartTime(stat))
    }
}
