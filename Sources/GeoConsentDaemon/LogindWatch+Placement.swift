import GeoCore
import GeoDBus
import GeoSystem

/// Placing a connection in its login session (LogindWatch.swift holds the
/// state): from the cgroup the identity read, the uid's own session, or
/// logind's `GetSessionByPID`, within a bound, retried, and kept per uid and
/// cgroup until logind's signals say sessions changed.
extension LogindWatch {
    /// Runs `body` once `caller`'s connection is placed: at once when it is,
    /// when logind is not on the bus, or when its placement went on without
    /// it; else at most `placementBound` later.
    func place(_ caller: Caller, _ body: @escaping () -> Void) {
        let name = caller.connection
        if placing[name] == nil { prefetch(name, uid: caller.uid, pid: caller.pid) }
        guard let p = placing[name], !p.released else { return body() }
        placing[name]!.bodies.append(body)
        if p.attempts == 0 && !p.fromCgroup { ask(name) }   // held back for its cgroup, which did not come
    }

    /// Starts placing connection `name` (of `uid`, `pid` as the bus says), unless
    /// it is placed or being placed: called as soon as the bus has said who it is,
    /// before its identity is resolved, so that logind answers meanwhile. Its
    /// calls wait in `place` for the answer. Where a placement of the uid is kept
    /// (`byCgroup`), logind is asked only if its cgroup's is not
    /// (`resolvedCgroup`): most new connections are an app the user ran before,
    /// and a question nobody waits for still takes the bus's and logind's time.
    func prefetch(_ name: String, uid: UInt32, pid: UInt32) {
        guard owner != nil, placed[name] == nil, placing[name] == nil else { return }
        placing[name] = Placement(uid: uid, pid: pid, epoch: userSessionsEpoch)
        placing[name]!.deadline = loop.schedule(after: Self.placementBound) { [weak self] in
            guard let self, self.placing[name]?.released == false else { return }
            Log.byCaller(uid: uid, .info, "logind has not placed \(name) in \(Int(Self.placementBound)) s: " +
                         "its calls go on as if it were in no login session until it is")
            self.release(name)
        }
        // A uid seen before waits for its cgroup, which mostly answers alone;
        // a uid's first process asks logind meanwhile, in case it cannot.
        if !keptUIDs.contains(uid) && !cgroupUIDs.contains(uid) { ask(name) }
    }

    /// `name`'s identity could not be resolved: its calls fail, so a placement
    /// not asked of logind yet is not asked.
    func notResolved(_ name: String) {
        guard let p = placing[name], p.attempts == 0 else { return }
        cancelTimers(of: p)
        placing[name] = nil
    }

    /// The identity helper has read the cgroup of `name`'s process (before its
    /// calls go on, and before logind's answer to its placement is read): where a
    /// process of the same uid in the same cgroup was placed since logind last
    /// said sessions changed, this one is placed the same way at once; else its
    /// cgroup says where, by logind's own rule (`LoginSessionOfCgroup`): in a
    /// session's scope, that session; in none, its uid's own session, as
    /// logind's "no session for that PID" leads to. Only a cgroup systemd did
    /// not lay out (no cgroup v2, a container's own layout) is asked of logind.
    func resolvedCgroup(_ name: String, uid: UInt32, _ cgroup: String?) {
        guard let p = placing[name], !p.released else { return }
        if let cgroup {
            let key = CgroupKey(uid: uid, cgroup: cgroup)
            placing[name]!.key = key
            if let kept = byCgroup[key] { return resolved(name, kept.map { .session($0) } ?? .none) }
            if let answer = LoginSessionOfCgroup.answer(cgroup) {
                if cgroupUIDs.count >= Self.byCgroupLimit { cgroupUIDs = [] }
                cgroupUIDs.insert(uid)
                placing[name]!.fromCgroup = true
                switch answer {
                case .session(_, let path):
                    return resolved(name, .session(path))
                case .none:
                    return userSession(uid) { [weak self] outcome in self?.resolved(name, outcome) }
                }
            }
        }
        if p.attempts == 0 { ask(name) }
    }

    /// Keeps where the placement of `name` ended, for its cgroup.
    func keep(_ name: String, _ path: String?) {
        guard let p = placing[name], let key = p.key, p.epoch == userSessionsEpoch else { return }
        if byCgroup.count >= Self.byCgroupLimit { byCgroup = [:]; keptUIDs = []; cgroupUIDs = [] }
        byCgroup[key] = .some(path)
        keptUIDs.insert(key.uid)
    }

    /// One try at placing `name`: `GetSessionByPID`, else the uid's session.
    func ask(_ name: String) {
        guard let p = placing[name] else { return }
        placing[name]!.attempts += 1
        call(Self.managerPath, Self.managerInterface, "GetSessionByPID", [.uint32(p.pid)], uid: p.uid) { [weak self] r in
            guard let self else { return }
            switch r {
            case .reply(let m):
                guard let path = m.arguments().first?.stringValue else { return self.resolved(name, .unknown) }
                self.resolved(name, .session(path))
            case .error:   // logind's answer: no session for that PID
                self.userSession(p.uid) { [weak self] outcome in self?.resolved(name, outcome) }
            case .failed:
                self.resolved(name, .unknown)
            }
        }
    }

