/// The consent and session state machine of docs/dbus-api.md: every authorization rule
/// lives here. Pure: no I/O, no clock of its own (each event brings `now`,
/// microseconds since the epoch). The daemon feeds it events and carries out
/// the effects it returns, in order.
public final class ConsentCore {
    /// Persisted consent records (the daemon saves them on `saveConsents`).
    public var records: [AppKey: ConsentRecord] { consents.all }
    /// The `Enabled` property (saved on `saveEnabled`).
    public internal(set) var enabled: Bool {
        didSet { allChanged = true }
    }
    public var config: Config

    struct Session {
        let caller: Caller
        /// The temporary grant of this session.
        var tempGrant: Accuracy?
        /// The accuracy of the session's last granted request: a request for less lowers the grant.
        var limit: Accuracy?
        /// The prompt this session waits on.
        var waiting: Waiting?
        var updates = false
        var lastStatus: AuthorizationStatus
        var lastGranted: Bool
        /// The pause the location side was last told of (`pauseFixes`, `resumeFixes`).
        var lastPause: PauseReason?
        /// Updates and accuracy as watchers were last told of them (`sessionsChanged`).
        var lastUpdates = false
        var lastShownAccuracy: Accuracy?
    }

    enum Waiting: Equatable {
        /// Joined the open prompt with this request id.
        case prompt(String)
        /// Waits for the app's open prompt to end (in `queued`).
        case queued
        /// A silent tap waits for the agent's `CheckFocus` with this id (in `focusChecks`).
        case focus(String)
    }

    struct Agent: Equatable {
        var name: String
        var path: String
        var uid: UInt32
        /// An agent of another protocol standing in for a uid with no agent of
        /// ours (`ExternalAgent`): asked through its front end, and never sent
        /// `Cancel` (it has none).
        var external = false
        /// What it serves beyond `Confirm` and `Cancel`.
        var features: AgentFeatures = []

        /// The same agent whatever its features: it may register again with
        /// others, and the prompts it was asked stay its own (`dropPrompts`).
        static func == (a: Agent, b: Agent) -> Bool {
            a.name == b.name && a.path == b.path && a.uid == b.uid && a.external == b.external
        }
    }

    struct Waiter {
        var call: CallID
        var session: SessionID
        var kind: PromptKind
        var options: AuthOptions
        /// A client object's `Start`: the updates to start once granted.
        var start: UpdateOptions?
        /// Queued for an agent of its uid to register, until this wall time (`agent-wait`).
        var agentDeadline: UInt64?
    }

    struct Prompt {
        var id: String
        var app: AppKey
        var kind: PromptKind
        var accuracy: Accuracy
        var agent: Agent
        var waiters: [Waiter]
        /// The `SetConsent` call that asked for this prompt (a settings window
        /// raising a decision): it is answered when the prompt is, with the
        /// app's status then; nil for a prompt the app's own request opened.
        var asker: CallID? = nil

        /// Nobody waits on it any more: it is withdrawn.
        var abandoned: Bool { waiters.isEmpty && asker == nil }
    }

    /// Every write to a session or a record is noted by its table: see `announceChanges`.
    var sessions = SessionTable()
    var consents: RecordTable
    var agents: [UInt32: Agent] = [:]
    /// Agents of other protocols, one per uid (ExternalAgents.swift).
    var externalAgents: [UInt32: ExternalAgent] = [:]
    var prompts: [String: Prompt] = [:]
    var openPrompt: [AppKey: String] = [:]
    /// Requests waiting for the app's open prompt to end, or for an agent of
    /// its uid to register, before they are evaluated afresh.
    var queued: [AppKey: [Waiter]] = [:] {
        didSet { wakeUpMayMove = true }
    }
    /// `queued` was written in this event, or a lapse time came nearer: the
    /// one wake-up may move (`rearmWakeUp`).
    var wakeUpMayMove = false
    /// When the core's one wake-up is due (`wakeUp`): the earliest deadline of
    /// a request waiting for an agent; nil when none waits.
    var armedWakeUp: UInt64?
    var nextPromptID = 1
    /// Silent taps waiting for the agent's `CheckFocus` (ConsentCore+Taps.swift).
    var focusChecks: [String: Waiter] = [:]
    /// When each app's last `Notice` went to its uid's agent, per uid (at most one a minute per app).
    var lastNotice: [UInt32: [String: UInt64]] = [:]
    /// Uids whose agent registered with the `focus` feature since the daemon
    /// started: while none of theirs can check a tap (it crashed, or is
    /// restarting), their silent taps are asked as first taps (fail closed).
    var focusUIDs: Set<UInt32> = []
    /// The earliest time a stored decision can lapse unused (ConsentCore+Lapse.swift); 0: not looked yet.
    var nextLapseCheck: UInt64 = 0
    /// Connections whose first process exited while they live on in another
    /// process (`processExited`): none of their sessions holds a temporary
    /// grant. Kept until the name leaves the bus.
    var processGone: Set<String> = []
    /// The login session of each connection logind placed (`loginSession`), until it leaves the bus.
    var loginSessionOf: [String: String] = [:]
    /// What logind says of each login session the daemon follows (`loginSessionState`).
    var loginStates: [String: LoginSessionState] = [:]
    /// When each login session began (`loginSessionBegan`).
    var loginBegan: [String: UInt64] = [:]
    /// Connections watching the sessions of each uid (`watchSessions`).
    var sessionWatchers: [UInt32: Set<String>] = [:]
    /// Uids whose sessions changed in this event, as watchers see them.
    var watchedChanged: Set<UInt32> = []

