/// What the user decides about an app in a settings window (`SetConsent`,
/// docs/dbus-api.md): Never, Ask Next Time or While Using, and Precise.
///
/// Any program of the user can call this, so it may only take away by
/// itself: a decision that gives an app less (Never, Ask, Precise off) is
/// stored at once, and one that gives more (While Using, Precise on) is asked
/// of the uid's consent agent first, the trusted prompt, as if the app had
/// asked. Otherwise any program could grant itself location without the user.
extension ConsentCore {
    func setConsent(_ call: CallID, _ caller: Caller, appID: String, uid: UInt32?,
                    decision: UserDecision?, accuracy: Accuracy?) {
        let target = uid ?? caller.uid
        if target != caller.uid && !caller.isRoot {
            return effects.append(.fail(call, .accessDenied("Only root may decide for another user's apps")))
        }
        if caller.sandboxed {
            return effects.append(.fail(call, .accessDenied("A sandboxed application may not decide for apps")))
        }
        let app = AppKey(uid: target, appID: appID)
        guard consents[app] != nil || !sessions.names(of: app).isEmpty else {
            return effects.append(.fail(call, .invalidArgs("No consent or session of \(DisplayText.escaped(appID)) for uid \(target)")))
        }
        let record = consents[app] ?? ConsentRecord()
        if decision == .never, consents[app] == nil, !mayStore(app) {
            return effects.append(.fail(call, .limitsExceeded(
                "uid \(target) has \(config.limits.consentsPerUser) stored decisions, its limit (consents-per-user)")))
        }

        switch decision {
        case .never?:
            var r = record
            r.decision = .denied
            r.decisionAccuracy = nil
            r.oneTimeApproved = false
            r.oneTimeAccuracy = nil
            r.decidedAt = now
            store(app, r)
            endGrants(of: app)
        case .ask?:
            if consents.removeValue(forKey: app) != nil { effects.append(.saveConsents(urgent: true)) }
            endGrants(of: app)
        case .whileUsing? where record.decision != .whenInUse:
            // More than stored: the user confirms it in their agent's prompt.
            let wanted = accuracy ?? record.oneTimeAccuracy ?? .full
            return askFromSettings(call, caller, app, .whenInUse, wanted)
        case .whileUsing?, nil:
            break
        }
        let kept = consents[app]
        switch accuracy {
        case .reduced?:
            guard var r = kept else { break }
            if r.decision == .whenInUse { r.decisionAccuracy = .reduced }
            if r.oneTimeApproved { r.oneTimeAccuracy = .reduced }
            store(app, r)
            // Grants held now give no more than the record.
            for name in sessions.names(of: app) {
                if sessions[name]?.tempGrant != nil { sessions[name]?.tempGrant = .reduced }
                if sessions[name]?.limit != nil { sessions[name]?.limit = .reduced }
            }
        case .full?:
            guard let r = kept else { break }
            if r.decision == .whenInUse, r.decisionAccuracy == .reduced {
                return askFromSettings(call, caller, app, .whenInUse, .full)
            }
            if r.decision != .whenInUse, r.oneTimeApproved, r.oneTimeAccuracy == .reduced {
                return askFromSettings(call, caller, app, .oneTime, .full)
            }
        case nil:
            break
        }
        // Less now wins over more asked before: a settings prompt still open for
        // the app is withdrawn (its window told what holds now), so that a later
        // yes there cannot undo this.
        if decision == .never || decision == .ask || accuracy == .reduced { withdrawSettingsPrompt(app) }
        effects.append(.reply(call, .status(appStatus(app))))
    }

    /// The app's status as a caller of it would get it now, without a session
    /// of its own: what is stored, or `restricted` when location is off for it.
    func appStatus(_ app: AppKey) -> AuthorizationStatus {
        let desktopOff = externalAgents[app.uid].map { $0.maxAccuracy == nil } ?? false
        if !enabled || policy(app) == .restricted || desktopOff { return .restricted }
        switch consents[app]?.decision {
        case .whenInUse?: return .whenInUse
        case .denied?: return .denied
        case nil: return .notDetermined
        }
    }

    /// Withdraws the app's open prompt a settings window asked for, answering
    /// that window with the status then; requests of the app's own are never
    /// joined to such a prompt (`ask`), so none waits on it.
    func withdrawSettingsPrompt(_ app: AppKey) {
        guard let id = openPrompt[app], let p = prompts[id], let asker = p.asker else { return }
        prompts[id] = nil
        openPrompt[app] = nil
        withdraw(p)
        effects.append(.reply(asker, .status(appStatus(app))))
        reevaluateQueued(app)
    }

    private func store(_ app: AppKey, _ r: ConsentRecord) {
        guard consents[app] != r else { return }
        consents[app] = r
        effects.append(.saveConsents(urgent: true))
    }

    /// Live temporary grants of `app` end, as at a reset: fail closed.
    private func endGrants(of app: AppKey) {
        for name in sessions.names(of: app) {
            sessions[name]?.tempGrant = nil
            sessions[name]?.limit = nil
        }
    }

    /// Opens a prompt of `kind` for `app` that the settings call `call` waits
    /// on; the agent's answer decides (`answered`, which replies to it).
    private func askFromSettings(_ call: CallID, _ caller: Caller, _ app: AppKey, _ kind: PromptKind, _ accuracy: Accuracy) {
        if appStatus(app) == .restricted { return effects.append(.reply(call, .status(.restricted))) }
        guard let agent = agents[app.uid] else { return effects.append(.fail(call, .noAgent)) }
        if openPrompt[app] != nil { return effects.append(.fail(call, .promptPending)) }
        if prompts.count >= Limits.openPrompts
            || (app.uid != 0 && prompts.values.lazy.filter({ $0.app.uid == app.uid }).count >= config.limits.promptsPerUser) {
            return effects.append(.fail(call, .limitsExceeded(
                "uid \(app.uid) has \(config.limits.promptsPerUser) prompts open, its limit (prompts-per-user)")))
        }
        let id = String(nextPromptID)
        nextPromptID += 1
        prompts[id] = Prompt(id: id, app: app, kind: kind, accuracy: accuracy, agent: agent, waiters: [], asker: call)
        openPrompt[app] = id
        // What is known of the app without a call of its own: a live session's
        // identity if it has one; else only its id, and so nothing proven.
        let live = sessions.names(of: app).compactMap { sessions[$0] }.first
        var request = ConfirmRequest(
            agentName: agent.name, agentPath: agent.path, requestID: id, appID: app.appID, kind: kind,
            appName: "", reason: "", accuracy: accuracy, pid: live?.caller.pid ?? 0,
            sandboxed: live?.caller.sandboxed ?? false, identity: live?.caller.identity,
            identityProven: live.map { config.grantsByName(to: $0.caller) } ?? false,
            executable: live?.caller.executable ?? "", parentWindow: "", timeout: config.promptTimeout, uid: app.uid)
        request.script = live?.caller.script ?? ""
        request.installed = live?.caller.installed ?? false
        request.askedBy = caller.appID
        effects.append(.confirm(request))
    }
}
