import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The hostile-local-user rig: a system-style bus with the shipped policy
/// (`PolicyBus`), the real daemon as the service user with CAP_SYS_PTRACE (as
/// the unit runs it), a gpsd fed a fix every 200 ms, and two unprivileged users
/// who run `geoconsent-localuser` through `setpriv`: the ATTACKER (nobody, uid
/// 65534) and the VICTIM (`victimUser`), who keeps tapping and fetching fixes
/// while an attack runs (`Victim`).
///
/// Needs root (setpriv), dbus-daemon and gpsd; skipped otherwise.
/// `GEOCONSENT_RIG_DAEMON=PATH` runs another geoconsentd build (to watch a
/// test fail on an older daemon).
final class LocalUserRig {
    static let attacker = ServiceUser(name: "nobody", uid: 65534, gid: 65534)
    /// An unprivileged user other than the attacker and the service user's
    /// stand-in. It must exist: the system bus drops connections of uids with
    /// no passwd entry (it cannot look up their groups), and creating a user
    /// would be a lasting change to the test machine, so an account every
    /// Debian system has (base-passwd) plays the victim.
    static let victimUser: ServiceUser = {
        for name in ["games", "man", "lp", "news"] {
            if let pw = getpwnam(name) { return ServiceUser(name: name, uid: pw.pointee.pw_uid, gid: pw.pointee.pw_gid) }
        }
        return ServiceUser(name: "uid 65533", uid: 65533, gid: 65533)
    }()

    static var binary: String { TestPaths.binDir + "/geoconsent-localuser" }
    static var daemonExecutable: String {
        ProcessInfo.processInfo.environment["GEOCONSENT_RIG_DAEMON"] ?? TestPaths.binDir + "/geoconsentd"
    }

    let serviceUser: ServiceUser
    let bus: PolicyBus
    let gpsd: GpsdInstance
    let daemon: RunningDaemon
    /// Mode 0755: per-user directories and logs live in here.
    let work: TempDir
    private let feeder: FixFeeder

    /// `geoclue`: the daemon serves GeoClue2 too (`[geoclue] serve`), with the facade's policy on the bus.
    /// `nofile`: the daemon's descriptor limit, as the unit's `LimitNOFILE=`.
    /// `logind`: the bus lets a logind stand-in own its name (`LogindMock`, started by the test).
    init(config: String = "", geoclue: Bool = false, nofile: Int? = nil, logind: Bool = false) throws {
        guard getuid() == 0 else { throw XCTSkip("the local-user rig acts as other uids with setpriv: needs root") }
        for tool in ["setpriv", "dbus-daemon"] where TestPaths.findExecutable(tool) == nil {
            throw XCTSkip("\(tool) is not installed; skipped")
        }
        serviceUser = try ServiceUser.standIn()
        bus = try PolicyBus(serviceUser: serviceUser, geoclue: geoclue, logind: logind)
        gpsd = try GpsdInstance()
        feeder = FixFeeder(gpsd: gpsd)
        work = try TempDir()
        chmod(work.path, 0o755)
        do {
            daemon = try bus.startDaemon(as: serviceUser, withPtrace: true, gpsdPort: gpsd.port,
                                         config: config + (geoclue ? "\n[geoclue]\nserve = true\n" : ""),
                                         executable: LocalUserRig.daemonExecutable, nofile: nofile)
        } catch {
            feeder.stop()
            gpsd.stop()
            bus.stop()
            throw error
        }
    }

    func stop() {
        daemon.stop()
        feeder.stop()
        gpsd.stop()
        bus.stop()
        work.remove()
    }

    /// A fresh directory `name` in the work directory, owned by `user`, mode 0755.
    func directory(_ name: String, ownedBy user: ServiceUser) throws -> String {
        let path = work.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chown(path, user.uid, user.gid)
        chmod(path, 0o755)
        return path
    }

    /// `geoconsent-localuser --bus BUS ARGS` as `user`, to completion (killed
    /// after `timeout`); stdout captured, stderr in `log` (in the work directory).
    func run(_ user: ServiceUser, _ args: [String], log: String, timeout: Double) throws -> (status: Int32?, output: String) {
        try ChildProcess.run(setpriv, user.setprivArgs() + [LocalUserRig.binary, "--bus", bus.address] + args,
                             timeout: timeout, logPath: work.file(log))
    }

    /// The same, in the background; stdout (unless captured) and stderr go to `log`.
    /// `binary`: a copy of the program at another path (another app, for the daemon).
    func start(_ user: ServiceUser, _ args: [String], log: String, captureStdout: Bool = false,
               binary: String = LocalUserRig.binary) throws -> ChildProcess {
        try ChildProcess(executable: setpriv,
                         arguments: user.setprivArgs() + [binary, "--bus", bus.address] + args,
                         logPath: work.file(log), captureStdout: captureStdout)
    }

