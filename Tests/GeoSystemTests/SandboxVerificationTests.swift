import Foundation
import XCTest
@testable import GeoSystem
import GeoCore

/// When a sandbox id counts as verified (docs/dbus-api.md, "Identity"): a
/// Flatpak by its `.flatpak-info`, a root that is a mount and a system-wide
/// installation of the app (FlatpakIdentity.swift); a Snap only by
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

    /// What bwrap leaves in `/proc/PID/mountinfo`: a tmpfs at the root it pivoted into.
    static let sandboxMounts = """
        1021 998 0:112 / / rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=65536k,mode=755,uid=1000,gid=1000
        1022 1021 0:57 /flatpak/runtime/files /usr ro,nosuid,nodev,relatime - ext4 /dev/vda2 ro
        1023 1021 0:57 /flatpak/app/files /app ro,nosuid,nodev,relatime - ext4 /dev/vda2 ro
        1030 1021 0:113 / /.flatpak-info ro,nosuid,nodev,relatime - tmpfs tmpfs rw

        """
    /// A chroot(2) into a directory: no mount is reachable at its root.
    static let chrootMounts = ""

    /// A fixture /proc and a system installation in which `installed` app ids
    /// have a directory.
    private struct World {
        let fake = FakeProc()
        var installation: String { fake.dir.sub("var/lib/flatpak") }

        init(installed: [String] = ["org.mozilla.firefox"]) {
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
        w.fake.process(100, exe: "/app/lib/firefox/firefox", flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.appID, "org.mozilla.firefox")
        XCTAssertEqual(app?.identity, .flatpak)
        XCTAssertNil(app?.notVerified)
        XCTAssertEqual(app?.executable, "/app/lib/firefox/firefox")
    }

    func testAChrootIntoADirectoryIsNotAFlatpak() {
        // unshare(CLONE_NEWUSER) and chroot(2): the root is a plain directory.
        let w = World()
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.chrootMounts)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertEqual(app?.appID, "org.mozilla.firefox", "still the name its records are kept under")
        XCTAssertTrue(app?.sandboxed ?? false, "restricted as a sandbox")
        XCTAssertTrue(app?.notVerified?.contains("its root is no mount point: a chroot into a directory, not a sandbox") ?? false,
                      app?.notVerified ?? "")
    }

    func testAnAppNotInstalledSystemWideIsNotVerified() {
        // A sandbox of its own that names an app the administrator never installed
        // (or that is installed for one user only, which anyone can do with any id).
        let w = World(installed: ["org.gnome.Maps"])
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts)
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
        w.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts)
        XCTAssertEqual(resolved(w.resolve())?.identity, .unverifiedFlatpak)
        // Nor a directory of another owner (only root can make one here).
        guard getuid() == 0 else { return }
        let w2 = World()
        XCTAssertEqual(chown(w2.installation + "/app/org.mozilla.firefox", 65534, 65534), 0)
        w2.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts)
        XCTAssertEqual(resolved(w2.resolve())?.identity, .unverifiedFlatpak)
    }

    func testAFlatpakInfoWithoutInstanceIsNotVerified() {
        // Flatpak writes [Instance] instance-id for every sandbox, and
        // xdg-desktop-portal refuses a .flatpak-info without it.
        let w = World()
        w.fake.process(100, flatpakInfo: "[Application]\nname=org.mozilla.firefox\n", mountinfo: Self.sandboxMounts)
        let app = resolved(w.resolve())
        XCTAssertEqual(app?.identity, .unverifiedFlatpak)
        XCTAssertTrue(app?.notVerified?.contains("no [Instance] instance-id") ?? false, app?.notVerified ?? "")
        let empty = World()
        empty.fake.process(100, flatpakInfo: "[Application]\nname=org.mozilla.firefox\n[Instance]\ninstance-id=\n",
                           mountinfo: Self.sandboxMounts)
        XCTAssertEqual(resolved(empty.resolve())?.identity, .unverifiedFlatpak)
    }

    func testMountinfoIsReadToABound() {
        // Missing: not verified.
        let w = World()
        w.fake.process(100, flatpakInfo: Self.firefoxInfo)
        XCTAssertEqual(resolved(w.resolve())?.notVerified, "it has no mountinfo")
        // Longer than 64 KiB (a host with many mounts): the first 64 KiB are read.
        let filler = (0..<2000).map { "\(2000 + $0) 1021 0:57 /x /mnt/m\($0) rw - ext4 /dev/vda2 rw\n" }.joined()
        XCTAssertGreaterThan(filler.utf8.count, IdentityLimits.fileBytes)
        let first = World()
        first.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts + filler)
        XCTAssertEqual(resolved(first.resolve())?.identity, .flatpak)
        let late = World()
        late.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: filler + Self.sandboxMounts)
        XCTAssertEqual(resolved(late.resolve())?.notVerified, "its root is no mount point in the first 64 KiB of its mountinfo")
    }

    func testRootMountLines() {
        let cases: [(String, Bool)] = [
            ("1 0 0:1 / / rw - tmpfs tmpfs rw\n", true),
            ("455 337 254:0 /tmp/chr / rw,relatime - ext4 /dev/vda rw\n", true),   // bind-mounted, then chroot
            ("1 0 0:1 / /proc rw - proc proc rw\n", false),
            ("1 0 0:1 / /\\040 rw - tmpfs tmpfs rw\n", false),
            ("1 0 0:1 / / rw - tmpfs tmpfs rw", false),   // a cut line does not count
            ("", false),
            ("garbage\n", false),
        ]
        for (text, root) in cases {
            XCTAssertEqual(AppIdentityResolver.rootIsAMount(mountinfo: Array(text.utf8)), root, text)
        }
    }

    func testUnsafeFlatpakInfoStillRefusesTheCaller() {
        // Verification comes after the safe read: a FIFO is refused as before.
        let w = World()
        w.fake.process(100, mountinfo: Self.sandboxMounts)
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
        both.fake.process(100, flatpakInfo: Self.firefoxInfo, mountinfo: Self.sandboxMounts)
        XCTAssertEqual(resolved(both.resolve(label: "snap.firefox.firefox (enforce)"))?.identity, .snap)
    }
}
