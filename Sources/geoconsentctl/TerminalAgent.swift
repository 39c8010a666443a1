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
    /// `--auto allow-once-reduced`, `allow-while-using-reduced`: Precise off.
    let autoAccuracy: Accuracy
    var prompts: [Prompt] = []
    var shown: String?
    var input: [UInt8] = []

    init(auto: AgentDecision?, accuracy: Accuracy = .full) {
        self.auto = auto
        autoAccuracy = accuracy
    }

    func handle(_ request: AgentRequest) {
        switch request {
        case .confirm(let prompt, let responder): confirm(Prompt(prompt: prompt, responder: responder))
        case .cancel(let id): cancel(id)
        case .registered:
            print(auto.map { tr("Consent agent registered for uid {uid}, answering {decision}; Ctrl-C to stop.",
                                ["uid": "\(getuid())", "decision": autoWord($0)]) }
                  ?? tr("Consent agent registered for uid {uid}; Ctrl-C to stop.", ["uid": "\(getuid())"]))
            fflush(stdout)
        case .unregistered(let reason):
            // Another agent of this uid holds the slot, or geoconsentd is away: the
            // library registers again as soon as it can.
            print(tr("Not the consent agent for now ({reason}); waiting to register again.",
                     ["reason": TerminalAgent.printable(reason)]))
            fflush(stdout)
        }
    }

    /// What `--auto` answers, as it was given: `allow-once-reduced` with Precise off.
    func autoWord(_ d: AgentDecision) -> String {
        d != .deny && autoAccuracy == .reduced ? d.rawValue + "-reduced" : d.rawValue
    }

    func confirm(_ p: Prompt) {
        if let auto {
            // allow-while-using is not an answer to the button: give what the user meant, once.
            let d: AgentDecision = (auto == .allowWhileUsing && p.prompt.kind == .oneTime) ? .allowOnce : auto
            let reduced = autoAccuracy == .reduced && d != .deny
            print(tr("Request {id}: {prompt} -> {decision}",
                     ["id": TerminalAgent.printable(p.id), "prompt": describe(p.prompt), "decision": d.rawValue]) +
                  (reduced ? tr(", approximate only") : ""))
            fflush(stdout)
            return p.responder.reply(d, accuracy: autoAccuracy)
        }
        prompts.append(p)
        showNext()
    }

    func cancel(_ id: String) {
        if let i = prompts.firstIndex(where: { $0.id == id }) {
            prompts.remove(at: i)
            print("\n" + tr("Request {id} was withdrawn.", ["id": TerminalAgent.printable(id)]))
            if shown == id { shown = nil }
            showNext()
        }
    }

    /// Any text a prompt shows, made safe for a terminal with the sanitizer the
    /// daemon and the graphical agent use (escape sequences could repaint the
    /// prompt, a bidi override reorder it): unsafe characters are written out as
    /// `\uXXXX`, and the result is cut to `limit` characters.
    static func printable(_ s: String, limit: Int = 200) -> String {
        let safe = DisplayText.escaped(s)
        return safe.count <= limit ? safe : String(safe.prefix(limit - 1)) + "…"
    }

    func describe(_ p: AgentPrompt) -> String {
        if p.kind == .locationOn {
            // The user switched location off for their apps; a program asks to switch it back on.
            return tr("Switch location back on for your apps")
        }
        let name = TerminalAgent.printable(p.appName)
        let who = tr("{app} (pid {pid})", ["app": TerminalAgent.printable(p.appID, limit: 4096), "pid": "\(p.pid)"])
            + (name.isEmpty ? "" : tr(", calling itself \"{name}\" (not proven)", ["name": name]))
        // Whole sentences, so that each language orders them its own way.
        switch (p.kind == .oneTime, p.accuracy == .reduced) {
        case (true, false): return tr("{who} asks for your precise location once", ["who": who])
        case (true, true): return tr("{who} asks for your approximate location once", ["who": who])
        case (false, false): return tr("{who} asks for your precise location while in use", ["who": who])
        case (false, true): return tr("{who} asks for your approximate location while in use", ["who": who])
        }
    }

    /// How sure the daemon is of the app (the prompt's `identity` and
    /// `identity-proven`): every claim the contract does not hold proven is
    /// marked so (docs/dbus-api.md, "What each identity proves").
    static func identityLine(_ p: AgentPrompt) -> String {
        let proven = p.identityProven
        switch p.identity {
        case .flatpak?: return tr("Identity: Flatpak app, verified (installed system-wide by the administrator)")
        case .snap?: return tr("Identity: Snap, confined by the kernel under its profile")
        case .unverifiedFlatpak?: return tr("Identity: claims to be a Flatpak app, NOT VERIFIED (any program can claim this)")
        case .systemdUnit?:
            return proven ? tr("Identity: systemd unit of a system service, verified")
                          : tr("Identity: systemd unit name, NOT VERIFIED (any program of this user can run under it)")
        case .executable?:
            return proven ? tr("Identity: program of a system user, verified")
                          : tr("Identity: program path, NOT VERIFIED (any program of this user can show it)")
        case .script?:
            return proven ? tr("Identity: script of a system user, verified")
                          : tr("Identity: script path, NOT VERIFIED (any program of this user can show it)")
        case nil: return tr("Identity: not reported by the daemon, NOT VERIFIED")
        }
    }

    /// Precise can be turned off only when the app asks for it.
    static func offersPrecise(_ p: AgentPrompt) -> Bool { p.accuracy == .full && p.kind != .locationOn }

    func showNext() {
        guard shown == nil, let p = prompts.first else { return }
        shown = p.id
        print("\n\(describe(p.prompt)).")
        if p.prompt.kind != .locationOn { print(TerminalAgent.identityLine(p.prompt)) }
        if !p.prompt.reason.isEmpty {
            print(tr("Reason given by the app: {reason}", ["reason": TerminalAgent.printable(p.prompt.reason)]))
        }
        if !p.prompt.askedBy.isEmpty {
            // A settings window (SetConsent) asks for more for the app: say who.
            print(tr("Asked by {program}, not by the app itself", ["program": TerminalAgent.printable(p.prompt.askedBy, limit: 4096)]))
        }
        // One letter per answer whatever the prompt: o Allow Once, w Allow While Using, d Don't Allow.
        if p.prompt.kind == .locationOn {
            print(tr("[o] Switch On   [d] Keep Off"))
        } else if p.prompt.kind == .oneTime {
            print(tr("[o] Allow Once   [d] Don't Allow"))
        } else {
            print(tr("[o] Allow Once   [w] Allow While Using   [d] Don't Allow"))
        }
        if TerminalAgent.offersPrecise(p.prompt) {
            print(tr("Add r to allow only your approximate location (Precise off): {keys}",
                     ["keys": p.prompt.kind == .oneTime ? "or" : "or, wr"]))
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
        var line = line
        var accuracy = Accuracy.full
        if TerminalAgent.offersPrecise(p.prompt), line.count == 2, line.hasSuffix("r"), line != "dr" {
            accuracy = .reduced
            line.removeLast()
        }
        let decision: AgentDecision?
        switch (p.prompt.kind == .whenInUse, line) {
        case (_, "o"): decision = .allowOnce
        case (true, "w"): decision = .allowWhileUsing
        case (_, "d"): decision = .deny
        default: decision = nil
        }
        guard let decision else {
            print(tr("Please answer with one of the letters shown.") + "\n> ", terminator: "")
            fflush(stdout)
            return
        }
        prompts.remove(at: i)
        shown = nil
        p.responder.reply(decision, accuracy: accuracy)
        print(tr("Answered {decision}.", ["decision": decision.rawValue
                                                       + (accuracy == .reduced && decision != .deny ? tr(", approximate only") : "")]))
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
    var autoAccuracy = Accuracy.full
    if var word = autoWord {
        if word.hasSuffix("-reduced"), word != "deny-reduced" {
            autoAccuracy = .reduced
            word.removeLast("-reduced".count)
        }
        guard let d = AgentDecision(rawValue: word) else {
            throw UsageError(tr("--auto wants allow-once, allow-while-using or deny (allow-once-reduced, allow-while-using-reduced: Precise off)"))
        }
        auto = d
    }
    try ctx.noMoreArguments()
    let client = try connect(ctx)
    // Retrying: after a restart of geoconsentd any program of this uid may register
    // first; this agent waits for the slot and registers again when the daemon returns.
    let requests = try await client.registerAgent(at: TerminalAgent.path, retrying: true)
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
    let agent = TerminalAgent(auto: auto, accuracy: autoAccuracy)
    for await input in inputs {
        switch input {
        case .request(let r): agent.handle(r)
        case .typed(let bytes): agent.typed(bytes[...])
        case .inputClosed:
            eprint("geoconsentctl: " + tr("standard input closed; prompts can no longer be answered (use --auto for scripts)"))
        }
    }
    // The requests end only with the connection.
    throw Failure(tr("lost the bus connection"))
}
