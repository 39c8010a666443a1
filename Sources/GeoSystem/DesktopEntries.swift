import Glibc
import GeoCore

/// Whether a desktop entry id names a program: the one check that lets a
/// GeoClue client's `DesktopId` reach a GeoClue agent (docs/geoclue.md,
/// "GeoClue agents").
///
/// Why: GNOME Shell's agent answers `AuthorizeApp(DESKTOP_ID)` from the
/// permission it stored for that desktop id, with no dialog. A `DesktopId` is
/// a string the client sets, so any app could borrow another's permission by
/// naming it. A host app (identity `executable`) is named to an agent only by
/// an entry that an administrator installed (`ID.desktop` in a system
/// applications directory, owned by root and writable by nobody else) whose
/// `Exec` (or `TryExec`) program is that very executable. Sandboxes and
/// systemd units are named by their own id, never by this.
public struct DesktopEntries {
    /// The system applications directories (XDG's defaults), first found wins.
    public var directories: [String]
    /// Where a bare `Exec` program name is looked up, as a session's PATH would.
    public var searchPath: [String]
    /// The largest entry read; real ones are a few KiB (translations included).
    public static let maxEntryBytes = 256 * 1024

    /// XDG's system applications directories, first found first.
    public static let defaultDirectories = Config().desktopEntries

    public init(directories: [String] = DesktopEntries.defaultDirectories,
                searchPath: [String] = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]) {
        self.directories = directories
        self.searchPath = searchPath
    }

    /// A desktop file id as the Desktop Entry specification allows one, of
    /// at most 255 bytes, without the `.desktop` suffix: no path of any kind.
    public static func isValidID(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= 255, id.utf8.first != UInt8(ascii: ".") else { return false }
        return id.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
    }

    /// True when the system entry `id` names `executable` (a resolved path, as
    /// the identity gives it) as its program. Any doubt is false.
    public func entry(_ id: String, names executable: String) -> Bool { path(id, names: executable) != nil }

    /// The path of the system entry `id` when it names `executable` (as `entry(_:names:)`), else nil.
    public func path(_ id: String, names executable: String) -> String? {
        guard Self.isValidID(id), executable.hasPrefix("/") else { return nil }
        for dir in directories {
            let path = dir + "/" + id + ".desktop"
            guard let bytes = Self.readSystemFile(path, directory: dir) else { continue }
            // The first entry found is the one a desktop would launch.
            let facts = Self.facts(ofEntry: bytes)
            return !facts.hidden && facts.programs.contains { resolve($0) == executable } ? path : nil
        }
        return nil
    }

    /// The programs an entry's `[Desktop Entry]` runs: `TryExec`'s and the
    /// first word of `Exec` (after `env VAR=VALUE …`), as written.
    public static func programs(ofEntry bytes: [UInt8]) -> [String] { facts(ofEntry: bytes).programs }

    /// What an entry's `[Desktop Entry]` says that matters here: its programs
    /// (`programs(ofEntry:)`), and whether it is deleted (`Hidden`) or kept
    /// out of menus (`NoDisplay`).
    static func facts(ofEntry bytes: [UInt8]) -> (programs: [String], exec: [String], hidden: Bool, noDisplay: Bool) {
        var inMain = false
        var found: [String] = []
        var command: [String] = []
        var hidden = false, noDisplay = false
        for raw in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            let line = String(decoding: raw, as: UTF8.self).trimmingSpaces()
            if line.hasPrefix("[") {
                inMain = line == "[Desktop Entry]"
                continue
            }
            guard inMain, let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq]).trimmingSpaces()
            let value = String(line[line.index(after: eq)...]).trimmingSpaces()
            switch key {
            case "TryExec":
                if !value.isEmpty { found.append(value) }
            case "Exec":
                var words = execWords(value)[...]
                if words.first == "env" || words.first == "/usr/bin/env" {
                    // env's assignments and options (-u NAME takes a word of its own).
                    words = words.dropFirst()
                    while let w = words.first, w.contains("=") || w.hasPrefix("-") {
                        words = words.dropFirst(w == "-u" || w == "--unset" ? 2 : 1)
                    }
                }
                if let program = words.first, !program.isEmpty { found.append(program) }
                command = Array(words)
            case "Hidden":
                hidden = value == "true"
            case "NoDisplay":
                noDisplay = value == "true"
            default:
                break
            }
        }
        return (found, command, hidden, noDisplay)
    }

    /// `Exec`'s words: split at spaces, with the specification's double
    /// quotes and their backslash escapes.
    static func execWords(_ value: String) -> [String] {
        var words: [String] = []
        var word = ""
        var quoted = false
        var escaped = false
        var started = false
        for c in value {
            if escaped {
                word.append(c)
                escaped = false
            } else if quoted && c == "\\" {
                escaped = true
            } else if c == "\"" {
                quoted.toggle()
                started = true
            } else if c == " " && !quoted {
                if started { words.append(word) }
                word = ""
                started = false
            } else {
                word.append(c)
                started = true
            }
        }
        if started { words.append(word) }
        return words
    }

    /// The file a program name runs: a path as it is, a bare name by the
    /// search path; symbolic links followed. Nil when none is found.
    func resolve(_ program: String) -> String? {
        let candidates = program.contains("/") ? [program] : searchPath.map { $0 + "/" + program }
        for candidate in candidates where candidate.hasPrefix("/") {
            guard let real = realpath(candidate, nil) else { continue }
            defer { free(real) }
            return String(cString: real)
        }
        return nil
    }

    /// The bytes of `path` if it is a regular file (links followed) that
    /// only root can have written: it and `directory` owned by root and not
    /// writable by group or others. Bounded by `maxEntryBytes`.
    static func readSystemFile(_ path: String, directory: String) -> [UInt8]? {
        var st = stat()
        guard stat(directory, &st) == 0, st.st_uid == 0, st.st_mode & (S_IWGRP | S_IWOTH) == 0 else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == 0,
              st.st_mode & (S_IWGRP | S_IWOTH) == 0, st.st_size <= maxEntryBytes else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            got += n
        }
        return Array(bytes[0..<got])
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and carriage returns: a line
    /// of a key file (a desktop entry, `.flatpak-info`) as GLib reads it.
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
