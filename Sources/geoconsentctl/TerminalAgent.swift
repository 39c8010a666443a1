import Glibc
import GeoDBus
import GeoCore
import GeoConsentAPI

/// A terminal consent agent for the caller's uid.
final class TerminalAgent {
    static let path = "/org/geoconsent/ctl/Agent"

    struct Prompt {
        var id: String
        var call: MethodCall
        var appID: String
        var kind: String
        var details: [String: DBusValue]
    }

    let auto: String?
    var prompts: [Prompt] = []
    var shown: String?
    var input: [UInt8] = []

    init(auto: String?) { self.auto = auto }

    static let interface = Interface<TerminalAgent>(GeoConsentAPI.agent, methods: [
        "Confirm": { agent, call in agent.confirm(call) },
        "Cancel": { agent, call in agent.cancel(call) },
    ])

    func confirm(_ call: MethodCall) {
        let a = call.arguments
        let p = Prompt(id: a[0].stringValue ?? "", call: call, appID: a[1].stringValue ?? "",
                       kind: a[2].stringValue ?? "", details: a[3].vardictValue ?? [:])
        if let auto {
            // allow-while-using is not an answer to the button: give what the user meant, once.
            let d = (auto == "allow-while-using" && p.kind == PromptKind.oneTime.rawValue) ? "allow-once" : auto
            print("Request \(p.id): \(describe(p)) -> \(d)")
            fflush(stdout)
            return call.reply([.string(d)])
        }
        prompts.append(p)
        showNext()
    }

    func cancel(_ call: MethodCall) {
        let id = call.arguments[0].stringValue ?? ""
        if let i = prompts.firstIndex(where: { $0.id == id }) {
            prompts.remove(at: i)
            print("\nRequest \(id) was withdrawn.")
            if shown == id { shown = nil }
            showNext()
        }
        call.reply()
    }

    /// Client-supplied text, made safe for a terminal: control characters (escape
    /// sequences could repaint the prompt) become "?", and it is cut to 200 characters.
    static func printable(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars.prefix(200) {
            let v = u.value
            let control = v < 0x20 || (0x7F...0x9F).contains(v) || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
            out.append(control ? "?" : u)
        }
        return String(out)
    }

    func describe(_ p: Prompt) -> String {
        let name = TerminalAgent.printable(p.details["app-name"]?.stringValue ?? "")
        let pid = p.details["pid"]?.uint32Value.map { " (pid \($0))" } ?? ""
        let who = TerminalAgent.printable(p.appID) + pid + (name.isEmpty ? "" : ", calling itself \"\(name)\"")
        let acc = p.details["accuracy"]?.stringValue == "reduced" ? "approximate" : "precise"
        let what = p.kind == PromptKind.oneTime.rawValue ? "your \(acc) location once" : "your \(acc) location while in use"
        return "\(who) asks for \(what)"
    }

    func showNext() {
        guard shown == nil, let p = prompts.first else { return }
        shown = p.id
        print("\n\(describe(p)).")
        if let r = p.details["reason"]?.stringValue, !r.isEmpty {
            print("Reason given by the app: \(TerminalAgent.printable(r))")
        }
        if p.kind == PromptKind.oneTime.rawValue {
            print("[a] Allow Once   [d] Don't Allow")
        } else {
            print("[o] Allow Once   [w] Allow While Using   [d] Don't Allow")
        }
        print("> ", terminator: "")
        fflush(stdout)
    }

    /// Bytes from the terminal; answers the shown prompt line by line.
    func typed(_ bytes: ArraySlice<UInt8>) {
        input.append(contentsOf: bytes)
        while let nl = input.firstIndex(of: 10) {
            let line = String(decoding: input[..<nl], as: UTF8.self).trimmingSpaces().lowercased()
            input.removeSubrange(...nl)
            answer(line)
        }
    }

    func answer(_ line: String) {
        guard let id = shown, let i = prompts.firstIndex(where: { $0.id == id }) else { return }
        let p = prompts[i]
        let decision: String?
        switch (p.kind == PromptKind.oneTime.rawValue, line) {
        case (true, "a"), (false, "o"): decision = "allow-once"
        case (false, "w"): decision = "allow-while-using"
        case (_, "d"): decision = "deny"
        default: decision = nil
        }
        guard let decision else {
            print("Please answer with one of the letters shown.\n> ", terminator: "")
            fflush(stdout)
            return
        }
        prompts.remove(at: i)
        shown = nil
        p.call.reply([.string(decision)])
        print("Answered \(decision).")
        showNext()
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s.removeLast() }
        return String(s)
    }
}

func agentCommand(_ ctx: inout Context) throws {
    let auto = try ctx.option("--auto")
    if let auto, !["allow-once", "allow-while-using", "deny"].contains(auto) {
        throw UsageError("--auto wants allow-once, allow-while-using or deny")
    }
    try ctx.noMoreArguments()
    let client = try Client(bus: ctx.bus)
    let loop = EventLoop()
    client.connection.attach(to: loop)
    let agent = TerminalAgent(auto: auto)
    let server = ObjectServer(connection: client.connection)
    server.export(agent, at: TerminalAgent.path, interfaces: [TerminalAgent.interface])
    var failed: String?
    client.connection.onDisconnect = { failed = "lost the bus connection"; loop.stop() }
    _ = try client.call("RegisterAgent", [.objectPath(TerminalAgent.path)])
    print("Consent agent registered for uid \(getuid())\(auto.map { ", answering \($0)" } ?? ""); Ctrl-C to stop.")
    fflush(stdout)
    if auto == nil {
        _ = fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK)
        var token: EventLoop.Token = 0
        token = loop.watch(fd: 0, events: .readable) { _ in
            var buf = [UInt8](repeating: 0, count: 1024)
            let n = read(0, &buf, buf.count)
            if n > 0 {
                agent.typed(buf[..<n])
            } else if n == 0 {
                eprint("geoconsentctl: standard input closed; prompts can no longer be answered (use --auto for scripts)")
                loop.unwatch(token)
            }
        }
    }
    let signals = SignalPipe(loop: loop) { _ in loop.stop() }
    loop.run()
    _ = signals
    if let failed { throw Failure(failed) }
}
