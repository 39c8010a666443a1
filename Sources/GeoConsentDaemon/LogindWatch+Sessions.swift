import GeoCore
import GeoDBus
import GeoSystem

/// The login sessions followed (LogindWatch.swift holds the state): each read
/// once, kept up to date from logind's signals (locked, active, when it
/// began), and forgotten when no connection is in it any more.
extension LogindWatch {
    /// Adds `name` to the login session at `path`, following it from its first connection on.
    func follow(_ path: String, _ name: String) {
        let uid = placing[name]?.uid ?? 0
        if followed[path] != nil {
            if followed[path]!.connections.isEmpty { lingering.removeAll { $0 == path } }
            followed[path]!.connections.insert(name)
            if followed[path]!.uid == 0 { followed[path]!.uid = uid }
            return
        }
        followed[path] = Followed(connections: [name], uid: uid)
        // The match rule (set at start) is in place before logind is asked,
        // so no change between the two is missed.
    }

    /// Reads `Active` and `LockedHint` of the login session at `path`: one
    /// read at a time (a wish for another while one is under way is kept and
    /// sent after it), so that no signal flood makes parallel reads.
    func read(_ path: String) {
        guard let f = followed[path] else { return }
        if let t = f.retry { loop.cancelTimer(t); followed[path]!.retry = nil }
        if f.reading { followed[path]!.readAgain = true; return }
        followed[path]!.reading = true
        call(path, "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.sessionInterface)], uid: f.uid) {
            [weak self] r in
            guard let self, self.followed[path] != nil else { return }
            self.followed[path]!.reading = false
            let again = self.followed[path]!.readAgain
            self.followed[path]!.readAgain = false
            guard case .reply(let m) = r, let props = m.arguments().first?.vardictValue else {
                // Nothing known: no state is made up. The calls waiting go on as
                // if logind had placed them nowhere; the session is read again
                // (at logind's next signal on it, its return, or a retry).
                let failed = self.followed[path]!.failedReads + 1
                self.followed[path]!.failedReads = failed
                if failed == 1 {
                    Log.info("cannot read the login session \(path) from logind: its grants do not pause until it can")
                }
                self.followed[path]!.waiting.forEach(self.release)
                if again { return self.read(path) }
                guard failed <= Self.retries, self.owner != nil else { return }
                self.followed[path]!.retry = self.loop.schedule(after: Self.delay(afterFailures: failed)) {
                    [weak self] in
                    guard let self, self.followed[path] != nil else { return }
                    self.followed[path]!.retry = nil
                    if !self.followed[path]!.known { self.read(path) }
                }
                return
            }
            self.followed[path]!.failedReads = 0
            self.update(path, props)
            self.followed[path]!.known = true
            self.changed(path)
            let waiting = self.followed[path]!.waiting
            self.followed[path]!.waiting = []
            // Only connections still placed here go on (one may have left while
            // logind was asked; the core has forgotten it). One whose placement
            // entry is gone already (logind left and came back meanwhile) is
            // told all the same.
            for name in waiting.sorted() where self.placed[name]?.flatMap({ $0 }) == path {
                if self.placing[name] != nil { self.finish(name, in: path) } else { self.onPlaced(name, path) }
            }
            if again { self.read(path) }
        }
    }

    func update(_ path: String, _ props: [String: DBusValue]) {
        if let v = props["Active"]?.unwrapped.boolValue { followed[path]?.active = v }
        if let v = props["LockedHint"]?.unwrapped.boolValue { followed[path]?.locked = v }
        if followed[path]?.began == nil, let t = Self.began(props, wallNow: GeoSystem.now(),
                                                           monotonicNow: EventLoop.monotonicNanos() / 1000) {
            followed[path]?.began = t
            onBegan(path, t)
        }
    }

    /// When a login session began, on the wall clock of now (microseconds),
    /// from logind's `TimestampMonotonic` where it gave one, else its
    /// `Timestamp`. Why the monotonic one first: `Timestamp` is the wall clock
    /// at login, and a machine without a real-time clock steps its clock (NTP)
    /// after the login screen, by hours or years; a session that began a
    /// moment ago would then look old, and its first tap would get `NoAgent`
    /// at once instead of waiting for the agent (`agent-wait`). Its age on the
    /// monotonic clock does not move with the wall clock. The conversion is
    /// made once, when first read: a step after that still counts. A monotonic
    /// time to come (logind in another time namespace) falls back on
    /// `Timestamp`. Nil when logind gave neither.
    static func began(_ props: [String: DBusValue], wallNow: UInt64, monotonicNow: UInt64) -> UInt64? {
        if let m = props["TimestampMonotonic"]?.unwrapped.uint64Value, m > 0, m <= monotonicNow,
           monotonicNow - m <= wallNow {
            return wallNow - (monotonicNow - m)
        }
        guard let t = props["Timestamp"]?.unwrapped.uint64Value, t > 0 else { return nil }
        return t
    }

    func changed(_ path: String) {
        // A lingering session's state is kept, and told when a connection is placed there again.
        guard let f = followed[path], f.known, !f.connections.isEmpty else { return }
        let state = LoginSessionState(active: f.active, locked: f.locked)
        // IdleHint and the like come as PropertiesChanged too, as often as the
        // session's owner likes: only a change of state is logged and told.
        guard state != f.told else { return }
        followed[path]!.told = state
        // Its user can lock and unlock it as often as it likes: a caller's line.
        Log.byCaller(uid: f.uid, .info, "login session \(path): \(state.pause.map { "paused (\($0.rawValue))" } ?? "in use")")
        onState(path, state)
    }

    /// Forgets a lingering session.
    func dropLingering(_ path: String) {
        lingering.removeAll { $0 == path }
        guard let f = followed[path], f.connections.isEmpty else { return }
        if let t = f.retry { loop.cancelTimer(t) }
        followed[path] = nil
    }

    /// A session or user came, went or changed: what was kept of the uids' own sessions is asked again.
    func usersChanged() {
        userSessionsEpoch &+= 1
        userSessions = [:]
        byCgroup = [:]
        keptUIDs = []
    }
}
