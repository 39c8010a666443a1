/// Persistence of consent records and `Enabled` (docs/dbus-api.md "State"). The formats are
/// plain text, documented in docs/state-format.md, so an admin can read them and a
/// damaged file can be inspected after it is moved aside.
import Glibc
import GeoCore

/// The state directory: files `consents` and `enabled`.
///
/// Loading never fails: a missing file gives the default (no records, enabled),
/// and a file that cannot be read or parsed is renamed to `NAME.corrupt-<micros>`
/// (kept for inspection) and replaced by the most private value — no records,
/// `Enabled` false — with a one-line `problem` for the log. Guessing at a damaged
/// file could grant location to an app the user never allowed; losing records
/// only means being asked again.
public final class StateStore: Sendable {
    /// Where the files live.
    public let directory: String

    /// The header line of `consents`; it also versions the format.
    static let consentsHeader = "# geoconsent consents v1"
    /// The header line of `enabled`.
    static let enabledHeader = "# geoconsent state v1"

    /// Nothing is touched until a load or save: the directory may not exist yet.
    public init(directory: String) {
        self.directory = directory
    }

    /// `DIR/consents`: the consent records.
    public var consentsPath: String { directory + "/consents" }
    /// `DIR/enabled`: the `Enabled` property.
    public var enabledPath: String { directory + "/enabled" }
    /// `DIR/wifi`: the `WiFiEnabled` property.
    public var wifiPath: String { directory + "/wifi" }
    /// `DIR/users-off`: the users who switched location off for their own apps.
    public var usersOffPath: String { directory + "/users-off" }

    // MARK: consents

    /// The persisted consent records. `problem` is non-nil when the file was
    /// damaged and moved aside (then `records` is empty).
    public func loadConsents() -> (records: [AppKey: ConsentRecord], problem: String?) {
        removeStaleTemporaryFiles()
        switch load(consentsPath, parse: StateStore.parseConsents) {
        case .missing: return ([:], nil)
        case .loaded(let records): return (records, nil)
        case .damaged(let problem): return ([:], problem + "; starting with no consent records")
        }
    }

    /// Writes all records atomically (sorted by `AppKey`, so equal state gives an
    /// identical file). Creates the directory (0700) when it is missing.
    public func saveConsents(_ records: [AppKey: ConsentRecord]) throws {
        try makeDirectory(directory, mode: 0o700)
        try writeFileAtomically(path: consentsPath, contents: StateStore.formatConsents(records), mode: 0o600)
    }

    // MARK: enabled

    /// The persisted `Enabled` property. `problem` is non-nil when the file was
    /// damaged and moved aside (then `enabled` is false).
    public func loadEnabled() -> (enabled: Bool, problem: String?) {
        switch load(enabledPath, parse: StateStore.parseEnabled) {
        case .missing: return (true, nil)
        case .loaded(let enabled): return (enabled, nil)
        case .damaged(let problem): return (false, problem + "; location stays disabled until root enables it")
        }
    }

    /// Writes `Enabled` atomically. Creates the directory (0700) when missing.
    public func saveEnabled(_ enabled: Bool) throws {
        try saveSwitch(enabledPath, "enabled", enabled)
    }

    // MARK: wifi

    /// The persisted `WiFiEnabled` switch: on when the file is missing (the
    /// admin's `wifi-url` decides), off when it was damaged and moved aside.
    public func loadWiFiEnabled() -> (enabled: Bool, problem: String?) {
        switch load(wifiPath, parse: { try StateStore.parseSwitch($0, key: "wifi") }) {
        case .missing: return (true, nil)
        case .loaded(let on): return (on, nil)
        case .damaged(let problem): return (false, problem + "; Wi-Fi positioning stays off until root switches it on")
        }
    }

    public func saveWiFiEnabled(_ enabled: Bool) throws {
        try saveSwitch(wifiPath, "wifi", enabled)
    }

    // MARK: users-off

    static let usersOffHeader = "# geoconsent users-off v1"

    /// The per-user switches: none when the file is missing; every user but
    /// root off when it was damaged and moved aside (its contents unknown).
    public func loadUsersOff() -> (users: UsersOff, problem: String?) {
        switch load(usersOffPath, parse: StateStore.parseUsersOff) {
        case .missing: return (UsersOff(), nil)
        case .loaded(let users): return (users, nil)
        case .damaged(let problem):
            return (.everyone, problem + "; location stays off for every user's apps until each user (or root) switches it on")
        }
    }

    public func saveUsersOff(_ users: UsersOff) throws {
        try makeDirectory(directory, mode: 0o700)
        try writeFileAtomically(path: usersOffPath, contents: StateStore.formatUsersOff(users), mode: 0o600)
    }