    var effects: [CoreEffect] = []
    /// Sessions given a `grantEnded` in this event's effects (one each).
    var ended: Set<SessionID> = []
    /// Sessions whose pause began in this event (`pauseChanged`): a grant of
    /// theirs that ends now ends by the pause (`grantEnded`'s `byPause`).
    var pausedNow: Set<SessionID> = []
    /// Why a grant ending in this event ends (`CoreEvent.grantEndCause`).
    var endCause = ""
    /// `Enabled` changed in this event: every session may have a new status.
    var allChanged = false
    /// Uids whose agent of another protocol came, went or changed its cap, or
    /// whose own location switch changed, in this event: their sessions may
    /// have a new status (only theirs: an agent's arrival and departure, which
    /// a caller can repeat at will, compare no other uid's sessions).
    var uidsChanged: Set<UInt32> = []
    var now: UInt64 = 0

    public init(config: Config = Config(), records: [AppKey: ConsentRecord] = [:], enabled: Bool = true,
                usersOff: UsersOff = UsersOff()) {
        self.config = config
        self.consents = RecordTable(records)
        self.enabled = enabled
        self.usersOff = usersOff
    }

    /// The users who switched location off for their own apps (`SetUserLocation`).
    public internal(set) var usersOff: UsersOff

    // MARK: Queries (for the daemon and tests)

    public var sessionCount: Int { sessions.count }
    /// The grant journal's lines of the last event (GrantJournal.swift): the
    /// daemon logs them after carrying out its effects.
    public internal(set) var grantNotes: [GrantNote] = []
    /// The journal's lines of decisions that lapsed in the last event.
    public internal(set) var lapseNotes: [LapseNote] = []
    public func hasSession(_ name: SessionID) -> Bool { sessions[name] != nil }
    /// The connection of session `name` (its own, or its client object's), while it exists.
    public func connection(ofSession name: SessionID) -> String? { sessions[name]?.caller.connection }
    /// Whether `connection` has a session of its own or of a client object.
    public func hasSessions(connection: String) -> Bool {
        sessions[.connection(connection)] != nil || !sessions.clientSessions(of: connection).isEmpty
    }
    public var openPromptCount: Int { prompts.count }
    /// Agents of ours and of other protocols: each is state a restart would lose.
    public var agentCount: Int { agents.count + externalAgents.count }
    /// Connections watching sessions (`WatchSessions`): told until they leave,
    /// so a watcher keeps the daemon from exiting when idle.
    public var watcherCount: Int { sessionWatchers.values.reduce(0) { $0 + $1.count } }
    public func agentName(forUID uid: UInt32) -> String? { agents[uid]?.name }
    public func externalAgent(forUID uid: UInt32) -> ExternalAgent? { externalAgents[uid] }

    /// The accuracy fixes for `session` must have now; nil: no fix may reach it
    /// (no grant, or its login session is paused).
    public func grantedAccuracy(for session: SessionID) -> Accuracy? {
        guard let s = sessions[session], pause(s.caller) == nil else { return nil }
        return effectiveAccuracy(s)
    }

    /// Who holds `session`, while it exists.
    public func caller(of session: SessionID) -> Caller? { sessions[session]?.caller }

    /// Why `session`'s login session is paused, if it is.
    public func pause(of session: SessionID) -> PauseReason? { sessions[session].flatMap { pause($0.caller) } }

    public func status(for session: SessionID) -> AuthorizationStatus? {
        sessions[session].map(status)
    }

    public func updatesOn(_ session: SessionID) -> Bool { sessions[session]?.updates ?? false }

    // MARK: Events

