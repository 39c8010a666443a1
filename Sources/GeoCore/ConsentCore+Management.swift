/// Management calls and agents of other protocols (ConsentCore.swift holds
/// the state and the rules): registering agents, the consent records, the
/// session lists and their watchers, `Enabled`.
extension ConsentCore {
    /// `SessionsChanged` to the watchers of each uid whose sessions changed in
    /// this event as `ListSessionDetails` shows them, and to root's.
    func tellWatchers() {
        defer { watchedChanged = [] }
        guard !sessionWatchers.isEmpty, !watchedChanged.isEmpty else { return }
        var to = sessionWatchers[0] ?? []
        for uid in watchedChanged { to.formUnion(sessionWatchers[uid] ?? []) }
        if !to.isEmpty { effects.append(.sessionsChanged(watchers: to.sorted())) }
    }

    /// The agent is gone: its prompts count as no answer, and its cap goes with it.
    func dropExternalAgent(_ uid: UInt32) {
        guard let g = externalAgents.removeValue(forKey: uid) else { return }
        uidsChanged.insert(uid)
        dropPrompts(of: Agent(name: g.name, path: "", uid: uid, external: true))
    }

    /// A new `MaxAccuracyLevel`: every client object of the uid may have a new
    /// grant (off: their updates end, `announceChanges`).
    func externalAgentLevel(_ name: String, _ maxAccuracy: Accuracy?) {
        guard let (uid, g) = externalAgents.first(where: { $0.value.name == name }), g.maxAccuracy != maxAccuracy else { return }
        externalAgents[uid]?.maxAccuracy = maxAccuracy
        uidsChanged.insert(uid)
        if maxAccuracy == nil { endOwnAPIGrants(of: uid) }
    }

    /// The desktop's location switch is off for `uid`: our own API's one-time
    /// grants of the uid end, as when location is switched off for everyone
    /// (client objects end with their updates, `announceChanges`).
    func endOwnAPIGrants(of uid: UInt32) {
        endTemporaryGrants(of: sessions.all.lazy.map(\.caller).filter { $0.uid == uid && $0.session.busName != nil }.map(\.session))
    }

    /// Why `caller` may not register an agent of either kind, if it may not:
    /// never a sandbox; with `[agents] allow`, only a listed id resting on more
    /// than the caller's word.
    func agentRefusal(_ caller: Caller) -> CoreError? {
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

    func management(_ call: CallID, _ caller: Caller, _ request: ManagementRequest) {
        switch request {
        case .registerAgent(let path, let features):
            if let refusal = agentRefusal(caller) { return effects.append(.fail(call, refusal)) }
            if let a = agents[caller.uid], a.name != caller.connection || a.path != path {
                return effects.append(.fail(call, .agentExists))
            }
            if features.contains(.focus) { focusUIDs.insert(caller.uid) }
            if agents[caller.uid] != nil {
                agents[caller.uid]?.features = features   // the same agent again, maybe with other features
                return effects.append(.reply(call, .empty))
            }
            agents[caller.uid] = Agent(name: caller.connection, path: path, uid: caller.uid, features: features)
            effects.append(.reply(call, .empty))
            agentArrived(caller.uid)
        case .addExternalAgent(let maxAccuracy, let label):
            if let refusal = externalAgentRefusal(caller) { return effects.append(.fail(call, refusal)) }
            let isNew = externalAgents[caller.uid] == nil
            externalAgents[caller.uid] = ExternalAgent(name: caller.connection, uid: caller.uid, maxAccuracy: maxAccuracy,
                                                       label: label)
            uidsChanged.insert(caller.uid)
            if maxAccuracy == nil { endOwnAPIGrants(of: caller.uid) }
            effects.append(.reply(call, .empty))
            // Our own agent answers first: another protocol's is asked only where the uid has none.
            if isNew && agents[caller.uid] == nil { agentArrived(caller.uid, external: true) }
        case .endGrants(let appID, let uid):
            if caller.sandboxed { return effects.append(.fail(call, .accessDenied("Sandboxed applications cannot stop other apps' grants"))) }
            let target = uid ?? caller.uid
            if target != caller.uid && !caller.isRoot {
                return effects.append(.fail(call, .accessDenied("Only root may stop another user's apps")))
            }
            let app = AppKey(uid: target, appID: appID)
            // As the app's own Revoke: a stored decision still applies, the updates stop.
            for name in sessions.names(of: app).sorted() { revoke(name) }
            // A tap under way is not granted after the Stop: it gets the status there is now.
            answerFocusWaiters(of: { $0 == app }) { [unowned self] in self.status($0) }
            effects.append(.reply(call, .empty))
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
            withdrawSettingsPrompt(app)
            // Forgetting an app also ends its live temporary grants: fail closed.
            endTemporaryGrants(of: sessions.names(of: app))
            effects.append(.reply(call, .empty))
        case .getUserLocation(let uid):
            let target = uid ?? caller.uid
            if target != caller.uid && !caller.isRoot {
                return effects.append(.fail(call, .accessDenied("Only root may read another user's location switch")))
            }
            effects.append(.reply(call, .flag(!usersOff.isOff(target))))
        case .setUserLocation(let on, let uid):
            setUserLocation(call, caller, on: on, uid: uid)
        case .setConsent(let appID, let uid, let decision, let accuracy):
            setConsent(call, caller, appID: appID, uid: uid, decision: decision, accuracy: accuracy)
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
        case .setWiFiEnabled(let value, let authorized):
            guard caller.isRoot || authorized else {
                return effects.append(.fail(call, .accessDenied("Only root may switch Wi-Fi positioning on or off")))
            }
            if value && config.sources.wifiURL.isEmpty {
                return effects.append(.fail(call, .invalidArgs(
                    "Wi-Fi positioning is not configured: [sources] wifi-url is empty in geoconsent.conf")))
            }
            effects.append(.wifiSwitched(value))
            effects.append(.reply(call, .empty))
        case .setEnabled(let value, let authorized):
            guard caller.isRoot || authorized else {
                return effects.append(.fail(call, .accessDenied("Only root may switch location on or off")))
            }
            if value != enabled {
                enabled = value
                effects.append(.saveEnabled)
                if !value {
                    endTemporaryGrants(of: sessions.names)
                    withdrawAllPrompts()
                }
                effects.append(.reply(call, .empty))
                effects.append(.enabledChanged(value))
            } else {
                effects.append(.reply(call, .empty))
            }
        }
    }
}
