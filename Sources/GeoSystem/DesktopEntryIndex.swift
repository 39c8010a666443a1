import Glibc
import GeoCore

/// The desktop entry a prompt names an app by (docs/dbus-api.md, "Agent
/// interface": `desktop-entry`), so that a person reads "Firefox ESR" with its
/// icon rather than `/usr/lib/firefox-esr/firefox-esr`.
///
/// Only entries an administrator installed count (`DesktopEntries.readSystemFile`:
/// root's files in root's directories): a user's own `~/.local/share/applications`
/// could name any program anything. The entry only names; what the app-id proves
/// is still its kind, and the prompt says so.
/// - a systemd unit's id: `ID.desktop`, if its program is the process's (the
///   unit name is the process's to choose; the program must agree);
/// - an executable or a script: the one shown entry whose program it is, or,
///   of several, the one whose id is the program's name;
/// - a verified Flatpak: `ID.desktop` among the installation's exports;
/// - a Snap: `NAME_NAME.desktop` among snapd's;
/// - an unverified Flatpak: none.
///
/// The scan of the applications directories is kept until one of them changes
/// (its inode or modification time: packages add and replace entries by
/// rename), so prompts in a row, which any user can cause, do not read them again.
public final class DesktopEntryIndex {
    public let entries: DesktopEntries
    /// Where verified Flatpaks' entries are (`exports/share/applications` of each installation).
    public let flatpakDirectories: [String]
    /// Where snapd puts the entries of installed snaps.
    public let snapDirectories: [String]

    /// The scan: program (resolved) → the entries naming it, first directory first.
    private var byProgram: [String: [Candidate]] = [:]
    /// What each directory was when scanned; a change means scanning again.
    private var scannedAs: [DirectoryStamp?] = []
    /// How many scans were made (tests and the bench read it).
    public private(set) var scans = 0
    /// The most entries read in one scan: a machine has a few hundred.
    public static let maxEntries = 4096

    private struct Candidate {
        var id: String
        var path: String
        var shown: Bool
    }

    private struct DirectoryStamp: Equatable {
        var device: UInt64, inode: UInt64, seconds: Int, nanoseconds: Int
    }

    public init(entries: DesktopEntries = DesktopEntries(),
                flatpakDirectories: [String] = ["/var/lib/flatpak/exports/share/applications"],
                snapDirectories: [String] = ["/var/lib/snapd/desktop/applications"]) {
        self.entries = entries
        self.flatpakDirectories = flatpakDirectories
        self.snapDirectories = snapDirectories
    }

    /// The path of the entry that names the app (see the type), or nil.
    /// `identity` nil: the app is known by its id alone (a settings window's
    /// prompt, with no call of the app's): a path is a program's, else none.
    public func entry(naming appID: String, identity: IdentityKind?, executable: String, script: String?) -> String? {
        let program = script ?? (executable.isEmpty ? appID : executable)
        switch identity {
        case nil:
            return appID.hasPrefix("/") ? entryRunning(appID) : nil
        case .systemdUnit?:
            return entries.path(appID, names: program)
        case .executable?, .script?:
            return entryRunning(program)
        case .flatpak?:
            return firstSystemEntry(appID, in: flatpakDirectories)
        case .snap?:
            return firstSystemEntry(appID + "_" + appID, in: snapDirectories)
        case .unverifiedFlatpak?:
            return nil
        }
    }

    private func firstSystemEntry(_ id: String, in directories: [String]) -> String? {
        guard DesktopEntries.isValidID(id) else { return nil }
        for dir in directories {
            let path = dir + "/" + id + ".desktop"
            if DesktopEntries.readSystemFile(path, directory: dir) != nil { return path }
        }
        return nil
    }

    /// The one entry that runs `program`: shown entries before hidden-from-menu
    /// ones; of several, the one named as the program is; else none (a guess
    /// between apps would name the wrong one).
    private func entryRunning(_ program: String) -> String? {
        guard program.hasPrefix("/") else { return nil }
        rescanIfChanged()
        // The caller's script path is as its command line gave it: a link is followed.
        let all = byProgram[program] ?? entries.resolve(program).flatMap { byProgram[$0] } ?? []
        let shown = all.filter(\.shown)
        let pool = shown.isEmpty ? all : shown
        if pool.count == 1 { return pool[0].path }
        let name = String(program[program.index(after: program.lastIndex(of: "/")!)...])
        let named = pool.filter { $0.id == name || $0.id.hasSuffix("." + name) }
        return named.count == 1 ? named[0].path : nil
    }

    private func rescanIfChanged() {
        let now = entries.directories.map(Self.stamp)
        guard now != scannedAs || scans == 0 else { return }
        scannedAs = now
        scans += 1
        byProgram = [:]
        var seen = Set<String>()
        var read = 0
        for dir in entries.directories {
            guard let names = Self.entryNames(in: dir) else { continue }
            for name in names where read < Self.maxEntries {
                let id = String(name.dropLast(".desktop".count))
                // The first directory's entry of an id hides the later ones, as on a desktop.
                guard DesktopEntries.isValidID(id), seen.insert(id).inserted else { continue }
                let path = dir + "/" + name
                guard let bytes = DesktopEntries.readSystemFile(path, directory: dir) else { continue }
                read += 1
                let facts = DesktopEntries.facts(ofEntry: bytes)
                guard !facts.hidden else { continue }
                for program in Set(facts.programs.compactMap { runs($0, exec: facts.exec) }) {
                    byProgram[program, default: []].append(Candidate(id: id, path: path, shown: !facts.noDisplay))
                }
            }
        }
    }

    /// What an entry's program runs, resolved: the program itself, or for an
    /// interpreter (`Exec=python3 /opt/app/main.py`) the script its command
    /// names, as the caller's identity would (`ScriptPath`); nil for an
    /// interpreter given no script (`sh -c …`), which would name every
    /// process of that interpreter after this entry.
    private func runs(_ program: String, exec: [String]) -> String? {
        guard let resolved = entries.resolve(program) else { return nil }
        guard let interpreter = ScriptPath.interpreter(resolved) else { return resolved }
        guard exec.first == program else { return nil }   // TryExec: the command says which script
        let argv = exec.flatMap { Array($0.utf8) + [UInt8(0)] }
        guard let script = ScriptPath.script(inCommandLine: argv, of: interpreter, cwd: nil) else { return nil }
        return entries.resolve(script)
    }

    /// The `*.desktop` names in `dir`, sorted; nil when it cannot be read.
    private static func entryNames(in dir: String) -> [String]? {
        guard let d = opendir(dir) else { return nil }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name.hasSuffix(".desktop") { names.append(name) }
        }
        return names.sorted()
    }

    private static func stamp(_ dir: String) -> DirectoryStamp? {
        var st = stat()
        guard stat(dir, &st) == 0 else { return nil }
        return DirectoryStamp(device: UInt64(st.st_dev), inode: UInt64(st.st_ino),
                              seconds: st.st_mtim.tv_sec, nanoseconds: st.st_mtim.tv_nsec)
    }
}
