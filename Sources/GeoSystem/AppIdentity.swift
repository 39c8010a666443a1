/// Who is calling: the app-id of a process, resolved from /proc (docs/dbus-api.md "Words",
/// App). The daemon trusts only this, never a name the client sends, because the
/// consent records are keyed by it.
import Glibc

/// A process's app identity.
public struct ResolvedApp: Equatable, Sendable {
    /// The app-id consent is recorded under.
    public var appID: String
    /// True for Flatpak and Snap apps: they may not register agents and may only
    /// reset their own record.
    public var sandboxed: Bool
    /// The readlink of `/proc/PID/exe` (without " (deleted)"), shown to the user in
    /// prompts; "" when it cannot be read.
    public var executable: String

    public init(appID: String, sandboxed: Bool, executable: String) {
        self.appID = appID
        self.sandboxed = sandboxed
        self.executable = executable
    }
}

/// Why a process could not be resolved. Every case means the caller is refused
/// (docs/dbus-api.md: a caller gone before it is resolved gets `AccessDenied`).
public enum IdentityError: Error, Equatable, Sendable {
    /// The process no longer exists (or is a zombie with no executable left).
    case processGone
    /// The process ended and its PID now belongs to another process, so what was
    /// read may describe the wrong program.
    case pidReused
    /// Something needed could not be read or made sense of; the text says what.
    case unreadable(String)
}

/// Resolves a PID to its app, first rule that applies:
/// 1. Flatpak: `[Application] name=` in `PID/root/.flatpak-info` (sandboxed).
/// 2. Snap: a cgroup path component `snap.NAME.…` → `NAME` (sandboxed).
/// 3. systemd app unit in the unified (`0::`) cgroup line: the last component
///    shaped `app-[LAUNCHER-]ID-RANDOM.scope` or `app-[LAUNCHER-]ID[@RANDOM].service`
///    → `ID` with `\xNN` escapes undone.
/// 4. The absolute path of `PID/exe`.
///
/// PID reuse: the process start time (field 22 of `PID/stat`) is read before and
/// after; a change means the PID was recycled in between. Without a pidfd from
/// the bus (dbus 1.14 gives none) this is the best available guard.
public struct AppIdentityResolver: Sendable {
    /// Normally `/proc`; tests point it at a fixture tree.
    public let procRoot: String
    /// Test hook run between the two start-time reads, to simulate PID reuse.
    var betweenReads: (@Sendable () -> Void)? = nil

    public init(procRoot: String = "/proc") {
        self.procRoot = procRoot
    }

    /// Resolves `pid` to its app (see the type's rules).
    public func resolve(pid: UInt32) -> Result<ResolvedApp, IdentityError> {
        let base = procRoot + "/" + String(pid)
        let before: UInt64
        switch startTime(base) {
        case .success(let t): before = t
        case .failure(let e): return .failure(e)
        }
        let resolved = resolveUnchecked(base)
        betweenReads?()
        switch startTime(base) {
        case .success(let after):
            if after != before { return .failure(.pidReused) }
        case .failure(let e):
            return .failure(e)
        }
        return resolved
    }

    private func resolveUnchecked(_ base: String) -> Result<ResolvedApp, IdentityError> {
        // The executable is wanted in every case (prompts show it), and also tells
        // a zombie (no exe) from a live process.
        var executable = ""
        var exeError: SystemError? = nil
        do {
            executable = try readLink(base + "/exe")
            if executable.hasSuffix(" (deleted)") { executable.removeLast(" (deleted)".count) }
        } catch let e as SystemError {
            exeError = e
        } catch {}

        // 1. Flatpak.
        let infoPath = base + "/root/.flatpak-info"
        do {
            if let bytes = try readFileBytes(infoPath) {
                guard let name = AppIdentityResolver.flatpakName(bytes) else {
                    return .failure(.unreadable("\(infoPath) has no [Application] name"))
                }
                return .success(ResolvedApp(appID: name, sandboxed: true, executable: executable))
            }
        } catch let e as SystemError where e.errno == ENOTDIR {
            // No root directory to look in: not a Flatpak.
        } catch let e as SystemError {
            if e.errno == ESRCH { return .failure(.processGone) }
            // Not knowing whether it is sandboxed, refuse rather than mistake a
            // Flatpak app for its (sandbox-internal) executable path.
            return .failure(.unreadable(e.description))
        } catch {
            return .failure(.unreadable("\(error)"))
        }

        // 2 and 3. cgroup.
        let cgroupPath = base + "/cgroup"
        let cgroup: [UInt8]
        do {
            guard let bytes = try readFileBytes(cgroupPath) else { return .failure(.processGone) }
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
            return .failure(.unreadable("\(base)/exe is not an absolute path: \(executable)"))
        }
        return .success(ResolvedApp(appID: executable, sandboxed: false, executable: executable))
    }

    // MARK: start time

    /// Field 22 of `stat`. Parsed after the last `)` because the command name
    /// (field 2, in parentheses) may itself contain spaces and parentheses.
    private func startTime(_ base: String) -> Result<UInt64, IdentityError> {
        let path = base + "/stat"
        let bytes: [UInt8]
        do {
            guard let b = try readFileBytes(path) else { return .failure(.processGone) }
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
    /// namespace) nor carry control characters; such a name is ignored.
    private static func isUsableID(_ id: String) -> Bool {
        !id.isEmpty && !id.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 < 0x20 || $0 == 0x7F })
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
