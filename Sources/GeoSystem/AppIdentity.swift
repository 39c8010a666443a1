/// Who is calling: the app-id of a process, resolved from /proc (docs/dbus-api.md "Words",
/// App). The daemon trusts only this, never a name the client sends, because the
/// consent records are keyed by it.
import Glibc
import GeoCore

/// A process's app identity.
public struct ResolvedApp: Equatable, Sendable {
    /// The app-id consent is recorded under, made display-safe (`DisplayText.escaped`).
    public var appID: String
    /// What the app-id rests on (docs/dbus-api.md, "Identity"): what config
    /// naming it may grant, and whether the caller is treated as sandboxed.
    public var identity: IdentityKind
    /// The readlink of `/proc/PID/exe` (without " (deleted)"), display-safe, shown
    /// to the user in prompts; "" when it cannot be read.
    public var executable: String
    /// The script the executable runs when it is an interpreter (`ScriptPath`),
    /// display-safe; nil when it is none or runs no file. The app-id when the
    /// kind is `.script`; beside a systemd unit's id, what names its desktop entry.
    public var script: String?
    /// Whether the program is one the administrator installed: `PID/exe` (the
    /// file itself, not its path) a regular file owned by root that only root
    /// may write, at a path under /usr, and so the script, seen at its path.
    /// Only how a prompt looks depends on it: within a uid the path stays a claim.
    public var installed: Bool = false
    /// The process's start time (field 22 of `PID/stat`, clock ticks since boot):
    /// with the PID, it names this process and no later one.
    public var startTime: UInt64
    /// For `.unverifiedFlatpak`: which check the sandbox failed, for the log.
    public var notVerified: String?
    /// The process's cgroup in the unified hierarchy (the `0::` line of
    /// `PID/cgroup`), when it was read (rules 3 and 4) and is at most
    /// `cgroupBytes`: logind's `GetSessionByPID` answers from it alone (the
    /// session whose scope it is in), so the daemon keeps that answer per cgroup
    /// (LogindWatch). Not an identity, never shown.
    public var cgroup: String?
    /// The longest cgroup path kept; a longer one is not (`cgroup` nil).
    public static let cgroupBytes = 1024

    public init(appID: String, identity: IdentityKind, executable: String, script: String? = nil,
                installed: Bool = false, startTime: UInt64 = 0, notVerified: String? = nil, cgroup: String? = nil) {
        self.appID = appID
        self.identity = identity
        self.executable = executable
        self.script = script
        self.installed = installed
        self.startTime = startTime
        self.notVerified = notVerified
        self.cgroup = cgroup.flatMap { $0.utf8.count <= ResolvedApp.cgroupBytes ? $0 : nil }
    }

    /// Flatpak and Snap apps, verified or not: they may not register agents and
    /// may only reset their own record.
    public var sandboxed: Bool { identity.isSandboxed }
}

/// Why a process could not be resolved. Every case means the caller is refused
/// (docs/dbus-api.md, "Identity": the caller gets `AccessDenied`).
public enum IdentityError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The process no longer exists (or is a zombie with no executable left).
    case processGone
    /// The PID now belongs to another process than the one first seen: it ended
    /// and its PID was reused, during a resolution or since the first one.
    case pidReused
    /// `/proc/PID` belongs to another uid than the connection's: the process
    /// that connected is gone and another user's process has its PID (or it
    /// changed its uid since).
    case otherUser(pid: UInt32, owner: UInt32, connectionUID: UInt32)
    /// Something needed could not be read or made sense of; the text says what.
    case unreadable(String)
    /// What was read cannot serve as an identity (an unsafe sandbox marker, an
    /// invalid or over-long id); the text says why.
    case refused(String)

    public var description: String {
        switch self {
        case .processGone: return "the calling process has exited"
        case .pidReused: return "the calling process's PID now belongs to another process"
        case .otherUser(let pid, let owner, let uid):
            return "PID \(pid) belongs to uid \(owner), not to the connection's uid \(uid)"
        case .unreadable(let why): return DisplayText.escaped(why)
        case .refused(let why): return DisplayText.escaped(why)
        }
    }
}

