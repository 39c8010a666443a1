/// Parsing of the admin configuration (docs/dbus-api.md "Configuration"). Pure: the caller
/// reads the files and hands the text here, so every rule is testable without I/O.

/// A configuration problem, reported as `FILE:LINE: reason` because that is what
/// the daemon prints before refusing to start (docs/dbus-api.md). `line` is 1-based; 0 means
/// the problem concerns the file as a whole (for example it cannot be read), and
/// then the description is `FILE: reason`.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    /// The file as it was named to the parser or loader.
    public var file: String
    /// 1-based line number, or 0 for the whole file.
    public var line: Int
    /// A short explanation, without the location.
    public var reason: String

    public init(file: String, line: Int, reason: String) {
        self.file = file
        self.line = line
        self.reason = reason
    }

    public var description: String {
        line > 0 ? "\(file):\(line): \(reason)" : "\(file): \(reason)"
    }
}

/// The INI dialect of `geoconsent.conf`.
///
/// Rules:
/// - Lines are separated by `\n`; a trailing `\r` is ignored. Spaces and tabs
///   around names and values are trimmed.
/// - A line whose first non-blank character is `#` or `;` is a comment.
/// - After a value or a section header, `#` preceded by a blank (or at the very
///   start of the value) begins a comment. `;` is not a comment there, because it
///   separates the app-ids of `allow`; a `#` with no blank before it is part of the
///   value, so paths like `/opt/a#b` survive.
/// - Sections: `[daemon]`, `[agents]`, `[limits]`, `[app "APP_ID"]`, and those a
///   front end owns (`Config.frontEndSections`: their entries are kept for it,
///   unchecked here). Inside the quotes `\"` and `\\` stand for `"` and `\`;
///   any other backslash escape is an error.
/// - A key given twice wins with its later value, in one file or across files,
///   so the parser merges into an existing `Config` instead of returning a new one.
public enum ConfigParser {
    /// Largest accepted `prompt-timeout` / `gpsd-linger` in seconds (one day). The
    /// bound keeps later conversions to integer milliseconds far from overflow, and
    /// no sensible setting comes near it.
    public static let maxSeconds: Double = 86_400
    /// Accepted range of `reduced-grid` in metres: a cell under a metre would not
    /// reduce anything, and one over 1000 km is meaningless.
    public static let reducedGridRange: ClosedRange<Double> = 1...1_000_000

    /// Parses `text` (the contents of `file`, named only for error messages) and
    /// applies every setting it contains on top of `config`.
    public static func parse(_ text: String, file: String, into config: inout Config) throws {
        try parse(bytes: Array(text.utf8), file: file, into: &config)
    }

