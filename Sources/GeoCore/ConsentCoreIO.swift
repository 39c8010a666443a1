/// Inputs and outputs of the consent core (`ConsentCore`): events in, effects out.

/// Identifies a method call the daemon is holding; the core answers it through effects.
public typealias CallID = UInt64

/// Who is calling, as the daemon resolved it from bus credentials.
public struct Caller: Equatable, Sendable {
    /// The session the call belongs to: the connection's own, or one of its
    /// client objects' (`clientSession(_:kind:)`).
    public var session: SessionID
    /// The unique bus name of the connection the session belongs to: the session
    /// ends when it leaves the bus.
    public var connection: String { session.connection }
    public let uid: UInt32
    public var pid: UInt32
    public let appID: String
    /// What the app-id rests on: what config naming it may grant (`Config.grantsByName`).
    public let identity: IdentityKind
    public var executable: String
    /// The script an interpreter runs (`IdentityKind.script`), display-safe;
    /// "" when the executable is no interpreter or runs none. Shown, and used to
    /// find the app's desktop entry; the app-id already holds it when the kind is `.script`.
    public var script: String = ""
    /// Whether the program it runs is one the administrator installed: the
    /// executable (and the script) a root-owned file under /usr that only root
    /// may write (`ResolvedApp.installed`). It decides how a prompt looks, never what is granted.
    public var installed: Bool = false
    /// The app the consent belongs to. Stored, not computed: an `AppKey` hashes
    /// its app id when made, and the core asks for it several times per call.
    public let app: AppKey

    public init(session: SessionID, uid: UInt32, pid: UInt32, appID: String, identity: IdentityKind = .executable,
                executable: String = "") {
        self.session = session
        self.uid = uid
        self.pid = pid
        self.appID = appID
        self.identity = identity
        self.executable = executable
        self.app = AppKey(uid: uid, appID: appID)
    }

    public var isRoot: Bool { uid == 0 }

    /// The same app on the same connection, as the session of one of its client
    /// objects (an object a front end made for it, of `kind`, numbered by the
    /// daemon): each such object is a grant of its own, and ends with the
    /// object or with the connection.
    public func clientSession(_ number: UInt32, kind: ObjectKind) -> Caller {
        var c = self
        c.session = .clientObject(connection: connection, kind: kind, number: number)
        return c
    }

    /// Flatpak or Snap, verified or not (`IdentityKind.isSandboxed`).
    public var sandboxed: Bool { identity.isSandboxed }
}

/// Options of `Request*Authorization` (unknown keys already dropped).
public struct AuthOptions: Equatable, Sendable {
    public var reason: String = ""
    public var accuracy: Accuracy = .full
    public var appName: String = ""
    public var parentWindow: String = ""
    /// The name an agent of another protocol may be told for the app, as its
    /// front end established it (never the app's word alone).
    public var externalName: ExternalName = .unproven(why: "")
    /// The longest its prompt may stay open, when less than `prompt-timeout`
    /// (a front end whose callers give up sooner: GDBus's 25 s); nil: no bound of its own.
    public var promptTimeout: Double?
    public init(reason: String = "", accuracy: Accuracy = .full, appName: String = "", parentWindow: String = "",
                externalName: ExternalName = .unproven(why: ""), promptTimeout: Double? = nil) {
        self.reason = reason
        self.accuracy = accuracy
        self.appName = appName
        self.parentWindow = parentWindow
        self.externalName = externalName
        self.promptTimeout = promptTimeout
    }
}

/// Which prompt an agent is asked to show.
public enum PromptKind: String, Sendable {
    case oneTime = "one-time"
    case whenInUse = "when-in-use"
    /// Switch location back on for the user's apps (`SetUserLocation`): asked
    /// with an empty app id; `allow-once` switches it on.
    case locationOn = "location-on"
}

/// The answers an agent's `Confirm` may give (docs/dbus-api.md), as the agent spells them.
public enum AgentDecision: String, Sendable {
    case allowOnce = "allow-once"
    case allowWhileUsing = "allow-while-using"
    case deny
}

