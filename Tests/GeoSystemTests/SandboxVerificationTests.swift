import Foundation
import XCTest
@testable import GeoSystem
import GeoCore

/// When a sandbox id counts as verified (docs/dbus-api.md, "Identity"): a
/// Flatpak by its `.flatpak-info`, a mount namespace of its own and a
/// system-wide installation of the app (FlatpakIdentity.swift); a Snap only by
/// the AppArmor label the bus reports (SnapIdentity.swift).
final class SandboxVerificationTests: XCTestCase {
    static let firefoxInfo = """
        [Application]
        name=org.mozilla.firefox
        runtime=runtime/org.freedesktop.Platform/x86_64/23.08

        [Instance]
        instance-id=4242
        app-path=/var/lib/flatpak/app/org.mozilla.firefox/x86_64/stable/abc/files

        """

    /// A fixture /proc with PID 1 in mount namespace 1, and a system
    /// installation in which `installed` app ids have a directory.
    private struct World {
        let fake = FakeProc()
        var installation: String { fake.dir.sub("var/lib/flatpak") }

        init(installed: [String] = ["org.mozilla.firefox"]) {
            fake.process(1, comm: "init", exe: "/sbin/init", mountNamespace: 1)
            for id in installed {
                try? FileManager.default.createDirectory(atPath: installation + "/app/" + id + "/x86_64",
                                                         withIntermediateDirectories: true)
            }
        }

        func resolve(_ pid: UInt32 = 100, label: String? = nil) -> Result<ResolvedApp, IdentityError> {
            var r = AppIdentityResolver(procRoot: fake.root, flatpakInstallations: [installation])
            // The fixture belongs to whoever runs the tests, not necessarily root.
            r.installationOwner = getuid()
            return r.resolve(pid: pid, uid: getuid(), securityLabel: label.map { Array($0.utf8) + [0] })
        }
    }

    private func resolved(_ r: Result<ResolvedApp, IdentityError>, file: StaticString = #filePath,
                          line: UInt = #line) -> ResolvedApp? {
        guard case .success(let app) = r else {
            XCTFail("expected an identity, got \(r)", file: file, line: line)
            return nil
        }
        return app
    }

    // MARK: Flatpak