    /// Like `parse(_:file:into:)` but from raw bytes, so that a file that is not
    /// valid UTF-8 is reported with the line where the bad byte is, rather than
    /// silently repaired into U+FFFD by a lossy decode.
    public static func parse(bytes: [UInt8], file: String, into config: inout Config) throws {
        // Work on a copy so that a file with an error leaves `config` untouched.
        var result = config
        var section: Section? = nil
        for (index, line) in try lines(of: bytes, file: file).enumerated() {
            let lineNumber = index + 1
            func fail(_ reason: String) -> ConfigError {
                ConfigError(file: file, line: lineNumber, reason: reason)
            }
            let trimmed = trim(Substring(line))
            if trimmed.isEmpty || trimmed.first == "#" || trimmed.first == ";" { continue }

            if trimmed.first == "[" {
                section = try parseHeader(trimmed, frontEnds: result.frontEndSections, fail: fail)
                continue
            }

            guard let eq = trimmed.firstIndex(of: "=") else {
                throw fail("expected 'key = value' or a [section] header")
            }
            let key = String(trim(trimmed[..<eq]))
            let value = String(stripComment(trimmed[trimmed.index(after: eq)...]))
            if key.isEmpty { throw fail("missing key before '='") }
            guard let current = section else {
                throw fail("key '\(key)' outside of any section")
            }
            switch current {
            case .daemon:
                switch key {
                case "prompt-timeout":
                    let v = try seconds(value, key: key, allowZero: false, fail: fail)
                    result.promptTimeout = v
                case "gpsd-linger":
                    let v = try seconds(value, key: key, allowZero: true, fail: fail)
                    result.gpsdLinger = v
                case "idle-exit":
                    result.idleExit = try seconds(value, key: key, allowZero: true, fail: fail)
                case "agent-wait":
                    result.agentWait = try seconds(value, key: key, allowZero: true, fail: fail)
                case "unused-lapse":
                    // At most about 100 years: days times a day's microseconds must fit in 64 bits.
                    guard let v = UInt32(value), v <= 36_500, value == String(v) else {
                        throw fail("unused-lapse must be a whole number of days from 0 to 36500, not '\(value)'")
                    }
                    result.unusedLapseDays = v
                case "reduced-grid":
                    guard let v = decimal(value), reducedGridRange.contains(v) else {
                        throw fail("reduced-grid must be a number of metres from 1 to 1000000, not '\(value)'")
                    }
                    result.reducedGrid = v
                case "state-dir":
                    guard value.first == "/" else {
                        throw fail("state-dir must be an absolute path, not '\(value)'")
                    }
                    result.stateDir = value
                case "desktop-entries":
                    let dirs = list(value)
                    if let bad = dirs.first(where: { !$0.hasPrefix("/") }) {
                        throw fail("desktop-entries wants absolute directories separated by ';', not '\(bad)'")
                    }
                    result.desktopEntries = dirs
                case "system-uid-max":
                    guard let v = uid(value) else {
                        throw fail("system-uid-max must be a uid, a whole number from 0 to 4294967294, not '\(value)'")
                    }
                    result.systemUIDMax = v
                default:
                    throw fail("unknown key '\(key)' in [daemon]")
                }
            case .agents:
                switch key {
                case "allow":
                    let ids = list(value)
                    if let bad = ids.first(where: { $0.contains(",") }) {
                        throw fail("allow separates app-ids with ';', not ',' ('\(bad)')")
                    }
                    result.agentAllow = ids
                default:
                    throw fail("unknown key '\(key)' in [agents]")
                }
            case .limits:
                let v = try count(value, key: key, fail: fail)
                switch key {
                case "sessions-per-user": result.limits.sessionsPerUser = v
                case "waiting-per-user": result.limits.waitingPerUser = v
                case "prompts-per-user":
                    guard v <= Limits.openPrompts else {
                        throw fail("prompts-per-user must be at most \(Limits.openPrompts), not '\(value)'")
                    }
                    result.limits.promptsPerUser = v
                case "consents-per-user": result.limits.consentsPerUser = v
                case "location-requests-per-session": result.limits.locationRequestsPerSession = v
                default:
                    throw fail("unknown key '\(key)' in [limits]")
                }
            case .sources:
                try parseSources(key: key, value: value, into: &result.sources, fail: fail)
            case .frontEnd(let name):
                result.frontEndEntries[name, default: []].append(ConfigEntry(key: key, value: value, file: file,
                                                                             line: lineNumber))
            case .app(let appID):
                switch key {
                case "policy":
                    guard let policy = AppPolicy(rawValue: value) else {
                        throw fail("policy must be 'always' or 'restricted', not '\(value)'")
                    }
                    result.apps[appID] = policy
                default:
                    throw fail("unknown key '\(key)' in [app \"\(appID)\"]")
                }
            }
        }
        config = result
    }

    private enum Section {
        case daemon
        case agents
        case limits
        case sources
        case frontEnd(String)
        case app(String)
    }

