import Glibc
import GeoDBus
import GeoConsentAPI

// Attacks through the GeoClue2 facade's doors (the daemon started with
// `[geoclue] serve`): AddAgent, which makes the daemon call the caller back,
// and client objects. Each prints what the daemon answered.

/// A method call of the GeoClue2 Manager.
func managerCall(_ member: String, _ args: [DBusValue] = []) -> Message {
    do {
        let m = try Message.methodCall(destination: GeoClueAPI.busName, path: GeoClueAPI.managerPath,
                                       interface: GeoClueAPI.managerInterfaceName, member: member)
        try m.append(args)
        return m
    } catch {
        fail("cannot build \(member): \(error)")
    }
}

/// `geoclue-agent-burst`: `calls` AddAgent pipelined on each of `connections`
/// connections, and the socket never read again: every call the daemon makes
/// back to this process (the read of its `MaxAccuracyLevel`) stays unanswered
/// for as long as it lives. Prints `sent N`, then holds until SIGTERM or `holdSeconds`.
func runGeoClueAgentBurst(bus: String, connections: Int, calls: Int, holdSeconds: Double) -> Int32 {
    var held: [Connection] = []
    for _ in 0..<connections {
        let c = connect(bus)
        for _ in 0..<calls { _ = c.send(managerCall("AddAgent", [.string("geoclue-burst")])) }
        c.flush()
        held.append(c)
    }
    say("sent \(connections * calls)")
    hold(held, seconds: holdSeconds)
    return 0
}

/// Keeps `connections` open, unread, until SIGTERM or `seconds`.
func hold(_ connections: [Connection], seconds: Double) {
    let loop = EventLoop()
    let signals = SignalPipe(loop: loop) { _ in loop.stop() }
    _ = loop.schedule(after: seconds) { loop.stop() }
    loop.run()
    withExtendedLifetime((signals, connections)) {}
}

/// A GeoClue agent that answers the read of its `MaxAccuracyLevel` (8, exact)
/// and every `AuthorizeApp` with yes.
final class AnsweringGeoClueAgent {
    static let interface = Interface<AnsweringGeoClueAgent>(GeoClueAPI.agent, methods: [
        "AuthorizeApp": { _, call in call.reply([.bool(true), .uint32(8)]) },
    ], getters: [MaxAccuracyLevelProperty.name: { _ in .uint32(8) }])
}

/// `geoclue-agent-loop`: AddAgent again and again for `seconds`, each answered
/// before the next, on one connection (or, with `fresh`, each on a new one,
/// the previous closed), serving the agent's property meanwhile. Prints
/// `summary calls=N ok=M errors=E` and the last error.
func runGeoClueAgentLoop(bus: String, seconds: Double, fresh: Bool) -> Int32 {
    let loop = EventLoop()
    let agent = AnsweringGeoClueAgent()
    var current: (c: Connection, server: ObjectServer)?
    func open() -> (Connection, ObjectServer) {
        let c = connect(bus)
        c.attach(to: loop)
        let server = ObjectServer(connection: c)
        server.export(agent, at: GeoClueAPI.agentPath, interfaces: [AnsweringGeoClueAgent.interface])
        return (c, server)
    }
    var calls = 0, ok = 0, errors = 0
    var lastError = ""
    let deadline = monotonic() + seconds
    var stopped = false
    let signals = SignalPipe(loop: loop) { _ in stopped = true }
    var closing: [Connection] = []
    func next() {
        guard !stopped, monotonic() < deadline else { return loop.stop() }
        if fresh || current == nil {
            // Closed from the loop, not from inside the reply's own dispatch.
            if let old = current?.c { closing.append(old); loop.later { closing.forEach { $0.close() }; closing = [] } }
            current = open()
        }
        calls += 1
        current!.c.call(managerCall("AddAgent", [.string("geoclue-loop")]), timeout: 20) { r in
            switch r {
            case .success: ok += 1
            case .failure(let e): errors += 1; lastError = "\(e.name) \(oneLine(String(e.message.prefix(200))))"
            }
            next()
        }
    }
    next()
    loop.run()
    _ = signals
    say("summary calls=\(calls) ok=\(ok) errors=\(errors)")
    if !lastError.isEmpty { say("last-error \(lastError)") }
    return 0
}

