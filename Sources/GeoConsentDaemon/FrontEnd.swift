import GeoCore
import GeoDBus

/// A protocol the daemon speaks besides its own API (the GeoClue2 facade,
/// `GeoClue/`): the daemon drives a list of them through this, with no
/// branch per protocol, and each reaches the daemon only through
/// `FrontEndHost`. What differs by protocol (object lifetimes, accuracy
/// levels, its own agents) lives in the front end; the consent and location
/// cores stay neutral.
public protocol FrontEnd: AnyObject {
    /// The well-known names it owns on the bus: requested at start, released
    /// before ours at idle exit.
    var busNames: [String] { get }
    /// Why one of them may be owned already, for the start-up error.
    var nameTakenHint: String { get }
    /// What it calls its client objects: the sessions of that kind are its
    /// own, and the effects on them go to it alone (`FrontEnds.owner`).
    var objectKind: ObjectKind? { get }
    /// Whether connections' own sessions (`SessionID.connection`) are its: our own API's.
    var servesConnectionSessions: Bool { get }
    /// Match rules for the signals it needs, added at start.
    var matchRules: [String] { get }
    /// Exports its objects (the daemon owns its names afterwards).
    func serve()
    /// Nothing of it keeps the daemon running.
    var isIdle: Bool { get }
    /// A message nothing else took (a signal of its peers); true when it was its.
    func handle(_ m: Message) -> Bool
    /// A connection left the bus; the consent core hears of it next.
    func connectionLeft(_ name: String)

    // What the consent core's effects mean for its sessions and calls.
    /// A call it gave the core (`FrontEndHost.hold`) failed with `error`.
    func callFailed(_ id: CallID, _ error: DBusError)
    /// The core let a held call's updates start (the location core answers it next).
    func updatesStarted(_ id: CallID)
    /// One of its sessions lost its grant (`byPause`: to its login session's pause, in this event).
    func grantEnded(session: SessionID, byPause: Bool)
    /// One of its sessions' status changed.
    func authorizationChanged(_ session: SessionID, _ status: AuthorizationStatus)
    /// The login session of one of its sessions is in use again (the user is back).
    func sessionResumed(_ session: SessionID)
    /// A prompt for one of its agents (`askExternalAgent`) about one of its sessions; true when it asked it.
    func authorize(_ r: ExternalPromptRequest) -> Bool
    /// Location was switched on or off.
    func enabledChanged()

    /// `WatchSessions`' watchers are to be told that the sessions changed.
    func sessionsChanged(watchers: [String])
    /// The body of the core's reply to a call it held (empty for most).
    func replyArguments(_ reply: CoreReply) -> [DBusValue]

    // From the location core: a fix takes one of two paths to its sessions.
    /// Gathered: a fix (the view each of them may see) for sessions of its own,
    /// once per view after the location core has decided them all.
    func deliver(_ sessions: [SessionID], _ fix: Fix)
    /// Streamed (`streamsFixes`): the fix for one session of its own, as soon
    /// as the location core has decided it, in the core's order; then
    /// `flushFixes` when the core has decided them all.
    var streamsFixes: Bool { get }
    func sendFix(to session: SessionID, _ fix: Fix, _ acc: Accuracy)
    func flushFixes()
    /// The body of a one-fix request's reply (`RequestLocation`).
    func locationReply(_ fix: Fix, _ acc: Accuracy) -> [DBusValue]
    /// A session of its own gets no fix for now, and why (a D-Bus error name and message).
    func locationError(_ session: SessionID, name: String, message: String)
    /// Whether any session receives fixes changed.
    func inUseChanged(_ value: Bool)
    /// The receiver (gpsd) came or went.
    func receiverChanged(connected: Bool)
    /// The sources that can answer changed, or root switched Wi-Fi positioning.
    func sourcesChanged()
}

public extension FrontEnd {
    /// Most protocols have no word for sources.
    func sourcesChanged() {}
}

/// What a front end may use of the daemon, and no more: the shell's event
/// loop and object server (the bus, to export its objects and send its
/// signals), its callers resolved, the consent core fed and read, calls held
/// for the core, connections retained, calls out within budgets it registers,
/// and the location side's filters. No process watch, no internals: what a
/// caller's grant rests on (its process, its login session) is the daemon's.
public protocol FrontEndHost: AnyObject {
    var loop: EventLoop { get }
    var server: ObjectServer { get }
    /// What the consent core says, read only (to check before calling anyone).
    var consent: ConsentQueries { get }
    /// The configuration's limits, which a front end applies to its own objects too.
    var limits: Limits { get }

