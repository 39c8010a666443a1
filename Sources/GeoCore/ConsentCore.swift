/// The consent and session state machine of docs/dbus-api.md: every authorization rule
/// lives here. Pure: no I/O, no clock of its own (each event brings `now`,
/// microseconds since the epoch). The daemon feeds it events and carries out
/// the effects it returns, in order.
public final class ConsentCore {
    /// Persisted consent records (the daemon saves them on `saveConsents`).
    public var records: [AppKey: ConsentRecord] { consents.all }
    /// The `Enabled` property (saved on `saveEnabled`).
    public private(set) var enabled: Bool {
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
    }

    struct Agent: Equatable {
        var name: String
        var path: String
        var uid: UInt32
        /// An agent of another protocol standing in for a uid with no agent of
        /// ours (`ExternalAgent`): asked through its front end, and never sent
        /// `Cancel` (it has none).
        var external = false
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
    }

    /// Every write to a session or a record is noted by its table: see `announceChanges`.
    private var sessions = SessionTable()
    private var consents: RecordTable
    private var agents: [UInt32: Agent] = [:]
    /// Agents of other protocols, one per uid (ExternalAgents.swift).
    private var externalAgents: [UInt32: ExternalAgent] = [:]
    private var prompts: [String: Prompt] = [:]
    private var openPrompt: [AppKey: String] = [:]
    /// Requests waiting for the app's open prompt to end, or for an agent of
    /// its uid to register, before they are evaluated afresh.
    private var queued: [AppKey: [Waiter]] = [:] {
        didSet { queuedChanged = true }
    }
    /// `queued` was written in this event: the one wake-up may move.
    private var queuedChanged = false
    /// When the core's one wake-up is due (`wakeUp`): the earliest deadline of
    /// a request waiting for an agent; nil when none waits.
    private var armedWakeUp: UInt64?
    private var nextPromptID = 1
    /// Connections whose first process exited while they live on in another
    /// process (`processExited`): none of their sessions holds a temporary
    /// grant. Kept until the name leaves the bus.
    private var processGone: Set<String> = []
    /// The login session of each connection logind placed (`loginSession`), until it leaves the bus.
    private var loginSessionOf: [String: String] = [:]
    /// What logind says of each login session the daemon follows (`loginSessionState`).
    private var loginStates: [String: LoginSessionState] = [:]
    /// When each login session began (`loginSessionBegan`).
    private var loginBegan: [String: UInt64] = [:]
    /// Connections watching the sessions of each uid (`watchSessions`).
    private var sessionWatchers: [UInt32: Set<String>] = [:]
    /// Uids whose sessions changed in this event, as watchers see them.
    private var watchedChanged: Set<UInt32> = []

    private var effects: [CoreEffect] = []
    /// Sessions given a `grantEnded` in this event's effects (one each).
    private var ended: Set<SessionID> = []
    /// Sessions whose pause began in this event (`pauseChanged`): a grant of
    /// theirs that ends now ends by the pause (`grantEnded`'s `byPause`).
    private var pausedNow: Set<SessionID> = []
    /// Why a grant ending in this event ends (`CoreEvent.grantEndCause`).
    private var endCause = ""
    /// `Enabled` changed in this event: every session may have a new status.
    private var allChanged = false
    private var now: UInt64 = 0

    public init(config: Config = Config(), records: [AppKey: ConsentRecord] = [:], enabled: Bool = true) {
        self.config = config
        self.consents = RecordTable(records)
        self.enabled = enabled
    }

    // MARK: Queries (for the daemon and tests)