/// What an agent's `Confirm` came back with.
public enum AgentAnswer: Equatable, Sendable, CustomStringConvertible {
    /// A decision, not yet checked against the kind.
    case decision(AgentDecision)
    /// A decision that allows at most this accuracy: the user turned Precise
    /// off (`allow-once-reduced`, `allow-while-using-reduced`), or an agent
    /// of another protocol allowed a lower level than the one asked for.
    case capped(AgentDecision, Accuracy)
    /// Timeout, error reply, wrong reply type, an unknown word, agent gone.
    case noAnswer(String)

    /// The suffix of an allowing decision that allows reduced accuracy at most
    /// (Precise off): `allow-once-reduced`, `allow-while-using-reduced`.
    public static let reducedSuffix = "-reduced"

    /// The agent's reply string: a decision, or no answer when it is not one of
    /// the words of the contract (they are matched exactly, case included).
    public init(reply: String) {
        if let d = AgentDecision(rawValue: reply) {
            self = .decision(d)
        } else if reply.hasSuffix(Self.reducedSuffix),
                  let d = AgentDecision(rawValue: String(reply.dropLast(Self.reducedSuffix.count))), d != .deny {
            self = .capped(d, .reduced)
        } else {
            self = .noAnswer("unknown decision '\(reply)'")
        }
    }

    /// For the log: the decision as the agent spelled it, or why there is none.
    public var description: String {
        switch self {
        case .decision(let d): return d.rawValue
        case .capped(let d, let a): return "\(d.rawValue), \(a.rawValue) at most"
        case .noAnswer(let why): return "no answer (\(why))"
        }
    }
}

/// A client call the core rules on.
public enum AppRequest: Equatable, Sendable {
    case requestOneTime(AuthOptions)
    case requestWhenInUse(AuthOptions)
    case getAuthorization
    case revoke
    case startUpdates(UpdateOptions)
    case stopUpdates
    case requestLocation(LocationOptions)
    /// A client object's `Start`: the standard prompt (as `requestWhenInUse`,
    /// its prompt at most `AuthOptions.promptTimeout` long), then updates with
    /// these options. Answered by `startUpdates`, or by `accessDenied` saying
    /// why not.
    case start(AuthOptions, UpdateOptions)
}

/// Consent and agent management calls (they do not start a session).
public enum ManagementRequest: Equatable, Sendable {
    case registerAgent(path: String, features: AgentFeatures = [])
    /// The indicator's Stop (`EndGrants`): the app's temporary grants and updates end now.
    case endGrants(appID: String, uid: UInt32?)
    case unregisterAgent(path: String)
    case listConsents
    case resetConsent(appID: String, uid: UInt32?)
    /// `SetConsent`: the user's own decision about an app, from a settings
    /// window (`UserDecision`; nil keeps it) and its precision (nil keeps it).
    /// Less is stored at once; more is asked of the uid's agent first.
    case setConsent(appID: String, uid: UInt32?, decision: UserDecision?, accuracy: Accuracy?)
    case listSessions
    /// `ListSessionDetails`: the same sessions, each with every detail (its pause too).
    case listSessionDetails
    /// `WatchSessions`: the caller's connection is told (`sessionsChanged`)
    /// whenever a session of its uid (root: of any uid) starts, ends, or
    /// changes what `ListSessionDetails` shows of it.
    case watchSessions
    /// `Enabled`: root's, or another caller's that polkit authorized (`authorized`).
    case setEnabled(Bool, authorized: Bool = false)
    /// `SetUserLocation`: location on or off for the apps of `uid` (the
    /// caller's own without it). Off at once; on by root or the uid's agent at
    /// once, else asked of that agent first.
    case setUserLocation(on: Bool, uid: UInt32?)
    /// `GetUserLocation`: whether location is on for the apps of `uid` (the caller's own without it).
    case getUserLocation(uid: UInt32?)
    /// `WiFiEnabled`: Wi-Fi positioning on or off for everyone; root's, or
    /// another caller's that polkit authorized (`authorized`), as `Enabled`.
    case setWiFiEnabled(Bool, authorized: Bool = false)
    /// The caller's connection becomes its uid's agent of another protocol
    /// (`ExternalAgent`, called `label` in messages), with this cap (nil:
    /// location off for the uid's client objects).
    case addExternalAgent(maxAccuracy: Accuracy?, label: String)
}