    /// `[daemon]`, `[agents]` or `[app "ID"]`, optionally followed by a comment.
    private static func parseHeader(_ line: Substring, frontEnds: Set<String>,
                                    fail: (String) -> ConfigError) throws -> Section {
        var i = line.index(after: line.startIndex)  // past "["
        while i < line.endIndex, isBlank(line[i]) { i = line.index(after: i) }
        // Name: up to the first blank, quote or "]".
        let nameStart = i
        while i < line.endIndex, line[i] != "]", line[i] != "\"", !isBlank(line[i]) { i = line.index(after: i) }
        let name = line[nameStart..<i]
        while i < line.endIndex, isBlank(line[i]) { i = line.index(after: i) }

        var appID: String? = nil
        if i < line.endIndex, line[i] == "\"" {
            i = line.index(after: i)
            var id = ""
            var closed = false
            while i < line.endIndex {
                let c = line[i]
                if c == "\"" { closed = true; i = line.index(after: i); break }
                if c == "\\" {
                    let n = line.index(after: i)
                    guard n < line.endIndex, line[n] == "\"" || line[n] == "\\" else {
                        throw fail("bad escape in section name: only \\\" and \\\\ are allowed")
                    }
                    id.append(line[n])
                    i = line.index(after: n)
                    continue
                }
                id.append(c)
                i = line.index(after: i)
            }
            guard closed else { throw fail("unterminated quote in section header") }
            appID = id
            while i < line.endIndex, isBlank(line[i]) { i = line.index(after: i) }
        }
        guard i < line.endIndex, line[i] == "]" else {
            throw fail("malformed section header: expected [daemon], [agents], [limits], [sources], [app \"APP_ID\"]" +
                       frontEnds.sorted().map { " or [\($0)]" }.joined())
        }
        let rest = trim(line[line.index(after: i)...])
        if !rest.isEmpty, rest.first != "#", rest.first != ";" {
            throw fail("unexpected text after section header")
        }
        switch (name, appID) {
        case ("daemon", nil): return .daemon
        case ("agents", nil): return .agents
        case ("limits", nil): return .limits
        case ("sources", nil): return .sources
        case (let other, nil) where frontEnds.contains(String(other)): return .frontEnd(String(other))
        case ("app", let id?):
            if id.isEmpty { throw fail("empty app-id in [app \"\"]") }
            return .app(id)
        case ("app", nil): throw fail("[app] needs a quoted app-id: [app \"APP_ID\"]")
        case (_, _?): throw fail("unknown section '\(name)' (only [app \"…\"] takes a name)")
        default: throw fail("unknown section [\(name)]")
        }
    }

    /// Smallest `gps-wait`: a receiver gives a fix a second, and a GPS fix
    /// must stay fresh until the next one, or another source's position
    /// would come between two of them.
    public static let minGPSWait: Double = 1
    /// Largest `gps-wait`: a minute is far longer than a receiver that has a
    /// fix takes to give one.
    public static let maxGPSWait: Double = 60

    /// Accepted `wifi-interval`: a lookup every few seconds would hammer the
    /// server, and one an hour is as good as none for a moving machine.
    public static let wifiIntervalRange: ClosedRange<Double> = 5...3600

    /// `https://HOST…` with no blank or control character in it: the helper
    /// speaks HTTPS only, and the URL is given to libcurl as it is.
    static func isHTTPSURL(_ value: String) -> Bool {
        guard value.hasPrefix("https://"), value.utf8.count <= 2048,
              value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        let host = value.dropFirst(8).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !host.isEmpty && !host.contains("@")
    }

    /// One `[sources]` entry.
    private static func parseSources(key: String, value: String, into sources: inout SourcesConfig,
                                     fail: (String) -> ConfigError) throws {
        switch key {
        case "gps":
            guard let v = Bool(value) else { throw fail("gps must be 'true' or 'false', not '\(value)'") }
            sources.gps = v
        case "gps-wait":
            guard let v = decimal(value), v >= minGPSWait, v <= maxGPSWait else {
                throw fail("gps-wait must be a number of seconds from \(Int(minGPSWait)) up to \(Int(maxGPSWait)), not '\(value)'")
            }
            sources.gpsWait = v
        case "static-file", "wifi-ca-file":
            guard value.isEmpty || value.first == "/" else {
                throw fail("\(key) must be an absolute path, or empty for none, not '\(value)'")
            }
            if key == "static-file" { sources.staticFile = value } else { sources.wifiCAFile = value }
        case "wifi-helper":
            guard value.first == "/" else { throw fail("wifi-helper must be an absolute path, not '\(value)'") }
            sources.wifiHelper = value
        case "wifi-url":
            guard value.isEmpty || isHTTPSURL(value) else {
                throw fail("wifi-url must be an https:// URL with a host, or empty for no Wi-Fi positioning, not '\(value)'")
            }
            sources.wifiURL = value
        case "wifi-interval":
            guard let v = decimal(value), wifiIntervalRange.contains(v) else {
                throw fail("wifi-interval must be a number of seconds from 5 to 3600, not '\(value)'")
            }
            sources.wifiInterval = v
        default:
            throw fail("unknown key '\(key)' in [sources]")
        }
    }

