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
            endTemporaryGrants(of: sessions.names(of: app))
        case .ask?:
            if consents.removeValue(forKey: app) != nil { effects.append(.saveConsents(urgent: true)) }
            endTemporaryGrants(of: sessions.names(of: app))
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
        if locationOff(app) { return .restricted }
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
        guard let id = openPrompt[app], let p = prompts[id], p.asker != nil else { return }
        prompts[id] = nil
        openPrompt[app] = nil
        withdraw(p)
        answerAsker(p)
        reevaluateQueued(app)
    }

    private func store(_ app: AppKey, _ r: ConsentRecord) {
        guard consents[app] != r else { return }
        consents[app] = r
        effects.append(.saveConsents(urgent: true))
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
        var request = confirmRequest(agent, id: id, app: app, kind: kind, accuracy: accuracy, about: live?.caller,
                                     options: nil, timeout: config.promptTimeout)
        request.askedBy = caller.appID
        effects.append(.confirm(request))
    }
}

/// The per-user switch (`SetUserLocation`, docs/dbus-api.md): a user's apps get
/// no location while it is off. Switching it off takes away: anyone of the uid.
/// Switching it on gives back every stored decision: root, the uid's agent of
/// ours (the trusted prompt's program), or anyone else after that agent's yes.
extension ConsentCore {
    func setUserLocation(_ call: CallID, _ caller: Caller, on: Bool, uid: UInt32?) {
        let target = uid ?? caller.uid
        if target != caller.uid && !caller.isRoot {
            return effects.append(.fail(call, .accessDenied("Only root may switch location for another user's apps")))
        }
        if caller.sandboxed {
            return effects.append(.fail(call, .accessDenied("A sandboxed application may not switch location for the user")))
        }
        if !on {
            if usersOff.set(target, off: true) {
                userSwitched(target)
                endAllGrants(of: target)
            }
            return effects.append(.reply(call, .empty))
        }
        guard usersOff.isOff(target) else { return effects.append(.reply(call, .empty)) }
        // Root deciding for another user is the administrator; its own apps' switch is asked like anyone's.
        if (caller.isRoot && target != caller.uid) || agents[target]?.name == caller.connection {
            usersOff.set(target, off: false)
            userSwitched(target)
            return effects.append(.reply(call, .empty))
        }
        let key = AppKey(uid: target, appID: "")
        guard let agent = agents[target] else { return effects.append(.fail(call, .noAgent)) }
        if openPrompt[key] != nil { return effects.append(.fail(call, .promptPending)) }
        let id = String(nextPromptID)
        nextPromptID += 1
        prompts[id] = Prompt(id: id, app: key, kind: .locationOn, accuracy: .full, agent: agent, waiters: [], asker: call)
        openPrompt[key] = id
        var request = confirmRequest(agent, id: id, app: key, kind: .locationOn, accuracy: .full, about: nil,
                                     options: nil, timeout: config.promptTimeout)
        request.askedBy = caller.appID
        effects.append(.confirm(request))
    }

    /// Every session of `uid` may have a new status (`announceChanges`), and the
    /// switches are written.
    func userSwitched(_ uid: UInt32) {
        uidsChanged.insert(uid)
        effects.append(.saveUsersOff)
    }

    /// Location went off for `uid`'s apps: their one-time grants end and their
    /// waiting requests are answered now, as when it goes off for everyone.
    private func endAllGrants(of uid: UInt32) {
        endTemporaryGrants(of: sessions.all.lazy.map(\.caller).filter { $0.uid == uid }.map(\.session))
        // (The switch's own prompt has the empty app id: it stays.)
        withdrawPrompts { $0.uid == uid && !$0.appID.isEmpty }
    }

    /// Answers the settings window waiting on prompt `p`, if one is: the app's
    /// status then, or nothing for the user's switch.
    func answerAsker(_ p: Prompt) {
        guard let asker = p.asker else { return }
        effects.append(.reply(asker, p.kind == .locationOn ? .empty : .status(appStatus(p.app))))
    }
}
