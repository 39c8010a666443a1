/// How sessions end and pause (ConsentCore.swift holds the state and the
/// rules): a connection leaving, a client object's end, the tapping process
/// exiting, and logind's word on login sessions.
extension ConsentCore {
    /// A connection left: its client objects' sessions end, then its own, and its agent goes.
    func nameLeft(_ name: String) {
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
    func endSession(_ name: SessionID) {
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
                if p.abandoned {
                    // Nobody waits any more: withdraw the prompt.
                    prompts[id] = nil
                    openPrompt[app] = nil
                    withdraw(p)
                    reevaluateQueued(app)
                } else {
                    prompts[id] = p
                }
            case .focus(let id)?:
                focusChecks[id] = nil   // its answer, when it comes, is dropped
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
    func processExited(_ connection: String) {
        guard processGone.insert(connection).inserted else { return }
        for name in [SessionID.connection(connection)] + sessions.clientSessions(of: connection).sorted() {
            guard var s = sessions[name], s.tempGrant != nil else { continue }
            s.tempGrant = nil
            if effectiveAccuracy(s) == nil { s.limit = nil }
            sessions[name] = s
        }
        // announceChanges sends AuthorizationChanged and ends the fixes where a grant is gone.
    }

    /// logind placed the connection in login session `id`.
    func loginSession(_ connection: String, _ id: String) {
        guard loginSessionOf[connection] != id else { return }
        loginSessionOf[connection] = id
        pauseChanged(of: [connection])
    }

    /// logind's word on login session `id` changed (nil: it says nothing any more).
    func loginSessionState(_ id: String, _ state: LoginSessionState?) {
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
    func pauseChanged(of connections: [String]) {
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
    func answerPaused(_ name: SessionID) {
        guard let s = sessions[name], let waiting = s.waiting else { return }
        let app = s.caller.app
        var waiter: Waiter?
        switch waiting {
        case .prompt(let id):
            guard var p = prompts[id] else { break }
            waiter = p.waiters.first { $0.session == name }
            p.waiters.removeAll { $0.session == name }
            if p.abandoned {
                prompts[id] = nil
                openPrompt[app] = nil
                withdraw(p)
            } else {
                prompts[id] = p
            }
        case .focus(let id):
            waiter = focusChecks.removeValue(forKey: id)
        case .queued:
            waiter = queued[app]?.first { $0.session == name }
            queued[app]?.removeAll { $0.session == name }
            if queued[app]?.isEmpty == true { queued[app] = nil }
        }
        sessions[name]?.waiting = nil
        if let w = waiter { conclude(w.call, name, .restricted, w.start) }
        reevaluateQueued(app)
    }
}
