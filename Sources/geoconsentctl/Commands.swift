import Glibc
import GeoConsentAPI
import GeoConsentClient

/// What every command gets: the bus, --json, and its own arguments.
struct Context {
    var bus: BusAddress
    var json: Bool
    var args: [String]

    /// Takes `--flag VALUE` / `--flag=VALUE` out of args.
    mutating func option(_ flag: String) throws -> String? {
        var i = 0
        while i < args.count {
            if args[i] == flag {
                guard i + 1 < args.count else { throw UsageError(tr("{option} needs a value", ["option": flag])) }
                let v = args[i + 1]
                args.removeSubrange(i...(i + 1))
                return v
            }
            if args[i].hasPrefix(flag + "=") {
                let v = String(args[i].dropFirst(flag.count + 1))
                args.remove(at: i)
                return v
            }
            i += 1
        }
        return nil
    }

    func noMoreArguments() throws {
        if let extra = args.first { throw UsageError(tr("unexpected argument '{argument}'", ["argument": extra])) }
    }
}

struct UsageError: Error {
    var message: String
    init(_ m: String) { message = m }
}

func seconds(_ s: String?, _ flag: String) throws -> Double? {
    guard let s else { return nil }
    guard let d = Double(s), d.isFinite, d > 0 else { throw UsageError(tr("{option} wants a positive number of seconds", ["option": flag])) }
    return d
}

// MARK: status

/// Connects the client library, with the command line's wording for failures.
func connect(_ ctx: Context) throws -> GeoConsentClient {
    do {
        return try GeoConsentClient(bus: ctx.bus)
    } catch {
        throw Failure(tr("cannot connect to the {bus}: {error}", ["bus": "\(ctx.bus)", "error": "\(error)"]))
    }
}

func statusCommand(_ ctx: inout Context) async throws {
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    let st = try await client.status()
    let version = st.version, enabled = st.enabled, gpsd = st.gpsdConnected, inUse = st.inUse
    // Whether this user has a consent agent: without one, every first request fails.
    let agent = try await client.authorization().agentRegistered
    if ctx.json {
        print(JSON.object([("version", .string(version)), ("enabled", .bool(enabled)),
                           ("gpsd_connected", .bool(gpsd)), ("in_use", .bool(inUse)),
                           ("sources", .array(st.sources.map { .string($0.rawValue) })),
                           ("wifi_enabled", .bool(st.wifiEnabled)), ("agent_registered", .bool(agent))]).text)
    } else {
        printFields([(tr("Version"), version), (tr("Location enabled"), yesNo(enabled)),
                     (tr("gpsd connected"), yesNo(gpsd)), (tr("In use"), yesNo(inUse)),
                     (tr("Sources"), st.sources.isEmpty ? tr("none") : st.sources.map { source in
                         source == .wifi && !st.wifiEnabled ? tr("{source} (off)", ["source": sourceName(source)]) : sourceName(source)
                     }.joined(separator: ", ")),
                     (tr("Consent agent"), agent ? tr("registered") : tr("none: start geoconsent-agent, or 'geoconsentctl agent'"))])
    }
}

// MARK: locate

/// Acts as an app pressing the button: one-time authorization, then one fix.
func locateCommand(_ ctx: inout Context) async throws {
    let accuracy = try ctx.option("--accuracy") ?? "full"
    guard Accuracy(rawValue: accuracy) != nil else { throw UsageError(tr("--accuracy wants full or reduced")) }
    let reason = try ctx.option("--reason") ?? "geoconsentctl locate"
    let timeout = try seconds(ctx.option("--timeout"), "--timeout") ?? 30
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    _ = try await authorize(client, accuracy: accuracy, reason: reason)
    let fix = try await client.requestLocation(timeout: timeout)
    printLocation(fix, json: ctx.json)
}

/// The tap: returns the status, or throws when it is not a grant.
func authorize(_ client: GeoConsentClient, accuracy: String, reason: String) async throws -> AuthorizationStatus {
    // The reply comes when the user has decided: the library waits longer than any prompt.
    let status = try await client.requestOneTimeAuthorization(
        AuthOptions(reason: reason, accuracy: Accuracy(rawValue: accuracy) ?? .full, appName: "geoconsentctl"))
    guard status == .whenInUse || status == .always else {
        // Why, as far as the daemon tells anyone: location off for everyone, or this app's own state.
        let enabled = try? await client.status().enabled
        let appID = (try? await client.authorization().appID) ?? ""
        throw Failure(notAuthorized(status, enabled: enabled, appID: appID))
    }
    return status
}

