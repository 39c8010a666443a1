/// Prompts and the requests that wait on them (ConsentCore.swift holds the
/// state and the rules): a request that needs the user's answer, the agent
/// asked, its answer and what it stores, requests queued behind a prompt or
/// for an agent to register (`agent-wait`, one wake-up for all), and prompts
/// withdrawn.
extension ConsentCore {
    /// `RequestOneTimeAuthorization` and `RequestWhenInUseAuthorization`, rules 1-4 of docs/dbus-api.md.
    /// `tap`: what the agent's `CheckFocus` made of a silent tap, once answered (ConsentCore+Taps.swift).
    func authorize(_ call: CallID, _ name: SessionID, _ kind: PromptKind, _ o: AuthOptions,
                   start: UpdateOptions? = nil, tap: TapVerdict? = nil) {
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
        let stored = storedCovers(app, a)
        if stored || heldCovers {
            // Rule 2 (both kinds): already granted at this accuracy; a request for less lowers the grant.
            let tempGrant = s.tempGrant != nil && !stored ? a : s.tempGrant
            // Written only when it changes: a session written is one whose
            // status is compared again (announceChanges), and an app's repeated
            // taps change nothing.
            if tempGrant != s.tempGrant || s.limit != a {
                s.tempGrant = tempGrant
                s.limit = a
                sessions[name] = s
            }
            if firstGrant { noteUse(app) }   // the first grant of this session
            return conclude(call, name, .whenInUse, start)
        }
        switch kind {
        case .oneTime:
            if let r = record, r.oneTimeApproved, (r.oneTimeAccuracy ?? .full).covers(a) {
                // Rule 3: the user confirmed the button once; later taps are silent
                // if the app is in front, where the desktop can tell.
                switch tapVerdict(call, name, o, start: start, answered: tap) {
                case nil:
                    return   // the agent is asked first
                case .silent(let witness)?:
                    // (No grant where the connection's process is gone: its status then.)
                    guard grantTemporary(name, a) else { return effects.append(.reply(call, .status(status(s)))) }
                    noteUse(app)
                    noticeSilentGrant(s.caller, o, a, witness)
                    return effects.append(.reply(call, .status(.whenInUse)))
                case .prompt(let doubt)?:
                    return ask(call, name, kind, o, start: start, doubt: doubt)   // asked as a first tap is
                }
            }
        case .whenInUse:
            if record?.decision == .denied {
                return conclude(call, name, status(s), start)
            }
        case .locationOn:
            return   // never an app's request: SetUserLocation asks it (ConsentCore+UserDecisions)
        }
        ask(call, name, kind, o, start: start)
    }

