import Glibc
import GeoDBus
import GeoConsentAPI

/// A consent agent for this uid that shows, byte for byte, what the daemon
/// tells it: `confirm kind=K app-id=HEX executable=HEX app-name=HEX`, then
/// answers with a fixed decision, or, with `never`, holds the call unanswered
/// (a silent agent: each prompt stays open until the daemon gives up on it).
final class PrintingAgent {
    static let path = "/org/geoconsent/localuser/Agent"
    let answer: String
    /// The calls a silent agent holds (kept so that they are never answered).
    var held: [MethodCall] = []

    init(answer: String) { self.answer = answer }

    static let interface = Interface<PrintingAgent>(GeoConsentAPI.agent, methods: [
        "Confirm": { agent, call in
            let args = call.arguments
            let details = args.count > 3 ? args[3].vardictValue ?? [:] : [:]
            say("confirm kind=\(oneLine(args.count > 2 ? args[2].stringValue ?? "" : ""))"
                + " app-id=\(hex(args.count > 1 ? args[1].stringValue ?? "" : ""))"
                + " executable=\(hex(details["executable"]?.stringValue ?? ""))"
                + " app-name=\(hex(details["app-name"]?.stringValue ?? ""))")
            if agent.answer == "never" {
                agent.held.append(call)
            } else {
                call.reply([.string(agent.answer)])
            }
        },
        "Cancel": { _, call in call.reply() },
    ])
}

func runAgent(bus: String, answer: String) -> Int32 {
    let c = connect(bus)
    let loop = EventLoop()
    c.attach(to: loop)
    let agent = PrintingAgent(answer: answer)
    let server = ObjectServer(connection: c)
    server.export(agent, at: PrintingAgent.path, interfaces: [PrintingAgent.interface])
    c.onDisconnect = { loop.stop() }
    switch call(c, "RegisterAgent", [.objectPath(PrintingAgent.path)]) {
    case .success: say("registered uid=\(getuid())")
    case .failure(let e):
        say("register error \(e.name) \(oneLine(e.message))")
        return 1
    }
    let signals = SignalPipe(loop: loop) { _ in loop.stop() }
    loop.run()
    _ = signals
    return 0
}
