import Foundation

/// Where the harness finds the source tree, the built binaries and tools.
public enum TestPaths {
    /// Root of the source tree (the directory holding Package.swift):
    /// `$GEOCONSENT_SOURCE_ROOT` if set, else two levels above this file
    /// (`Instruments/GeoTestSupport/Paths.swift` -> `.`).
    public static var sourceRoot: String {
        if let env = ProcessInfo.processInfo.environment["GEOCONSENT_SOURCE_ROOT"], !env.isEmpty {
            return env
        }
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()   // GeoTestSupport
            .deletingLastPathComponent()   // Instruments
            .deletingLastPathComponent()   // root
            .path
    }

    /// Directory of the built executables (geoconsentd, geoconsentctl,
    /// nmea-replay): `$GEOCONSENT_BIN_DIR` if set, else the directory of the
    /// running executable (`/proc/self/exe`); `swift test` runs the test bundle
    /// from the SwiftPM build directory (e.g. `.build/debug`), beside them.
    ///
    /// Tests run some of them as other uids (`setpriv`). When they run as root
    /// from a tree other users cannot reach (a clone under a 0700 directory),
    /// the executables are copied once into a 0755 temp directory, removed at
    /// exit, and that is returned instead: every uid can run the same binaries.
    public static var binDir: String { resolvedBinDir }

    private static let resolvedBinDir: String = {
        let built = builtBinDir
        guard getuid() == 0, !everyoneCanEnter(built) else { return built }
        var template = Array("/tmp/geoconsent-bin.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { return built }
        let shared = String(cString: made)
        chmod(shared, 0o755)
        for name in ["geoconsentd", "geoconsentctl", "nmea-replay"] {
            try? FileManager.default.copyItem(atPath: built + "/" + name, toPath: shared + "/" + name)
        }
        sharedBinDirToRemove = shared
        atexit { if let d = sharedBinDirToRemove { try? FileManager.default.removeItem(atPath: d) } }
        return shared
    }()

    /// Where SwiftPM put this build's products (executables, and the compiled
    /// modules under `Modules/`): `$GEOCONSENT_BIN_DIR` if set, else the directory
    /// of the running executable. Unlike `binDir`, never a copy.
    public static var buildProductsDir: String { builtBinDir }

    private static var builtBinDir: String {
        if let env = ProcessInfo.processInfo.environment["GEOCONSENT_BIN_DIR"], !env.isEmpty {
            return env
        }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }

    /// True when every directory from / down to `dir` lets others search it (o+x).
    static func everyoneCanEnter(_ dir: String) -> Bool {
        var path = ""
        for part in ["/"] + dir.split(separator: "/").map(String.init) {
            path = part == "/" ? "/" : (path == "/" ? "/" : path + "/") + part
            var st = stat()
            guard stat(path, &st) == 0, st.st_mode & S_IXOTH != 0 else { return false }
        }
        return true
    }

    /// `tests/dbus/test-bus.conf` in the source tree.
    public static var testBusConfig: String { sourceRoot + "/tests/dbus/test-bus.conf" }

    /// `data/track.nmea` in the source tree.
    public static var trackFile: String { sourceRoot + "/data/track.nmea" }

    /// Finds an executable: `candidates` that are absolute paths first, then
    /// `name` in `$PATH` and the sbin directories (not always in root's PATH
    /// inside containers). Nil when nothing executable is found.
    public static func findExecutable(_ name: String, candidates: [String] = []) -> String? {
        var dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        dirs += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        for c in candidates + dirs.map({ $0 + "/" + name }) where access(c, X_OK) == 0 {
            return c
        }
        return nil
    }
}

/// Last `maxBytes` of a file, for error messages ("" if unreadable).
func tailOfFile(_ path: String, maxBytes: Int = 4000) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    let slice = data.count > maxBytes ? data.suffix(maxBytes) : data
    return String(decoding: slice, as: UTF8.self)
}

/// The shared copy of the binaries made by `TestPaths.binDir`, removed at exit.
nonisolated(unsafe) private var sharedBinDirToRemove: String?