/// Resolves a PID to its app, first rule that applies:
/// 1. Snap: the AppArmor label the bus reports for the connection,
///    `snap.NAME.APP` in enforce mode → `NAME` (`.snap`; see `SnapIdentity.swift`).
///    A cgroup path is not a Snap: any process can be put in one named so.
/// 2. Flatpak: `[Application] name=` in `PID/root/.flatpak-info`, a valid Flatpak
///    app id; `.flatpak` when the sandbox passes the checks of
///    `FlatpakIdentity.swift`, else `.unverifiedFlatpak`.
/// 3. systemd app unit in the unified (`0::`) cgroup line: the last component
///    shaped `app-[LAUNCHER-]ID-RANDOM.scope` or `app-[LAUNCHER-]ID[@RANDOM].service`
///    → `ID` with `\xNN` escapes undone (`.systemdUnit`).
/// 4. When `PID/exe` is an interpreter, the script it runs, from `PID/cmdline`
///    (`ScriptPath`; `.script`).
/// 5. The absolute path of `PID/exe`, display-safe (`DisplayText.escaped`; `.executable`).
///
/// Whose process: `PID` must be owned by the connection's uid, and its start
/// time (field 22 of `PID/stat`) is read before and after, and compared with
/// the one first seen for the connection when there is one. Every read goes
/// through one handle on `/proc/PID`, and `.flatpak-info`, which the process
/// controls, through `readCallerFile`. Without a pidfd from the bus (dbus 1.14
/// gives none) this is the best available guard against PID reuse.
public struct AppIdentityResolver: Sendable {
    /// Normally `/proc`; tests point it at a fixture tree.
    public let procRoot: String
    /// Flatpak's system installations (`/var/lib/flatpak`): an app id installed
    /// there is one the administrator chose (`FlatpakIdentity.swift`).
    public let flatpakInstallations: [String]
    /// Test hook run between the two start-time reads, to simulate PID reuse.
    var betweenReads: (@Sendable () -> Void)? = nil
    /// Who must own an installed app's directory: root; tests that cannot
    /// chown their fixtures set their own uid.
    var installationOwner: UInt32 = 0

    public init(procRoot: String = "/proc", flatpakInstallations: [String] = ["/var/lib/flatpak"]) {
        self.procRoot = procRoot
        self.flatpakInstallations = flatpakInstallations
    }

    /// Resolves `pid`, which the bus reports for a connection of `uid`, to its app
    /// (see the type's rules). `firstStart` is the start time of the process
    /// first resolved for that connection, if any: another one is refused.
    /// `securityLabel` is the connection's `LinuxSecurityLabel` from the bus
    /// (`GetConnectionCredentials`), when it gave one.
    public func resolve(pid: UInt32, uid: UInt32, firstStart: UInt64? = nil,
                        securityLabel: [UInt8]? = nil) -> Result<ResolvedApp, IdentityError> {
        let dir: ProcessDirectory
        switch open(pid) {
        case .success(let d): dir = d
        case .failure(let e): return .failure(e)
        }
        defer { dir.close() }
        let before: UInt64
        switch check(dir, pid: pid, uid: uid, firstStart: firstStart) {
        case .success(let t): before = t
        case .failure(let e): return .failure(e)
        }
        let resolved = resolveUnchecked(dir, uid: uid, securityLabel: securityLabel)
        betweenReads?()
        switch check(dir, pid: pid, uid: uid, firstStart: before) {
        case .success: break
        case .failure(let e): return .failure(e)
        }
        return resolved.map {
            var app = $0
            app.startTime = before
            return app
        }
    }

    /// Checks that `pid` is still the process of `uid` that started at `startTime`
    /// (a caller resolved before): cheaper than `resolve`, for later calls of a connection.
    public func verify(pid: UInt32, uid: UInt32, startTime: UInt64) -> Result<Void, IdentityError> {
        switch open(pid) {
        case .failure(let e): return .failure(e)
        case .success(let dir):
            defer { dir.close() }
            return check(dir, pid: pid, uid: uid, firstStart: startTime).map { _ in () }
        }
    }

