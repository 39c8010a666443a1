import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Within one uid an identity can be forged: exec another binary after
/// connecting, bind-mount over a binary in a user namespace, sit in a cgroup
/// named like an app unit or a Snap, chroot into a root with a hand-written
/// `.flatpak-info`. Each forgery runs on the local-user rig as uid 65534, with
/// config `policy = always` and `[agents] allow` naming the forged id, while
/// the victim (another uid) keeps tapping and fetching fixes. The forged id
/// may key the attacker's own records (docs/dbus-api.md, "Identity"), but it
/// must get no status 3, no fix and no agent slot from config.
final class LocalUserForgedIdentityTests: XCTestCase {
    static let firefox = "org.mozilla.firefox"
    var rig: LocalUserRig!

    override func setUpWithError() throws {
        rig = try LocalUserRig(config: config(naming: forgedID(for: name)))
    }

    override func tearDown() {
        rig?.stop()
        rig = nil
    }

    /// The id each test forges, which its config grants.
    private func forgedID(for test: String) -> String {
        if test.contains("testExecAfterConnecting") || test.contains("testBindMountOverABinary") { return LocalUserRig.sleepPath }
        if test.contains("testSnapLikeCgroup") { return "firefox" }
        return Self.firefox
    }

    /// `policy = always` for `id`, and `[agents] allow` for `id` and the victim's
    /// agent (geoconsentctl of the victim's uid, a system uid).
    private func config(naming id: String) -> String {
        let victimAgent = realpathOf(TestPaths.binDir + "/geoconsentctl")
        return "[agents]\nallow = \(id); \(victimAgent)\n\n[app \"\(id)\"]\npolicy = always\n"
    }

    // MARK: the forgeries

    func testExecAfterConnectingUnlocksNothing() throws {
        // The connection's PID runs /usr/bin/sleep when first resolved.
        try forgery("exec after connecting", appID: LocalUserRig.sleepPath,
                    agentRefusal: "only in processes of system uids") {
            try rig.run(LocalUserRig.attacker, ["forge", "--how", "exec", "--target", LocalUserRig.sleepPath],
                        log: "forge-exec.log", timeout: 60).output
        }
    }

    func testBindMountOverABinaryUnlocksNothing() throws {
        // This program mounted at /usr/bin/sleep in a mount namespace of its own.
        try forgery("bind mount over a binary", appID: LocalUserRig.sleepPath,
                    agentRefusal: "only in processes of system uids") {
            try rig.run(LocalUserRig.attacker, ["forge", "--how", "bind-mount", "--target", LocalUserRig.sleepPath],
                        log: "forge-bind.log", timeout: 60).output
        }
    }

    func testAppUnitCgroupUnlocksNothing() throws {
        // What `systemd-run --user --scope --unit=app-gnome-org.mozilla.firefox-4242`
        // gives any user; without a user manager here, root stages the cgroup.
        try forgery("cgroup app-gnome-org.mozilla.firefox-4242.scope", appID: Self.firefox,
                    agentRefusal: "only in processes of system uids") {
            try inCgroup("app-gnome-org.mozilla.firefox-4242.scope")
        }
    }

    func testSnapLikeCgroupIsNoSnap() throws {
        try forgery("cgroup snap.firefox.firefox-4242.scope", appID: realpathOf(LocalUserRig.binary),
                    agentRefusal: "is not allowed to register a consent agent") {
            try inCgroup("snap.firefox.firefox-4242.scope")
        }
    }

    func testFlatpakInfoInAChrootOfItsOwnIsNoFlatpak() throws {
        // unshare(CLONE_NEWUSER), chroot into a directory holding a well-formed
        // .flatpak-info: the root is no mount, as no sandbox bwrap made has.
        try flatpakRoot(bindMounted: false, notVerified: "its root is no mount point: a chroot into a directory, not a sandbox")
    }

    func testFlatpakInfoInABindMountedRootIsNoFlatpakUnlessInstalled() throws {
        // A mount namespace too and the root bind-mounted, so that it passes for a
        // sandbox; it names an app this machine has not installed system-wide.
        try flatpakRoot(bindMounted: true, notVerified: "\(Self.firefox) is not installed system-wide")
    }

    private func flatpakRoot(bindMounted: Bool, notVerified: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let how = bindMounted ? "bind-mounted root" : "chroot"
        try forgery("\(how) with .flatpak-info of \(Self.firefox)", appID: Self.firefox,
                    agentRefusal: "Sandboxed applications cannot register consent agents", file: file, line: line) {
            let dir = try rig.directory("forged-root", ownedBy: LocalUserRig.attacker)
            let out = try rig.run(LocalUserRig.attacker, ["forge", "--how", "flatpak-root", "--dir", dir, "--app-id", Self.firefox]
                                    + (bindMounted ? ["--bind-root"] : []),
                                  log: "forge-flatpak.log", timeout: 60).output
            XCTAssertTrue(out.contains("chrooted"), out + tailOf(rig.work.file("forge-flatpak.log")), file: file, line: line)
            let log = rig.daemon.log()
            XCTAssertTrue(log.contains("claims a Flatpak, not verified: \(notVerified)"), log, file: file, line: line)
            XCTAssertTrue(log.contains("config naming it does not apply: app \"\(Self.firefox)\""), log, file: file, line: line)
            return out
        }
    }