    /// Grants `name` a temporary grant of accuracy `a`; false when it may hold none.
    @discardableResult
    func grantTemporary(_ name: SessionID, _ a: Accuracy) -> Bool {
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
    func mayStore(_ app: AppKey) -> Bool {
        consents[app] != nil || app.uid == 0 || consents.count(uid: app.uid) < config.limits.consentsPerUser
    }

    /// Updates `last-used` of an existing record; written lazily (not a decision).
    func noteUse(_ app: AppKey) {
        guard var r = consents[app], r.lastUsed != now else { return }
        r.lastUsed = now
        consents[app] = r
        effects.append(.saveConsents(urgent: false))
    }

    /// `doubt`: an approved app's tap that could not be seen as one (the prompt says so).
    func ask(_ call: CallID, _ name: SessionID, _ kind: PromptKind, _ o: AuthOptions, start: UpdateOptions?,
             doubt: TapDoubt? = nil) {
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
            if p.kind == kind && p.accuracy.covers(o.accuracy) && p.asker == nil {
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
        var request = confirmRequest(agent, id: id, app: app, kind: kind, accuracy: o.accuracy, about: s.caller,
                                     options: o, timeout: timeout)
        request.tapDoubt = doubt
        effects.append(.confirm(request))
    }

    /// What `agent` is told of a prompt (or of a silent grant, `Notice`): the
    /// app as `caller`, its process, shows it and how sure the daemon is of
    /// its id (nil: no live session, so nothing is proven), and what the
    /// app's own request said (`options`; nil for a prompt someone else asked for).
    func confirmRequest(_ agent: Agent, id: String, app: AppKey, kind: PromptKind, accuracy: Accuracy,
                        about caller: Caller?, options o: AuthOptions?, timeout: Double) -> ConfirmRequest {
        var r = ConfirmRequest(
            agentName: agent.name, agentPath: agent.path, requestID: id, appID: app.appID, kind: kind,
            appName: o?.appName ?? "", reason: o?.reason ?? "", accuracy: accuracy, pid: caller?.pid ?? 0,
            sandboxed: caller?.sandboxed ?? false, identity: caller?.identity,
            identityProven: caller.map { config.grantsByName(to: $0) } ?? false,
            executable: caller?.executable ?? "", parentWindow: o?.parentWindow ?? "", timeout: timeout, uid: app.uid)
        r.script = caller?.script ?? ""
        r.installed = caller?.installed ?? false
        return r
    }

    func answered(_ id: String, _ answer: AgentAnswer) {
        guard let p = prompts.removeValue(forKey: id) else { return }   // late answer after Cancel
        openPrompt[p.app] = nil
        var decision: AgentDecision?
        defer { answerAsker(p) }
        // What the answer allows at most (an agent of another protocol's allowed level): a
        // grant, stored or not, is never for more.
        var cap = Accuracy.full
        switch answer {
        case .decision(let d): decision = d
        case .capped(let d, let a): (decision, cap) = (d, a)
        case .noAnswer: break
        }
        func allowed(_ a: Accuracy) -> Accuracy { cap == .reduced ? .reduced : a }
        // A settings window asked for more: only the answer that gives it counts
        // (a denial there is no decision about the app's own requests).
        if p.asker != nil, let d = decision, !(p.kind == .whenInUse ? d == .allowWhileUsing : d == .allowOnce) {
            decision = nil
        }
        if p.kind == .locationOn {
            if decision != nil, usersOff.set(p.app.uid, off: false) { userSwitched(p.app.uid) }
            return
        }
        let live = p.waiters.filter { sessions[$0.session] != nil }
        for w in live { sessions[w.session]?.waiting = nil }

        switch (p.kind, decision) {
        case (.oneTime, .allowOnce?) where !mayStore(p.app):
            // The uid reached its limit while the prompt was open: the grant, not the confirmation.
            for w in live { grantTemporary(w.session, allowed(w.options.accuracy)) }
        case (.oneTime, .allowOnce?):
            // Allowed anew: the next silent grant is told however soon (`noticeSilentGrant`).
            lastNotice[p.app.uid]?[p.app.appID] = nil
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
    func reevaluateQueued(_ app: AppKey) {
        guard openPrompt[app] == nil, let waiting = queued.removeValue(forKey: app) else { return }
        for w in waiting where sessions[w.session] != nil {
            sessions[w.session]?.waiting = nil
            authorize(w.call, w.session, w.kind, w.options, start: w.start)
        }
    }

    /// Until when a request of `caller` that needs a prompt waits for its uid's
    /// agent: `agentWait` after its login session began; nil when logind did
    /// not place it or did not say when that session began.
    func agentDeadline(_ caller: Caller) -> UInt64? {
        guard config.agentWait > 0, let id = loginSessionOf[caller.connection], let began = loginBegan[id] else { return nil }
        return began &+ UInt64(config.agentWait * 1e6)
    }

    /// An agent of `uid` registered: the requests that waited for one and
    /// that it can answer are asked now. An agent of another protocol answers client
    /// objects' `Start` only: an app whose waiting requests are all of our own
    /// API stays queued as it is (evaluating it again would only queue it again).
    func agentArrived(_ uid: UInt32, external: Bool = false) {
        for app in queued.keys.sorted() where app.uid == uid {
            guard let waiting = queued[app], waiting.contains(where: { $0.agentDeadline != nil }) else { continue }
            if external && !waiting.contains(where: { $0.start != nil }) { continue }
            reevaluateQueued(app)
        }
    }

    /// The earliest agent-wait deadline has come: the apps with a request whose
    /// wait is over (and still no agent to ask) are evaluated afresh, which
    /// answers those `NoAgent`.
    func agentWaitOver() {
        for app in queued.keys.sorted() where agents[app.uid] == nil {
            guard queued[app]?.contains(where: { ($0.agentDeadline ?? .max) <= now }) == true else { continue }
            reevaluateQueued(app)
        }
    }

    /// One wake-up for all requests waiting for an agent, at the earliest of
    /// their deadlines: moved when that changes, cancelled (`wakeUp(at: nil)`)
    /// when none waits. So the timers a caller can make the daemon arm for it
    /// are one in all, however many requests wait, leave or are queued again.
    func rearmWakeUp() {
        guard wakeUpMayMove else { return }
        wakeUpMayMove = false
        var next: UInt64?
        for waiters in queued.values {
            for w in waiters { if let d = w.agentDeadline, d < (next ?? .max) { next = d } }
        }
        // And the earliest lapse of a stored decision (ConsentCore+Lapse.swift).
        if config.unusedLapseDays > 0, nextLapseCheck != .max, nextLapseCheck < (next ?? .max) { next = nextLapseCheck }
        guard next != armedWakeUp else { return }
        armedWakeUp = next
        effects.append(.wakeUp(at: next))
    }

    /// The agent is gone: its open prompts count as no answer.
    func dropAgent(_ uid: UInt32) {
        guard let agent = agents.removeValue(forKey: uid) else { return }
        forgetNotices(of: uid)
        dropPrompts(of: agent)
    }

    func dropPrompts(of agent: Agent) {
        for id in prompts.values.filter({ $0.agent == agent }).map(\.id).sorted() {
            answered(id, .noAnswer("agent left"))
        }
    }

    /// Tells the agent a prompt is withdrawn; an agent of another protocol has no way to hear it.
    func withdraw(_ p: Prompt) {
        guard !p.agent.external else { return }
        effects.append(.cancel(agentName: p.agent.name, agentPath: p.agent.path, requestID: p.id))
    }

    /// Location was switched off: every open or queued request is answered
    /// `restricted` now and its prompt withdrawn, so no answer given later can grant.
    func withdrawAllPrompts() { withdrawPrompts { _ in true } }

    /// The prompts of the apps `matching` says, and the requests queued for
    /// them: withdrawn, and answered `restricted` now (or the settings window's
    /// status), so that no answer given later grants them.
    func withdrawPrompts(of matching: (AppKey) -> Bool) {
        for id in prompts.keys.sorted() {
            guard let p = prompts[id], matching(p.app) else { continue }
            prompts[id] = nil
            openPrompt[p.app] = nil
            withdraw(p)
            answerAsker(p)
            for w in p.waiters where sessions[w.session] != nil {
                sessions[w.session]?.waiting = nil
                conclude(w.call, w.session, .restricted, w.start)
            }
        }
        for app in queued.keys.sorted() where matching(app) {
            for w in queued.removeValue(forKey: app) ?? [] where sessions[w.session] != nil {
                sessions[w.session]?.waiting = nil
                conclude(w.call, w.session, .restricted, w.start)
            }
        }
        answerFocusWaiters(of: matching) { _ in .restricted }
    }
}