    private func open(_ pid: UInt32) -> Result<ProcessDirectory, IdentityError> {
        do {
            return .success(try ProcessDirectory(path: procRoot + "/" + String(pid)))
        } catch let e as SystemError where e.errno == ENOENT || e.errno == ESRCH {
            return .failure(.processGone)
        } catch {
            return .failure(.unreadable("\(error)"))
        }
    }

    /// The owner check and the start time (returned), compared with `firstStart`.
    private func check(_ dir: ProcessDirectory, pid: UInt32, uid: UInt32, firstStart: UInt64?) -> Result<UInt64, IdentityError> {
        let owner: UInt32
        do {
            owner = try dir.ownerUID()
        } catch {
            return .failure(.unreadable("\(error)"))
        }
        guard owner == uid else { return .failure(.otherUser(pid: pid, owner: owner, connectionUID: uid)) }
        switch startTime(dir) {
        case .success(let t):
            if let first = firstStart, first != t { return .failure(.pidReused) }
            return .success(t)
        case .failure(let e):
            return .failure(e)
        }
    }

    private func resolveUnchecked(_ dir: ProcessDirectory, uid: UInt32,
                                  securityLabel: [UInt8]?) -> Result<ResolvedApp, IdentityError> {
        // The executable is wanted in every case (prompts show it), and also tells
        // a zombie (no exe) from a live process.
        var executable = ""
        var exeError: SystemError? = nil
        do {
            executable = try dir.readLink("exe")
            if executable.hasSuffix(" (deleted)") { executable.removeLast(" (deleted)".count) }
            executable = DisplayText.escaped(executable)
        } catch let e as SystemError {
            exeError = e
        } catch {}
        if executable.utf8.count > IdentityLimits.identityBytes {
            return .failure(.refused("the executable path is longer than \(IdentityLimits.identityBytes) bytes"))
        }

        // 1. Snap, from what the kernel says confines the connection.
        if let label = securityLabel, let snap = AppIdentityResolver.snapName(fromSecurityLabel: label) {
            return .success(ResolvedApp(appID: snap, identity: .snap, executable: executable))
        }

        // 2. Flatpak.
        switch flatpakApp(dir, uid: uid) {
        case .success(let app?):
            return .success(ResolvedApp(appID: app.id, identity: app.notVerified == nil ? .flatpak : .unverifiedFlatpak,
                                        executable: executable, notVerified: app.notVerified))
        case .success(nil): break
        case .failure(let e): return .failure(e)
        }

        // 3. systemd app unit.
        let cgroup: [UInt8]
        do {
            guard let bytes = try dir.readKernelFile("cgroup") else { return .failure(.processGone) }
            cgroup = bytes
        } catch let e as SystemError {
            if e.errno == ESRCH { return .failure(.processGone) }
            return .failure(.unreadable(e.description))
        } catch {
            return .failure(.unreadable("\(error)"))
        }
        let lines = AppIdentityResolver.cgroupLines(cgroup)
        let unified = lines.first(where: { $0.hierarchy == "0" && $0.controllers.isEmpty })
        let script = exeError == nil ? scriptOf(dir, executable: executable) : nil
        let installed = exeError == nil && isInstalled(dir, executable: executable, script: script)
        if let unified, let id = AppIdentityResolver.systemdAppID(inCgroupPath: unified.path) {
            return .success(ResolvedApp(appID: id, identity: .systemdUnit, executable: executable, script: script,
                                        installed: installed, cgroup: String(unified.path)))
        }

        // 4. and 5. The script, or the executable path.
        if let e = exeError {
            // A zombie or exiting process has no exe any more.
            if e.errno == ENOENT || e.errno == ESRCH { return .failure(.processGone) }
            return .failure(.unreadable(e.description))
        }
        guard executable.hasPrefix("/") else {
            return .failure(.unreadable("\(dir.path)/exe is not an absolute path: \(executable.prefix(256))"))
        }
        return .success(ResolvedApp(appID: script ?? executable, identity: script == nil ? .executable : .script,
                                    executable: executable, script: script, installed: installed,
                                    cgroup: unified.map { String($0.path) }))
    }