    /// A limit: a whole number from 1 to 65536 (0 would lock every user out).
    private static func count(_ value: String, key: String, fail: (String) -> ConfigError) throws -> Int {
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), value.utf8.count <= 5,
              let v = Int(value), (1...65536).contains(v) else {
            throw fail("\(key) must be a whole number from 1 to 65536, not '\(value)'")
        }
        return v
    }

    /// A uid: decimal digits only, at most 4294967294 (4294967295 is `(uid_t)-1`, no user).
    private static func uid(_ value: String) -> UInt32? {
        guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let v = UInt64(value), v < UInt64(UInt32.max) else { return nil }
        return UInt32(v)
    }

    /// A duration in seconds: non-negative decimal, at most `maxSeconds`.
    private static func seconds(_ value: String, key: String, allowZero: Bool,
                                fail: (String) -> ConfigError) throws -> Double {
        guard let v = decimal(value), v <= maxSeconds, allowZero || v > 0 else {
            let low = allowZero ? "from 0" : "greater than 0 and"
            throw fail("\(key) must be a number of seconds \(low) up to 86400, not '\(value)'")
        }
        return v
    }

    /// Plain decimal numbers only (`12`, `0.5`): no sign, exponent, hex, `inf` or
    /// `nan`, which `Double(String)` would accept and an admin would not mean.
    private static func decimal(_ s: String) -> Double? {
        var digits = 0
        var dots = 0
        for b in s.utf8 {
            if b >= 0x30 && b <= 0x39 { digits += 1 } else if b == 0x2E { dots += 1 } else { return nil }
        }
        guard digits > 0, dots <= 1, s.utf8.first != 0x2E, s.utf8.last != 0x2E else { return nil }
        guard let v = Double(s), v.isFinite else { return nil }
        return v
    }

    /// Cuts a value at an inline `#` comment (see the type's rules) and trims it.
    private static func stripComment(_ raw: Substring) -> Substring {
        var prevBlank = true  // the start of the value counts as after a blank
        var i = raw.startIndex
        while i < raw.endIndex {
            let c = raw[i]
            if c == "#" && prevBlank { return trim(raw[..<i]) }
            prevBlank = isBlank(c)
            i = raw.index(after: i)
        }
        return trim(raw)
    }

    /// The lines of a file in this project's text rules: split at `\n`, a
    /// trailing `\r` dropped, each valid UTF-8 or refused as `FILE:LINE`.
    static func lines(of bytes: [UInt8], file: String) throws -> [String] {
        var result: [String] = []
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != 0x0A { end += 1 }
            var lineBytes = bytes[start..<end]
            if lineBytes.last == 0x0D { lineBytes = lineBytes.dropLast() }
            start = end + 1
            guard let line = String(validating: lineBytes, as: UTF8.self) else {
                throw ConfigError(file: file, line: result.count + 1, reason: "not valid UTF-8")
            }
            result.append(line)
        }
        return result
    }

    /// A `;`-separated list, each item trimmed, empty ones left out.
    static func list(_ value: String) -> [String] {
        value.split(separator: ";").map { String(trim($0)) }.filter { !$0.isEmpty }
    }

    private static func isBlank(_ c: Character) -> Bool {
        c == " " || c == "\t" || c == "\u{0B}" || c == "\u{0C}"
    }

    static func trim(_ s: Substring) -> Substring {
        var a = s.startIndex
        var b = s.endIndex
        while a < b, isBlank(s[a]) { a = s.index(after: a) }
        while b > a, isBlank(s[s.index(before: b)]) { b = s.index(before: b) }
        return s[a..<b]
    }
}