func printLocation(_ loc: Location, json: Bool) {
    if json {
        print(JSON(loc.raw).text)
        return
    }
    let f = loc.fix
    var rows: [(String, String)] = [(tr("Latitude"), format(f.latitude, 7)), (tr("Longitude"), format(f.longitude, 7))]
    if let a = f.altitude { rows.append((tr("Altitude"), format(a, 1) + " m")) }
    if let a = f.horizontalAccuracy { rows.append((tr("Accuracy"), "± " + format(a, 1) + " m")) }
    if let s = f.speed { rows.append((tr("Speed"), format(s, 2) + " m/s")) }
    if let c = f.course { rows.append((tr("Course"), format(c, 1) + "°")) }
    rows.append((tr("Fix"), f.mode.rawValue))
    rows.append((tr("Source"), sourceName(f.source)))
    if let t = f.timestamp { rows.append((tr("Time"), formatTime(t))) }
    rows.append((tr("Authorization"), loc.accuracy.rawValue))
    printFields(rows)
}

/// Where a fix came from, as a person reads it.
func sourceName(_ source: PositionSource) -> String {
    switch source {
    case .gps: return tr("GPS receiver")
    case .wifi: return tr("Wi-Fi access points")
    case .static: return tr("static position file")
    }
}

func format(_ x: Double, _ digits: Int) -> String {
    var buf = [CChar](repeating: 0, count: 64)
    _ = withVaList([x]) { vsnprintf(&buf, buf.count, "%.\(digits)f", $0) }
    return String(cString: buf)
}

// MARK: consents, sessions, reset, enable

func consentsCommand(_ ctx: inout Context) async throws {
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    let list = try await client.listConsents()
    if ctx.json {
        print(JSON.array(list.map { c in
            .object([("uid", .uint(UInt64(c.uid))), ("app_id", .string(c.appID)),
                     ("record", JSON(ConsentRecordDictionary.encode(c.record)))])
        }).text)
        return
    }
    if list.isEmpty { return print(tr("No consents stored.")) }
    let rows: [[String]] = list.map { c in
        let r = c.record
        let once = r.oneTimeApproved ? (r.oneTimeAccuracy?.rawValue ?? yesNo(true)) : yesNo(false)
        return ["\(c.uid)", c.appID, r.decision?.rawValue ?? "-", once, formatTime(r.decidedAt), formatTime(r.lastUsed)]
    }
    printTable([tr("UID"), tr("APP"), tr("DECISION"), tr("BUTTON"), tr("DECIDED"), tr("LAST USED")], rows)
}

func sessionsCommand(_ ctx: inout Context) async throws {
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    // This command's own connection is not a session (listing does not start one).
    let list = try await client.listSessions()
    if ctx.json {
        print(JSON.array(list.map { s in
            .object([("name", .string(s.name)), ("uid", .uint(UInt64(s.uid))), ("app_id", .string(s.appID)),
                     ("status", .uint(UInt64(s.status.rawValue))), ("updates", .bool(s.updates)),
                     ("paused", .string(s.paused?.rawValue ?? ""))])
        }).text)
        return
    }
    if list.isEmpty { return print(tr("No sessions.")) }
    printTable([tr("NAME"), tr("UID"), tr("APP"), tr("STATUS"), tr("UPDATES"), tr("PAUSED")], list.map { s in
        [s.name, "\(s.uid)", s.appID, s.status.name, yesNo(s.updates), s.paused?.rawValue ?? "-"]
    })
}

func resetCommand(_ ctx: inout Context) async throws {
    let uid = try ctx.option("--uid")
    guard let app = ctx.args.first else { throw UsageError(tr("reset needs an APP_ID")) }
    ctx.args.removeFirst()
    try ctx.noMoreArguments()
    var target: UInt32?
    if let uid {
        guard let u = UInt32(uid) else { throw UsageError(tr("--uid wants a number")) }
        target = u
    }
    let client = try connect(ctx)
    defer { client.close() }
    // An app the daemon knows nothing of for that user (no stored consent, no
    // live session) is most likely a typo: say so rather than "forgotten".
    // (Only where the caller sees that user's consents: its own, or root's
    // view of all; another user's are the daemon's to refuse.)
    let uidShown = target ?? getuid()
    if getuid() == 0 || uidShown == getuid() {
        let stored = try await client.listConsents().contains { $0.appID == app && $0.uid == uidShown }
        let live = try await client.listSessions().contains { $0.appID == app && $0.uid == uidShown }
        if !stored && !live { throw unknownApp(app, uidShown) }
    }
    try await client.resetConsent(appID: app, uid: target)
    if !ctx.json { print(tr("Consent of {app} forgotten.", ["app": app])) } else { print("{}") }
}