    /// The script an interpreter runs (`ScriptPath`), display-safe and within
    /// the identity's bound; nil for any other program, or when it cannot be told.
    private func scriptOf(_ dir: ProcessDirectory, executable: String) -> String? {
        // A command line longer than is read may have its operand cut: no script then.
        guard let interpreter = ScriptPath.interpreter(executable),
              let cmdline = try? dir.readKernelFilePrefix("cmdline"), cmdline.complete else { return nil }
        let cwd = try? dir.readLink("cwd")
        guard let path = ScriptPath.script(inCommandLine: cmdline.bytes, of: interpreter, cwd: cwd) else { return nil }
        let shown = DisplayText.escaped(path)
        return shown.utf8.count <= IdentityLimits.identityBytes ? shown : nil
    }

    /// `ResolvedApp.installed`: the running file through `PID/exe` (so not a
    /// path the process could have mounted something else over), and the
    /// script at its path as the daemon sees it.
    private func isInstalled(_ dir: ProcessDirectory, executable: String, script: String?) -> Bool {
        var st = stat()
        guard executable.hasPrefix("/usr/"), fstatat(dir.fd, "exe", &st, 0) == 0,
              AppIdentityResolver.isRootsAlone(st) else { return false }
        // An interpreter running code of no file (`-c`, standard input) runs
        // the caller's code, not the administrator's.
        guard let script else { return ScriptPath.interpreter(executable) == nil }
        return script.hasPrefix("/usr/") && DisplayText.isSafe(script) && stat(script, &st) == 0
            && AppIdentityResolver.isRootsAlone(st)
    }

    /// A regular file owned by root that no group or other may write.
    static func isRootsAlone(_ st: stat) -> Bool {
        st.st_mode & S_IFMT == S_IFREG && st.st_uid == 0 && st.st_mode & (S_IWGRP | S_IWOTH) == 0
    }

    /// The Flatpak app id from `PID/root/.flatpak-info` and why its sandbox is not
    /// verified (nil: it is); nil when there is no such file. The file is the
    /// process's own (a process in a user namespace can put anything there): it
    /// is read with `readCallerFile`, and anything unsafe, unparsable or not a
    /// valid app id refuses the caller rather than mistaking a Flatpak app for
    /// its sandbox-internal executable path.
    private func flatpakApp(_ dir: ProcessDirectory, uid: UInt32) -> Result<(id: String, notVerified: String?)?, IdentityError> {
        let shown = dir.path + "/root/.flatpak-info"
        do {
            guard let root = try dir.openRoot() else { return .success(nil) }
            defer { _ = close(root) }
            guard let bytes = try readCallerFile(root: root, ".flatpak-info", describedAs: shown) else {
                return .success(nil)
            }
            guard let name = AppIdentityResolver.flatpakName(bytes) else {
                return .failure(.refused("\(shown) has no [Application] name"))
            }
            guard AppIdentityResolver.isValidFlatpakID(name) else {
                return .failure(.refused("\(shown) names no valid Flatpak app id (\(name.utf8.count) bytes: " +
                                         "\(DisplayText.escaped(String(name.prefix(64)))))"))
            }
            return .success((name, verifyFlatpak(name, info: bytes, dir)))
        } catch let e as UnsafeCallerFile {
            return .failure(.refused(e.reason))
        } catch let e as SystemError {
            if e.errno == ESRCH { return .failure(.processGone) }
            return .failure(.unreadable(e.description))
        } catch {
            return .failure(.unreadable("\(error)"))
        }
    }

    // MARK: start time