    /// The header, then a uid per line (sorted); after a damaged file, `*`
    /// and a `+UID` line per user who switched location on since.
    static func formatUsersOff(_ users: UsersOff) -> String {
        var lines = [usersOffHeader]
        if let allBut = users.allBut {
            lines.append("*")
            lines += allBut.sorted().map { "+\($0)" }
        } else {
            lines += users.uids.sorted().map { "\($0)" }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func parseUsersOff(_ bytes: [UInt8]) throws -> UsersOff {
        let lines = try splitLines(bytes)
        guard let header = lines.first, header.elementsEqual(usersOffHeader.utf8) else {
            throw ParseFailure(line: 1, reason: "missing header '\(usersOffHeader)'")
        }
        let all = lines.count > 1 && word(lines[1]) == "*"
        var uids = Set<UInt32>()
        for (i, line) in lines.enumerated().dropFirst(all ? 2 : 1) {
            var text = word(line)
            if all {
                guard text.hasPrefix("+") else { throw ParseFailure(line: i + 1, reason: "expected +UID after '*'") }
                text.removeFirst()
            }
            guard let n = number(ArraySlice(text.utf8)), n <= UInt64(UInt32.max), uids.insert(UInt32(n)).inserted else {
                throw ParseFailure(line: i + 1, reason: "expected a uid, once")
            }
        }
        return all ? UsersOff(allBut: uids) : UsersOff(uids: uids)
    }

    /// A switch file: the state header, then `KEY=true` or `KEY=false`.
    private func saveSwitch(_ path: String, _ key: String, _ on: Bool) throws {
        try makeDirectory(directory, mode: 0o700)
        let text = StateStore.enabledHeader + "\n" + key + "=" + (on ? "true" : "false") + "\n"
        try writeFileAtomically(path: path, contents: text, mode: 0o600)
    }

    /// Removes the `.NAME.tmp-PID-*` files of writers that are gone (killed between
    /// creating the temporary file and renaming it): they never were state, and each
    /// crash would otherwise leave another copy of the records behind. Files of a
    /// process that still exists are kept (it may be writing).
    private func removeStaleTemporaryFiles() {
        guard let names = try? listDirectory(directory) else { return }
        for name in names {
            guard let prefix = [".consents.tmp-", ".enabled.tmp-", ".wifi.tmp-", ".users-off.tmp-"].first(where: { name.hasPrefix($0) }) else { continue }
            let rest = name.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid > 0, pid != getpid() else { continue }
            if kill(pid, 0) == 0 || errno == EPERM { continue }
            unlink(directory + "/" + name)
        }
    }

    // MARK: loading and quarantine

    private enum Outcome<T> {
        case missing
        case loaded(T)
        case damaged(String)
    }

    /// A reason a file was not accepted, with the line it was found on (0: whole file).
    struct ParseFailure: Error {
        var line: Int
        var reason: String
    }

    private func load<T>(_ path: String, parse: ([UInt8]) throws -> T) -> Outcome<T> {
        let why: String
        do {
            guard let bytes = try readFileBytes(path) else { return .missing }
            return .loaded(try parse(bytes))
        } catch let e as ParseFailure {
            why = e.line > 0 ? "line \(e.line): \(e.reason)" : e.reason
        } catch let e as SystemError {
            why = "\(e.operation): \(e.message)"
        } catch {
            why = "\(error)"
        }
        let aside = path + ".corrupt-" + String(now())
        if rename(path, aside) == 0 {
            return .damaged("state file \(path) is unusable (\(why)); moved it to \(aside)")
        }
        let e = SystemError.last("rename", path)
        return .damaged("state file \(path) is unusable (\(why)) and could not be moved to \(aside) (\(e.message))")
    }

    // MARK: consents format

    /// The file's text for `records` (see docs/state-format.md).
    static func formatConsents(_ records: [AppKey: ConsentRecord]) -> String {
        var out = consentsHeader + "\n"
        for key in records.keys.sorted() {
            let r = records[key]!
            let fields = [
                String(key.uid),
                escape(key.appID),
                r.decision?.rawValue ?? "-",
                r.decisionAccuracy?.rawValue ?? "-",
                r.oneTimeApproved ? "1" : "0",
                r.oneTimeAccuracy?.rawValue ?? "-",
                String(r.decidedAt),
                String(r.lastUsed),
            ] + (r.lapsed.isEmpty ? [] : [escape(r.lapsed), String(r.lapsedAt)])
            out += fields.joined(separator: "\t") + "\n"
        }
        return out
    }

    /// Strict parser of the consents file: anything not exactly as written by
    /// `formatConsents` is rejected, since a half-understood file must not grant.
    static func parseConsents(_ bytes: [UInt8]) throws -> [AppKey: ConsentRecord] {
        let lines = try splitLines(bytes)
        guard let header = lines.first, header.elementsEqual(consentsHeader.utf8) else {
            throw ParseFailure(line: 1, reason: "missing header '\(consentsHeader)'")
        }
        var records: [AppKey: ConsentRecord] = [:]
        for (index, line) in lines.enumerated().dropFirst() {
            let n = index + 1
            func fail(_ reason: String) -> ParseFailure { ParseFailure(line: n, reason: reason) }
            let fields = line.split(separator: 0x09, omittingEmptySubsequences: false)
            // Ten for a record whose decisions lapsed, so that files without one stay as before.
            guard fields.count == 8 || fields.count == 10 else {
                throw fail("expected 8 or 10 tab-separated fields, found \(fields.count)")
            }
            guard let uidValue = number(fields[0]), uidValue <= UInt64(UInt32.max) else { throw fail("bad uid") }
            guard let appID = unescape(fields[1]) else { throw fail("bad app-id escaping") }
            let decision: StoredDecision?
            switch word(fields[2]) {
            case "-": decision = nil
            case let w: guard let d = StoredDecision(rawValue: w) else { throw fail("bad decision '\(w)'") }
                decision = d
            }
            guard let decisionAccuracy = accuracy(fields[3]) else { throw fail("bad decision-accuracy") }
            let oneTime: Bool
            switch word(fields[4]) {
            case "1": oneTime = true
            case "0": oneTime = false
            default: throw fail("bad one-time-approved (expected 1 or 0)")
            }
            guard let oneTimeAccuracy = accuracy(fields[5]) else { throw fail("bad one-time-accuracy") }
            guard let decidedAt = number(fields[6]) else { throw fail("bad decided-at") }
            guard let lastUsed = number(fields[7]) else { throw fail("bad last-used") }
            let key = AppKey(uid: UInt32(uidValue), appID: appID)
            guard records[key] == nil else { throw fail("duplicate record for \(key)") }
            var record = ConsentRecord(decision: decision, decisionAccuracy: decisionAccuracy,
                                       oneTimeApproved: oneTime, oneTimeAccuracy: oneTimeAccuracy,
                                       decidedAt: decidedAt, lastUsed: lastUsed)
            if fields.count == 10 {
                guard let lapsed = unescape(fields[8]), !lapsed.isEmpty,
                      lapsed.split(separator: ";", omittingEmptySubsequences: false).allSatisfy({
                          $0 == "when-in-use" || $0 == "one-time-approved" }) else {
                    throw fail("bad lapsed")
                }
                guard let lapsedAt = number(fields[9]) else { throw fail("bad lapsed-at") }
                // What lapsed is no longer stored: only a denial (which never lapses) may stand beside it.
                guard decision != .whenInUse, !oneTime else { throw fail("a lapsed record that still grants") }
                record.lapsed = lapsed
                record.lapsedAt = lapsedAt
            }
            records[key] = record
        }
        return records
    }

    // MARK: enabled format

    static func parseEnabled(_ bytes: [UInt8]) throws -> Bool { try parseSwitch(bytes, key: "enabled") }

    static func parseSwitch(_ bytes: [UInt8], key: String) throws -> Bool {
        let lines = try splitLines(bytes)
        guard let header = lines.first, header.elementsEqual(enabledHeader.utf8) else {
            throw ParseFailure(line: 1, reason: "missing header '\(enabledHeader)'")
        }
        guard lines.count == 2 else {
            throw ParseFailure(line: 0, reason: "expected exactly one '\(key)=' line after the header")
        }
        switch word(lines[1]) {
        case key + "=true": return true
        case key + "=false": return false
        default: throw ParseFailure(line: 2, reason: "expected \(key)=true or \(key)=false")
        }
    }

    // MARK: helpers

    /// Lines of a file that must end with a newline: a missing final newline means
    /// the file was cut short (the writer always ends it), so it is damaged.
    private static func splitLines(_ bytes: [UInt8]) throws -> [ArraySlice<UInt8>] {
        if bytes.isEmpty { throw ParseFailure(line: 0, reason: "empty file") }
        guard bytes.last == 0x0A else { throw ParseFailure(line: 0, reason: "truncated (no final newline)") }
        return bytes.dropLast().split(separator: 0x0A, omittingEmptySubsequences: false)
    }

    private static func word(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// `-` (absent), `full` or `reduced`; the outer nil means "not one of these".
    private static func accuracy(_ bytes: ArraySlice<UInt8>) -> Accuracy?? {
        let w = word(bytes)
        if w == "-" { return .some(nil) }
        guard let a = Accuracy(rawValue: w) else { return nil }
        return .some(a)
    }

    /// A decimal UInt64 without sign, blanks or leading zeros (except "0" itself).
    private static func number(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        if bytes.count > 1 && bytes.first == 0x30 { return nil }
        var v: UInt64 = 0
        for b in bytes {
            guard b >= 0x30 && b <= 0x39 else { return nil }
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(b - 0x30))
            if o1 || o2 { return nil }
            v = s
        }
        return v
    }

    /// Percent-escapes `%`, every byte below 0x20 (tab, newline, CR among them) and
    /// DEL, as `%XX` with upper-case hex, so an app-id fits in one tab-separated field.
    static func escape(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            if b == 0x25 || b < 0x20 || b == 0x7F {
                out.append(0x25)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Reverses `escape`. Rejects (nil) a `%` not followed by two hex digits, a raw
    /// byte that should have been escaped, and a result that is not valid UTF-8.
    static func unescape(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == 0x25 {
                guard i + 2 < bytes.endIndex, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else { return nil }
                out.append(hi << 4 | lo)
                i += 3
                continue
            }
            if b < 0x20 || b == 0x7F { return nil }
            out.append(b)
            i += 1
        }
        return String(validating: out, as: UTF8.self)
    }

}