    /// A copy of `geoconsent-localuser` named `name` in the work directory, which
    /// every uid may run: an app of its own, whose consent the victim's rounds
    /// (which reset their own app's) do not touch.
    func appCopy(_ name: String) throws -> String {
        let path = work.file(name)
        if !FileManager.default.fileExists(atPath: path) {
            try FileManager.default.copyItem(atPath: LocalUserRig.binary, toPath: path)
            chmod(path, 0o755)
        }
        return path
    }

    /// The victim and its agent (`geoconsentctl agent --auto allow-once`), both
    /// `victimUser`, once the agent is registered. `silentTaps`: the victim
    /// keeps its app's confirmation, so that its taps after the first are
    /// silent, and its agent (`geoconsent-localuser agent`) registers with the
    /// `focus` and `notices` features and says the victim is in front.
    func startVictim(silentTaps: Bool = false) throws -> Victim {
        let agentLog = work.file("victim-agent.log")
        let agent: ChildProcess
        if silentTaps {
            agent = try startAgent(LocalUserRig.victimUser, answer: "allow-once", log: "victim-agent.log",
                                   extra: ["--features", "focus,notices", "--focus", "yes"])
        } else {
            agent = try ChildProcess(executable: setpriv,
                                     arguments: LocalUserRig.victimUser.setprivArgs() +
                                        [TestPaths.binDir + "/geoconsentctl", "--bus", bus.address, "agent", "--auto", "allow-once"],
                                     logPath: agentLog)
            guard waitForLine(in: agentLog, timeout: 15, where: { $0.contains("registered for uid \(LocalUserRig.victimUser.uid)") }) != nil else {
                agent.stop()
                throw HarnessError("the victim's agent did not register: \(tailOf(agentLog))\ndaemon:\n\(daemon.log())")
            }
        }
        let process = try start(LocalUserRig.victimUser, ["victim", "--max-seconds", "300"] + (silentTaps ? ["--keep-consent", "yes"] : []),
                                log: "victim.log")
        return Victim(agent: agent, process: process, logPath: work.file("victim.log"))
    }

    /// `geoconsent-localuser agent --answer ANSWER` as `user` (`never`: a
    /// silent agent), once registered; its output (`confirm …` per prompt) in `log`.
    func startAgent(_ user: ServiceUser, answer: String, log: String, extra: [String] = []) throws -> ChildProcess {
        let agent = try start(user, ["agent", "--answer", answer] + extra, log: log)
        guard waitForLine(in: work.file(log), timeout: 15, where: { $0.hasPrefix("registered") }) != nil else {
            agent.stop()
            throw HarnessError("the agent of uid \(user.uid) did not register: \(tailOf(work.file(log)))")
        }
        return agent
    }

    /// The `confirm …` lines an agent started with `startAgent` has printed.
    func confirms(in log: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: work.file(log)) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("confirm ") }.map(String.init)
    }

    /// The path the daemon resolves `sleep` to (symbolic links followed).
    static var sleepPath: String {
        let found = TestPaths.findExecutable("sleep") ?? "/usr/bin/sleep"
        return (try? FileManager.default.destinationOfSymbolicLink(atPath: found)).map {
            $0.hasPrefix("/") ? $0 : (found as NSString).deletingLastPathComponent + "/" + $0
        } ?? found
    }

    private var setpriv: String { TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv" }
}

/// Feeds gpsd one fix every 200 ms on a thread of its own, until stopped.
final class FixFeeder: @unchecked Sendable {
    private let lock = NSLock()
    private var stopping = false
    private var finished = false

    init(gpsd: GpsdInstance) {
        let feed = LocationFeed()
        Thread { [self] in
            while !self.isStopping {
                gpsd.send(feed.next().sentences)
                usleep(200_000)
            }
            self.lock.lock(); self.finished = true; self.lock.unlock()
        }.start()
    }

    private var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    func stop() {
        lock.lock(); stopping = true; lock.unlock()
        while true {
            lock.lock(); let done = finished; lock.unlock()
            if done { return }
            usleep(10_000)
        }
    }
}

/// The first line of the file at `path` for which `match` holds, polling until `timeout`.
func waitForLine(in path: String, timeout: Double, where match: (String) -> Bool) -> String? {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if let data = FileManager.default.contents(atPath: path),
           let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first(where: { match(String($0)) }) {
            return String(line)
        }
        if Date() > deadline { return nil }
        usleep(20_000)
    }
}

/// The bytes of a hex string (as `geoconsent-localuser` prints UTF-8) as text.
func unhex(_ s: Substring) -> String {
    var bytes: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex, let j = s.index(i, offsetBy: 2, limitedBy: s.endIndex), let b = UInt8(s[i..<j], radix: 16) {
        bytes.append(b)
        i = j
    }
    return String(decoding: bytes, as: UTF8.self)
}