    /// Field 22 of `stat`. Parsed after the last `)` because the command name
    /// (field 2, in parentheses) may itself contain spaces and parentheses.
    private func startTime(_ dir: ProcessDirectory) -> Result<UInt64, IdentityError> {
        let path = dir.path + "/stat"
        let bytes: [UInt8]
        do {
            guard let b = try dir.readKernelFile("stat") else { return .failure(.processGone) }
            bytes = b
        } catch let e as SystemError {
            if e.errno == ESRCH || e.errno == ENOTDIR { return .failure(.processGone) }
            return .failure(.unreadable(e.description))
        } catch {
            return .failure(.unreadable("\(error)"))
        }
        guard let t = AppIdentityResolver.parseStartTime(bytes) else {
            return .failure(.unreadable("cannot parse \(path)"))
        }
        // A zombie has exited (its pidfd is readable already): whoever does not
        // reap it must not keep it counting as alive.
        if let state = AppIdentityResolver.parseState(bytes), state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") {
            return .failure(.processGone)
        }
        return .success(t)
    }


    static func parseStartTime(_ bytes: [UInt8]) -> UInt64? {
        // fields[0] is field 3 (state), so field 22 is fields[19].
        guard let fields = fieldsAfterName(bytes), fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    /// Field 3 of `stat`, the process state (`R`, `S`, `Z` …).
    static func parseState(_ bytes: [UInt8]) -> UInt8? { fieldsAfterName(bytes)?.first?.first }

    /// The fields of `stat` from field 3 on: after the last `)`, because the
    /// command name (field 2, in parentheses) may itself hold spaces and parentheses.
    private static func fieldsAfterName(_ bytes: [UInt8]) -> [ArraySlice<UInt8>]? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        return bytes[(close + 1)...].split(whereSeparator: { $0 == 0x20 || $0 == 0x0A })
    }

    // MARK: cgroup

    struct CgroupLine {
        var hierarchy: Substring
        var controllers: Substring
        var path: Substring
    }

    /// `ID:CONTROLLERS:PATH` lines; the path may itself contain `:`.
    static func cgroupLines(_ bytes: [UInt8]) -> [CgroupLine] {
        String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            return CgroupLine(hierarchy: parts[0], controllers: parts[1], path: parts[2])
        }
    }

    /// The ApplicationID of the last component that is a systemd app unit, per
    /// systemd's "Desktop Environment Integration": `app-[LAUNCHER-]ID-RANDOM.scope`
    /// or `app-[LAUNCHER-]ID[@RANDOM].service`. ID's own dashes are written `\x2d`,
    /// so splitting on `-` first and unescaping after keeps them apart.
    static func systemdAppID(inCgroupPath path: Substring) -> String? {
        for component in path.split(separator: "/").reversed() {
            if let id = appIDFromUnit(component) { return id }
        }
        return nil
    }

    static func appIDFromUnit(_ unit: Substring) -> String? {
        var idParts: [Substring]
        if unit.hasSuffix(".scope") {
            let name = unit.dropLast(".scope".count)
            let parts = name.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count >= 3, parts[0] == "app", isAlnum(parts[parts.count - 1]) else { return nil }
            idParts = Array(parts[1..<(parts.count - 1)])
        } else if unit.hasSuffix(".service") {
            var name = unit.dropLast(".service".count)
            if let at = name.firstIndex(of: "@") { name = name[..<at] }
            let parts = name.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0] == "app" else { return nil }
            idParts = Array(parts[1...])
        } else {
            return nil
        }
        // A leading plain-alphanumeric part followed by more is the launcher
        // (`gnome`, `kde`, `flatpak`…); launchers carry no dots or escapes.
        if idParts.count >= 2, isAlnum(idParts[0]) { idParts.removeFirst() }
        guard let id = unescapeUnitName(Substring(idParts.joined(separator: "-"))), isUsableID(id) else { return nil }
        return id
    }

    /// Undoes systemd's `\xNN` escapes; nil on a malformed escape or bad UTF-8.
    static func unescapeUnitName(_ s: Substring) -> String? {
        let bytes = Array(s.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\\") {
                guard i + 3 < bytes.count, bytes[i + 1] == UInt8(ascii: "x"),
                      let hi = hexValue(bytes[i + 2]), let lo = hexValue(bytes[i + 3]) else { return nil }
                out.append(hi << 4 | lo)
                i += 4
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// An id from a cgroup name must not look like a path (that is rule 4's
    /// namespace) nor carry control, format or bidirectional characters
    /// (`DisplayText`), nor be longer than an identity may be; such a name is ignored.
    private static func isUsableID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= IdentityLimits.identityBytes && !id.utf8.contains(UInt8(ascii: "/"))
            && DisplayText.isSafe(id)
    }

    private static func isAlnum(_ s: Substring) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
    }
}