/// An event the daemon feeds the core.
public enum CoreEvent: Equatable, Sendable {
    case request(CallID, Caller, AppRequest)
    case management(CallID, Caller, ManagementRequest)
    case agentAnswered(requestID: String, AgentAnswer)
    /// The agent's answer to `CheckFocus` before a silent tap (or why there is none).
    case focusAnswered(requestID: String, FocusAnswer)
    /// A unique name left the bus: its session and those of its client objects end.
    case nameLeft(String)
    /// A client object's session ends (`Stop`, the object deleted, its `Start`
    /// given up), as if its connection had left.
    case sessionEnded(SessionID)
    /// An agent of another protocol's cap changed (nil: location off); ignored
    /// unless `name` is a registered one.
    case externalAgentLevel(name: String, maxAccuracy: Accuracy?)
    /// The process a connection's first session call came from has exited,
    /// while the connection (this unique name) is still on the bus: another
    /// process holds it now. The temporary grants of its sessions (its own and
    /// its client objects') end, and none is given to them again.
    case processExited(String)
    /// The processes of connection `connection` belong to login session `id`
    /// (logind's, on the same bus): its sessions follow that login session's
    /// state from now on. Sent once per connection, before its first call
    /// when logind answered in time.
    case loginSession(connection: String, id: String)
    /// What logind now says of login session `id`; nil: nothing known any more
    /// (logind left the bus), which behaves as a session logind never knew.
    case loginSessionState(id: String, LoginSessionState?)
    /// Login session `id` began at this wall time, microseconds (logind's
    /// `TimestampMonotonic` put on the wall clock when read, else its
    /// `Timestamp`: `LogindWatch.began`): its user's requests wait for an
    /// agent for a while after it (`Config.agentWait`).
    case loginSessionBegan(id: String, at: UInt64)
    /// A time the core asked for (`wakeUp`) has come.
    case wokeUp
}

/// Why the user of a login session is not at it, as logind says.
public enum PauseReason: String, Equatable, Sendable {
    /// The screen is locked (`LockedHint`, or logind's `Lock` signal).
    case locked
    /// Another session is in the foreground of the seat (`Active` false: another user switched in).
    case inactive
}

/// A login session as far as location goes: in use (active and unlocked) or
/// paused. A session logind does not know has no state (today's behaviour).
public enum LoginSessionState: Equatable, Sendable {
    case inUse
    case paused(PauseReason)

    /// From logind's `Active` and `LockedHint` properties.
    public init(active: Bool, locked: Bool) {
        if locked { self = .paused(.locked) }
        else if !active { self = .paused(.inactive) }
        else { self = .inUse }
    }

    public var pause: PauseReason? {
        if case .paused(let r) = self { return r }
        return nil
    }
}

/// A session as `ListSessions` shows it.
public struct SessionInfo: Equatable, Sendable {
    public var name: String
    public var uid: UInt32
    public var appID: String
    public var status: AuthorizationStatus
    public var updates: Bool
    /// Why the session's login session is paused, if it is.
    public var paused: PauseReason?
    /// Fixes reach it now: its updates are on, it holds a grant, and it is
    /// not paused (the settings window's "in use now").
    public var receiving: Bool
    /// Where the last position it got came from (the location side fills it
    /// in: the consent core does not see positions); nil before the first.
    public var source: PositionSource?
    /// The accuracy fixes for it have now (`grantedAccuracy`); nil without a
    /// grant or while paused, as `GetAuthorization` says.
    public var accuracy: Accuracy?
    public init(name: String, uid: UInt32, appID: String, status: AuthorizationStatus, updates: Bool,
                paused: PauseReason? = nil, receiving: Bool = false, accuracy: Accuracy? = nil) {
        self.name = name
        self.uid = uid
        self.appID = appID
        self.status = status
        self.updates = updates
        self.paused = paused
        self.receiving = receiving
        self.accuracy = accuracy
    }
}

