import GeoDBus
import GeoCore

// The agent interface's arguments and reply (docs/dbus-api.md "Agent interface"),
// each declared once: the daemon calls with these, agents (the client library's,
// ctl's, the bench's and the tests') decode and answer with them.

/// What an agent is asked to show: `Confirm`'s arguments, details included.
public struct AgentPrompt: Equatable, Sendable {
    /// Names the prompt in a later `Cancel`.
    public var requestID: String
    /// The app asking (docs/dbus-api.md "Words": App), as the daemon resolved it.
    public var appID: String
    /// Which prompt to show; nil for a kind this library does not know.
    public var kind: PromptKind?
    /// The name the app gave itself: client-supplied, untrusted.
    public var appName: String
    /// Why the app asks, in its own words (client-supplied).
    public var reason: String
    /// The accuracy asked for.
    public var accuracy: Accuracy
    /// The calling process.
    public var pid: UInt32
    /// The app runs in a Flatpak or Snap sandbox.
    public var sandboxed: Bool
    /// What the app id rests on, and so how sure the daemon is of the app; nil
    /// from a daemon that does not say (an agent then shows the id as unproven).
    public var identity: IdentityKind?
    /// Whether the daemon holds the app id proven (a verified sandbox, or a
    /// program of a system user); false: the app's own claim.
    public var identityProven: Bool
    /// The calling process's executable.
    public var executable: String
    /// The script that executable runs, when it is an interpreter ("" otherwise).
    public var script: String = ""
    /// Whether the program (and script) is one the administrator installed:
    /// a prompt shows it in a neutral tone, though the id stays unproven.
    public var installed: Bool = false
    /// A system desktop entry (a path) that names the app, for its name and icon; "" for none.
    public var desktopEntry: String = ""
    /// The program that asked for this prompt when it is not the app (a settings
    /// window raising a decision, `SetConsent`): its app id; "" for the app's own request.
    public var askedBy: String = ""
    /// Why an approved app's tap is asked (it could not be seen as a tap); nil for other prompts.
    public var tapDoubt: TapDoubt?
    /// The app's window, for a dialog to attach to (`x11:ID`, `wayland:HANDLE` or empty).
    public var parentWindow: String
    /// Where the app's position would come from, best first (empty from a
    /// daemon that does not say).
    public var sources: [PositionSource] = []

    /// A prompt; details left out read as the daemon never sends them (empty, 0, false, full).
    public init(requestID: String, appID: String, kind: PromptKind?, appName: String = "", reason: String = "",
                accuracy: Accuracy = .full, pid: UInt32 = 0, sandboxed: Bool = false,
                identity: IdentityKind? = nil, identityProven: Bool = false, executable: String = "",
                parentWindow: String = "") {
        self.requestID = requestID
        self.appID = appID
        self.kind = kind
        self.appName = appName
        self.reason = reason
        self.accuracy = accuracy
        self.pid = pid
        self.sandboxed = sandboxed
        self.identity = identity
        self.identityProven = identityProven
        self.executable = executable
        self.parentWindow = parentWindow
    }
}

/// `Confirm(s request_id, s app_id, s kind, a{sv} details) -> (s decision)`: the arguments.
public enum ConfirmCall {
    /// The method's name.
    public static let member = "Confirm"

    /// The daemon's call: ids, kind and the details of docs/dbus-api.md, every key always present.
    public static func encode(_ r: ConfirmRequest) -> [DBusValue] {
        [.string(r.requestID), .string(r.appID), .string(r.kind.rawValue), .vardict([
            "app-name": .string(r.appName),
            "reason": .string(r.reason),
            "accuracy": .string(r.accuracy.rawValue),
            "pid": .uint32(r.pid),
            "sandboxed": .bool(r.sandboxed),
            "identity": .string(r.identity?.rawValue ?? ""),
            "identity-proven": .bool(r.identityProven),
            "executable": .string(r.executable),
            "script": .string(r.script),
            "program-installed": .bool(r.installed),
            "desktop-entry": .string(r.desktopEntry),
            "asked-by": .string(r.askedBy),
            "tap-not-verified": .string(r.tapDoubt?.rawValue ?? ""),
            "parent-window": .string(r.parentWindow),
            "sources": .strings(r.sources.map(\.rawValue)),
        ])]
    }

    /// Nil unless the values are `ssss`-typed as declared; missing details read as
    /// "", 0 and false, an unknown accuracy as full, an unknown identity as nil.
    public static func decode(_ values: [DBusValue]) -> AgentPrompt? {
        guard values.count == 4, let id = values[0].stringValue, let app = values[1].stringValue,
              let kind = values[2].stringValue, let d = values[3].vardictValue else { return nil }
        var prompt = AgentPrompt(requestID: id, appID: app, kind: PromptKind(rawValue: kind),
                                 appName: d["app-name"]?.stringValue ?? "", reason: d["reason"]?.stringValue ?? "",
                                 accuracy: Accuracy(rawValue: d["accuracy"]?.stringValue ?? "") ?? .full,
                                 pid: d["pid"]?.uint32Value ?? 0, sandboxed: d["sandboxed"]?.boolValue ?? false,
                                 identity: d["identity"]?.stringValue.flatMap(IdentityKind.init(rawValue:)),
                                 identityProven: d["identity-proven"]?.boolValue ?? false,
                                 executable: d["executable"]?.stringValue ?? "",
                                 parentWindow: d["parent-window"]?.stringValue ?? "")
        prompt.script = d["script"]?.stringValue ?? ""
        prompt.installed = d["program-installed"]?.boolValue ?? false
        prompt.desktopEntry = d["desktop-entry"]?.stringValue ?? ""
        prompt.askedBy = d["asked-by"]?.stringValue ?? ""
        prompt.tapDoubt = d["tap-not-verified"]?.stringValue.flatMap(TapDoubt.init(rawValue:))
        prompt.sources = d["sources"]?.arrayValue?.compactMap { $0.stringValue.flatMap(PositionSource.init(rawValue:)) } ?? []
        return prompt
    }
}

