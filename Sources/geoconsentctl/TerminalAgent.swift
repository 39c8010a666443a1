import Glibc
import GeoConsentClient

/// A terminal consent agent for the caller's uid: the prompts the daemon sends
/// (through the client library's agent) are shown one at a time and answered
/// with a letter, or answered at once with `--auto`.
final class TerminalAgent {
    static let path = "/org/geoconsent/ctl/Agent"

    struct Prompt {
        var prompt: AgentPrompt
        var responder: AgentResponder
        var id: String { prompt.requestID }
    }

    let auto: AgentDecision?
    var prompts: [Prompt] = []
    var shown: String?
    var input: [UInt8] = []

    init(auto: AgentDecision?) { self.auto = auto }

    func handle(_ request: AgentRequest) {
        switch request {
        case .confirm(let prompt, let responder): confirm(Prompt(prompt: prompt, responder: responder))
        case .cancel(let id): cancel(id)
        }
    }

    func confirm(_ p: Prompt) {
        if let auto {
            // allow-while-using is not an answer to the button: give what the user meant, once.
            let d: AgentDecision = (auto == .allowWhileUsing && p.prompt.kind == .oneTime) ? .allowOnce : auto
            print("Request \(p.id): \(describe(p.prompt)) -> \(d.rawValue)")
            fflush(stdout)
            return p.responder.reply(d)
        }
        prompts.append(p)
        showNext()
    }

    func cancel(_ id: String) {
        if let i = prompts.firstIndex(where: { $0.id == id }) {
            prompts.remove(at: i)
            print("\nRequest \(id) was withdrawn.")
            if shown == id { shown = nil }
            showNext()
        }
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

    func describe(_ p: AgentPrompt) -> String {
        let name = TerminalAgent.printable(p.appName)
        let who = TerminalAgent.printable(p.appID) + " (pid \(p.pid))" + (name.isEmpty ? "" : ", calling itself \"\(name)\"")
        let acc = p.accuracy == .reduced ? "approximate" : "precise"
        let what = p.kind == .oneTime ? "your \(acc) location once" : "your \(acc) location while in use"
        return "\(who) asks for \(what)"
    }

    func showNext() {
        guard shown == nil, let p = prompts.first else { return }
        shown = p.id
        print("\n\(describe(p.prompt)).")
        if !p.prompt.reason.isEmpty {
            print("Reason given by the app: \(TerminalAgent.printable(p.prompt.reason))")
        }
        if p.prompt.kind == .oneTime {
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
        let decision: AgentDecision?
        switch (p.prompt.kind == .oneTime, line) {
        case (true, "a"), (false, "o"): decision = .allowOnce
        case (false, "w"): decision = .allowWhileUsing
        case (_, "d"): decision = .deny
        default: decision = nil
        }
        guard let decision else {
            print("Please answer with one of the letters shown.\n> ", terminator: "")
            fflush(stdout)
            return
        }
        prompts.remove(at: i)
        shown = nil
        p.responder.reply(decision)
        print("Answered \(decision.rawValue).")
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

/// What the agent command waits for: the daemon's requests and the terminal's input.
enum AgentInput {
    case request(AgentRequest)
    case typed([UInt8])
    case inputClosed
}

func agentCommand(_ ctx: inout Context) async throws {
    let autoWord = try ctx.option("--auto")
    var auto: AgentDecision?
    if let autoWord {
        guard let d = AgentDecision(rawValue: autoWord) else {
            throw UsageError("--auto wants allow-once, allow-while-using or deny")
        }
        auto = d
    }
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    let requests = try await client.registerAgent(at: TerminalAgent.path)
    print("Consent agent registered for uid \(getuid())\(autoWord.map { ", answering \($0)" } ?? ""); Ctrl-C to stop.")
    fflush(stdout)
    // Ctrl-C (or SIGTERM) ends the agent, exit status 0; its registration ends with the connection.
    exitOnInterrupt()
    let (inputs, feed) = AsyncStream<AgentInput>.makeStream()
    let forward = Task {
        for await r in requests { feed.yield(.request(r)) }
        feed.finish()
    }
    defer { forward.cancel() }
    if auto == nil {
        StandardInput.read { bytes in feed.yield(.typed(bytes)) } closed: { feed.yield(.inputClosed) }
    }
    let agent = TerminalAgent(auto: auto)
    for await input in inputs {
        switch input {
        case .request(let r): agent.handle(r)
        case .typed(let bytes): agent.typed(bytes[...])
        case .inputClosed:
            eprint("geoconsentctl: standard input closed; prompts can no longer be answered (use --auto for scripts)")
        }
    }
    // The requests end only with the connection.
    throw Failure("lost the bus connection")
}
