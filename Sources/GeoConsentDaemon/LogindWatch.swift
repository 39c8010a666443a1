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
/// core: from its cgroup by logind's own rule (`LoginSessionOfCgroup`: a
/// session's scope is that session; apps started by the user's service
/// manager are in no session of their own), else by `GetSessionByPID` for a
/// cgroup systemd did not lay out; a caller in no session takes its uid's:
/// the user's `Display`, else its first session on a seat. Each login session placed is
/// followed while a connection is in it: logind's signals on its object
/// (`PropertiesChanged` of `Active` and `LockedHint`, `Lock`, `Unlock`),
/// through one match rule for all sessions set at start (a rule per session
/// would let a user with many logins exhaust the bus's rules per connection),
/// and its properties read once. Every call is asynchronous, and
/// nothing is polled: only logind's signals wake the daemon. Without logind
/// on the bus, or for a caller it places in no session, nothing is known and
/// the core behaves as it always did.
///
/// What a placement costs (docs/performance.md, "logind"): where logind must
/// be asked, it is asked as soon as the bus has said who the caller is
/// (`prefetch`), so logind answers while the identity helper reads /proc; what logind said of a uid's own session is
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

    struct Followed {
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
    struct Placement {
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
        /// Placed from its cgroup by logind's own rule (`LoginSessionOfCgroup`):
        /// logind is not asked where the process is.
        var fromCgroup = false
    }

    /// What logind's placement of a process depends on: logind finds its
    /// session from its cgroup (the session scope it is in), and where it is
    /// in none, the daemon takes its uid's own session.
    struct CgroupKey: Hashable {
        var uid: UInt32
        var cgroup: String
    }

    let connection: Connection
    let outgoing: OutgoingCalls
    let loop: EventLoop
    /// logind's unique name while it is on the bus: only its signals count.
    var owner: String?
    /// Connections placed: the object path of their login session, nil for none.
    var placed: [String: String?] = [:]
    /// Placements under way, by connection.
    var placing: [String: Placement] = [:]
    /// Login sessions followed, by object path (the core's id for them); with
    /// no connection, a lingering one (`lingering`).
    var followed: [String: Followed] = [:]
    /// Followed sessions no connection is in now, oldest first: still known, and
    /// kept current by logind's signals, for the next connection placed there.
    var lingering: [String] = []
    /// What logind said of a uid's own session (`userSession`: a path, or nil
    /// for none), kept while its signals say no session or user came, went or
    /// changed. `userSessionsEpoch` counts those signals, so that an answer
    /// asked for before one is not kept.
    var userSessions: [UInt32: String?] = [:]
    var userSessionsEpoch = 0
    /// Where placements ended (a session's path, or nil for none), by the
    /// uid and cgroup of the process placed: kept on the same terms as
    /// `userSessions`, so that the next connection from the same cgroup is placed
    /// without waiting for logind (who is asked all the same; its answer for
    /// that connection is not waited for).
    var byCgroup: [CgroupKey: String?] = [:]
    /// Entries of `byCgroup`, at most; past it, all are forgotten. Why a bound:
    /// a user can make cgroups of its own (its service manager's subtree).
    static let byCgroupLimit = 1024
    /// The uids of `byCgroup`'s keys.
    var keptUIDs: Set<UInt32> = []
    /// Uids one of whose processes was placed from its cgroup by logind's rule
    /// (`LoginSessionOfCgroup`): their cgroups are laid out as systemd lays them
    /// out, so logind is not asked ahead of the identity helper's read for the
    /// next ones. Bounded as `byCgroup` (forgotten with it).
    var cgroupUIDs: Set<UInt32> = []

    /// Where what logind says goes: the consent core (an init argument: the wire cannot be missing).
    private let feed: (CoreEvent) -> Void

    /// The connection was placed in the login session `id`.
    func onPlaced(_ connection: String, _ id: String) { feed(.loginSession(connection: connection, id: id)) }
    /// What logind says of login session `id` now (nil: nothing known).
    func onState(_ id: String, _ state: LoginSessionState?) { feed(.loginSessionState(id: id, state)) }
    /// When a login session began (logind's `TimestampMonotonic` on the wall clock), told once, before
    /// its state and the connections placed in it.
    func onBegan(_ id: String, _ at: UInt64) { feed(.loginSessionBegan(id: id, at: at)) }

    /// Asks the bus once (start-up, blocking as the other start-up calls are)
    /// whether logind is there, and subscribes to its arrival and departure.
    init(connection: Connection, outgoing: OutgoingCalls, loop: EventLoop, feed: @escaping (CoreEvent) -> Void) throws {
        self.connection = connection
        self.outgoing = outgoing
        self.loop = loop
        self.feed = feed
        let rules = [
            BusDriver.matchRule("NameOwnerChanged", "arg0='\(Self.busName)'"),
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

    enum Outcome { case session(String), none, unknown }

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
    func ownerChanged(_ new: String?) {
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
    enum CallResult {
        case reply(Message)
        case error(DBusError)
        case failed
    }

    /// Errors that are not logind's answer.
    static let noAnswer: Set<String> = [
        DBusError.noReplyName, DBusError.limitsExceededName, DBusError.disconnectedName, DBusError.timeoutName,
        "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
        "org.freedesktop.DBus.Error.NoMemory",
    ]

    /// An asynchronous call to logind, counted against the logind budget of `uid`.
    func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue], uid: UInt32,
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
