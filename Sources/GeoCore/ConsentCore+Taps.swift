/// Silent taps (rule 3 of `RequestOneTimeAuthorization`): whether a tap of
/// an approved app is the app in front (`CheckFocus`, asked of an agent with
/// the `focus` feature), and the notice of each silent grant (`Notice`, to an
/// agent with `notices`). No desktop proves a tap on the app's button; what
/// the agent can tell is whether the tapping process owns the focused window
/// and, on X11, whether a physical press just landed there.
extension ConsentCore {
    /// At most one `Notice` per app per minute: a tapping loop must not flood the desktop.
    static let noticeInterval: UInt64 = 60_000_000

    /// What rule 3 makes of this tap: `verdict` once the agent answered; else
    /// it asks the agent (nil: the request waits for the answer), or, with an
    /// agent that cannot tell (the earlier contract's), it stays silent.
    func tapVerdict(_ call: CallID, _ name: SessionID, _ o: AuthOptions, start: UpdateOptions?,
                    answered verdict: TapVerdict?) -> TapVerdict? {
        if let verdict { return verdict }
        guard var s = sessions[name] else { return .prompt(.unchecked) }
        let uid = s.caller.uid
        guard let agent = agents[uid], agent.features.contains(.focus) else {
            // An agent that checked taps for this uid is gone (crashed, restarting, or
            // replaced by one that cannot): not silent until one can check again.
            // A uid that never had one (a headless agent, or none) keeps the rule as it was.
            return focusUIDs.contains(uid) ? .prompt(.unchecked) : .silent(.unknown)
        }
        if uid != 0 && sessions.waitingCount(uid: uid) >= config.limits.waitingPerUser {
            return .prompt(.unchecked)   // which refuses it beyond the same limit (fail closed)
        }
        let id = "focus-\(nextPromptID)"
        nextPromptID += 1
        focusChecks[id] = Waiter(call: call, session: name, kind: .oneTime, options: o, start: start)
        s.waiting = .focus(id)
        sessions[name] = s
        effects.append(.checkFocus(FocusCheckRequest(agentName: agent.name, agentPath: agent.path, requestID: id,
                                                     uid: uid, pid: s.caller.pid, appID: s.caller.appID)))
        return nil
    }

    /// The agent answered `CheckFocus` (or its budget ran out): the tap is
    /// evaluated afresh with the answer, since anything may have changed meanwhile.
    func focusAnswered(_ id: String, _ answer: FocusAnswer) {
        guard let w = focusChecks.removeValue(forKey: id), sessions[w.session]?.waiting == .focus(id) else { return }
        sessions[w.session]?.waiting = nil
        authorize(w.call, w.session, .oneTime, w.options, start: w.start, tap: answer.verdict)
    }

    /// Tells the uid's agent of a silent tap's grant, once per app per minute.
    func noticeSilentGrant(_ caller: Caller, _ o: AuthOptions, _ a: Accuracy, _ witness: TapWitness) {
        guard let agent = agents[caller.uid], agent.features.contains(.notices) else { return }
        var times = lastNotice[caller.uid] ?? [:]
        if let last = times[caller.appID], now &- last < Self.noticeInterval, now >= last { return }
        if times.count >= config.limits.consentsPerUser {
            times = times.filter { now &- $0.value < Self.noticeInterval }
            // Still full: that many of the uid's apps tapped within a minute. The
            // uid's own desktop is spared more; its apps' grants stay in the journal.
            if times.count >= config.limits.consentsPerUser { lastNotice[caller.uid] = times; return }
        }
        times[caller.appID] = now
        lastNotice[caller.uid] = times
        let about = confirmRequest(agent, id: "", app: caller.app, kind: .oneTime, accuracy: a, about: caller,
                                   options: o, timeout: 0)
        effects.append(.notice(NoticeRequest(about: about, witness: witness)))
    }

    /// Taps of these apps waiting for `CheckFocus` are answered now with
    /// `status` (location switched off, the indicator's Stop), rather than be
    /// granted when the agent's answer comes.
    func answerFocusWaiters(of matching: (AppKey) -> Bool, _ status: (Session) -> AuthorizationStatus) {
        for id in focusChecks.keys.sorted() {
            guard let w = focusChecks[id], let s = sessions[w.session], matching(s.caller.app) else { continue }
            focusChecks[id] = nil
            sessions[w.session]?.waiting = nil
            conclude(w.call, w.session, status(s), w.start)
        }
    }

    /// The agent of `uid` is gone: its notice times go with it (a new agent
    /// starts afresh), so the table holds only uids with an agent.
    func forgetNotices(of uid: UInt32) { lastNotice[uid] = nil }
}