/// `GetAuthorization`'s answer.
public struct AuthorizationInfo: Equatable, Sendable {
    public var status: AuthorizationStatus
    public var temporary: Bool
    /// nil: no grant (`none`).
    public var accuracy: Accuracy?
    public var appID: String
    public var oneTimeApproved: Bool
    /// A consent agent of the caller's uid is registered (ours, or one of
    /// another protocol's): a prompt can be shown (`agent-registered`).
    public var agentRegistered = false
    /// The caller's user has location on for their apps (`user-location`;
    /// `SetUserLocation`): false while they switched it off.
    public var userLocation = true
    public init(status: AuthorizationStatus, temporary: Bool, accuracy: Accuracy?, appID: String, oneTimeApproved: Bool) {
        self.status = status
        self.temporary = temporary
        self.accuracy = accuracy
        self.appID = appID
        self.oneTimeApproved = oneTimeApproved
    }
}

/// A successful reply.
public enum CoreReply: Equatable, Sendable {
    case empty
    case status(AuthorizationStatus)
    case authorization(AuthorizationInfo)
    case consents([(AppKey, ConsentRecord)])
    case sessions([SessionInfo])
    /// The same list, for `ListSessionDetails`.
    case sessionDetails([SessionInfo])
    /// A yes or no: `GetUserLocation`.
    case flag(Bool)

