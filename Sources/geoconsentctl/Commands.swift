import Glibc
import GeoDBus
import GeoCore
import GeoConsentAPI

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
                guard i + 1 < args.count else { throw UsageError("\(flag) needs a value") }
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
        if let extra = args.first { throw UsageError("unexpected argument '\(extra)'") }
    }
}

struct UsageError: Error {
    var message: String
    init(_ m: String) { message = m }
}

func seconds(_ s: String?, _ flag: String) throws -> Double? {
    guard let s else { return nil }
    guard let d = Double(s), d.isFinite, d > 0 else { throw UsageError("\(flag) wants a positive number of seconds") }
    return d
}

// MARK: status

func statusCommand(_ ctx: inout Context) throws {
    try ctx.noMoreArguments()
    let p = try Client(bus: ctx.bus).properties()
    let version = p["Version"]?.stringValue ?? "?"
    let enabled = p["Enabled"]?.boolValue ?? false
    let gpsd = p["GpsdConnected"]?.boolValue ?? false
    let inUse = p["InUse"]?.boolValue ?? false
    if ctx.json {
        print(JSON.object([("version", .string(version)), ("enabled", .bool(enabled)),
                           ("gpsd_connected", .bool(gpsd)), ("in_use", .bool(inUse))]).text)
    } else {
        printFields([("Version", version), ("Location enabled", enabled ? "yes" : "no"),
                     ("gpsd connected", gpsd ? "yes" : "no"), ("In use", inUse ? "yes" : "no")])
    }
}

// MARK: locate

/// Acts as an app pressing the button: one-time authorization, then one fix.
func locateCommand(_ ctx: inout Context) throws {
    let accuracy = try ctx.option("--accuracy") ?? "full"
    guard Accuracy(rawValue: accuracy) != nil else { throw UsageError("--accuracy wants full or reduced") }
    let reason = try ctx.option("--reason") ?? "geoconsentctl locate"
    let timeout = try seconds(ctx.option("--timeout"), "--timeout") ?? 30
    try ctx.noMoreArguments()
    let client = try Client(bus: ctx.bus)
    let status = try authorize(client, accuracy: accuracy, reason: reason)
    let fix = try client.call("RequestLocation", [.vardict(["timeout": .double(timeout)])], timeout: timeout + 5)
    printLocation(fix.first ?? .vardict([:]), json: ctx.json, status: status)
}

/// The tap: returns the status, or throws when it is not a grant.
func authorize(_ client: Client, accuracy: String, reason: String) throws -> UInt32 {
    let opts: DBusValue = .vardict(["accuracy": .string(accuracy), "reason": .string(reason),
                                    "app-name": .string("geoconsentctl")])
    // The reply comes when the user has decided: wait longer than any prompt.
    let r = try client.call("RequestOneTimeAuthorization", [opts], timeout: 24 * 3600)
    let status = r.first?.uint32Value ?? 0
    guard status == AuthorizationStatus.whenInUse.rawValue || status == AuthorizationStatus.always.rawValue else {
        throw Failure("location not authorized: \(statusName(status)) (\(status))")
    }
    return status
}

func printLocation(_ v: DBusValue, json: Bool, status: UInt32?) {
    let d = v.vardictValue ?? [:]
    if json {
        print(JSON(v).text)
        return
    }
    func num(_ k: String, _ unit: String, _ digits: Int = 1) -> String? {
        guard let x = d[k]?.doubleValue else { return nil }
        return format(x, digits) + unit
    }
    var rows: [(String, String)] = []
    if let lat = d["latitude"]?.doubleValue, let lon = d["longitude"]?.doubleValue {
        rows.append(("Latitude", format(lat, 7)))
        rows.append(("Longitude", format(lon, 7)))
    }
    if let a = num("altitude", " m") { rows.append(("Altitude", a)) }
    if let a = num("horizontal-accuracy", " m") { rows.append(("Accuracy", "± " + a)) }
    if let s = num("speed", " m/s", 2) { rows.append(("Speed", s)) }
    if let c = num("course", "°") { rows.append(("Course", c)) }
    if let f = d["fix"]?.stringValue { rows.append(("Fix", f)) }
    if let t = d["timestamp"]?.uint64Value { rows.append(("Time", formatTime(t))) }
    if let a = d["accuracy-authorization"]?.stringValue { rows.append(("Authorization", a)) }
    printFields(rows)
}

