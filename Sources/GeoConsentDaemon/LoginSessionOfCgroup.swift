/// The login session a process is in, read from its cgroup path the way logind
/// itself reads it (libsystemd's `cg_path_get_session`, which `GetSessionByPID`
/// and `sd_pid_get_session` both come down to): leading slices are skipped, and
/// the first unit after them is the session's scope, `session-ID.scope`, or
/// the process is in no session. So a new app's first call needs no question
/// to logind: its cgroup, which the identity helper reads anyway, says it.
///
/// A process cannot choose this: the slices and the session scope are made by
/// systemd and logind as root, and a user's own subtree (`user@UID.service`,
/// delegated to the user) begins with a unit that is not a session, so any
/// `session-*.scope` a user makes inside it is read as no session, as logind
/// reads it.
enum LoginSessionOfCgroup {
    enum Answer: Equatable {
        /// In this session (its logind object path).
        case session(id: String, path: String)
        /// In no session: the uid's own session is asked of logind instead.
        case none
    }

    /// `cgroup`: the unified hierarchy's path (`0::PATH` of `/proc/PID/cgroup`).
    /// Nil when the path is not one systemd lays out (no unit after the slices,
    /// or a name logind would not accept): then logind is asked.
    static func answer(_ cgroup: String) -> Answer? {
        var parts = cgroup.split(separator: "/", omittingEmptySubsequences: true)[...]
        while let first = parts.first, first.hasSuffix(".slice") { parts = parts.dropFirst() }
        guard let unit = parts.first, isUnitName(unit) else { return nil }
        guard unit.hasPrefix("session-"), unit.hasSuffix(".scope") else { return Answer.none }
        let id = unit.dropFirst("session-".count).dropLast(".scope".count)
        guard isSessionID(id) else { return Answer.none }
        return .session(id: String(id), path: LogindWatch.sessionPathPrefix + "/" + pathLabel(id))
    }

    /// logind's `session_id_valid`: letters and digits, at least one.
    static func isSessionID(_ id: Substring) -> Bool {
        !id.isEmpty && id.utf8.allSatisfy { isAlphanumeric($0) }
    }

    /// A unit name as systemd accepts it in a cgroup path: `NAME.TYPE` of the
    /// characters systemd allows, at most 255 bytes.
    static func isUnitName(_ s: Substring) -> Bool {
        guard s.utf8.count <= 255, let dot = s.lastIndex(of: "."), dot != s.startIndex,
              !s[s.index(after: dot)...].isEmpty else { return false }
        return s.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "-")
            || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "@") }
    }

    /// sd-bus's object path label (`sd_bus_path_encode`): letters and digits as
    /// they are, except a leading digit; every other byte `_` and two hex digits.
    static func pathLabel(_ s: Substring) -> String {
        var out = ""
        for (i, b) in s.utf8.enumerated() {
            let isDigit = b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
            if isAlphanumeric(b) && !(i == 0 && isDigit) {
                out.unicodeScalars.append(UnicodeScalar(b))
            } else {
                out += "_" + String(b, radix: 16).leftPadded(to: 2)
            }
        }
        return out
    }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
    }
}

private extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