    /// Handles one event at wall time `now` and returns what the daemon must do.
    public func handle(_ event: CoreEvent, now: UInt64) -> [CoreEffect] {
        self.now = now
        effects = []
        ended = []
        pausedNow = []
        grantNotes = []
        lapseNotes = []
        endCause = event.grantEndCause
        if case .externalAgentLevel(let name, _) = event, let a = externalAgents.values.first(where: { $0.name == name }) {
            endCause = "its \(a.label) switched location off"
        }
        // Before the event: a request after a lapse's time finds it lapsed.
        lapseUnused()
        switch event {
        case .request(let call, let caller, let appRequest):
            request(call, caller, appRequest)
        case .management(let call, let caller, let request):
            management(call, caller, request)
        case .agentAnswered(let id, let answer):
            answered(id, answer)
        case .focusAnswered(let id, let answer):
            focusAnswered(id, answer)
        case .nameLeft(let name):
            nameLeft(name)
        case .sessionEnded(let name):
            endSession(name)
        case .externalAgentLevel(let name, let maxAccuracy):
            externalAgentLevel(name, maxAccuracy)
        case .processExited(let name):
            processExited(name)
        case .loginSession(let connection, let id):
            loginSession(connection, id)
        case .loginSessionState(let id, let state):
            loginSessionState(id, state)
        case .loginSessionBegan(let id, let at):
            loginBegan[id] = at
        case .wokeUp:
            // The wake-up has fired: the next one is armed afresh, even when
            // it came a little early and nothing was due yet.
            armedWakeUp = nil
            wakeUpMayMove = true
            agentWaitOver()
        }
        announceChanges()
        tellWatchers()
        followLapseTimes()
        rearmWakeUp()
        sessions.forgetChanges()
        consents.forgetChanges()
        allChanged = false
        uidsChanged = []
        return effects
    }

    // MARK: Rules

    /// The app's policy from the config. Most configs name no app: skip hashing
    /// the (often long) app id then; this runs several times per call.
    func policy(_ app: AppKey) -> AppPolicy? { config.apps.isEmpty ? nil : config.apps[app.appID] }

    /// `restricted` applies to whoever shows the app-id: it only takes away.
    func isRestricted(_ caller: Caller) -> Bool { locationOff(caller.app) }

    /// Location is off for `app`: for everyone (`Enabled`), for its user
    /// (their own switch, or their desktop's), or for the app (`policy = restricted`).
    func locationOff(_ app: AppKey) -> Bool {
        !enabled || usersOff.isOff(app.uid) || policy(app) == .restricted || desktopSwitchOff(app.uid)
    }

    /// The agent of another protocol of a client object's uid (it speaks for
    /// client objects only: our own API's sessions never have one).
    func externalAgent(of caller: Caller) -> ExternalAgent? {
        guard !externalAgents.isEmpty, caller.session.busName == nil else { return nil }
        return externalAgents[caller.uid]
    }

    /// The desktop's own location switch is off for `uid`, as that uid's agent
    /// of another protocol says (GNOME Shell's `MaxAccuracyLevel` 0 when the
    /// user switches location off in GNOME's settings): for every session of
    /// the uid, our own API's too. (Its reduced cap is for client objects
    /// only: `externalAgent(of:)`.)
    func desktopSwitchOff(_ uid: UInt32) -> Bool {
        guard !externalAgents.isEmpty, let a = externalAgents[uid] else { return false }
        return a.maxAccuracy == nil
    }

    /// The app's own `Revoke`, and the user's Stop of it (`EndGrants`): the
    /// session's temporary grant ends and its updates stop, even where a
    /// stored decision still grants.
    func revoke(_ name: SessionID) {
        endTemporaryGrants(of: [name])
        sessions[name]?.updates = false
        endGrant(name)
    }

    /// The one-time grants of these sessions end (and a lower accuracy they
    /// asked for with them): fail closed, when what gave them is taken away.
    func endTemporaryGrants<S: Sequence>(of names: S) where S.Element == SessionID {
        for name in names {
            sessions[name]?.tempGrant = nil
            sessions[name]?.limit = nil
        }
    }

    /// `always` applies only where the app-id is more than the caller's word
    /// (`Config.grantsByName`): a verified sandbox, or a system uid.
    func isAlways(_ caller: Caller) -> Bool {
        policy(caller.app) == .always && config.grantsByName(to: caller)
    }

    /// Why the caller's login session is paused, if logind says it is.
    func pause(_ caller: Caller) -> PauseReason? {
        guard !loginStates.isEmpty, let id = loginSessionOf[caller.connection] else { return nil }
        return loginStates[id]?.pause
    }

