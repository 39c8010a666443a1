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
    /// Seconds a call to logind may take. A first call waits for two to five
    /// of them in a row (placement, then the session's first read).
    static let timeout = 2.0
    /// logind's session objects, all under this path.
    static let sessionPathPrefix = "/org/freedesktop/login1/session"

    private struct Followed {
        var connections: Set<String> = []
        var active = true
        var locked = false
        /// The properties have been read (else nothing is known yet).
        var known = false
        /// Placements waiting for the first read: the connection and its calls.
        var waiting: [(name: String, bodies: [() -> Void])] = []
        /// The state last told (`onState`): only a change is told again.
        var told: LoginSessionState?
    }

    private let connection: Connection
    /// logind's unique name while it is on the bus: only its signals count.
    private var owner: String?
    /// Connections placed: the object path of their login session, nil for none.
    private var placed: [String: String?] = [:]
    /// Placements under way, by connection: the calls waiting for them.
    private var placing: [String: [() -> Void]] = [:]
    /// Login sessions followed, by object path (the core's id for them).
    private var followed: [String: Followed] = [:]

    /// The connection was placed in the login session `id`.
    var onPlaced: (_ connection: String, _ id: String) -> Void = { _, _ in }
    /// What logind says of login session `id` now (nil: nothing known).
    var onState: (_ id: String, _ state: LoginSessionState?) -> Void = { _, _ in }

    /// Asks the bus once (start-up, blocking as the other start-up calls are)
    /// whether logind is there, and subscribes to its arrival and departure.
    init(connection: Connection) throws {
        self.connection = connection
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

    /// Some placement is under way (the daemon is not idle).
    var isPlacing: Bool { !placing.isEmpty }

    /// Runs `body` once `caller`'s connection is placed (at once when it is, or
    /// when logind is not on the bus).
    func place(_ caller: Caller, _ body: @escaping () -> Void) {
        let name = caller.connection
        guard owner != nil, placed[name] == nil else { return body() }
        if placing[name] != nil { placing[name]!.append(body); return }
        placing[name] = [body]
        call(Self.managerPath, Self.managerInterface, "GetSessionByPID", [.uint32(caller.pid)]) { [weak self] reply in
            guard let self else { return }
            if let path = reply?.arguments().first?.stringValue { return self.placed(name, path) }
            self.userSession(caller.uid) { [weak self] path in self?.placed(name, path) }
        }
    }

    /// The login session of `uid` for its processes outside any session: the
    /// user's `Display` (logind's choice of its graphical session), else its
    /// first session on a seat.
    private func userSession(_ uid: UInt32, _ done: @escaping (String?) -> Void) {
        let seatSession: () -> Void = { [weak self] in
            self?.call(Self.managerPath, Self.managerInterface, "ListSessions", []) { reply in
                done(Self.seatSession(of: uid, in: reply))
            }
        }
        call(Self.managerPath, Self.managerInterface, "GetUser", [.uint32(uid)]) { [weak self] reply in
            guard let self, let user = reply?.arguments().first?.stringValue else { return seatSession() }
            self.call(user, "org.freedesktop.DBus.Properties", "Get",
                      [.string(Self.userInterface), .string("Display")]) { reply in
                let display = reply?.arguments().first?.unwrapped.structFields?.dropFirst().first?.stringValue
                if let display, display != "/" { return done(display) }
                seatSession()
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

    private func placed(_ name: String, _ path: String?) {
        guard let bodies = placing.removeValue(forKey: name) else { return }   // it left meanwhile
        placed[name] = .some(path)
        guard let path else {
            Log.debug("logind places \(name) in no login session: its grants do not pause")
            return bodies.forEach { $0() }
        }
        follow(path, name)
        if followed[path]!.known {
            onPlaced(name, path)
            bodies.forEach { $0() }
        } else {
            followed[path]!.waiting.append((name, bodies))
        }
    }

    /// Adds `name` to the login session at `path`, following it from its first connection on.
    private func follow(_ path: String, _ name: String) {
        if followed[path] != nil { followed[path]!.connections.insert(name); return }
        followed[path] = Followed(connections: [name])
        // The match rule (set at start) is in place before logind is asked,
        // so no change between the two is missed.
        read(path)
    }

    /// Reads `Active` and `LockedHint` of the login session at `path`.
    private func read(_ path: String) {
        call(path, "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.sessionInterface)]) { [weak self] reply in
            guard let self, self.followed[path] != nil else { return }
            let waiting = self.followed[path]!.waiting
            self.followed[path]!.waiting = []
            // Only connections still on the bus go on (one may have left while
            // logind was asked; the core has forgotten it).
            let present = waiting.filter { self.placed[$0.name] != nil }
            guard let props = reply?.arguments().first?.vardictValue else {
                // Nothing known: no state is made up. The calls go on as if
                // logind had placed them nowhere, until a later read of the
                // session succeeds (at logind's next signal on it, or its
                // return); those connections are not placed again.
                Log.info("cannot read the login session \(path) from logind: its grants do not pause")
                return present.forEach { $0.bodies.forEach { $0() } }
            }
            self.update(path, props)
            self.followed[path]!.known = true
            self.changed(path)
            for p in present {
                self.onPlaced(p.name, path)
                p.bodies.forEach { $0() }
            }
        }
    }

    private func update(_ path: String, _ props: [String: DBusValue]) {
        if let v = props["Active"]?.unwrapped.boolValue { followed[path]?.active = v }
        if let v = props["LockedHint"]?.unwrapped.boolValue { followed[path]?.locked = v }
    }

    private func changed(_ path: String) {
        guard let f = followed[path], f.known else { return }
        let state = LoginSessionState(active: f.active, locked: f.locked)
        // IdleHint and the like come as PropertiesChanged too, as often as the
        // session's owner likes: only a change of state is logged and told.
        guard state != f.told else { return }
        followed[path]!.told = state
        Log.info("login session \(path): \(state.pause.map { "paused (\($0.rawValue))" } ?? "in use")")
        onState(path, state)
    }

    /// A connection left the bus: its login session is followed no longer
    /// once it was the last one there.
    func forget(_ name: String) {
        placing[name] = nil
        guard let entry = placed.removeValue(forKey: name) else { return }
        if placed.isEmpty { placed = [:] }
        guard let path = entry, var f = followed[path] else { return }
        f.connections.remove(name)
        guard f.connections.isEmpty else { followed[path] = f; return }
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
        Log.info(new != nil ? "logind is on the bus" : "logind left the bus: grants do not pause until it is back")
        for path in followed.keys.sorted() {
            if new == nil {
                followed[path]!.known = false
                followed[path]!.told = nil
                onState(path, nil)
            } else {
                read(path)
            }
        }
    }

    /// An asynchronous call to logind (or the bus); `done` gets the reply, nil on any error.
    private func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue],
                      to destination: String = LogindWatch.busName, _ done: @escaping (Message?) -> Void) {
        guard let m = try? Message.methodCall(destination: destination, path: path, interface: interface, member: member),
              (try? m.append(args)) != nil else { return done(nil) }
        connection.call(m, timeout: Self.timeout) { result in
            switch result {
            case .success(let reply): done(reply)
            case .failure(let e):
                Log.debug("\(member) on \(path): \(e)")
                done(nil)
            }
        }
    }
}
