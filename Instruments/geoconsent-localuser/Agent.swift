import Glibc
import GeoDBus
import GeoConsentAPI

/// A consent agent for this uid that shows, byte for byte, what the daemon
/// tells it: `confirm kind=K app-id=HEX executable=HEX app-name=HEX`, then
/// answers with a fixed decision, or, with `never`, holds the call unanswered
/// (a silent agent: each prompt stays open until the daemon gives up on it).
/// Registered with features (`--features focus,notices`), it prints
/// `focus pid=N` for each `CheckFocus` and answers it as `--focus` says
/// (`yes`: in front with a press; `no`: behind; `hold`: never), and prints
/// `notice app-id=HEX focus=W always=B` for each `Notice`.
final class PrintingAgent {
    static let path = "/org/geoconsent/localuser/Agent"
    let answer: String
    let focus: String
    /// The calls a silent agent holds (kept so that they are never answered).
    var held: [MethodCall] = []

    init(answer: String, focus: String) {
        self.answer = answer
        self.focus = focus
    }

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
        "Notice": { _, call in
            let n = NoticeCall.decode(call.arguments)
            say("notice app-id=\(hex(n?.appID ?? "")) focus=\(n?.witness?.rawValue ?? "?") always=\(n?.always == true ? 1 : 0)")
            call.reply()
        },
        "CheckFocus": { agent, call in
            say("focus pid=\(CheckFocusCall.decode(call.arguments) ?? 0)")
            switch agent.focus {
            case "hold": agent.held.append(call)
            case "no": call.reply(CheckFocusReply.encode(focused: .no, press: .unknown, via: "localuser"))
            default: call.reply(CheckFocusReply.encode(focused: .yes, press: .yes, via: "localuser"))
            }
        },
    ])
}

func runAgent(bus: String, answer: String, features: [String], focus: String) -> Int32 {
    let c = connect(bus)
    let loop = EventLoop()
    c.attach(to: loop)
    let agent = PrintingAgent(answer: answer, focus: focus)
    let server = ObjectServer(connection: c)
    server.export(agent, at: PrintingAgent.path, interfaces: [PrintingAgent.interface])
    c.onDisconnect = { loop.stop() }
    let registration = features.isEmpty
        ? call(c, "RegisterAgent", [.objectPath(PrintingAgent.path)])
        : call(c, "RegisterAgentWithOptions", [.objectPath(PrintingAgent.path), OptionDictionary.encodeAgentOptions(features: features)])
    switch registration {
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