    /// A paused session is `restricted`, as if location were switched off for
    /// its user; its grant (`effectiveAccuracy`) stays, to resume with.
    func status(_ s: Session) -> AuthorizationStatus {
        let app = s.caller.app
        if isRestricted(s.caller) || pause(s.caller) != nil { return .restricted }
        if isAlways(s.caller) { return .always }
        let record = consents[app]
        if record?.decision == .whenInUse { return .whenInUse }
        if s.tempGrant != nil { return .whenInUse }
        if record?.decision == .denied { return .denied }
        return .notDetermined
    }

    func effectiveAccuracy(_ s: Session) -> Accuracy? {
        let app = s.caller.app
        if isRestricted(s.caller) { return nil }
        var best: Accuracy?
        if isAlways(s.caller) { best = .full }
        if let r = consents[app], r.decision == .whenInUse { best = max(best, r.decisionAccuracy ?? .full) }
        if let t = s.tempGrant { best = max(best, t) }
        guard let best else { return nil }
        let granted: Accuracy = s.limit == .reduced ? .reduced : best
        return externalAgent(of: s.caller).map { $0.cap(granted) } ?? granted
    }

    func max(_ a: Accuracy?, _ b: Accuracy) -> Accuracy {
        (a == .full || b == .full) ? .full : .reduced
    }

    func storedCovers(_ app: AppKey, _ a: Accuracy) -> Bool {
        guard let r = consents[app], r.decision == .whenInUse else { return false }
        return (r.decisionAccuracy ?? .full).covers(a)
    }

    /// The caller's session, made at its first call unless its uid has all the
    /// sessions it may have (then the call fails and nil is returned).
    func session(for caller: Caller, _ call: CallID) -> Session? {
        if let s = sessions[caller.session] { return s }
        let limit = config.limits.sessionsPerUser
        if !caller.isRoot && sessions.sessionCount(uid: caller.uid) >= limit {
            effects.append(.fail(call, .limitsExceeded(
                "uid \(caller.uid) has \(limit) sessions with the location service, its limit (sessions-per-user)")))
            return nil
        }
        var s = Session(caller: caller, lastStatus: .notDetermined, lastGranted: false)
        s.lastStatus = status(s)
        s.lastGranted = effectiveAccuracy(s) != nil
        s.lastPause = pause(caller)
        sessions.add(s)
        watchedChanged.insert(caller.uid)
        // A stored decision (or the config) grants a new session of the app from its first call.
        if s.lastGranted, let a = effectiveAccuracy(s) {
            grantNotes.append(GrantNote(caller, .began(a, temporary: false)))
            // A stored decision in use does not lapse (ConsentCore+Lapse.swift): a
            // grant it gives is a use, unless the session begins paused (no fix can come).
            if s.lastPause == nil, consents[caller.app]?.decision == .whenInUse { noteUse(caller.app) }
        }
        // Before any updates of this session can start: they start paused.
        if let p = s.lastPause { effects.append(.pauseFixes(session: caller.session, p)) }
        return s
    }

    func request(_ call: CallID, _ caller: Caller, _ request: AppRequest) {
        guard var s = session(for: caller, call) else { return }
        let name = caller.session
        switch request {
        case .requestOneTime(let o):
            authorize(call, name, .oneTime, o)
        case .requestWhenInUse(let o):
            authorize(call, name, .whenInUse, o)
        case .getAuthorization:
            let st = status(s)
            let record = consents[caller.app]
            var info = AuthorizationInfo(
                status: st,
                temporary: st == .whenInUse && record?.decision != .whenInUse,
                accuracy: pause(caller) == nil ? effectiveAccuracy(s) : nil,
                appID: caller.appID,
                oneTimeApproved: record?.oneTimeApproved ?? false)
            info.agentRegistered = agents[caller.uid] != nil || externalAgents[caller.uid] != nil
            info.userLocation = !usersOff.isOff(caller.uid)
            effects.append(.reply(call, .authorization(info)))
        case .revoke:
            effects.append(.reply(call, .empty))
            revoke(name)
        case .startUpdates(let options):
            guard effectiveAccuracy(s) != nil else { return effects.append(.fail(call, .notAuthorized)) }
            s.updates = true
            sessions[name] = s
            effects.append(.startUpdates(call, session: name, options))
        case .stopUpdates:
            s.updates = false
            sessions[name] = s
            effects.append(.stopUpdates(call, session: name))
        case .requestLocation(let options):
            guard effectiveAccuracy(s) != nil else { return effects.append(.fail(call, .notAuthorized)) }
            if let p = pause(caller) { return effects.append(.fail(call, .sessionPaused(p))) }
            effects.append(.locate(call, session: name, options))
        case .start(let o, let updates):
            authorize(call, name, .whenInUse, o, start: updates)
        }
    }