    public static func == (a: CoreReply, b: CoreReply) -> Bool {
        switch (a, b) {
        case (.empty, .empty): return true
        case (.flag(let x), .flag(let y)): return x == y
        case (.status(let x), .status(let y)): return x == y
        case (.authorization(let x), .authorization(let y)): return x == y
        case (.sessions(let x), .sessions(let y)), (.sessionDetails(let x), .sessionDetails(let y)): return x == y
        case (.consents(let x), .consents(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }
}

/// The errors of docs/dbus-api.md, as the core decides them (GeoConsentAPI gives their D-Bus names).
public enum CoreError: Equatable, Sendable, Error {
    case notAuthorized
    case noAgent
    case agentExists
    case promptPending
    case accessDenied(String)
    case invalidArgs(String)
    /// A per-user limit of `Config.limits` was reached; the text names it.
    case limitsExceeded(String)
    /// The session's login session is paused: no fix reaches it until the user is back.
    case sessionPaused(PauseReason)

    public var message: String {
        switch self {
        case .notAuthorized: return "This session has no location grant"
        case .noAgent: return "No consent agent is registered for this user"
        case .agentExists: return "A consent agent is already registered for this user"
        case .promptPending: return "This session already waits on a prompt"
        case .accessDenied(let m), .invalidArgs(let m), .limitsExceeded(let m): return m
        case .sessionPaused(let r): return r.message
        }
    }
}

extension PauseReason {
    /// What a paused session is told (an error's message, `LocationError`'s).
    public var message: String {
        switch self {
        case .locked: return "The user's session is locked: location resumes when it is unlocked"
        case .inactive:
            return "The user's session is not in the foreground of its seat (another session is): " +
                   "location resumes when it is again"
        }
    }
}

/// What the agent is asked (`Agent.Confirm`).
public struct ConfirmRequest: Equatable, Sendable {
    public var agentName: String
    public var agentPath: String
    public var requestID: String
    public var appID: String
    public var kind: PromptKind
    public var appName: String
    public var reason: String
    public var accuracy: Accuracy
    public var pid: UInt32
    public var sandboxed: Bool
    /// What the app id rests on (`identity` in the details): the prompt says how
    /// sure the daemon is of the app.
    public var identity: IdentityKind?
    /// Whether that kind proves the app id for this caller (`Config.grantsByName`:
    /// a verified sandbox, or a process of a system uid): else the id is the
    /// app's own claim, and the prompt says so.
    public var identityProven: Bool
    public var executable: String
    /// The caller's `script` and `installed` (`Caller`).
    public var script: String = ""
    public var installed: Bool = false
    /// The app id of the program that asked for this prompt when it is not the
    /// app itself (`asked-by`): a settings window raising a decision (`SetConsent`).
    public var askedBy: String = ""
    /// An approved app's tap that could not be seen as one, and why
    /// (`tap-not-verified`); nil for every other prompt.
    public var tapDoubt: TapDoubt?
    /// A system desktop entry that names the app (its path): filled in by the
    /// daemon when the prompt goes out (GeoSystem's `DesktopEntries.entry(naming:)`); "" for none.
    public var desktopEntry: String = ""
    public var parentWindow: String
    /// Seconds the agent has to answer.
    public var timeout: Double
    /// The uid whose agent is asked (the app's): the daemon's calls to agents are budgeted per uid.
    public var uid: UInt32
    /// Where the app's position would come from, best first (`sources`):
    /// filled in by the location side when the prompt goes out.
    public var sources: [PositionSource] = []

    public init(agentName: String, agentPath: String, requestID: String, appID: String, kind: PromptKind,
                appName: String, reason: String, accuracy: Accuracy, pid: UInt32, sandboxed: Bool,
                identity: IdentityKind? = .executable, identityProven: Bool = false,
                executable: String, parentWindow: String, timeout: Double, uid: UInt32 = 0) {
        self.agentName = agentName
        self.agentPath = agentPath
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
        self.timeout = timeout
        self.uid = uid
    }
}

/// What the daemon must do, in order.
public enum CoreEffect: Equatable, Sendable {
    case reply(CallID, CoreReply)
    case fail(CallID, CoreError)
    /// Unicast `AuthorizationChanged` to a session.
    case authorizationChanged(session: SessionID, AuthorizationStatus)
    case confirm(ConfirmRequest)
    /// Ask an agent of another protocol, through the front end that registered
    /// it; it has no `Cancel`, so a withdrawn prompt's late answer is just dropped.
    case askExternalAgent(ExternalPromptRequest)
    case cancel(agentName: String, agentPath: String, requestID: String)
    /// Ask the agent whether the tapping process is the app in front (`CheckFocus`);
    /// its answer comes back as `focusAnswered`, within its budget.
    case checkFocus(FocusCheckRequest)
    /// Tell the agent of a silent tap's grant (`Notice`); no answer is awaited.
    case notice(NoticeRequest)
    /// Write consent records. `urgent`: before any later effect (a decision);
    /// otherwise it may be batched (only `last-used` changed).
    case saveConsents(urgent: Bool)
    case saveEnabled
    /// Write the per-user switches (`UsersOff`); urgent, as a decision.
    case saveUsersOff
    /// Broadcast `PropertiesChanged` for `Enabled`.
    case enabledChanged(Bool)
    /// Root switched Wi-Fi positioning (`WiFiEnabled`): keep it, and tell the location side.
    case wifiSwitched(Bool)
    /// The session may receive fixes now (`StartUpdates`, `RequestLocation` passed the gate),
    /// with the options the call came with.
    case startUpdates(CallID, session: SessionID, UpdateOptions)
    case stopUpdates(CallID?, session: SessionID)
    case locate(CallID, session: SessionID, LocationOptions)
    /// Stop the session's fixes at once: drop its updates and pending requests
    /// (its grant ended, or it called `Revoke`). `byPause`: it ended because its
    /// login session was paused in this event (a one-time grant at the lock);
    /// false for a grant that ended while the session was paused already (its
    /// consent reset, location switched off), which the user's return does not
    /// bring back.
    case grantEnded(session: SessionID, byPause: Bool = false)
    /// The session's login session is paused: its updates stay on but get no
    /// fix (`LocationError` says why), its waiting `RequestLocation` calls fail.
    /// Sent before any `startUpdates` of a session that is paused already.
    case pauseFixes(session: SessionID, PauseReason)
    /// The pause of the session ends (the user is back, or the session ended):
    /// its updates get fixes again.
    case resumeFixes(session: SessionID)
    /// Unicast `SessionsChanged` to these connections (`watchSessions`).
    case sessionsChanged(watchers: [String])
    /// The core's one wake-up: send `wokeUp` at this wall time (microseconds
    /// since the epoch, as `now`), instead of at any time said before; nil:
    /// cancel it, nothing waits. (Requests waiting for an agent give up then;
    /// an early wake-up does no harm.)
    case wakeUp(at: UInt64?)
}

/// What an agent of ours serves beyond `Confirm` and `Cancel`
/// (`RegisterAgentWithOptions`' `features`): an agent of the earlier contract has none.
public struct AgentFeatures: OptionSet, Equatable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Send it `Notice` at each silent tap's grant.
    public static let notices = AgentFeatures(rawValue: 1)
    /// Ask it `CheckFocus` before a silent tap.
    public static let focus = AgentFeatures(rawValue: 2)

    /// The features named by these words; unknown words (a later contract's) are ignored.
    public init(words: [String]) {
        self = []
        for w in words {
            switch w {
            case "notices": insert(.notices)
            case "focus": insert(.focus)
            default: break
            }
        }
    }
}

/// One of `CheckFocus`'s three-valued answers.
public enum FocusFact: String, Equatable, Sendable {
    case yes, no, unknown
}

/// An agent's answer to `CheckFocus`, or why there is none.
public enum FocusAnswer: Equatable, Sendable {
    case answered(focused: FocusFact, press: FocusFact)
    case noAnswer(String)

    /// Rule 3 of `RequestOneTimeAuthorization`: what the tap is, by this
    /// answer. Another window in front, or no press where presses can be
    /// seen, is no tap on the app's button; no answer fails closed.
    var verdict: TapVerdict {
        switch self {
        case .noAnswer: return .prompt(.unchecked)
        case .answered(.no, _): return .prompt(.behind)
        case .answered(.yes, .no): return .prompt(.noPress)
        case .answered(.yes, .yes): return .silent(.pressed)
        case .answered(.yes, .unknown): return .silent(.inFront)
        case .answered(.unknown, _): return .silent(.unknown)
        }
    }
}

/// What a silent tap rests on (`Notice`'s `focus`).
public enum TapWitness: String, Equatable, Sendable {
    /// The app in front, with a physical press in its window.
    case pressed
    /// The app in front, where presses cannot be seen.
    case inFront = "in-front"
    /// The desktop could not tell, or the agent was not asked.
    case unknown
}

/// What rule 3 makes of a tap.
enum TapVerdict: Equatable {
    /// Granted without a prompt.
    case silent(TapWitness)
    /// It is asked as a first tap is (rule 4), for this reason.
    case prompt(TapDoubt)
}

/// Why an approved app's tap was not silent (`Confirm`'s `tap-not-verified`):
/// the prompt tells the user that the app asked without a tap that could be seen.
public enum TapDoubt: String, Equatable, Sendable {
    /// Another window was in front.
    case behind
    /// The app was in front, but no physical press landed in it.
    case noPress = "no-press"
    /// Nothing could check it (no answer in time, or no agent that can).
    case unchecked
}

/// `CheckFocus` for one silent tap.
public struct FocusCheckRequest: Equatable, Sendable {
    public var agentName: String
    public var agentPath: String
    public var requestID: String
    public var uid: UInt32
    /// The tapping process, in the daemon's PID namespace.
    public var pid: UInt32
    public var appID: String
    public init(agentName: String, agentPath: String, requestID: String, uid: UInt32, pid: UInt32, appID: String) {
        self.agentName = agentName
        self.agentPath = agentPath
        self.requestID = requestID
        self.uid = uid
        self.pid = pid
        self.appID = appID
    }
}

/// `Notice` of a silent tap's grant: the app as a prompt would show it
/// (`about`, whose request id and timeout mean nothing here), and what the tap rests on.
public struct NoticeRequest: Equatable, Sendable {
    public var about: ConfirmRequest
    public var witness: TapWitness
    /// Shown even where the user switched notices off: nothing verified the tap.
    public var always: Bool { witness == .unknown }
    public init(about: ConfirmRequest, witness: TapWitness) {
        self.about = about
        self.witness = witness
    }
}