/// `decide APP_ID never|ask|while-using [--precise on|off] [--uid UID]`: the
/// user's decision, as the settings window makes it (SetConsent). More than
/// is stored is confirmed in the user's consent agent first: this waits for it.
func decideCommand(_ ctx: inout Context) async throws {
    let uid = try ctx.option("--uid")
    let precise = try ctx.option("--precise")
    guard let app = ctx.args.first else { throw UsageError(tr("decide needs an APP_ID")) }
    ctx.args.removeFirst()
    var decision: UserDecision?
    if let word = ctx.args.first {
        guard let d = UserDecision(rawValue: word) else {
            throw UsageError(tr("decide wants never, ask or while-using, not '{word}'", ["word": word]))
        }
        decision = d
        ctx.args.removeFirst()
    }
    try ctx.noMoreArguments()
    var accuracy: Accuracy?
    switch precise {
    case nil: break
    case "on"?: accuracy = .full
    case "off"?: accuracy = .reduced
    default: throw UsageError(tr("--precise wants on or off"))
    }
    guard decision != nil || accuracy != nil else { throw UsageError(tr("decide needs never, ask, while-using or --precise")) }
    let target = try uid.map { u -> UInt32 in
        guard let v = UInt32(u) else { throw UsageError(tr("--uid wants a number")) }
        return v
    }
    let client = try connect(ctx)
    defer { client.close() }
    let status = try await client.setConsent(appID: app, decision: decision, accuracy: accuracy, uid: target)
    if ctx.json {
        print(JSON.object([("status", .uint(UInt64(status.rawValue))), ("name", .string(status.name))]).text)
    } else {
        print(tr("{app}: {status}", ["app": app, "status": status.name]))
    }
}

/// `user-location [on|off] [--uid UID]`: location for the apps of the user (the
/// settings window's switch; SetUserLocation). Off at once; on asks the user's
/// consent agent unless root asks (this waits for it); no word: says which.
func userLocationCommand(_ ctx: inout Context) async throws {
    let uid = try ctx.option("--uid")
    let word = ctx.args.first
    if word != nil { ctx.args.removeFirst() }
    try ctx.noMoreArguments()
    let target = try uid.map { u -> UInt32 in
        guard let v = UInt32(u) else { throw UsageError(tr("--uid wants a number")) }
        return v
    }
    let client = try connect(ctx)
    defer { client.close() }
    switch word {
    case "on"?: try await client.setUserLocation(true, uid: target)
    case "off"?: try await client.setUserLocation(false, uid: target)
    case nil: break
    default: throw UsageError(tr("user-location wants on or off"))
    }
    let on = try await client.userLocation(uid: target)
    if ctx.json { return print(JSON.object([("user_location", .bool(on))]).text) }
    print(on ? tr("Location is on for the apps of uid {uid}.", ["uid": "\(target ?? getuid())"])
             : tr("Location is off for the apps of uid {uid}.", ["uid": "\(target ?? getuid())"]))
}

/// `reset` of an app the daemon knows nothing of for that user.
func unknownApp(_ app: String, _ uid: UInt32) -> Failure {
    Failure(tr("no consent or session of {app} for uid {uid}: see 'geoconsentctl consents'",
               ["app": app, "uid": "\(uid)"]))
}

func setEnabledCommand(_ ctx: inout Context, _ value: Bool) async throws {
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    try await client.setEnabled(value)
}

/// `wifi on|off`: the switch of Wi-Fi positioning for everyone (root's, or
/// a user's that polkit authorizes).
func setWiFiCommand(_ ctx: inout Context) async throws {
    guard let word = ctx.args.first, word == "on" || word == "off" else {
        throw UsageError(tr("wifi wants on or off"))
    }
    ctx.args.removeFirst()
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    defer { client.close() }
    try await client.setWiFiEnabled(word == "on")
}

/// "yes" or "no", in the user's language.
func yesNo(_ b: Bool) -> String { b ? tr("yes") : tr("no") }