    public var sessionCount: Int { sessions.count }
    /// The grant journal's lines of the last event (GrantJournal.swift): the
    /// daemon logs them after carrying out its effects.
    public private(set) var grantNotes: [GrantNote] = []
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
        endCause = event.grantEndCause
        if case .externalAgentLevel(let name, _) = event, let a = externalAgents.values.first(where: { $0.name == name }) {
            endCause = "its \(a.label) switched location off"
        }
        switch event {
        case .client(let call, let caller, let request):
            client(call, caller, request)
        case .management(let call, let caller, let request):
            management(call, caller, request)
        case .agentAnswered(let id, let answer):
            answered(id, answer)
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
            queuedChanged = true
            agentWaitOver()
        }
        announceChanges()
        tellWatchers()
        rearmWakeUp()
        sessions.forgetChanges()
        consents.forgetChanges()
        allChanged = false
        return effects
    }

    // MARK: Rules

    /// The app's policy from the config. Most configs name no app: skip hashing
    /// the (often long) app id then; this runs several times per call.
    private func policy(_ app: AppKey) -> AppPolicy? { config.apps.isEmpty ? nil : config.apps[app.appID] }

    /// `restricted` applies to whoever shows the app-id: it only takes away.
    private func isRestricted(_ caller: Caller) -> Bool {
        !enabled || policy(caller.app) == .restricted || externalAgentOff(caller)
    }

    /// The agent of another protocol of a client object's uid (it speaks for
    /// client objects only: our own API's sessions never have one).
    private func externalAgent(of caller: Caller) -> ExternalAgent? {
        guard !externalAgents.isEmpty, caller.session.busName == nil else { return nil }
        return externalAgents[caller.uid]
    }

    /// A client object whose uid's agent of another protocol says location is off.
    private func externalAgentOff(_ caller: Caller) -> Bool {
        externalAgent(of: caller).map { $0.maxAccuracy == nil } ?? false
    }

    /// `always` applies only where the app-id is more than the caller's word
    /// (`Config.grantsByName`): a verified sandbox, or a system uid.
    private func isAlways(_ caller: Caller) -> Bool {
        policy(caller.app) == .always && config.grantsByName(to: caller)
    }

    /// Why the caller's login session is paused, if logind says it is.
    private func pause(_ caller: Caller) -> PauseReason? {
        guard !loginStates.isEmpty, let id = loginSessionOf[caller.connection] else { return nil }
        return loginStates[id]?.pause
    }

    /// A paused session is `restricted`, as if location were switched off for
    /// its user; its grant (`effectiveAccuracy`) stays, to resume with.
    private func status(_ s: Session) -> AuthorizationStatus {
        let app = s.caller.app
        if isRestricted(s.caller) || pause(s.caller) != nil { return .restricted }
        if isAlways(s.caller) { return .always }
        let record = consents[app]
        if record?.decision == .whenInUse { return .whenInUse }
        if s.tempGrant != nil { return .whenInUse }
        if record?.decision == .denied { return .denied }
        return .notDetermined
    }

    private func effectiveAccuracy(_ s: Session) -> Accuracy? {
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

    private func max(_ a: Accuracy?, _ b: Accuracy) -> Accuracy {
        (a == .full || b == .full) ? .full : .reduced
    }

    private func storedCovers(_ app: AppKey, _ a: Accuracy) -> Bool {
        guard let r = consents[app], r.decision == .whenInUse else { return false }
        return (r.decisionAccuracy ?? .full).covers(a)
    }

    /// The caller's session, made at its first call unless its uid has all the
    /// sessions it may have (then the call fails and nil is returned).
    private func session(for caller: Caller, _ call: CallID) -> Session? {
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
        if s.lastGranted, let a = effectiveAccuracy(s) { grantNotes.append(GrantNote(caller, .began(a, temporary: false))) }
        // Before any updates of this session can start: they start paused.
        if let p = s.lastPause { effects.append(.pauseFixes(session: caller.session, p)) }
        return s
    }

    private func client(_ call: CallID, _ caller: Caller, _ request: ClientRequest) {
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
            effects.append(.reply(call, .authorization(AuthorizationInfo(
                status: st,
                temporary: st == .whenInUse && record?.decision != .whenInUse,
                accuracy: pause(caller) == nil ? effectiveAccuracy(s) : nil,
                appID: caller.appID,
                oneTimeApproved: record?.oneTimeApproved ?? false))))
        case .revoke:
            s.tempGrant = nil
            s.limit = nil
            s.updates = false
            sessions[name] = s
            effects.append(.reply(call, .empty))
            // Stop fixes even if a stored decision still grants: Revoke ends updates.
            endGrant(name)
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
    private func conclude(_ call: CallID, _ name: SessionID, _ status: AuthorizationStatus, _ start: UpdateOptions?) {
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
    private func refusal(_ s: Session, _ status: AuthorizationStatus) -> String {
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

    /// `RequestOneTimeAuthorization` and `RequestWhenInUseAuthorization`, rules 1-4 of docs/dbus-api.md.
    private func authorize(_ call: CallID, _ name: SessionID, _ kind: PromptKind, _ o: AuthOptions,
                           start: UpdateOptions? = nil) {
        guard var s = sessions[name] else { return }
        let app = s.caller.app
        let a = o.accuracy
        if isRestricted(s.caller) { return conclude(call, name, .restricted, start) }
        // Paused: answered as when location is off for the user, without a prompt;
        // a client object's Start with a stored grant starts, paused.
        if pause(s.caller) != nil { return conclude(call, name, .restricted, start) }
        if isAlways(s.caller) {
            // Config grants `full`; a request for less still lowers this session's grant.
            s.limit = a
            sessions[name] = s
            return conclude(call, name, .always, start)
        }
        if s.waiting != nil { return effects.append(.fail(call, .promptPending)) }

        let firstGrant = s.limit == nil
        let record = consents[app]
        let heldCovers = (s.tempGrant.map { t in s.limit == .reduced ? Accuracy.reduced : t })?.covers(a) ?? false
        if storedCovers(app, a) || heldCovers {
            // Rule 2 (both kinds): already granted at this accuracy; a request for less lowers the grant.
            if s.tempGrant != nil, !storedCovers(app, a) { s.tempGrant = a }
            s.limit = a
            sessions[name] = s
            if firstGrant { noteUse(app) }   // the first grant of this session
            return conclude(call, name, .whenInUse, start)
        }
        switch kind {
        case .oneTime:
            if let r = record, r.oneTimeApproved, (r.oneTimeAccuracy ?? .full).covers(a) {
                // Rule 3: the user confirmed the button once; later taps are silent.
                // (No grant where the connection's process is gone: its status then.)
                guard grantTemporary(name, a) else { return effects.append(.reply(call, .status(status(s)))) }
                noteUse(app)
                return effects.append(.reply(call, .status(.whenInUse)))
            }
        case .whenInUse:
            if record?.decision == .denied {
                return conclude(call, name, status(s), start)
            }
        }
        ask(call, name, kind, o, start: start)
    }

    /// Grants `name` a temporary grant of accuracy `a`; false when it may hold none.
    @discardableResult
    private func grantTemporary(_ name: SessionID, _ a: Accuracy) -> Bool {
        guard var s = sessions[name], !isRestricted(s.caller), pause(s.caller) == nil,
              !processGone.contains(s.caller.connection) else {
            return false
        }
        s.tempGrant = a
        s.limit = a
        sessions[name] = s
        return true
    }

    /// Whether a decision about `app` may be stored: its record exists, or its
    /// uid has fewer than `consents-per-user` (root has no such limit).
    private func mayStore(_ app: AppKey) -> Bool {
        consents[app] != nil || app.uid == 0 || consents.count(uid: app.uid) < config.limits.consentsPerUser
    }

    /// Updates `last-used` of an existing record; written lazily (not a decision).
    private func noteUse(_ app: AppKey) {
        guard var r = consents[app] else { return }
        r.lastUsed = now
        consents[app] = r
        effects.append(.saveConsents(urgent: false))
    }

    private func ask(_ call: CallID, _ name: SessionID, _ kind: PromptKind, _ o: AuthOptions, start: UpdateOptions?) {
        guard var s = sessions[name] else { return }
        let app = s.caller.app
        // Our own agent first; for a client object's Start, the uid's agent of another protocol else.
        let external = start == nil ? nil : externalAgents[app.uid]
        // An agent of another protocol may answer from what it stored for the
        // name it is told: only a name the front end proved may be told.
        if agents[app.uid] == nil, let external, case .unproven(let why) = o.externalName {
            return effects.append(.fail(call, .accessDenied(
                "uid \(app.uid)'s \(external.label) is told only a name the app's identity proves, and none is proven for " +
                "\(app.appID)\(why.isEmpty ? "" : ": " + why); a geoconsent agent can ask about it")))
        }
        guard let agent = agents[app.uid] ?? external.map({ Agent(name: $0.name, path: "", uid: $0.uid, external: true) }) else {
            if let deadline = agentDeadline(s.caller), deadline > now,
               app.uid == 0 || sessions.waitingCount(uid: app.uid) < config.limits.waitingPerUser {
                // The user's session has just begun: its agent may not be there yet.
                // (The one wake-up moves to the earliest such deadline: `rearmWakeUp`.)
                queued[app, default: []].append(Waiter(call: call, session: name, kind: kind, options: o, start: start,
                                                       agentDeadline: deadline))
                s.waiting = .queued
                sessions[name] = s
                return
            }
            if start != nil {
                return effects.append(.fail(call, .accessDenied(
                    "No consent agent is registered for uid \(app.uid), so nobody can allow \(app.appID) to use location")))
            }
            return effects.append(.fail(call, .noAgent))
        }
        let limits = config.limits
        if app.uid != 0 {
            if sessions.waitingCount(uid: app.uid) >= limits.waitingPerUser {
                return effects.append(.fail(call, .limitsExceeded(
                    "uid \(app.uid) has \(limits.waitingPerUser) requests waiting on prompts, its limit (waiting-per-user)")))
            }
            if !mayStore(app) {
                return effects.append(.fail(call, .limitsExceeded(
                    "uid \(app.uid) has \(limits.consentsPerUser) stored decisions, its limit (consents-per-user); "
                    + "reset some with geoconsentctl reset")))
            }
        }
        let waiter = Waiter(call: call, session: name, kind: kind, options: o, start: start)
        if let openID = openPrompt[app], var p = prompts[openID] {
            if p.kind == kind && p.accuracy.covers(o.accuracy) {
                p.waiters.append(waiter)
                prompts[openID] = p
                s.waiting = .prompt(openID)
            } else {
                queued[app, default: []].append(waiter)
                s.waiting = .queued
            }
            sessions[name] = s
            return
        }
        if prompts.count >= Limits.openPrompts
            || (app.uid != 0 && prompts.values.lazy.filter({ $0.app.uid == app.uid }).count >= limits.promptsPerUser) {
            // Answered at once, as a prompt that cannot be shown is (no answer:
            // nothing changes), rather than by a wait on other users' prompts.
            return conclude(call, name, status(s), start)
        }
        let id = String(nextPromptID)
        nextPromptID += 1
        prompts[id] = Prompt(id: id, app: app, kind: kind, accuracy: o.accuracy, agent: agent, waiters: [waiter])
        openPrompt[app] = id
        s.waiting = .prompt(id)
        sessions[name] = s
        let timeout = min(config.promptTimeout, o.promptTimeout ?? config.promptTimeout)
        if agent.external, case .proven(let externalName) = o.externalName {
            // (Proven here: an unproven name was refused before any prompt opened.)
            return effects.append(.askExternalAgent(ExternalPromptRequest(
                agentName: agent.name, requestID: id, appName: externalName,
                session: name, accuracy: o.accuracy, timeout: timeout,
                uid: app.uid)))
        }
        effects.append(.confirm(ConfirmRequest(
            agentName: agent.name, agentPath: agent.path, requestID: id, appID: app.appID, kind: kind,
            appName: o.appName, reason: o.reason, accuracy: o.accuracy, pid: s.caller.pid,
            sandboxed: s.caller.sandboxed, identity: s.caller.identity,
            identityProven: config.grantsByName(to: s.caller),
            executable: s.caller.executable, parentWindow: o.parentWindow,
            timeout: timeout,
            uid: app.uid)))
    }

    private func answered(_ id: String, _ answer: AgentAnswer) {
        guard let p = prompts.removeValue(forKey: id) else { return }   // late answer after Cancel
        openPrompt[p.app] = nil
        var decision: AgentDecision?
        // What the answer allows at most (an agent of another protocol's allowed level): a
        // grant, stored or not, is never for more.
        var cap = Accuracy.full
        switch answer {
        case .decision(let d): decision = d
        case .capped(let d, let a): (decision, cap) = (d, a)
        case .noAnswer: break
        }
        func allowed(_ a: Accuracy) -> Accuracy { cap == .reduced ? .reduced : a }
        let live = p.waiters.filter { sessions[$0.session] != nil }
        for w in live { sessions[w.session]?.waiting = nil }

        switch (p.kind, decision) {
        case (.oneTime, .allowOnce?) where !mayStore(p.app):
            // The uid reached its limit while the prompt was open: the grant, not the confirmation.
            for w in live { grantTemporary(w.session, allowed(w.options.accuracy)) }
        case (.oneTime, .allowOnce?):
            var r = consents[p.app] ?? ConsentRecord()
            r.oneTimeApproved = true
            r.oneTimeAccuracy = allowed(p.accuracy)
            r.decidedAt = now
            r.lastUsed = now
            consents[p.app] = r
            effects.append(.saveConsents(urgent: true))
            for w in live { grantTemporary(w.session, allowed(w.options.accuracy)) }
        case (.whenInUse, .allowOnce?):
            for w in live { grantTemporary(w.session, allowed(w.options.accuracy)) }
            noteUse(p.app)
        case (.whenInUse, .allowWhileUsing?) where !mayStore(p.app):
            for w in live { grantTemporary(w.session, allowed(w.options.accuracy)) }
        case (.whenInUse, .allowWhileUsing?):
            var r = consents[p.app] ?? ConsentRecord()
            r.decision = .whenInUse
            r.decisionAccuracy = allowed(p.accuracy)
            r.decidedAt = now
            r.lastUsed = now
            consents[p.app] = r
            effects.append(.saveConsents(urgent: true))
            for w in live { sessions[w.session]?.limit = allowed(w.options.accuracy) }
        case (.whenInUse, .deny?) where !mayStore(p.app):
            break
        case (.whenInUse, .deny?):
            var r = consents[p.app] ?? ConsentRecord()
            r.decision = .denied
            r.decisionAccuracy = nil
            r.decidedAt = now
            consents[p.app] = r
            effects.append(.saveConsents(urgent: true))
        default:
            break   // deny of the button, timeout, agent error, anything else: nothing changes
        }
        for w in live {
            guard let s = sessions[w.session] else { continue }
            conclude(w.call, w.session, status(s), w.start)
        }
        reevaluateQueued(p.app)
    }

    /// Requests that waited for the app's prompt to end are evaluated afresh.
    private func reevaluateQueued(_ app: AppKey) {
        guard openPrompt[app] == nil, let waiting = queued.removeValue(forKey: app) else { return }
        for w in waiting where sessions[w.session] != nil {
            sessions[w.session]?.waiting = nil
            authorize(w.call, w.session, w.kind, w.options, start: w.start)
        }
    }

    /// `SessionsChanged` to the watchers of each uid whose sessions changed in
    /// this event as `ListSessionDetails` shows them, and to root's.
    private func tellWatchers() {
        defer { watchedChanged = [] }
        guard !sessionWatchers.isEmpty, !watchedChanged.isEmpty else { return }
        var to = sessionWatchers[0] ?? []
        for uid in watchedChanged { to.formUnion(sessionWatchers[uid] ?? []) }
        if !to.isEmpty { effects.append(.sessionsChanged(watchers: to.sorted())) }
    }

    /// Until when a request of `caller` that needs a prompt waits for its uid's
    /// agent: `agentWait` after its login session began; nil when logind did
    /// not place it or did not say when that session began.
    private func agentDeadline(_ caller: Caller) -> UInt64? {
        guard config.agentWait > 0, let id = loginSessionOf[caller.connection], let began = loginBegan[id] else { return nil }
        return began &+ UInt64(config.agentWait * 1e6)
    }

    /// An agent of `uid` registered: the requests that waited for one and
    /// that it can answer are asked now. An agent of another protocol answers client
    /// objects' `Start` only: an app whose waiting requests are all of our own
    /// API stays queued as it is (evaluating it again would only queue it again).
    private func agentArrived(_ uid: UInt32, external: Bool = false) {
        for app in queued.keys.sorted() where app.uid == uid {
            guard let waiting = queued[app], waiting.contains(where: { $0.agentDeadline != nil }) else { continue }
            if external && !waiting.contains(where: { $0.start != nil }) { continue }
            reevaluateQueued(app)
        }
    }

    /// The earliest agent-wait deadline has come: the apps with a request whose
    /// wait is over (and still no agent to ask) are evaluated afresh, which
    /// answers those `NoAgent`.
    private func agentWaitOver() {
        for app in queued.keys.sorted() where agents[app.uid] == nil {
            guard queued[app]?.contains(where: { ($0.agentDeadline ?? .max) <= now }) == true else { continue }
            reevaluateQueued(app)
        }
    }

    /// One wake-up for all requests waiting for an agent, at the earliest of
    /// their deadlines: moved when that changes, cancelled (`wakeUp(at: nil)`)
    /// when none waits. So the timers a caller can make the daemon arm for it
    /// are one in all, however many requests wait, leave or are queued again.
    private func rearmWakeUp() {
        guard queuedChanged else { return }
        queuedChanged = false
        var next: UInt64?
        for waiters in queued.values {
            for w in waiters { if let d = w.agentDeadline, d < (next ?? .max) { next = d } }
        }
        guard next != armedWakeUp else { return }
        armedWakeUp = next
        effects.append(.wakeUp(at: next))
    }

    /// A connection left: its client objects' sessions end, then its own, and its agent goes.
    private func nameLeft(_ name: String) {
        for client in sessions.clientSessions(of: name).sorted() { endSession(client) }
        endSession(.connection(name))
        processGone.remove(name)
        loginSessionOf[name] = nil
        for (uid, w) in sessionWatchers where w.contains(name) {
            sessionWatchers[uid]?.remove(name)
            if sessionWatchers[uid]?.isEmpty == true { sessionWatchers[uid] = nil }
        }
        if let (uid, _) = agents.first(where: { $0.value.name == name }) {
            dropAgent(uid)
        }
        if let (uid, _) = externalAgents.first(where: { $0.value.name == name }) {
            dropExternalAgent(uid)
        }
    }

    /// The session ends: its grant, its updates, and its part in a prompt.
    private func endSession(_ name: SessionID) {
        if let s = sessions.remove(name) {
            watchedChanged.insert(s.caller.uid)
            if s.lastGranted { grantNotes.append(GrantNote(s.caller, .ended(endCause))) }
            let app = s.caller.app
            if s.lastGranted || s.updates { endGrant(name) }
            // The location side forgets the session's pause with it.
            if s.lastPause != nil { effects.append(.resumeFixes(session: name)) }
            switch s.waiting {
            case .queued?:
                queued[app]?.removeAll { $0.session == name }
                if queued[app]?.isEmpty == true { queued[app] = nil }
            case .prompt(let id)?:
                guard var p = prompts[id] else { break }
                p.waiters.removeAll { $0.session == name }
                if p.waiters.isEmpty {
                    // Nobody waits any more: withdraw the prompt.
                    prompts[id] = nil
                    openPrompt[app] = nil
                    withdraw(p)
                    reevaluateQueued(app)
                } else {
                    prompts[id] = p
                }
            case nil:
                break
            }
        }
    }

    /// The process of the connection's first session call has exited, and
    /// another process holds the connection: the grants the user gave to what
    /// they tapped in end, as a one-time grant on iOS ends when the app goes
    /// away. That is the temporary grant of the connection's session and of its
    /// client objects' sessions, now and from now on. Stored decisions stay
    /// (they are the app's, not the process's); a request for less accuracy
    /// stays in force while one of them grants.
    private func processExited(_ connection: String) {
        guard processGone.insert(connection).inserted else { return }
        for name in [SessionID.connection(connection)] + sessions.clientSessions(of: connection).sorted() {
            guard var s = sessions[name], s.tempGrant != nil else { continue }
            s.tempGrant = nil
            if effectiveAccuracy(s) == nil { s.limit = nil }
            sessions[name] = s
        }
        // announceChanges sends AuthorizationChanged and ends the fixes where a grant is gone.
    }

    // MARK: Login sessions

    /// logind placed the connection in login session `id`.
    private func loginSession(_ connection: String, _ id: String) {
        guard loginSessionOf[connection] != id else { return }
        loginSessionOf[connection] = id
        pauseChanged(of: [connection])
    }

    /// logind's word on login session `id` changed (nil: it says nothing any more).
    private func loginSessionState(_ id: String, _ state: LoginSessionState?) {
        if state == nil { loginBegan[id] = nil }
        guard loginStates[id] != state else { return }
        loginStates[id] = state
        // Lock and unlock are rare; the connections of one login session are few.
        pauseChanged(of: loginSessionOf.filter { $0.value == id }.map(\.key))
    }

    /// The sessions of `connections` (their own and their client objects') may
    /// be paused now, or resume. A pause that begins ends each one's temporary
    /// grant, as a one-time grant on iOS ends when the app leaves the
    /// foreground, and answers its waiting request as when location is off
    /// for the user; stored decisions stay. `announceChanges` then sends
    /// `AuthorizationChanged`, `resumeFixes` (or `pauseFixes` for a new
    /// reason), and `grantEnded`.
    private func pauseChanged(of connections: [String]) {
        for connection in connections.sorted() {
            for name in [SessionID.connection(connection)] + sessions.clientSessions(of: connection).sorted() {
                guard var s = sessions[name] else { continue }
                if let p = pause(s.caller), s.lastPause == nil {
                    s.tempGrant = nil
                    if effectiveAccuracy(s) == nil { s.limit = nil }
                    // Said first: a Start answered below must find its updates paused.
                    s.lastPause = p
                    pausedNow.insert(name)
                    effects.append(.pauseFixes(session: name, p))
                    sessions[name] = s
                    answerPaused(name)
                } else {
                    sessions[name] = s   // noted as changed: announceChanges compares it
                }
            }
        }
    }

    /// A session waiting on a prompt (or for one) was paused: its request is
    /// answered now as when location is off, and a prompt nobody else waits
    /// on is withdrawn, so that no answer given later grants it.
    private func answerPaused(_ name: SessionID) {
        guard let s = sessions[name], let waiting = s.waiting else { return }
        let app = s.caller.app
        var waiter: Waiter?
        switch waiting {
        case .prompt(let id):
            guard var p = prompts[id] else { break }
            waiter = p.waiters.first { $0.session == name }
            p.waiters.removeAll { $0.session == name }
            if p.waiters.isEmpty {
                prompts[id] = nil
                openPrompt[app] = nil
                withdraw(p)
            } else {
                prompts[id] = p
            }
        case .queued:
            waiter = queued[app]?.first { $0.session == name }
            queued[app]?.removeAll { $0.session == name }
            if queued[app]?.isEmpty == true { queued[app] = nil }
        }
        sessions[name]?.waiting = nil
        if let w = waiter { conclude(w.call, name, .restricted, w.start) }
        reevaluateQueued(app)
    }

    /// The agent is gone: its open prompts count as no answer.
    private func dropAgent(_ uid: UInt32) {
        guard let agent = agents.removeValue(forKey: uid) else { return }
        dropPrompts(of: agent)
    }

    private func dropPrompts(of agent: Agent) {
        for id in prompts.values.filter({ $0.agent == agent }).map(\.id).sorted() {
            answered(id, .noAnswer("agent left"))
        }
    }

    /// Tells the agent a prompt is withdrawn; an agent of another protocol has no way to hear it.
    private func withdraw(_ p: Prompt) {
        guard !p.agent.external else { return }
        effects.append(.cancel(agentName: p.agent.name, agentPath: p.agent.path, requestID: p.id))
    }

    // MARK: Agents of other protocols

    /// The agent is gone: its prompts count as no answer, and its cap goes with it.
    private func dropExternalAgent(_ uid: UInt32) {
        guard let g = externalAgents.removeValue(forKey: uid) else { return }
        allChanged = true
        dropPrompts(of: Agent(name: g.name, path: "", uid: uid, external: true))
    }

    /// A new `MaxAccuracyLevel`: every client object of the uid may have a new
    /// grant (off: their updates end, `announceChanges`).
    private func externalAgentLevel(_ name: String, _ maxAccuracy: Accuracy?) {
        guard let (uid, g) = externalAgents.first(where: { $0.value.name == name }), g.maxAccuracy != maxAccuracy else { return }
        externalAgents[uid]?.maxAccuracy = maxAccuracy
        allChanged = true
    }

    /// Why `caller` may not register an agent of either kind, if it may not:
    /// never a sandbox; with `[agents] allow`, only a listed id resting on more
    /// than the caller's word.
    private func agentRefusal(_ caller: Caller) -> CoreError? {
        if caller.sandboxed { return .accessDenied("Sandboxed applications cannot register consent agents") }
        if !config.agentAllow.isEmpty {
            if !config.agentAllow.contains(caller.appID) {
                return .accessDenied("\(caller.appID) is not allowed to register a consent agent")
            }
            if !config.grantsByName(to: caller) {
                // Listed, but any program of this uid could show that id.
                return .accessDenied(
                    "\(caller.appID) is allowed to register a consent agent only in processes of system uids " +
                    "(at most \(config.systemUIDMax), [daemon] system-uid-max), not of uid \(caller.uid): " +
                    "another user's process can show any \(caller.identity == .systemdUnit ? "unit name" : "executable path")")
            }
        }
        return nil
    }

    /// Why `caller` may not add an agent of another protocol, if it may not: what its
    /// `AddAgent` would be answered. The daemon asks before it reads the
    /// agent's level, so that a refused caller makes it call no one.
    public func externalAgentRefusal(_ caller: Caller) -> CoreError? {
        if let refusal = agentRefusal(caller) { return refusal }
        if let g = externalAgents[caller.uid], g.name != caller.connection { return .agentExists }
        return nil
    }

    /// Whether `name` is the connection of `uid`'s registered agent of another protocol.
    public func isExternalAgent(_ name: String, uid: UInt32) -> Bool { externalAgents[uid]?.name == name }

    private func management(_ call: CallID, _ caller: Caller, _ request: ManagementRequest) {
        switch request {
        case .registerAgent(let path):
            if let refusal = agentRefusal(caller) { return effects.append(.fail(call, refusal)) }
            if let a = agents[caller.uid] {
                if a.name == caller.connection && a.path == path { return effects.append(.reply(call, .empty)) }
                return effects.append(.fail(call, .agentExists))
            }
            agents[caller.uid] = Agent(name: caller.connection, path: path, uid: caller.uid)
            effects.append(.reply(call, .empty))
            agentArrived(caller.uid)
        case .addExternalAgent(let maxAccuracy, let label):
            if let refusal = agentRefusal(caller) { return effects.append(.fail(call, refusal)) }
            if let g = externalAgents[caller.uid], g.name != caller.connection { return effects.append(.fail(call, .agentExists)) }
            let isNew = externalAgents[caller.uid] == nil
            externalAgents[caller.uid] = ExternalAgent(name: caller.connection, uid: caller.uid, maxAccuracy: maxAccuracy,
                                                       label: label)
            allChanged = true
            effects.append(.reply(call, .empty))
            // Our own agent answers first: another protocol's is asked only where the uid has none.
            if isNew && agents[caller.uid] == nil { agentArrived(caller.uid, external: true) }
        case .unregisterAgent(let path):
            guard let a = agents[caller.uid], a.name == caller.connection, a.path == path else {
                return effects.append(.fail(call, .invalidArgs("No agent is registered at \(path) by this connection")))
            }
            dropAgent(caller.uid)
            effects.append(.reply(call, .empty))
        case .listConsents:
            let list = records.filter { caller.isRoot || $0.key.uid == caller.uid }
                .sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            effects.append(.reply(call, .consents(list)))
        case .resetConsent(let appID, let uid):
            let target = uid ?? caller.uid
            if target != caller.uid && !caller.isRoot {
                return effects.append(.fail(call, .accessDenied("Only root may reset another user's consents")))
            }
            if caller.sandboxed && appID != caller.appID {
                return effects.append(.fail(call, .accessDenied("A sandboxed application may only reset its own consent")))
            }
            let app = AppKey(uid: target, appID: appID)
            if consents.removeValue(forKey: app) != nil { effects.append(.saveConsents(urgent: true)) }
            // Forgetting an app also ends its live temporary grants: fail closed.
            for name in sessions.names(of: app) {
                sessions[name]?.tempGrant = nil
                sessions[name]?.limit = nil
            }
            effects.append(.reply(call, .empty))
        case .listSessions, .listSessionDetails:
            let list = sessions.all.filter { caller.isRoot || $0.caller.uid == caller.uid }
                .sorted { $0.caller.session < $1.caller.session }
                .map { s -> SessionInfo in
                    let granted = grantedAccuracy(for: s.caller.session)
                    return SessionInfo(name: s.caller.session.description, uid: s.caller.uid, appID: s.caller.appID,
                                       status: status(s), updates: s.updates, paused: pause(s.caller),
                                       receiving: s.updates && granted != nil, accuracy: granted)
                }
            effects.append(.reply(call, request == .listSessions ? .sessions(list) : .sessionDetails(list)))
        case .watchSessions:
            if caller.sandboxed {
                return effects.append(.fail(call, .accessDenied("A sandboxed application may not watch other apps' sessions")))
            }
            var w = sessionWatchers[caller.uid] ?? []
            if !w.contains(caller.connection) && !caller.isRoot && w.count >= Limits.sessionWatchersPerUser {
                return effects.append(.fail(call, .limitsExceeded(
                    "uid \(caller.uid) has \(Limits.sessionWatchersPerUser) connections watching its sessions, its limit")))
            }
            w.insert(caller.connection)
            sessionWatchers[caller.uid] = w
            effects.append(.reply(call, .empty))
        case .setEnabled(let value):
            guard caller.isRoot else { return effects.append(.fail(call, .accessDenied("Only root may switch location on or off"))) }
            if value != enabled {
                enabled = value
                effects.append(.saveEnabled)
                if !value {
                    for name in sessions.names {
                        sessions[name]?.tempGrant = nil
                        sessions[name]?.limit = nil
                    }
                    withdrawAllPrompts()
                }
                effects.append(.reply(call, .empty))
                effects.append(.enabledChanged(value))
            } else {
                effects.append(.reply(call, .empty))
            }
        }
    }

    /// Location was switched off: every open or queued request is answered
    /// `restricted` now and its prompt withdrawn, so no answer given later can grant.
    private func withdrawAllPrompts() {
        for id in prompts.keys.sorted() {
            guard let p = prompts.removeValue(forKey: id) else { continue }
            openPrompt[p.app] = nil
            withdraw(p)
            for w in p.waiters where sessions[w.session] != nil {
                sessions[w.session]?.waiting = nil
                conclude(w.call, w.session, .restricted, w.start)
            }
        }
        for app in queued.keys.sorted() {
            for w in queued.removeValue(forKey: app) ?? [] where sessions[w.session] != nil {
                sessions[w.session]?.waiting = nil
                conclude(w.call, w.session, .restricted, w.start)
            }
        }
    }

    /// Adds `grantEnded` for a session, once per event (a set, not a scan of the
    /// effects: disabling the service ends every session's grant at once).
    private func endGrant(_ name: SessionID, byPause: Bool = false) {
        if ended.insert(name).inserted { effects.append(.grantEnded(session: name, byPause: byPause)) }
    }

    /// Unicasts `AuthorizationChanged` to every session whose status changed in
    /// this event, and ends the fixes of sessions that lost their grant. A status
    /// depends on `Enabled`, the config, the app's record and the session itself,
    /// so the sessions to compare are those the tables noted as written and those
    /// of apps whose record changed; all of them only when `Enabled` changed.
    /// (The config does not change while an event is handled.)
    private func announceChanges() {
        var names: [SessionID]
        if allChanged {
            names = sessions.names.sorted()
        } else {
            let apps = consents.changed
            names = apps.sorted().flatMap { sessions.names(of: $0).sorted() }
            for name in sessions.changed.sorted() {
                if let app = sessions[name]?.caller.app, !apps.contains(app) { names.append(name) }
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