func format(_ x: Double, _ digits: Int) -> String {
    var buf = [CChar](repeating: 0, count: 64)
    _ = withVaList([x]) { vsnprintf(&buf, buf.count, "%.\(digits)f", $0) }
    return String(cString: buf)
}

// MARK: consents, sessions, reset, enable

func consentsCommand(_ ctx: inout Context) throws {
    try ctx.noMoreArguments()
    let r = try Client(bus: ctx.bus).call("ListConsents")
    let list = r.first?.arrayValue ?? []
    if ctx.json {
        print(JSON.array(list.map { e in
            let f = e.structFields ?? []
            return .object([("uid", JSON(f[0])), ("app_id", JSON(f[1])), ("record", JSON(f[2]))])
        }).text)
        return
    }
    if list.isEmpty { return print("No consents stored.") }
    let rows: [[String]] = list.map { e in
        let f = e.structFields ?? []
        let rec = f[2].vardictValue ?? [:]
        let decision = rec["decision"]?.stringValue ?? ""
        let once = (rec["one-time-approved"]?.boolValue ?? false) ? (rec["one-time-accuracy"]?.stringValue ?? "yes") : "no"
        return ["\(f[0].uint32Value ?? 0)", f[1].stringValue ?? "", decision.isEmpty ? "-" : decision, once,
                formatTime(rec["decided-at"]?.uint64Value ?? 0), formatTime(rec["last-used"]?.uint64Value ?? 0)]
    }
    printTable(["UID", "APP", "DECISION", "BUTTON", "DECIDED", "LAST USED"], rows)
}

func sessionsCommand(_ ctx: inout Context) throws {
    try ctx.noMoreArguments()
    let r = try Client(bus: ctx.bus).call("ListSessions")
    let list = r.first?.arrayValue ?? []
    if ctx.json {
        print(JSON.array(list.map { e in
            let f = e.structFields ?? []
            return .object([("name", JSON(f[0])), ("uid", JSON(f[1])), ("app_id", JSON(f[2])),
                            ("status", JSON(f[3])), ("updates", JSON(f[4]))])
        }).text)
        return
    }
    if list.isEmpty { return print("No sessions.") }
    printTable(["NAME", "UID", "APP", "STATUS", "UPDATES"], list.map { e in
        let f = e.structFields ?? []
        return [f[0].stringValue ?? "", "\(f[1].uint32Value ?? 0)", f[2].stringValue ?? "",
                statusName(f[3].uint32Value ?? 0), (f[4].boolValue ?? false) ? "yes" : "no"]
    })
}

func resetCommand(_ ctx: inout Context) throws {
    let uid = try ctx.option("--uid")
    guard let app = ctx.args.first else { throw UsageError("reset needs an APP_ID") }
    ctx.args.removeFirst()
    try ctx.noMoreArguments()
    var opts: [String: DBusValue] = [:]
    if let uid {
        guard let u = UInt32(uid) else { throw UsageError("--uid wants a number") }
        opts["uid"] = .uint32(u)
    }
    _ = try Client(bus: ctx.bus).call("ResetConsent", [.string(app), .vardict(opts)])
    if !ctx.json { print("Consent of \(app) forgotten.") } else { print("{}") }
}

func setEnabledCommand(_ ctx: inout Context, _ value: Bool) throws {
    try ctx.noMoreArguments()
    _ = try Client(bus: ctx.bus).call("Set", [.string(GeoConsentAPI.interfaceName), .string("Enabled"), .variant(.bool(value))],
                                      interface: ObjectServer.properties)
}
