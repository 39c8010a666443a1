import GeoCore
import GeoDBus
import GeoSystem

/// Follows logind (`org.freedesktop.login1`, on the daemon's own bus) for the
/// callers' login sessions: whether their user is at them (active and
/// unlocked) or not (locked, or another session in the foreground of the
/// seat). The daemon feeds the consent core what it learns
/// (`CoreEvent.loginSession`, `loginSessionState`).
///
/// A caller is placed once per connection, before its first call reaches the
/// core: `GetSessionByPID` with the connection's PID, else its uid's session
/// (apps started by the user's service manager are in no session of their
/// own): the user's `Display`, else its first session on a seat. Each login session placed is
/// followed while a connection is in it: logind's signals on its object
/// (`PropertiesChanged` of `Active` and `LockedHint`, `Lock`, `Unlock`),
/// through one match rule for all sessions set at start (a rule per session
/// would let a user with many logins exhaust the bus's rules per connection),
/// and its properties read once. Every call is asynchronous, and
/// nothing is polled: only logind's signals wake the daemon. Without logind
/// on the bus, or for a caller it places in no session, nothing is known and
/// the core behaves as it always did.
///
/// What a placement costs (docs/performance.md, "logind"): it is asked as soon
/// as the bus has said who the caller is (`prefetch`), so logind answers while
/// the identity helper reads /proc; what logind said of a uid's own session is
/// kept until logind's signals say a session or user came, went or changed
/// (`userSessions`); and a login session whose last connection left stays known
/// (`lingerLimit` of them) while the match rule keeps its state current, so
/// that the next app of the same login session asks logind one question, not four.
final class LogindWatch {
    static let busName = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let userInterface = "org.freedesktop.login1.User"
    /// Seconds a call to logind may take.
    static let timeout = 2.0
    /// Seconds a first call waits for its placement at most, however many
    /// calls to logind that takes: then it goes on as "unknown", and the
    /// placement, when it completes, applies from then on.
    static let placementBound = 4.0
    /// Seconds before a placement or a session read that failed is tried
    /// again, doubled at each try, `retries` times at most.
    static let retryDelay = 2.0
    static let retries = 4

    /// Seconds before the next try after `failures` failed ones in a row.
    static func delay(afterFailures failures: Int) -> Double { retryDelay * Double(1 << (failures - 1)) }
    /// logind's session objects, all under this path.
    static let sessionPathPrefix = "/org/freedesktop/login1/session"
    /// logind's user objects, all under this path.
    static let userPathPrefix = "/org/freedesktop/login1/user"
    /// Login sessions kept known after their last connection left. Why a bound:
    /// each is a few hundred bytes, and only logins (not callers) make them.
    static let lingerLimit = 64
    /// uids whose own session is kept (`userSessions`); past it, all are forgotten.
    static let userSessionsLimit = 1024

    private struct Followed {
        var connections: Set<String> = []
        var active = true
        var locked = false
        /// The properties have been read (else nothing is known yet).
        var known = false
        /// A read of the properties is under way.
        var reading = false
        /// Another read is wanted once that one is answered (reads are not sent in parallel).
        var readAgain = false
        /// The next read after a failed one.
        var retry: EventLoop.Token?
        /// Failed reads in a row.
        var failedReads = 0
        /// Connections placed here that the core has not been told of yet (the
        /// first read has not succeeded yet).
        var waiting: Set<String> = []
        /// The state last told (`onState`): only a change is told again.
        var told: LoginSessionState?
        /// When the session began (wall microseconds, from `TimestampMonotonic`:
        /// `began(_:wallNow:monotonicNow:)`), once told (`onBegan`).
        var began: UInt64?
        /// Whose calls the reads count against (OutgoingCalls), and whose lines its
        /// changes are in the log: the first connection's uid other than root's.
        var uid: UInt32
    }

    /// A connection's placement under way: the calls it holds back until it is
    /// placed, at most `placementBound`.
    private struct Placement {
        var uid: UInt32
        var pid: UInt32
        var bodies: [() -> Void] = []
        var deadline: EventLoop.Token?
        /// The calls went on already (the bound passed, or the placement failed):
        /// the placement still applies when it completes.
        var released = false
        var attempts = 0
        var retry: EventLoop.Token?
        /// The uid and cgroup of its process, once the identity helper has read it.
        var key: CgroupKey?
        /// `userSessionsEpoch` when it began: its answer is kept only if no signal came since.
        var epoch = 0
    }

