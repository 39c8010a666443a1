/// The script an interpreter runs, from its command line (docs/dbus-api.md,
/// "Identity", rule 4): without it every Python app would be one app,
/// `/usr/bin/python3.11`, with one consent for all of them.
///
/// The command line is the process's own to write, like its executable path:
/// within a uid the script path is a claim (kind `script`), which keys that
/// user's records and proves only for system uids what root started.
public enum ScriptPath {
    /// The interpreter family of `executable` (a resolved path), by the names
    /// Debian installs them under, with an optional version (`python3.11`,
    /// `perl5.36`, `lua5.4`) and `-dbg`; nil for a program that is none.
    public static func interpreter(_ executable: String) -> Interpreter? {
        guard let slash = executable.lastIndex(of: "/") else { return nil }
        let name = executable[executable.index(after: slash)...]
        for (stem, family) in interpreters where name.hasPrefix(stem) {
            var rest = name.dropFirst(stem.count)
            if rest.hasSuffix("-dbg") { rest = rest.dropLast(4) }
            if rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) { return family }
        }
        return nil
    }

    /// How an interpreter's command line reads: the options after which the
    /// program is not a file (code in the command line, a module, standard
    /// input), and the options that take the next word as their value.
    public struct Interpreter: Equatable, Sendable {
        let code: Set<String>
        let withValue: Set<String>

        enum Option { case code, valueFollows, alone }

        /// What an option word does. `--name=value` carries its value; a
        /// single-dash word is read letter by letter, as getopt does: flags run
        /// together (`-Es`), and the first letter that takes a value takes the
        /// rest of the word (`-cCODE`, `-Wignore`) or, last, the next word. A
        /// code option anywhere, its value attached or not, means no script.
        func option(_ w: String) -> Option {
            if w.hasPrefix("--") {
                let name = String(w.split(separator: "=", maxSplits: 1)[0])
                if code.contains(name) { return .code }
                return withValue.contains(name) && !w.contains("=") ? .valueFollows : .alone
            }
            if code.contains(w) { return .code }
            if withValue.contains(w) { return .valueFollows }
            let sign = w.first!
            for (i, letter) in w.dropFirst().enumerated() {
                let single = "\(sign)\(letter)"
                if code.contains(single) { return .code }
                if withValue.contains(single) { return i == w.count - 2 ? .valueFollows : .alone }
            }
            return .alone
        }

        static let python = Interpreter(code: ["-c", "-m", "-"], withValue: ["-W", "-X", "-Q"])
        static let perl = Interpreter(code: ["-e", "-E", "-"], withValue: ["-I", "-M", "-m"])
        static let ruby = Interpreter(code: ["-e", "-"], withValue: ["-I", "-r", "-C"])
        static let node = Interpreter(code: ["-e", "--eval", "-p", "--print", "-"],
                                      withValue: ["-r", "--require", "--import", "--loader"])
        static let gjs = Interpreter(code: ["-c", "--command", "-m", "--module"], withValue: ["-I", "--include-path"])
        static let shell = Interpreter(code: ["-c", "-s", "-"], withValue: ["-o", "+o", "-O", "+O"])
        static let lua = Interpreter(code: ["-e", "-"], withValue: ["-l"])
        static let php = Interpreter(code: ["-r", "-a", "-"], withValue: ["-c", "-d", "-z"])
        static let tcl = Interpreter(code: ["-"], withValue: ["-encoding"])
        static let rscript = Interpreter(code: ["-e", "-"], withValue: [])
    }

    /// Name stems, longest first where one is the other's prefix (`gjs-console`
    /// before `gjs`, `nodejs` before `node`, `luajit` before `lua`).
    private static let interpreters: [(String, Interpreter)] = [
        ("python", .python), ("pypy", .python), ("perl", .perl), ("ruby", .ruby),
        ("nodejs", .node), ("node", .node), ("gjs-console", .gjs), ("gjs", .gjs),
        ("bash", .shell), ("dash", .shell), ("zsh", .shell), ("mksh", .shell), ("ksh", .shell), ("sh", .shell),
        ("luajit", .lua), ("lua", .lua), ("php", .php), ("tclsh", .tcl), ("wish", .tcl), ("Rscript", .rscript),
    ]

    /// The script of a command line (`/proc/PID/cmdline`: arguments ended by
    /// NUL): after the interpreter's options, the first operand. A relative one
    /// is taken from `cwd` (the process's working directory, absolute). Nil when
    /// the interpreter runs code of no file, the operand climbs with `..`, or
    /// anything does not make a path.
    public static func script(inCommandLine bytes: [UInt8], of interpreter: Interpreter, cwd: String?) -> String? {
        var words = bytes.split(separator: 0, omittingEmptySubsequences: false).dropFirst()
        if words.last?.isEmpty == true { words = words.dropLast() }
        while let word = words.first {
            let w = String(decoding: word, as: UTF8.self)
            if w == "--" {
                words = words.dropFirst()
                break
            }
            guard w.hasPrefix("-") || (w.hasPrefix("+") && interpreter == .shell) else { break }
            switch interpreter.option(w) {
            case .code: return nil
            case .valueFollows: words = words.dropFirst(2)
            case .alone: words = words.dropFirst()
            }
        }
        guard let operand = words.first, !operand.isEmpty else { return nil }
        let path = String(decoding: operand, as: UTF8.self)
        let absolute: String
        if path.hasPrefix("/") {
            absolute = path
        } else if let cwd, cwd.hasPrefix("/"), !cwd.hasSuffix(" (deleted)") {
            absolute = (cwd == "/" ? "" : cwd) + "/" + path
        } else {
            return nil
        }
        // Lexically tidied: `./` and doubled slashes go; `..` would need the
        // file system to resolve, so it is no script.
        var parts: [Substring] = []
        for part in absolute.split(separator: "/") where part != "." {
            if part == ".." { return nil }
            parts.append(part)
        }
        guard !parts.isEmpty else { return nil }
        return "/" + parts.joined(separator: "/")
    }
}