    /// The answer to an authorization request: the status that applies, or for a
    /// client object's `Start` (`start` set) its updates, or `accessDenied` saying
    /// why there is no grant.
    func conclude(_ call: CallID, _ name: SessionID, _ status: AuthorizationStatus, _ start: UpdateOptions?) {
        guard let start else { return effects.append(.reply(call, .status(status))) }
        guard var s = sessions[name] else { return }
        guard effectiveAccuracy(s) != nil else {
            return effects.append(.fail(call, .accessDenied(refusal(s, status))))
        }
        s.updates = true
        sessions[name] = s
        effects.append(.startUpdates(call, session: name, start))
    }

    /// Why a client object's `Start` is refused, for its caller.
    func refusal(_ s: Session, _ status: AuthorizationStatus) -> String {
        let app = s.caller.appID
        switch status {
        case .restricted:
            if !enabled { return "Location is switched off" }
            if let p = pause(s.caller) { return p.message }
            if let a = externalAgent(of: s.caller), a.maxAccuracy == nil {
                return "Location is switched off for uid \(s.caller.uid) (its \(a.label) allows no accuracy)"
            }
            return "The administrator does not allow \(app) to use location (policy = restricted)"
        case .denied:
            return "Location access for \(app) was denied (the user chose Don't Allow)"
        case .notDetermined, .always, .whenInUse:
            return "The location prompt for \(app) was not answered"
        }
    }

    /// Adds `grantEnded` for a session, once per event (a set, not a scan of the
    /// effects: disabling the service ends every session's grant at once).
    func endGrant(_ name: SessionID, byPause: Bool = false) {
        if ended.insert(name).inserted { effects.append(.grantEnded(session: name, byPause: byPause)) }
    }

    /// Unicasts `AuthorizationChanged` to every session whose status changed in
    /// this event, and ends the fixes of sessions that lost their grant. A status
    /// depends on `Enabled`, the config, the app's record and the session itself,
    /// so the sessions to compare are those the tables noted as written, those
    /// of apps whose record changed and the client objects' of uids whose agent
    /// of another protocol changed; all of them only when `Enabled` changed.
    /// (The config does not change while an event is handled.)
    func announceChanges() {
        var names: [SessionID]
        if allChanged {
            names = sessions.names.sorted()
        } else {
            let apps = consents.changed
            names = apps.sorted().flatMap { sessions.names(of: $0).sorted() }
            for name in sessions.changed.sorted() {
                if let app = sessions[name]?.caller.app, !apps.contains(app) { names.append(name) }
            }
            if !uidsChanged.isEmpty {
                let listed = Set(names)
                names += sessions.all.lazy.map(\.caller)
                    .filter { self.uidsChanged.contains($0.uid) && !listed.contains($0.session) }
                    .map(\.session).sorted()
            }
        }
        for name in names {
            guard var s = sessions[name] else { continue }
            let st = status(s)
            let accuracy = effectiveAccuracy(s)
            let granted = accuracy != nil
            let p = pause(s.caller)
            // What ListSessionDetails shows of it (its accuracy as grantedAccuracy gives it).
            let shown = p == nil ? accuracy : nil
            if st != s.lastStatus || p != s.lastPause || granted != s.lastGranted || s.updates != s.lastUpdates
                || shown != s.lastShownAccuracy {
                watchedChanged.insert(s.caller.uid)
                s.lastUpdates = s.updates
                s.lastShownAccuracy = shown
            }
            if st != s.lastStatus {
                effects.append(.authorizationChanged(session: name, st))
                s.lastStatus = st
            }
            // The pause that began in this event, if any: what ends a grant now
            // (not one that began earlier, when a grant ends under it).
            let pauseBegan = pausedNow.contains(name) ? p : nil
            if p != s.lastPause {
                effects.append(p.map { .pauseFixes(session: name, $0) } ?? .resumeFixes(session: name))
                s.lastPause = p
            }
            if s.lastGranted && !granted {
                s.updates = false
                endGrant(name, byPause: pauseBegan != nil)
                grantNotes.append(GrantNote(s.caller, .ended(pauseBegan?.grantEndCause ?? endCause)))
            } else if granted && !s.lastGranted, let a = effectiveAccuracy(s) {
                grantNotes.append(GrantNote(s.caller, .began(a, temporary: s.tempGrant != nil && !storedCovers(s.caller.app, a))))
            }
            s.lastGranted = granted
            sessions[name] = s
        }
    }
}