    /// What logind's placement of a process depends on: logind finds its
    /// session from its cgroup (the session scope it is in), and where it is
    /// in none, the daemon takes its uid's own session.
    struct CgroupKey: Hashable {
        var uid: UInt32
        var cgroup: String
    }

    private let connection: Connection
    private let outgoing: OutgoingCalls
    private let loop: EventLoop
    /// logind's unique name while it is on the bus: only its signals count.
    private var owner: String?
    /// Connections placed: the object path of their login session, nil for none.
    private var placed: [String: String?] = [:]
    /// Placements under way, by connection.
    private var placing: [String: Placement] = [:]
    /// Login sessions followed, by object path (the core's id for them); with
    /// no connection, a lingering one (`lingering`).
    private var followed: [String: Followed] = [:]
    /// Followed sessions no connection is in now, oldest first: still known, and
    /// kept current by logind's signals, for the next connection placed there.
    private var lingering: [String] = []
    /// What logind said of a uid's own session (`userSession`: a path, or nil
    /// for none), kept while its signals say no session or user came, went or
    /// changed. `userSessionsEpoch` counts those signals, so that an answer
    /// asked for before one is not kept.
    private var userSessions: [UInt32: String?] = [:]
    private var userSessionsEpoch = 0
    /// Where placements ended (a session's path, or nil for none), by the
    /// uid and cgroup of the process placed: kept on the same terms as
    /// `userSessions`, so that the next connection from the same cgroup is placed
    /// without waiting for logind (who is asked all the same; its answer for
    /// that connection is not waited for).
    private var byCgroup: [CgroupKey: String?] = [:]
    /// Entries of `byCgroup`, at most; past it, all are forgotten. Why a bound:
    /// a user can make cgroups of its own (its service manager's subtree).
    static let byCgroupLimit = 1024
    /// The uids of `byCgroup`'s keys.
    private var keptUIDs: Set<UInt32> = []

    /// The connection was placed in the login session `id`.
    var onPlaced: (_ connection: String, _ id: String) -> Void = { _, _ in }
    /// What logind says of login session `id` now (nil: nothing known).
    var onState: (_ id: String, _ state: LoginSessionState?) -> Void = { _, _ in }
    /// When a login session began (logind's `TimestampMonotonic` on the wall clock), told once, before
    /// its state and the connections placed in it.
    var onBegan: (_ id: String, _ at: UInt64) -> Void = { _, _ in }

    /// Asks the bus once (start-up, blocking as the other start-up calls are)
    /// whether logind is there, and subscribes to its arrival and departure.
    init(connection: Connection, outgoing: OutgoingCalls, loop: EventLoop) throws {
        self.connection = connection
        self.outgoing = outgoing
        self.loop = loop
        let rules = [
            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus'," +
                "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.busName)'",
            "type='signal',sender='\(Self.busName)',path_namespace='\(Self.sessionPathPrefix)'",
            // Sessions and users that come, go or change: what `userSessions` keeps is stale then.
            "type='signal',sender='\(Self.busName)',path='\(Self.managerPath)',interface='\(Self.managerInterface)'",
            "type='signal',sender='\(Self.busName)',path_namespace='\(Self.userPathPrefix)'",
        ]
        var calls = try rules.map { try BusDriver.call("AddMatch", [.string($0)]) }
        // Asked after the rules, in the same round trip: no arrival between the two is missed.
        let ask = try BusDriver.call("GetNameOwner", [.string(Self.busName)])
        calls.append(ask)
        let replies = connection.callsBlocking(calls, timeout: Self.timeout)
        for case .failure(let e) in replies.dropLast() { throw e }
        owner = (try? replies.last?.get())?.arguments().first?.stringValue
    }

    /// logind is on the bus now.
    var isPresent: Bool { owner != nil }

    /// Some call waits for its placement (the daemon is not idle).
    var isPlacing: Bool { placing.values.contains { !$0.released } }

    /// Runs `body` once `caller`'s connection is placed: at once when it is,
    /// when logind is not on the bus, or when its placement went on without
    /// it; else at most `placementBound` later.
    func place(_ caller: Caller, _ body: @escaping () -> Void) {
        let name = caller.connection
        if placing[name] == nil { prefetch(name, uid: caller.uid, pid: caller.pid) }
        guard let p = placing[name], !p.released else { return body() }
        placing[name]!.bodies.append(body)
        if p.attempts == 0 { ask(name) }   // held back for its cgroup, which did not come
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
        if !keptUIDs.contains(uid) { ask(name) }
    }

    /// `name`'s identity could not be resolved: its calls fail, so a placement
    /// not asked of logind yet is not asked.
    func notResolved(_ name: String) {
        guard let p = placing[name], p.attempts == 0 else { return }
        cancelTimers(of: p)
        placing[name] = nil
    }

