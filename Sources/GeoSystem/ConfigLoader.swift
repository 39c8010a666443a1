/// Finds and reads the configuration files (docs/dbus-api.md "Configuration") and hands
/// their text to the pure `ConfigParser`.
import Glibc
import GeoCore

public enum ConfigLoader {
    /// The configuration the daemon runs with.
    ///
    /// - With `explicitFile` (`--config FILE`) only that file is read.
    /// - Otherwise `defaultFile`, then every `*.conf` in `conf.d/` beside it, in
    ///   byte order of their names; a later file wins key by key. Names starting
    ///   with `.` are skipped, like a shell glob would, so editor and package
    ///   manager leftovers such as `.foo.conf.swp` do not count.
    ///
    /// A file or `conf.d` that does not exist means defaults (docs/dbus-api.md). Anything
    /// else that goes wrong — a file that exists but cannot be read, bad UTF-8, a
    /// bad line — throws `ConfigError` naming the file (and line), because the
    /// daemon must refuse to start rather than run with a config the admin did
    /// not write.
    /// `frontEndSections`: the sections the daemon's front ends own
    /// (`Config.frontEndSections`).
    public static func load(explicitFile: String?, defaultFile: String = "/etc/geoconsent/geoconsent.conf",
                            frontEndSections: Set<String> = []) throws -> Config {
        var config = Config()
        config.frontEndSections = frontEndSections
        if let file = explicitFile {
            // Named on the command line: a file that is not there is a mistake, not defaults.
            guard try apply(file, to: &config) else {
                throw ConfigError(file: file, line: 0, reason: "does not exist (named by --config)")
            }
            return config
        }
        try apply(defaultFile, to: &config)
        let dropIn = directoryName(of: defaultFile) + "/conf.d"
        let names: [String]
        do {
            names = try listDirectory(dropIn)
        } catch let e as SystemError where e.isNotFound {
            names = []
        } catch let e as SystemError {
            throw ConfigError(file: dropIn, line: 0, reason: "cannot read directory: \(e.message)")
        }
        for name in names where !name.hasPrefix(".") && name.hasSuffix(".conf") {
            try apply(dropIn + "/" + name, to: &config)
        }
        return config
    }

    /// Parses one file on top of `config`; a missing file changes nothing
    /// (false: it was missing).
    @discardableResult
    private static func apply(_ file: String, to config: inout Config) throws -> Bool {
        let bytes: [UInt8]?
        do {
            bytes = try readFileBytes(file)
        } catch let e as SystemError {
            throw ConfigError(file: file, line: 0, reason: "cannot read: \(e.message)")
        }
        guard let bytes else { return false }
        try ConfigParser.parse(bytes: bytes, file: file, into: &config)
        return true
    }
}
