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