    private enum Outcome { case session(String), none, unknown }

    /// The identity helper has read the cgroup of `name`'s process (before its
    /// calls go on, and before logind's answer to its placement is read): where a
    /// process of the same uid in the same cgroup was placed since logind last
    /// said sessions changed, this one is placed the same way at once.
    func resolvedCgroup(_ name: String, uid: UInt32, _ cgroup: String?) {
        guard let p = placing[name], !p.released else { return }
        if let cgroup {
            let key = CgroupKey(uid: uid, cgroup: cgroup)
            placing[name]!.key = key
            if let kept = byCgroup[key] { return resolved(name, kept.map { .session($0) } ?? .none) }
        }
        if p.attempts == 0 { ask(name) }
    }

    /// Keeps where the placement of `name` ended, for its cgroup.
    private func keep(_ name: String, _ path: String?) {
        guard let p = placing[name], let key = p.key, p.epoch == userSessionsEpoch else { return }
        if byCgroup.count >= Self.byCgroupLimit { byCgroup = [:]; keptUIDs = [] }
        byCgroup[key] = .some(path)
        keptUIDs.insert(key.uid)
    }

    /// One try at placing `name`: `GetSessionByPID`, else the uid's session.
    private func ask(_ name: String) {
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
    private func userSession(_ uid: UInt32, _ answer: @escaping (Outcome) -> Void) {
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
    private static func seatSession(of uid: UInt32, in reply: Message?) -> String? {
        let items = reply?.arguments().first?.arrayValue ?? []
        return items.compactMap { item -> (id: String, path: String)? in
            guard let f = item.structFields, f.count == 5, f[1].uint32Value == uid,
                  let id = f[0].stringValue, let seat = f[3].stringValue, !seat.isEmpty,
                  let path = f[4].stringValue else { return nil }
            return (id, path)
        }.min { $0.id < $1.id }?.path
    }

    /// Where logind placed `name`, or that it could not be asked.
    private func resolved(_ name: String, _ outcome: Outcome) {
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
    private func finish(_ name: String, in path: String?) {
        guard var p = placing.removeValue(forKey: name) else { return }
        cancelTimers(of: p)
        if let path { onPlaced(name, path) }
        if !p.released { p.released = true; p.bodies.forEach { $0() } }
    }

    private func cancelTimers(of p: Placement) {
        if let t = p.deadline { loop.cancelTimer(t) }
        if let t = p.retry { loop.cancelTimer(t) }
    }

    /// The calls `name`'s placement holds go on now; the placement goes on.
    private func release(_ name: String) {
        guard let p = placing[name], !p.released else { return }
        placing[name]!.released = true
        placing[name]!.bodies = []
        if let t = p.deadline { loop.cancelTimer(t) }
        placing[name]!.deadline = nil
        p.bodies.forEach { $0() }
    }

    /// Adds `name` to the login session at `path`, following it from its first connection on.
    private func follow(_ path: String, _ name: String) {
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
    private func read(_ path: String) {
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

    private func update(_ path: String, _ props: [String: DBusValue]) {
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

    private func changed(_ path: String) {
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

    /// A connection left the bus: its login session is followed no longer
    /// once it was the last one there.
    func forget(_ name: String) {
        if let p = placing.removeValue(forKey: name) { cancelTimers(of: p) }
        guard let entry = placed.removeValue(forKey: name) else { return }
        if placed.isEmpty { placed = [:] }
        guard let path = entry, var f = followed[path] else { return }
        f.connections.remove(name)
        f.waiting.remove(name)
        guard f.connections.isEmpty else { followed[path] = f; return }
        onState(path, nil)
        guard f.known, owner != nil else {
            if let t = f.retry { loop.cancelTimer(t) }
            followed[path] = nil
            return
        }
        // Kept, lingering: the core has forgotten it (told again at the next placement there).
        f.told = nil
        followed[path] = f
        lingering.append(path)
        if lingering.count > Self.lingerLimit { dropLingering(lingering[0]) }
    }

    /// Forgets a lingering session.
    private func dropLingering(_ path: String) {
        lingering.removeAll { $0 == path }
        guard let f = followed[path], f.connections.isEmpty else { return }
        if let t = f.retry { loop.cancelTimer(t) }
        followed[path] = nil
    }

    /// A session or user came, went or changed: what was kept of the uids' own sessions is asked again.
    private func usersChanged() {
        userSessionsEpoch &+= 1
        userSessions = [:]
        byCgroup = [:]
        keptUIDs = []
    }

    /// logind's signals and its arrival or departure; true when the message was one of them.
    func handle(_ m: Message) -> Bool {
        guard m.type == .signal else { return false }
        if BusDriver.isSignal(m, "NameOwnerChanged") {
            let args = m.arguments()
            guard args.count == 3, args[0].stringValue == Self.busName, let new = args[2].stringValue else { return false }
            ownerChanged(new.isEmpty ? nil : new)
            return true
        }
        guard let owner, m.sender == owner, let path = m.path else { return false }
        if path == Self.managerPath, m.interface == Self.managerInterface {
            switch m.member {
            case "SessionNew", "SessionRemoved", "UserNew", "UserRemoved":
                usersChanged()
                if m.member == "SessionRemoved", let gone = m.arguments().dropFirst().first?.stringValue {
                    dropLingering(gone)
                }
                return true
            default:
                return false
            }
        }
        if path.hasPrefix(Self.userPathPrefix + "/") {
            usersChanged()
            return true
        }
        guard followed[path] != nil else { return false }
        // Not read yet, or its read failed: what logind says now is read whole.
        guard followed[path]!.known else {
            if m.interface == "org.freedesktop.DBus.Properties" || m.interface == Self.sessionInterface { read(path) }
            return true
        }
        switch (m.interface, m.member) {
        case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
            let args = m.arguments()
            guard args.first?.stringValue == Self.sessionInterface else { return true }
            update(path, args.dropFirst().first?.vardictValue ?? [:])
            let invalidated = args.dropFirst(2).first?.arrayValue?.compactMap(\.stringValue) ?? []
            if invalidated.contains("Active") || invalidated.contains("LockedHint") { read(path) }
        case (Self.sessionInterface, "Lock"):
            followed[path]?.locked = true
        case (Self.sessionInterface, "Unlock"):
            // A request to the screen locker, which the session's owner may
            // send too: it unlocks nothing by itself. What the locker says
            // (LockedHint) decides.
            read(path)
            return true
        default:
            return true
        }
        changed(path)
        return true
    }

    /// logind left (nothing is known any more) or came (back): read every followed session afresh.
    private func ownerChanged(_ new: String?) {
        owner = new
        usersChanged()
        // Lingering sessions are not followed across logind's restart: asked afresh when needed.
        for path in lingering { dropLingering(path) }
        // Whatever the bus counted for the one before is freed.
        outgoing.calleeLeft(Self.busName)
        Log.info(new != nil ? "logind is on the bus" : "logind left the bus: grants do not pause until it is back")
        if new == nil {
            // Nothing will place them now: the calls waiting go on.
            for name in placing.keys.sorted() {
                release(name)
                if let p = placing.removeValue(forKey: name) { cancelTimers(of: p) }
            }
        }
        for path in followed.keys.sorted() {
            if new == nil {
                followed[path]!.known = false
                followed[path]!.told = nil
                if let t = followed[path]!.retry { loop.cancelTimer(t); followed[path]!.retry = nil }
                onState(path, nil)
            } else {
                followed[path]!.failedReads = 0
                read(path)
            }
        }
    }

    /// What a call to logind came back with: its reply, its error (an
    /// answer: "no such session", say), or nothing (no answer in time, refused
    /// by the budget or the bus, logind gone).
    private enum CallResult {
        case reply(Message)
        case error(DBusError)
        case failed
    }

    /// Errors that are not logind's answer.
    private static let noAnswer: Set<String> = [
        DBusError.noReplyName, DBusError.limitsExceededName, DBusError.disconnectedName, DBusError.timeoutName,
        "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
        "org.freedesktop.DBus.Error.NoMemory",
    ]

    /// An asynchronous call to logind, counted against the logind budget of `uid`.
    private func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue], uid: UInt32,
                      _ done: @escaping (CallResult) -> Void) {
        guard let m = try? Message.methodCall(destination: Self.busName, path: path, interface: interface, member: member),
              (try? m.append(args)) != nil else { return done(.failed) }
        let refused = outgoing.call(m, purpose: .logind, uid: uid, callee: Self.busName, timeout: Self.timeout) { result in
            switch result {
            case .success(let reply): done(.reply(reply))
            case .failure(let e):
                Log.debug("\(member) on \(path): \(e)")
                done(Self.noAnswer.contains(e.name) ? .failed : .error(e))
            }
        }
        if let refused {
            Log.debug("\(member) on \(path) not sent: \(refused)")
            loop.later { done(.failed) }
        }
    }
}