    // MARK: helpers

    /// Runs `attack` (which returns the attacker's output) while the victim taps,
    /// and checks what the forged identity got: resolved as `appID` (advisory),
    /// but no status 3, no fix, and `RegisterAgent` refused with `agentRefusal`.
    private func forgery(_ label: String, appID: String, agentRefusal: String,
                         file: StaticString = #filePath, line: UInt = #line, _ attack: () throws -> String) throws {
        try rig.whileVictimTaps("forged identity: \(label)", file: file, line: line) { _ in
            let out = try attack()
            func reply(_ member: String) -> String {
                out.split(separator: "\n").first { $0.hasPrefix("reply \(member) ") }.map(String.init) ?? "(no reply to \(member))"
            }
            let auth = reply("GetAuthorization"), tap = reply("RequestOneTimeAuthorization")
            let fix = reply("RequestLocation"), agent = reply("RegisterAgent")
            let context = "\n\(out)\ndaemon:\n\(rig.daemon.log())"
            XCTAssertTrue(auth.hasPrefix("reply GetAuthorization ok status "), auth + context, file: file, line: line)
            XCTAssertTrue(auth.hasSuffix(" app-id \(appID)"), "resolved as: \(auth)" + context, file: file, line: line)
            XCTAssertFalse(auth.contains(" status 3 "), "config granted the forged id: \(auth)", file: file, line: line)
            XCTAssertFalse(tap.contains("ok status 3"), "config granted the forged id: \(tap)", file: file, line: line)
            XCTAssertFalse(fix.contains(" ok "), "the forged id got a fix: \(fix)", file: file, line: line)
            XCTAssertTrue(agent.contains("error \(DBusError.accessDeniedName)"), "the forged id got the agent slot: \(agent)",
                          file: file, line: line)
            XCTAssertTrue(agent.contains(agentRefusal), agent, file: file, line: line)
            return "attacker: \(auth.dropFirst(6)); \(tap.dropFirst(6)); \(fix.dropFirst(6)); \(agent.dropFirst(6).prefix(120))"
        }
    }

    /// The attacker connects, root moves it into the cgroup `name` of the
    /// unified hierarchy, then it calls. Returns its output.
    private func inCgroup(_ name: String) throws -> String {
        guard let hierarchy = Self.unifiedCgroupMount() else { throw XCTSkip("no cgroup2 hierarchy mounted") }
        let dir = hierarchy + "/" + name
        guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
            throw XCTSkip("cannot create the cgroup \(dir): \(String(cString: strerror(errno)))")
        }
        defer { rmdir(dir) }
        let go = rig.work.file("go-cgroup")
        let a = try rig.start(LocalUserRig.attacker, ["forge", "--how", "wait", "--go-file", go],
                              log: "forge-cgroup.log", captureStdout: true)
        defer {
            if a.isRunning {
                try? "\(a.pid)".write(toFile: hierarchy + "/cgroup.procs", atomically: false, encoding: .utf8)
                a.stop()
            }
        }
        var lines: [String] = []
        guard let connected = a.readStdoutLine(timeout: 15), connected.hasPrefix("connected pid=") else {
            throw HarnessError("the attacker did not connect: \(tailOf(rig.work.file("forge-cgroup.log")))")
        }
        lines.append(connected)
        guard let pid = pid_t(connected.split(separator: " ")[1].dropFirst("pid=".count)) else {
            throw HarnessError("no pid in \(connected)")
        }
        do {
            try "\(pid)".write(toFile: dir + "/cgroup.procs", atomically: false, encoding: .utf8)
        } catch {
            throw XCTSkip("cannot move PID \(pid) into \(dir): \(error)")
        }
        let cgroup = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? ""
        XCTAssertTrue(cgroup.contains("0::/\(name)\n"), cgroup)
        XCTAssertTrue(FileManager.default.createFile(atPath: go, contents: Data()))
        chmod(go, 0o644)
        while let l = a.readStdoutLine(timeout: 30) {
            lines.append(l)
            if l.hasPrefix("reply RegisterAgent ") { break }
        }
        XCTAssertNotNil(a.waitForExit(timeout: 10), "the attacker did not finish")
        return lines.joined(separator: "\n")
    }

    /// Where the cgroup2 (unified) hierarchy is mounted: `/sys/fs/cgroup`, or
    /// `/sys/fs/cgroup/unified` on a hybrid system.
    static func unifiedCgroupMount() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
            let fields = halves[0].split(separator: " ")
            if fields.count > 4 { return String(fields[4]) }
        }
        return nil
    }
}

/// `path` with every symbolic link resolved (the daemon resolves executables so).
func realpathOf(_ path: String) -> String {
    guard let p = realpath(path, nil) else { return path }
    defer { free(p) }
    return String(cString: p)
}
