/// Who is calling: the app-id of a process, resolved from /proc (docs/dbus-api.md "Words",
/// App). The daemon trusts only this, never a name the client sends, because the
/// consent records are keyed by it.
import Glibc
import GeoCore

/// A process's app identity.
public struct ResolvedApp: Equatable, Sendable {
    /// The app-id consent is recorded under, made display-safe (`DisplayText.escaped`).
    public var appID: String
    /// True for Flatpak and Snap apps: they may not register agents and may only
    /// reset their own record.
    public var sandboxed: Bool
    /// The readlink of `/proc/PID/exe` (without " (deleted)"), display-safe, shown
    /// to the user in prompts; "" when it cannot be read.
    public var executable: String
    /// The process's start time (field 22 of `PID/stat`, clock ticks since boot):
    /// with the PID, it names this process and no later one.
    public var startTime: UInt64

    public init(appID: String, sandboxed: Bool, executable: String, startTime: UInt64 = 0) {
        self.appID = appID
        self.sandboxed = sandboxed
        self.executable = executable
        self.startTime = startTime
    }
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
/// 1. Flatpak: `[Application] name=` in `PID/root/.flatpak-info` (sandboxed); the
///    name must be a valid Flatpak app id.
/// 2. Snap: a cgroup path component `snap.NAME.…` → `NAME` (sandboxed).
/// 3. systemd app unit in the unified (`0::`) cgroup line: the last component
///    shaped `app-[LAUNCHER-]ID-RANDOM.scope` or `app-[LAUNCHER-]ID[@RANDOM].service`
///    → `ID` with `\xNN` escapes undone.
/// 4. The absolute path of `PID/exe`, display-safe (`DisplayText.escaped`).
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
    /// Test hook run between the two start-time reads, to simulate PID reuse.
    var betweenReads: (@Sendable () -> Void)? = nil

    public init(procRoot: String = "/proc") {
        self.procRoot = procRoot
    }

    /// Resolves `pid`, which the bus reports for a connection of `uid`, to its app
    /// (see the type's rules). `firstStart` is the start time of the process
    /// first resolved for that connection, if any: another one is refused.
    public func resolve(pid: UInt32, uid: UInt32, firstStart: UInt64? = nil) -> Result<ResolvedApp, IdentityError> {
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
        let resolved = resolveUnchecked(dir)
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

    private func resolveUnchecked(_ dir: ProcessDirectory) -> Result<ResolvedApp, IdentityError> {
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

        // 1. Flatpak.
        switch flatpakID(dir) {
        case .success(let name?):
            return .success(ResolvedApp(appID: name, sandboxed: true, executable: executable))
        case .success(nil): break
        case .failure(let e): return .failure(e)
        }

        // 2 and 3. cgroup.
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
        for line in lines {
            if let snap = AppIdentityResolver.snapName(inCgroupPath: line.path) {
                return .success(ResolvedApp(appID: snap, sandboxed: true, executable: executable))
            }
        }
        if let unified = lines.first(where: { $0.hierarchy == "0" && $0.controllers.isEmpty }),
           let id = AppIdentityResolver.systemdAppID(inCgroupPath: unified.path) {
            return .success(ResolvedApp(appID: id, sandboxed: false, executable: executable))
        }

        // 4. Executable path.
        if let e = exeError {
            // A zombie or exiting process has no exe any more.
            if e.errno == ENOENT || e.errno == ESRCH { return .failure(.processGone) }
            return .failure(.unreadable(e.description))
        }
        guard executable.hasPrefix("/") else {
            return .failure(.unreadable("\(dir.path)/exe is not an absolute path: \(executable.prefix(256))"))
        }
        return .success(ResolvedApp(appID: executable, sandboxed: false, executable: executable))
    }

    /// The Flatpak app id from `PID/root/.flatpak-info`, nil when there is no such
    /// file. The file is the process's own (a process in a user namespace can
    /// put anything there): it is read with `readCallerFile`, and anything
    /// unsafe, unparsable or not a valid app id refuses the caller rather than
    /// mistaking a Flatpak app for its sandbox-internal executable path.
    private func flatpakID(_ dir: ProcessDirectory) -> Result<String?, IdentityError> {
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
            return .success(name)
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
        return .success(t)
    }

    static func parseStartTime(_ bytes: [UInt8]) -> UInt64? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(whereSeparator: { $0 == 0x20 || $0 == 0x0A })
        // fields[0] is field 3 (state), so field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }

    // MARK: Flatpak

    /// The `name=` key of the `[Application]` group, or nil.
    static func flatpakName(_ bytes: [UInt8]) -> String? {
        var inApplication = false
        for raw in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
            let line = trim(String(decoding: raw, as: UTF8.self))
            if line.hasPrefix("[") {
                inApplication = line == "[Application]"
                continue
            }
            guard inApplication, let eq = line.firstIndex(of: "=") else { continue }
            if trim(String(line[..<eq])) == "name" {
                let value = trim(String(line[line.index(after: eq)...]))
                return value.isEmpty ? nil : value
            }
        }
        return nil
    }

    /// Flatpak's own rule for an app id (`flatpak_is_valid_name` in flatpak's
    /// common/flatpak-ref-utils.c): 1 to 255 bytes; three or more elements
    /// separated by `.`, none empty; elements of `[A-Za-z0-9_-]` that do not
    /// start with a digit; `-` only in the last element. So no path, no space, no
    /// control or bidirectional character can be an app id.
    static func isValidFlatpakID(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= IdentityLimits.flatpakIDBytes else { return false }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        for (i, element) in elements.enumerated() {
            let last = i == elements.count - 1
            guard let first = element.first, !(0x30...0x39).contains(first) else { return false }
            for b in element {
                let letter = (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b)
                let ok = letter || (0x30...0x39).contains(b) || b == UInt8(ascii: "_") || (last && b == UInt8(ascii: "-"))
                if !ok { return false }
            }
        }
        return true
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

    /// `NAME` from a component `snap.NAME.…` anywhere in the path.
    static func snapName(inCgroupPath path: Substring) -> String? {
        for component in path.split(separator: "/") where component.hasPrefix("snap.") {
            let rest = component.dropFirst("snap.".count)
            guard let dot = rest.firstIndex(of: "."), dot != rest.startIndex else { continue }
            guard let name = unescapeUnitName(rest[..<dot]), isUsableID(name) else { continue }
            return name
        }
        return nil
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


    private static func trim(_ s: String) -> String {
        var sub = Substring(s)
        while let c = sub.first, c == " " || c == "\t" || c == "\r" { sub.removeFirst() }
        while let c = sub.last, c == " " || c == "\t" || c == "\r" { sub.removeLast() }
        return String(sub)
    }
}