/// `geoclue-client-churn`: on each of `connections` connections (all kept
/// open): CreateClient, Start (refused when this uid has no agent), and with
/// `delete`, DeleteClient. Prints each answer, `done`, then holds until
/// SIGTERM or `holdSeconds`.
func runGeoClueClientChurn(bus: String, connections: Int, delete: Bool, holdSeconds: Double) -> Int32 {
    var held: [Connection] = []
    for i in 0..<connections {
        let c = connect(bus)
        held.append(c)
        let created = Result { try c.callBlocking(managerCall("CreateClient"), timeout: 20) }
        guard case .success(let reply) = created, reply.asError == nil, let path = reply.arguments().first?.stringValue else {
            let why: String
            switch created {
            case .success(let r): why = r.asError.map { "\($0.name) \($0.message)" } ?? "no path"
            case .failure(let e): why = "\(e)"
            }
            say("reply create-\(i) error \(oneLine(why))")
            continue
        }
        /// `callBlocking` throws an error reply: either way, one word for the answer.
        func answer(_ m: Message?) -> String {
            guard let m else { return "error build" }
            do {
                let r = try c.callBlocking(m, timeout: 20)
                return r.asError.map { "error \($0.name)" } ?? "ok"
            } catch let e as DBusError {
                return "error \(e.name)"
            } catch {
                return "error \(oneLine("\(error)"))"
            }
        }
        say("reply start-\(i) " + answer(try? Message.methodCall(destination: GeoClueAPI.busName, path: path,
                                                                 interface: GeoClueAPI.clientInterfaceName, member: "Start")))
        if delete { say("reply delete-\(i) " + answer(managerCall("DeleteClient", [.objectPath(path)]))) }
    }
    say("done \(connections)")
    hold(held, seconds: holdSeconds)
    return 0
}

/// A GNOME-Shell-like GeoClue agent: it answers `AuthorizeApp` from a
/// permission it stored for one desktop id (`allowed`: true, with no dialog)
/// and refuses every other, printing `authorize DESKTOP_ID_HEX LEVEL yes|no`.
final class StoredPermissionGeoClueAgent {
    let allowed: String
    init(allowed: String) { self.allowed = allowed }

    static let interface = Interface<StoredPermissionGeoClueAgent>(GeoClueAPI.agent, methods: [
        "AuthorizeApp": { agent, call in
            let id = call.arguments.first?.stringValue ?? ""
            let yes = id == agent.allowed
            say("authorize \(hex(id)) \(call.arguments.dropFirst().first?.uint32Value ?? 0) \(yes ? "yes" : "no")")
            call.reply([.bool(yes), .uint32(yes ? 8 : 0)])
        },
    ], getters: [MaxAccuracyLevelProperty.name: { _ in .uint32(8) }])
}

/// `geoclue-shell-agent --allow ID`: `StoredPermissionGeoClueAgent` registered
/// with `AddAgent` (prints `registered`), until SIGTERM.
func runGeoClueShellAgent(bus: String, allowed: String) -> Int32 {
    let c = connect(bus)
    let loop = EventLoop()
    c.attach(to: loop)
    let agent = StoredPermissionGeoClueAgent(allowed: allowed)
    let server = ObjectServer(connection: c)
    server.export(agent, at: GeoClueAPI.agentPath, interfaces: [StoredPermissionGeoClueAgent.interface])
    c.onDisconnect = { loop.stop() }
    c.call(managerCall("AddAgent", [.string("gnome-shell")]), timeout: 20) { r in
        switch r {
        case .success(let m):
            if let e = m.asError { say("register error \(e.name) \(oneLine(e.message))"); return loop.stop() }
            say("registered uid=\(getuid())")
        case .failure(let e):
            say("register error \(e.name) \(oneLine(e.message))")
            loop.stop()
        }
    }
    let signals = SignalPipe(loop: loop) { _ in loop.stop() }
    loop.run()
    _ = signals
    return 0
}

/// A GeoClue client on `c`: GetClient, `DesktopId` set to `desktopID`,
/// `RequestedAccuracyLevel` 8, `Start`; prints `reply Start ok` or
/// `reply Start error NAME MESSAGE`.
func geoclueStart(_ c: Connection, desktopID: String) {
    func client(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue]) -> Result<Message, DBusError> {
        Result {
            let m = try Message.methodCall(destination: GeoClueAPI.busName, path: path, interface: interface, member: member)
            try m.append(args)
            let r = try c.callBlocking(m, timeout: 30)
            if let e = r.asError { throw e }
            return r
        }.mapError { $0 as? DBusError ?? .failed("\($0)") }
    }
    guard case .success(let created) = client(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "GetClient", []),
          let path = created.arguments().first?.stringValue else { return say("reply GetClient error") }
    let props = "org.freedesktop.DBus.Properties"
    _ = client(path, props, "Set", [.string(GeoClueAPI.clientInterfaceName), .string("DesktopId"), .variant(.string(desktopID))])
    _ = client(path, props, "Set", [.string(GeoClueAPI.clientInterfaceName), .string("RequestedAccuracyLevel"),
                                    .variant(.uint32(8))])
    switch client(path, GeoClueAPI.clientInterfaceName, "Start", []) {
    case .success: say("reply Start ok")
    case .failure(let e): say("reply Start error \(e.name) \(oneLine(String(e.message.prefix(500))))")
    }
}