    /// Resolves the caller of `call` (and places it in its login session),
    /// then runs `body`; on failure `call` is answered with why.
    func resolveCaller(_ call: MethodCall, _ body: @escaping (Caller) -> Void)
    /// Resolves `connection` for a read that starts nothing (nil: it cannot be).
    func resolveCaller(connection: String, _ done: @escaping (Caller?) -> Void)
    /// The front end holds an object of `caller`'s connection from now on:
    /// what its grants will rest on is kept now (its process, watched with
    /// what this call proved of it), before any session. Only within `body`.
    func retain(_ caller: Caller)
    /// The front end holds nothing more of `connection` (its last object is
    /// gone): what `retain` kept goes, unless a session needs it.
    func release(connection: String)

    /// Hands the consent core an event and carries out its effects.
    func feed(_ event: CoreEvent)
    /// Keeps a call the core will answer; returns its id.
    func hold(_ call: MethodCall) -> CallID
    /// An id for a request the front end makes of its own accord, with no
    /// call to answer (the core's answer reaches the front end all the same).
    func holdWithoutCall() -> CallID
    /// Fails a held call the core will not answer any more.
    func abandon(_ id: CallID, _ error: DBusError)

    /// Calls of `purpose` may be made (`call`); false when the budgets of all
    /// purposes would pass the bus's share.
    func register(_ purpose: CallBudgets.Purpose) -> Bool
    /// Sends `message` within `purpose`'s budget for `uid` (OutgoingCalls.call).
    func call(_ message: Message, purpose: CallBudgets.Purpose, uid: UInt32, callee: String, timeout: Double,
              _ done: @escaping (Result<Message, DBusError>) -> Void) -> CallBudgets.Refusal?
    /// Logs what looks like an attack by `connection`, once for it.
    func noteAttack(_ connection: String, uid: UInt32, _ what: String)

    /// New filters for a started session of its own.
    func setUpdateOptions(session: SessionID, _ options: UpdateOptions)
    /// Whether any session receives fixes now.
    var locationInUse: Bool { get }
    /// Whether the receiver (gpsd) is connected.
    var locationReceiverConnected: Bool { get }
    /// The sources that can answer now, best first (`Sources`).
    var locationSources: [PositionSource] { get }
    /// Wi-Fi positioning is configured and root has it switched on (`WiFiEnabled`).
    var wifiEnabled: Bool { get }
    /// Where each session's last position came from, by the session's name.
    var lastSources: [String: PositionSource] { get }
}

/// What a front end may read of the consent core.
public protocol ConsentQueries: AnyObject {
    var enabled: Bool { get }
    func agentName(forUID uid: UInt32) -> String?
    func externalAgent(forUID uid: UInt32) -> ExternalAgent?
    func externalAgentRefusal(_ caller: Caller) -> CoreError?
    func isExternalAgent(_ name: String, uid: UInt32) -> Bool
}

extension ConsentCore: ConsentQueries {}

/// What a front end that has nothing to do at an event does: nothing. A
/// front end implements what its protocol needs (a small one: its names, its
/// objects, `deliver`, `grantEnded`).
public extension FrontEnd {
    var servesConnectionSessions: Bool { false }
    func sessionsChanged(watchers: [String]) {}
    func replyArguments(_ reply: CoreReply) -> [DBusValue] { [] }
    var streamsFixes: Bool { false }
    func sendFix(to session: SessionID, _ fix: Fix, _ acc: Accuracy) {}
    func flushFixes() {}
    func locationReply(_ fix: Fix, _ acc: Accuracy) -> [DBusValue] { [] }
    func locationError(_ session: SessionID, name: String, message: String) {}
    func receiverChanged(connected: Bool) {}
    var matchRules: [String] { [] }
    var nameTakenHint: String { "another program serves it" }
    var isIdle: Bool { true }
    func handle(_ m: Message) -> Bool { false }
    func connectionLeft(_ name: String) {}
    func callFailed(_ id: CallID, _ error: DBusError) {}
    func updatesStarted(_ id: CallID) {}
    func authorizationChanged(_ session: SessionID, _ status: AuthorizationStatus) {}
    func sessionResumed(_ session: SessionID) {}
    func authorize(_ r: ExternalPromptRequest) -> Bool { false }
    func enabledChanged() {}
    func inUseChanged(_ value: Bool) {}
}

/// The front ends a daemon serves, shared by the parts that hand them work
/// (the daemon, `LocationService`): made before them and filled at start, so
/// no part holds an optional wire to them.
final class FrontEnds {
    private(set) var all: [FrontEnd] = []
    /// The one whose sessions connections' own are (our own API).
    private(set) var connectionOwner: FrontEnd?

    func add(_ frontEnd: FrontEnd) {
        all.append(frontEnd)
        if frontEnd.servesConnectionSessions { connectionOwner = frontEnd }
    }

    /// The front end whose session `session` is: a connection's own, our own
    /// API; a client object's, the one of its kind.
    func owner(of session: SessionID) -> FrontEnd? {
        switch session {
        case .connection: return connectionOwner
        case .clientObject(_, let kind, _): return all.first { $0.objectKind == kind }
        }
    }
}