    /// The login session of `uid` for its processes outside any session: the
    /// user's `Display` (logind's choice of its graphical session), else its
    /// first session on a seat.
    func userSession(_ uid: UInt32, _ answer: @escaping (Outcome) -> Void) {
        if let kept = userSessions[uid] { return answer(kept.map { .session($0) } ?? .none) }
        let epoch = userSessionsEpoch
        let done: (Outcome) -> Void = { [weak self] outcome in
            // Kept only when no signal came meanwhile, and only an answer (not "unknown").
            if let self, self.userSessionsEpoch == epoch {
                if self.userSessions.count >= Self.userSessionsLimit { self.userSessions = [:] }
                switch outcome {
                case .session(let path): self.userSessions[uid] = .some(path)
                case .none: self.userSessions[uid] = .some(nil)
                case .unknown: break
                }
            }
            answer(outcome)
        }
        let seatSession: () -> Void = { [weak self] in
            self?.call(Self.managerPath, Self.managerInterface, "ListSessions", [], uid: uid) { r in
                guard case .reply(let m) = r else { return done(.unknown) }
                done(Self.seatSession(of: uid, in: m).map { .session($0) } ?? .none)
            }
        }
        call(Self.managerPath, Self.managerInterface, "GetUser", [.uint32(uid)], uid: uid) { [weak self] r in
            guard let self else { return }
            switch r {
            case .failed: return done(.unknown)
            case .error: return seatSession()
            case .reply(let m):
                guard let user = m.arguments().first?.stringValue else { return seatSession() }
                self.call(user, "org.freedesktop.DBus.Properties", "Get",
                          [.string(Self.userInterface), .string("Display")], uid: uid) { r in
                    switch r {
                    case .failed: return done(.unknown)
                    case .error: return seatSession()
                    case .reply(let m):
                        let display = m.arguments().first?.unwrapped.structFields?.dropFirst().first?.stringValue
                        if let display, display != "/" { return done(.session(display)) }
                        seatSession()
                    }
                }
            }
        }
    }

    /// The first session of `uid` on a seat in a `ListSessions` reply (`a(susso)`:
    /// id, uid, user, seat, path), by id.
    static func seatSession(of uid: UInt32, in reply: Message?) -> String? {
        let items = reply?.arguments().first?.arrayValue ?? []
        return items.compactMap { item -> (id: String, path: String)? in
            guard let f = item.structFields, f.count == 5, f[1].uint32Value == uid,
                  let id = f[0].stringValue, let seat = f[3].stringValue, !seat.isEmpty,
                  let path = f[4].stringValue else { return nil }
            return (id, path)
        }.min { $0.id < $1.id }?.path
    }

    /// Where logind placed `name`, or that it could not be asked.
    func resolved(_ name: String, _ outcome: Outcome) {
        // It left meanwhile; or it was placed already, from its cgroup (`resolvedCgroup`),
        // and this is logind's answer, asked all the same.
        guard placing[name] != nil, placed[name] == nil else { return }
        switch outcome {
        case .session(let path):
            keep(name, path)
            placed[name] = .some(path)
            follow(path, name)
            if followed[path]!.known {
                // A lingering session's first connection again: the core forgot it, and is
                // told anew (not logged: its state has not changed since it was).
                if followed[path]!.told == nil {
                    let f = followed[path]!
                    if let began = f.began { onBegan(path, began) }
                    let state = LoginSessionState(active: f.active, locked: f.locked)
                    followed[path]!.told = state
                    onState(path, state)
                }
                finish(name, in: path)
            } else {
                followed[path]!.waiting.insert(name)
                if !followed[path]!.reading { read(path) }
                // Its last read failed: the calls do not wait for the next one.
                if followed[path]!.failedReads > 0 { release(name) }
            }
        case .none:
            keep(name, nil)
            placed[name] = .some(nil)
            Log.debug("logind places \(name) in no login session: its grants do not pause")
            finish(name, in: nil)
        case .unknown:
            // Not recorded as "no session": its calls go on now, and it is asked again.
            release(name)
            let attempts = placing[name]!.attempts
            guard attempts <= Self.retries else {
                // Asked again at its next call.
                placing[name] = nil
                return
            }
            placing[name]!.retry = loop.schedule(after: Self.delay(afterFailures: attempts)) { [weak self] in
                guard let self, self.placing[name] != nil, self.owner != nil else { return }
                self.placing[name]!.retry = nil
                self.ask(name)
            }
        }
    }

    /// The placement of `name` is complete: the core is told (in a session),
    /// and the calls it held go on.
    func finish(_ name: String, in path: String?) {
        guard var p = placing.removeValue(forKey: name) else { return }
        cancelTimers(of: p)
        if let path { onPlaced(name, path) }
        if !p.released { p.released = true; p.bodies.forEach { $0() } }
    }

    func cancelTimers(of p: Placement) {
        if let t = p.deadline { loop.cancelTimer(t) }
        if let t = p.retry { loop.cancelTimer(t) }
    }

    /// The calls `name`'s placement holds go on now; the placement goes on.
    func release(_ name: String) {
        guard let p = placing[name], !p.released else { return }
        placing[name]!.released = true
        placing[name]!.bodies = []
        if let t = p.deadline { loop.cancelTimer(t) }
        placing[name]!.deadline = nil
        p.bodies.forEach { $0() }
    }
}