/// `Confirm`'s reply: `(s decision)`.
public enum ConfirmReply {
    /// An agent's answer.
    public static func encode(_ decision: AgentDecision) -> [DBusValue] { encode(word: decision.rawValue) }

    /// An agent's answer that allows at most `accuracy`: with Precise off
    /// (`.reduced`), an allowing decision is spelled `allow-once-reduced` or
    /// `allow-while-using-reduced`; `deny` and `.full` are the plain words.
    public static func encode(_ decision: AgentDecision, accuracy: Accuracy) -> [DBusValue] {
        encode(word: word(decision, accuracy: accuracy))
    }

    /// The reply word for `decision` allowing at most `accuracy`.
    public static func word(_ decision: AgentDecision, accuracy: Accuracy) -> String {
        decision == .deny || accuracy == .full ? decision.rawValue : decision.rawValue + AgentAnswer.reducedSuffix
    }

    /// Any word, decision or not (tests of agents that answer nonsense).
    public static func encode(word: String) -> [DBusValue] { [.string(word)] }

    /// What the daemon makes of a reply of `signature` with `values`: a decision
    /// when it is one string that spells one, else no answer.
    public static func decode(signature: String, _ values: [DBusValue]) -> AgentAnswer {
        guard signature == "s", case .string(let word)? = values.first else {
            return .noAnswer("the agent answered with type '\(signature)'")
        }
        return AgentAnswer(reply: word)
    }
}

/// `Cancel(s request_id) -> ()`: the prompt is withdrawn.
public enum CancelCall {
    /// The method's name.
    public static let member = "Cancel"

    /// The daemon's call withdrawing `requestID`.
    public static func encode(requestID: String) -> [DBusValue] { [.string(requestID)] }

    /// The request id; nil unless the one value is a string.
    public static func decode(_ values: [DBusValue]) -> String? {
        values.count == 1 ? values[0].stringValue : nil
    }
}

/// `Notice(s app_id, s kind, a{sv} details) -> ()`: a silent tap's grant, told
/// to an agent with the `notices` feature.
public enum NoticeCall {
    public static let member = "Notice"
    /// The one kind of this contract.
    public static let silentGrant = "silent-grant"

    /// The daemon's call: the app as `Confirm` shows it, and what the tap rests on.
    public static func encode(_ n: NoticeRequest) -> [DBusValue] {
        let r = n.about
        return [.string(r.appID), .string(silentGrant), .vardict([
            "app-name": .string(r.appName),
            "accuracy": .string(r.accuracy.rawValue),
            "identity": .string(r.identity?.rawValue ?? ""),
            "identity-proven": .bool(r.identityProven),
            "executable": .string(r.executable),
            "script": .string(r.script),
            "desktop-entry": .string(r.desktopEntry),
            "focus": .string(n.witness.rawValue),
            "always": .bool(n.always),
        ])]
    }

    /// An agent's reading: the app id, the kind, what the tap rests on (nil
    /// for a word this library does not know) and whether it must be shown;
    /// nil unless the values are typed as declared.
    public static func decode(_ values: [DBusValue]) -> (appID: String, kind: String, witness: TapWitness?, always: Bool)? {
        guard values.count == 3, let app = values[0].stringValue, let kind = values[1].stringValue,
              let d = values[2].vardictValue else { return nil }
        return (app, kind, d["focus"]?.stringValue.flatMap(TapWitness.init(rawValue:)), d["always"]?.boolValue ?? false)
    }
}

/// `CheckFocus(u pid, a{sv} details) -> (a{sv} answer)`: is the tapping process the app in front?
public enum CheckFocusCall {
    public static let member = "CheckFocus"

    public static func encode(_ r: FocusCheckRequest) -> [DBusValue] {
        [.uint32(r.pid), .vardict(["app-id": .string(r.appID)])]
    }

    /// The pid asked about; nil unless typed as declared.
    public static func decode(_ values: [DBusValue]) -> UInt32? {
        guard values.count == 2, let pid = values[0].uint32Value, values[1].vardictValue != nil else { return nil }
        return pid
    }
}

/// `CheckFocus`'s reply: `(a{sv} answer)` with `focused`, `press` and `via`.
public enum CheckFocusReply {
    public static func encode(focused: FocusFact, press: FocusFact, via: String) -> [DBusValue] {
        [.vardict(["focused": .string(focused.rawValue), "press": .string(press.rawValue), "via": .string(via)])]
    }

    /// What the daemon makes of a reply: without a `focused` it knows, or of
    /// another shape, it is no answer (rule 3 then prompts). A `press` it does
    /// not know reads as `no`, the reading that prompts.
    public static func decode(signature: String, _ values: [DBusValue]) -> FocusAnswer {
        guard signature == "a{sv}", let d = values.first?.vardictValue else {
            return .noAnswer("a reply of type (\(signature)), not (a{sv})")
        }
        guard let f = d["focused"]?.stringValue.flatMap(FocusFact.init(rawValue:)) else {
            return .noAnswer("a reply without a 'focused' of yes, no or unknown")
        }
        let press = d["press"].map { $0.stringValue.flatMap(FocusFact.init(rawValue:)) ?? .no } ?? .unknown
        return .answered(focused: f, press: press)
    }
}
