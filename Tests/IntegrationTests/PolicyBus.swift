import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

// A system-style bus with the shipped policy and the real daemon as a service
// user, and the helpers to act as other users on it (`setpriv`): shared by
// ServiceTests and the local-user rig (LocalUserRig.swift).

/// Runs a command with stdout captured and stderr in a temp file, and returns both.
struct LoggedRun {
    var status: Int32?
    var output: String
    var log: String
    var asStatusAndLog: (status: Int32?, log: String) { (status, log) }
}

func runLogged(_ exe: String, _ args: [String], environment: [String: String] = [:], timeout: Double = 30) throws -> LoggedRun {
    let dir = try TempDir()
    let log = dir.file("stderr")
    let r = try ChildProcess.run(exe, args, timeout: timeout, logPath: log, environment: environment)
    return LoggedRun(status: r.status, output: r.output, log: tailOf(log, max: 1 << 20))
}

func tailOf(_ path: String, max: Int = 8000) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    return String(decoding: data.suffix(max), as: UTF8.self)
}

func makeDirs(_ paths: String...) throws {
    for p in paths { try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true) }
}

func isDirectory(_ path: String) -> Bool {
    var d: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &d) && d.boolValue
}

/// Polls NameHasOwner(org.geoconsent.GeoConsent1) until the daemon owns it.
func waitForName(_ address: String, process: ChildProcess, log: String, timeout: Double = 10) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        let r = try TestBus.busctl(address: address, ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                      "org.freedesktop.DBus", "NameHasOwner", "s", GeoConsentAPI.busName])
        if r.status == 0 && r.output.contains("true") { return }
        if !process.isRunning { throw HarnessError("geoconsentd exited (\(process.exitCode ?? -1)):\n\(tailOf(log))") }
        if Date() > deadline { throw HarnessError("geoconsentd did not own its name in \(timeout) s:\n\(tailOf(log))") }
        usleep(20_000)
    }
}

/// A uid/gid to act as with `setpriv`.
struct ServiceUser {
    var name: String
    var uid: uid_t
    var gid: gid_t

    /// Who plays the service user `geoconsent`: that user when it exists (the
    /// package is installed), else the system user `daemon` (uid 1, present on
    /// every Debian system). Creating a user on the test machine would be a
    /// lasting change to it, and a renamed copy of the policy tests the same
    /// rules: `PolicyBus` replaces `user="geoconsent"` by `user="daemon"` and
    /// nothing else.
    static func standIn() throws -> ServiceUser {
        for name in ["geoconsent", "daemon"] {
            if let pw = getpwnam(name) {
                return ServiceUser(name: name, uid: pw.pointee.pw_uid, gid: pw.pointee.pw_gid)
            }
        }
        throw XCTSkip("neither user geoconsent nor daemon exists; policy tests skipped")
    }

    /// `setpriv` arguments that run a command as this user, without
    /// supplementary groups; with `ptrace`, keeping CAP_SYS_PTRACE and nothing
    /// else, as geoconsentd.service does (AmbientCapabilities=,
    /// CapabilityBoundingSet=), NoNewPrivileges= included.
    func setprivArgs(ptrace: Bool = false) -> [String] {
        var a = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"]
        if uid != 0 { a.append("--no-new-privs") }
        if ptrace {
            a += ["--inh-caps=-all,+sys_ptrace", "--ambient-caps=-all,+sys_ptrace", "--bounding-set=-all,+sys_ptrace"]
        } else if uid != 0 {
            a += ["--inh-caps=-all", "--bounding-set=-all"]
        }
        return a + ["--"]
    }
}

/// A `dbus-daemon` started from a system-style config written here: the
/// default context of /usr/share/dbus-1/system.conf (default deny for owning
/// names and method calls, signals and requested replies allowed, the bus
/// driver reachable, monitoring for root only) plus an `<include>` of the
/// shipped dbus-policy/org.geoconsent.GeoConsent1.conf (and, on request, the
/// GeoClue2 facade's), or of a copy where the stand-in user replaces `geoconsent`.
final class PolicyBus {
    /// logind's part of systemd's policy (org.freedesktop.login1.conf): root owns it, anyone calls it.
    static let logindPolicy = """
      <policy user="root"><allow own="org.freedesktop.login1"/></policy>
      <policy context="default"><allow send_destination="org.freedesktop.login1"/></policy>
    """

    /// A stand-in for any other system service, which root may own and anyone may call.
    static let otherService = "org.geoconsent.test.OtherService"
    let dir: TempDir
    let address: String
    let process: ChildProcess
    let logPath: String
    let serviceUser: ServiceUser
    let busctlPath: String