    func testASandboxOfAnInstalledAppIsVerified() {
        let w = World()
        w.fake.process(100, exe: "/app/lib/firefox/firefox", flatpakInfo: Self.firefoxInfo, mountNamespace: 2)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.appID, "org.mozilla.firefox")
        XCTAssertEqual(app?.identity, .flatpak)
        XCTAssertNil(app?.notVerified)
        XCTAssertEqual(app?.executable, "/app/lib/firefox/firefox")
    }

    func testAChrootInTheHostsMountNamespaceIsNotAFlatpak() {
        // unshare(CLONE_NEWUSER) and chroot(2) leave the process in PID 1's mount
        // namespace; bwrap never does.
        let w = World()
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountNamespace: 1)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertEqual(app?.appID, "org.mozilla.firefox", "still the name its records are kept under")
        XCTAssertTrue(app?.sandboxed ?? false, "restricted as a sandbox")
        XCTAssertTrue(app?.notVerified?.contains("shares PID 1's mount namespace (mnt:[1]): a chroot, not a sandbox") ?? false,
                      app?.notVerified ?? "")
    }

    func testAnAppNotInstalledSystemWideIsNotVerified() {
        // A sandbox of its own that names an app the administrator never installed
        // (or that is installed for one user only, which anyone can do with any id).
        let w = World(installed: ["org.gnome.Maps"])
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountNamespace: 2)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertTrue(app?.notVerified?.contains("org.mozilla.firefox is not installed system-wide (no directory owned by root at "
                                                  + w.installation + "/app/org.mozilla.firefox)") ?? false,
                      app?.notVerified ?? "")
    }

    func testAnInstallationMustBeARealDirectoryOfItsOwner() throws {
        // A symbolic link there is not the administrator's installation.
        let w = World(installed: [])
        try FileManager.default.createDirectory(atPath: w.installation + "/app", withIntermediateDirectories: true)
        let elsewhere = w.fake.dir.sub("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        XCTAssertEqual(symlink(elsewhere, w.installation + "/app/org.mozilla.firefox"), 0)
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountNamespace: 2)
        XCTAssertEqual(resolved(w.resolve())?.identity, .unverifiedFlatpak)
        // Nor a directory of another owner (only root can make one here).
        guard getuid() == 0 else { return }
        let w2 = World()
        XCTAssertEqual(chown(w2.installation + "/app/org.mozilla.firefox", 65534, 65534), 0)
        w2.fake.process(100, flatpakInfo: Self.firefoxInfo, mountNamespace: 2)
        XCTAssertEqual(resolved(w2.resolve())?.identity, .unverifiedFlatpak)
    }

    func testAFlatpakInfoWithoutInstanceIsNotVerified() {
        // Flatpak writes [Instance] instance-id for every sandbox, and
        // xdg-desktop-portal refuses a .flatpak-info without it.
        let w = World()
        w.fake.process(100, flatpakInfo: "[Application]\nname=org.mozilla.firefox\n", mountNamespace: 2)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertTrue(app?.notVerified?.contains("no [Instance] instance-id") ?? false, app?.notVerified ?? "")
        let empty = World()
        empty.fake.process(100, flatpakInfo: "[Application]\nname=org.mozilla.firefox\n[Instance]\ninstance-id=\n",
                           mountNamespace: 2)
        XCTAssertEqual(resolved(empty.resolve())?.identity, .unverifiedFlatpak)
    }

    func testUnreadableMountNamespacesAreNotVerified() {
        let w = World()
        w.fake.process(100, flatpakInfo: Self.firefoxInfo)   // no ns/mnt
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertTrue(app?.notVerified?.contains("cannot be compared with PID 1's") ?? false, app?.notVerified ?? "")
    }

    func testUnsafeFlatpakInfoStillRefusesTheCaller() {
        // Verification comes after the safe read: a FIFO is refused as before.
        let w = World()
        w.fake.process(100, mountNamespace: 2)
        let info = w.fake.dir.sub("100/root/.flatpak-info")
        try? FileManager.default.createDirectory(atPath: w.fake.dir.sub("100/root"), withIntermediateDirectories: true)
        XCTAssertEqual(mkfifo(info, 0o644), 0)
        guard case .failure(.refused(let why)) = w.resolve() else { return XCTFail("expected refused") }
        XCTAssertTrue(why.contains("is not a regular file (a FIFO)"), why)
    }

    // MARK: Snap

    func testSnapNamesFromSecurityLabels() {
        let cases: [(String, String?)] = [
            ("snap.firefox.firefox (enforce)", "firefox"),
            ("snap.firefox.geckodriver (enforce)", "firefox"),
            ("snap.firefox.hook.configure (enforce)", "firefox"),
            ("snap.firefox_work.firefox (enforce)", "firefox_work"),
            ("snap.my-daemon.daemon (kill)", "my-daemon"),
            ("snap.x1.y (enforce)", "x1"),
            // Not confined, so not a sandbox.
            ("snap.firefox.firefox (complain)", nil),
            ("snap.firefox.firefox (unconfined)", nil),
            ("snap.firefox.firefox", nil),
            ("unconfined", nil),
            // Not snapd's profiles.
            ("/usr/bin/firefox (enforce)", nil),
            ("firefox (enforce)", nil),
            ("snap.firefox (enforce)", nil),
            ("snap.firefox. (enforce)", nil),
            ("snap..firefox (enforce)", nil),
            ("snap.Firefox.firefox (enforce)", nil),
            ("snap.fire--fox.firefox (enforce)", nil),
            ("snap.-firefox.firefox (enforce)", nil),
            ("snap.firefox-.firefox (enforce)", nil),
            ("snap.1234.x (enforce)", nil),
            ("snap.firefox_.x (enforce)", nil),
            ("snap.firefox_ABC.x (enforce)", nil),
            ("snap.firefox_12345678901.x (enforce)", nil),
            ("snap." + String(repeating: "a", count: 41) + ".x (enforce)", nil),
            ("snap.fire\u{202E}fox.x (enforce)", nil),
            ("snap.firefox.firefox(enforce)", nil),
            ("", nil),
        ]
        for (label, name) in cases {
            XCTAssertEqual(AppIdentityResolver.snapName(fromSecurityLabel: Array(label.utf8) + [0]), name, label)
        }
        // The bus sends the bytes and a NUL; a final newline (as in attr/current) is no different.
        XCTAssertEqual(AppIdentityResolver.snapName(fromSecurityLabel: Array("snap.a.b (enforce)\n".utf8)), "a")
        XCTAssertNil(AppIdentityResolver.snapName(fromSecurityLabel: Array("snap.a.b (enforce)\nx".utf8)))
        XCTAssertNil(AppIdentityResolver.snapName(fromSecurityLabel: Array(repeating: 0x61, count: 5000)))
    }

    func testTheLabelMakesTheSnapAndTheCgroupDoesNot() {
        let w = World()
        let cgroup = "0::/user.slice/user@1000.service/app.slice/snap.firefox.firefox-1f2e.scope\n"
        w.fake.process(100, cgroup: cgroup, exe: "/snap/firefox/4242/usr/lib/firefox/firefox")
        let labelled = resolved(w.resolve(label: "snap.firefox.firefox (enforce)"))
        XCTAssertEqual(labelled?.appID, "firefox")
        XCTAssertEqual(labelled?.identity, .snap)
        let unlabelled = resolved(w.resolve())
        XCTAssertEqual(unlabelled?.identity, .executable, "a cgroup name proves nothing")
        XCTAssertEqual(unlabelled?.appID, "/snap/firefox/4242/usr/lib/firefox/firefox")
        let devmode = resolved(w.resolve(label: "snap.firefox.firefox (complain)"))
        XCTAssertEqual(devmode?.identity, .executable)
        // The label is the kernel's word: it wins over a .flatpak-info the process shows.
        let both = World()
        both.fake.process(100, flatpakInfo: Self.firefoxInfo, mountNamespace: 2)
        XCTAssertEqual(resolved(both.resolve(label: "snap.firefox.firefox (enforce)"))?.identity, .snap)
    }
}
