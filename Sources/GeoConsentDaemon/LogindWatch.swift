import GeoCore
import GeoDBus

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
        /// When the session began (`Timestamp`, wall microseconds), once told (`onBegan`).
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
    /// Login sessions followed, by object path (the core's id for them).
    private var followed: [String: Followed] = [:]

    /// The connection was placed in the login session `id`.
    var onPlaced: (_ connection: String, _ id: String) -> Void = { _, _ in }
    /// What logind says of login session `id` now (nil: nothing known).
    var onState: (_ id: String, _ state: LoginSessionState?) -> Void = { _, _ in }
    /// When a login session began (logind's `Timestamp`), told once, before
    /// its state and the connections placed in it.
    var onBegan: (_ id: String, _ at: UInt64) -> Void = { _, _ in }

    /// Asks the bus once (start-up, blocking as the other start-up calls are)
    /// whether logind is there, and subscribes to its arrival and departure.
    init(connection: Connection, outgoing: OutgoingCalls, loop: EventLoop) throws {
        self.connection = connection
        self.outgoing = outgoing
        self.loop = loop
        try connection.addMatch("type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus'," +
                                "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.busName)'")
        try connection.addMatch("type='signal',sender='\(Self.busName)',path_namespace='\(Self.sessionPathPrefix)'")
        let m = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                       interface: "org.freedesktop.DBus", member: "GetNameOwner")
        try m.append([.string(Self.busName)])
        owner = (try? connection.callBlocking(m, timeout: Self.timeout))?.arguments().first?.stringValue
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
        if let p = placing[name] {
            if p.released { return body() }
            placing[name]!.bodies.append(body)
            return
        }
        guard owner != nil, placed[name] == nil else { return body() }
        placing[name] = Placement(uid: caller.uid, pid: caller.pid, bodies: [body])
        placing[name]!.deadline = loop.schedule(after: Self.placementBound) { [weak self] in
            guard let self, self.placing[name]?.released == false else { return }
            Log.byCaller(uid: caller.uid, .info, "logind has not placed \(name) in \(Int(Self.placementBound)) s: " +
                         "its calls go on as if it were in no login session until it is")
            self.release(name)
        }
        ask(name)
    }

    private enum Outcome { case session(String), none, unknown }

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
    private func userSession(_ uid: UInt32, _ done: @escaping (Outcome) -> Void) {
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
        guard placing[name] != nil else { return }   // it left meanwhile
        switch outcome {
        case .session(let path):
            placed[name] = .some(path)
            follow(path, name)
            if followed[path]!.known {
                finish(name, in: path)
            } else {
                followed[path]!.waiting.insert(name)
                if !followed[path]!.reading { read(path) }
                // Its last read failed: the calls do not wait for the next one.
                if followed[path]!.failedReads > 0 { release(name) }
            }
        case .none:
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
        if followed[path]?.began == nil, let t = props["Timestamp"]?.unwrapped.uint64Value, t > 0 {
            followed[path]?.began = t
            onBegan(path, t)
        }
    }

    private func changed(_ path: String) {
        guard let f = followed[path], f.known else { return }
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
        if let t = f.retry { loop.cancelTimer(t) }
        followed[path] = nil
        onState(path, nil)
    }

    /// logind's signals and its arrival or departure; true when the message was one of them.
    func handle(_ m: Message) -> Bool {
        guard m.type == .signal else { return false }
        if m.sender == "org.freedesktop.DBus", m.member == "NameOwnerChanged" {
            let args = m.arguments()
            guard args.count == 3, args[0].stringValue == Self.busName, let new = args[2].stringValue else { return false }
            ownerChanged(new.isEmpty ? nil : new)
            return true
        }
        guard let owner, m.sender == owner, let path = m.path, followed[path] != nil else { return false }
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