    /// `geoclue`: include the GeoClue2 facade's policy too
    /// (dbus-policy/org.freedesktop.GeoClue2.geoconsent.conf), as `make install GEOCLUE=1` does.
    /// `logind`: root may own logind's name (for a stand-in), and anyone may call it, as systemd's policy says.
    init(serviceUser: ServiceUser, geoclue: Bool = false, logind: Bool = false) throws {
        self.serviceUser = serviceUser
        dir = try TempDir()
        chmod(dir.path, 0o711)   // other uids connect to the socket in here
        logPath = dir.file("dbus-daemon.log")
        busctlPath = TestPaths.findExecutable("busctl") ?? "/usr/bin/busctl"
        let shipped = [ServiceTests.policyFile] + (geoclue ? [ServiceTests.geoCluePolicyFile] : [])
        var policies: [String] = []
        for policy in shipped {
            guard serviceUser.name != "geoconsent" else { policies.append(policy); continue }
            let text = try String(contentsOfFile: policy, encoding: .utf8)
            let renamed = text.replacingOccurrences(of: "user=\"geoconsent\"", with: "user=\"\(serviceUser.name)\"")
            guard renamed != text, !renamed.contains("=\"geoconsent\"") else {
                throw HarnessError("\(policy) names the service user in an unexpected way; update PolicyBus")
            }
            let copy = dir.file((policy as NSString).lastPathComponent)
            try renamed.write(toFile: copy, atomically: true, encoding: .utf8)
            chmod(copy, 0o644)
            policies.append(copy)
        }
        let includes = policies.map { "<include>\($0)</include>" }.joined(separator: "\n  ")
        let config = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <auth>EXTERNAL</auth>
          <listen>unix:tmpdir=/tmp</listen>
          <policy context="default">
            <allow user="*"/>
            <deny own="*"/>
            <deny send_type="method_call"/>
            <allow send_type="signal"/>
            <allow send_requested_reply="true" send_type="method_return"/>
            <allow send_requested_reply="true" send_type="error"/>
            <allow receive_type="method_call"/>
            <allow receive_type="method_return"/>
            <allow receive_type="error"/>
            <allow receive_type="signal"/>
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
            <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"
                  send_member="UpdateActivationEnvironment"/>
            <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Debug.Stats"/>
          </policy>
          <policy user="root">
            <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
          </policy>
          <!-- Another system service, with the usual policy of one (polkit's, say). -->
          <policy user="root">
            <allow own="\(PolicyBus.otherService)"/>
          </policy>
          <policy context="default">
            <allow send_destination="\(PolicyBus.otherService)"/>
          </policy>
          \(logind ? Self.logindPolicy : "")
          \(includes)
        </busconfig>
        """
        try config.write(toFile: dir.file("system.conf"), atomically: true, encoding: .utf8)
        let exe = TestPaths.findExecutable("dbus-daemon") ?? "dbus-daemon"
        process = try ChildProcess(executable: exe,
                                   arguments: ["--config-file=\(dir.file("system.conf"))", "--nofork", "--print-address=1",
                                               "--address=unix:dir=\(dir.path)"],
                                   logPath: logPath, captureStdout: true)
        guard let line = process.readStdoutLine(timeout: 10), line.hasPrefix("unix:") else {
            process.stop()
            throw HarnessError("PolicyBus: dbus-daemon printed no address:\n\(tailOf(logPath))")
        }
        address = line.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit { stop() }

    func stop() {
        process.stop()
        dir.remove()
    }

    func log() -> String { tailOf(logPath) }

    /// `busctl --address=... ARGS` as `who`.
    func busctl(_ args: [String], as who: ServiceUser, timeout: Double = 15) throws -> LoggedRun {
        try runLogged(TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv",
                      who.setprivArgs() + [busctlPath, "--address=\(address)"] + args, timeout: timeout)
    }

    /// The built geoconsentd (or `executable`) on this bus as `who`, with or
    /// without CAP_SYS_PTRACE, reaching gpsd on `gpsdPort` (default: a port
    /// nobody listens on) with `config` as its config file; returns once it owns
    /// its name.
    /// `nofile`: the daemon's descriptor limit (`prlimit`), as a unit's `LimitNOFILE=` sets it.
    /// `denyCapset`: capset(2) fails with EPERM in it, as where a unit's system call filter denies it.
    func startDaemon(as who: ServiceUser, withPtrace: Bool, gpsdPort: UInt16? = nil, config: String = "",
                     executable: String = TestPaths.binDir + "/geoconsentd", nofile: Int? = nil,
                     denyCapset: Bool = false) throws -> RunningDaemon {
        let d = dir.file("daemon-\(withPtrace ? "ptrace" : "plain")")
        try makeDirs(d + "/state")
        chmod(d, 0o711)
        chown(d + "/state", who.uid, who.gid)
        // Up between calls however long a test waits, unless the test names idle-exit.
        let text = config.contains("idle-exit") ? config : "[daemon]\nidle-exit = 0\n" + config
        try text.write(toFile: d + "/geoconsent.conf", atomically: true, encoding: .utf8)
        chmod(d + "/geoconsent.conf", 0o644)
        let log = d + "/geoconsentd.log"
        let port = try gpsdPort ?? FreePort.pick()
        let setpriv = TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv"
        let (exe, prefix): (String, [String]) = nofile.map {
            (TestPaths.findExecutable("prlimit") ?? "/usr/bin/prlimit", ["--nofile=\($0):\($0)", setpriv])
        } ?? (setpriv, [])
        // After setpriv, which needs capset to hand the daemon its capability.
        let wrapper = denyCapset ? [TestPaths.binDir + "/geoconsent-localuser", "deny-capset"] : []
        let p = try ChildProcess(executable: exe,
                                 arguments: prefix + who.setprivArgs(ptrace: withPtrace) + wrapper +
                                    [executable, "--bus", address, "--gpsd", "127.0.0.1:\(port)",
                                     "--config", d + "/geoconsent.conf", "--state-dir", d + "/state"],
                                 logPath: log)
        do {
            try waitForName(address, process: p, log: log)
        } catch {
            p.stop()
            throw error
        }
        return RunningDaemon(process: p, logPath: log)
    }
}

struct RunningDaemon {
    let process: ChildProcess
    let logPath: String
    func stop() { process.stop() }
    func log() -> String { tailOf(logPath) }
}
