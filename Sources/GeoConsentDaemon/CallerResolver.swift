import Glibc
import GeoCore
import GeoDBus
import GeoSystem

/// Finds out who a bus peer is: uid, pid and AppArmor label from the bus
/// (`GetConnectionCredentials`), the app-id and what it rests on (`IdentityKind`)
/// from the label and /proc (read here, or by the identity helper that holds
/// CAP_SYS_PTRACE: `IdentitySource`, GeoSystem's IdentitySeparation.swift).
/// Identity never comes from what a client says.
/// Answers are cached per unique name (never reused on a bus) until it leaves,
/// together with the start time of the process they were read from. Later calls
/// check that this PID is still that process of that uid, and once it is not
/// (the connection outlived the process that made it, and its PID may be
/// another program's now) the connection is refused for good: it is never
/// resolved afresh, so it cannot pick up whoever gets its PID next.
///
/// A pidfd is opened on the PID before it is resolved, and kept while the
/// connection's first call is handled: if the process has not exited once the
/// resolution is over, that descriptor is proven to be the process resolved
/// (`ProcessExitDescriptor.isRunning`), and the process watch takes it over
/// (`takeExitDescriptor`) with no second question to the identity helper.
final class CallerResolver {
    /// A connection resolved once. A class: `known` then holds a reference per
    /// bucket, not the ~170 bytes of this, and a dictionary has up to twice as
    /// many buckets as entries (at 1,000 connections 2,048: 377 KB as a struct,
    /// 49 KB plus 192 bytes per connection as a class; docs/performance.md).
    private final class Known {
        let caller: Caller
        /// The start time of the process first seen for the connection.
        let startTime: UInt64
        /// When that was last confirmed (monotonic nanoseconds).
        var checkedAt: UInt64
        /// Set once the check failed: every later call gets this.
        var refusal: DBusError?
        /// A pidfd on the process resolved, opened before it was resolved and
        /// found running after: proven to be that process. Held only while the
        /// connection's first call is handled (see `dropExitDescriptor`).
        var exitDescriptor: Int32?

        init(caller: Caller, startTime: UInt64, checkedAt: UInt64, exitDescriptor: Int32?) {
            self.caller = caller
            self.startTime = startTime
            self.checkedAt = checkedAt
            self.exitDescriptor = exitDescriptor
        }
    }

    /// The most pidfds held at once for first calls being handled. Why a bound:
    /// a connection's first call holds one from its credentials to its end, which
    /// may take a logind round trip (`LogindWatch.place`); a burst of new
    /// connections must not take the descriptors the process watch, state writes
    /// and gpsd need (this is part of `SessionProcessWatch.reserved`). Beyond it a
    /// connection is resolved without one, and its process watch, if any, checks
    /// its pidfd through the identity source as before (`isFirstProcess`).
    static let heldDescriptorLimit = 32

    /// How long a successful check stands. Why not check every call: a check
    /// reads `/proc/PID/stat` (several system calls), which pipelined calls of one
    /// connection would pay each time (docs/performance.md, taps pipelined);
    /// and a PID is handed to a new process only after the kernel has cycled
    /// through the whole PID space (`pid_max` allocations), which takes far
    /// longer. Within the interval the connection keeps the identity of its own
    /// first process, never another's.
    static let recheckInterval: UInt64 = 100_000_000

    private let connection: Connection
    private let identity: IdentitySource
    private var known: [String: Known] = [:]
    /// App-ids and executable paths, one copy each: thousands of sessions of one
    /// app then share two strings instead of holding two each.
    private var interned: Set<String> = []
    private var waiting: [String: [(Result<Caller, DBusError>) -> Void]] = [:]
    /// Descriptors in `known` now.
    private var heldDescriptors = 0
    /// `pidfd_open` cannot work here (ENOSYS, EPERM): not tried again. The
    /// process watch says so in the log when it finds the same.
    private var pidfdUnavailable = false

    /// Who places a connection in its login session (LogindWatch): told what
    /// resolving learns, as soon as it does (an init argument).
    private let placement: CallerPlacement

    init(connection: Connection, identity: IdentitySource, placement: CallerPlacement) {
        self.connection = connection
        self.identity = identity
        self.placement = placement
    }

    /// Identities come from the identity helper, not from /proc read here.
    var usesHelper: Bool { identity is IdentityHelperClient }

    /// Some caller's credentials are still being asked of the bus.
    var isResolving: Bool { !waiting.isEmpty }

    /// Calls `done` with the caller, at once when known, else after a bus round trip.
    func resolve(_ name: String, _ done: @escaping (Result<Caller, DBusError>) -> Void) {
        if let k = known[name] {
            if let refusal = k.refusal { return done(.failure(refusal)) }
            let now = EventLoop.monotonicNanos()
            if now &- k.checkedAt < CallerResolver.recheckInterval { return done(.success(k.caller)) }
            if let refusal = check(name, k, at: now) { return done(.failure(refusal)) }
            return done(.success(k.caller))
        }
        if waiting[name] != nil {
            waiting[name]!.append(done)
            return
        }
        waiting[name] = [done]
        do {
            let m = try BusDriver.call("GetConnectionCredentials", [.string(name)])
            connection.call(m, timeout: 25) { [weak self] result in self?.finish(name, result) }
        } catch {
            finish(name, .failure(DBusError.failed("\(error)")))
        }
    }

    /// Checks that the PID of `k` is still the process first seen for it; once
    /// it is not, `k` is refused for good. Returns the refusal, if any.
    private func check(_ name: String, _ k: Known, at now: UInt64) -> DBusError? {
        switch identity.verify(pid: k.caller.pid, uid: k.caller.uid, startTime: k.startTime) {
        case .success:
            k.checkedAt = now
            return nil
        case .failure(let e):
            Log.byCaller(uid: k.caller.uid, .info, "refusing \(name) (pid \(k.caller.pid), uid \(k.caller.uid)) from now on: " +
                         "not the process first seen for it: \(e); app \(Log.field(k.caller.appID))")
            k.refusal = CallerResolver.denied(e)
            return k.refusal
        }
    }

    /// Whether the PID of `name` is, right now, the process first seen for it
    /// (checked as for a call, whatever the interval): after a descriptor was
    /// opened on that PID, true proves the descriptor is that process's.
    func isFirstProcess(_ name: String) -> Bool {
        guard let k = known[name], k.refusal == nil else { return false }
        return check(name, k, at: EventLoop.monotonicNanos()) == nil
    }

    /// The proven descriptor on the process of `name` (see `Known.exitDescriptor`),
    /// handed over: the caller closes it. Nil when there is none (not opened,
    /// the process had exited, the bound was reached, or it was handed or dropped
    /// already): then a descriptor opened now needs `isFirstProcess`.
    func takeExitDescriptor(_ name: String) -> Int32? {
        guard let k = known[name], let fd = k.exitDescriptor else { return nil }
        k.exitDescriptor = nil
        heldDescriptors -= 1
        return fd
    }

    /// Whether the proven descriptor of `name` is still held (`takeExitDescriptor` would give one).
    func holdsExitDescriptor(_ name: String) -> Bool { known[name]?.exitDescriptor != nil }

    /// Closes the descriptor of `name` if nobody took it: called once a call of
    /// the connection has been handled. Why not keep it for a later session
    /// call: a connection whose first call starts no session (a status read)
    /// may stay for hours, and a descriptor each would count against the
    /// process watch's bound; such a connection's later session call opens its
    /// pidfd then and checks it through the identity source (one more helper
    /// round trip, as before). A GeoClue `GetClient` is the exception: the
    /// process watch takes the descriptor at once (`Daemon.watchProcessNow`),
    /// for the `Start` to come, and lets it go with the connection's last
    /// client object (client objects per uid are bounded by `sessions-per-user`).
    func dropExitDescriptor(_ name: String) {
        if let fd = takeExitDescriptor(name) { close(fd) }
    }

    /// A pidfd on `pid`, opened before `pid` is resolved; nil when none may be
    /// held or none opens (then the process watch falls back on `isFirstProcess`).
    private func openBeforeResolving(_ pid: UInt32) -> Int32? {
        guard !pidfdUnavailable, heldDescriptors < CallerResolver.heldDescriptorLimit else { return nil }
        switch ProcessExitDescriptor.open(pid: pid) {
        case .success(let fd): return fd
        case .failure(.unsupported): pidfdUnavailable = true; return nil
        case .failure: return nil   // gone already, or EMFILE and the like
        }
    }

    private func finish(_ name: String, _ reply: Result<Message, DBusError>) {
        let result: Result<(caller: Caller, startTime: UInt64, exitDescriptor: Int32?), DBusError>
        switch reply {
        case .failure(let e):
            Log.debug("credentials of \(name): \(e)")
            result = .failure(.accessDenied("Could not identify the caller"))
        case .success(let m):
            result = decode(name, m)
        }
        if case .success(let k) = result {
            known[name] = Known(caller: k.caller, startTime: k.startTime, checkedAt: EventLoop.monotonicNanos(),
                                exitDescriptor: k.exitDescriptor)
            if k.exitDescriptor != nil { heldDescriptors += 1 }
        }
        for done in waiting.removeValue(forKey: name) ?? [] { done(result.map { $0.caller }) }
    }

    private func decode(_ name: String, _ m: Message)
        -> Result<(caller: Caller, startTime: UInt64, exitDescriptor: Int32?), DBusError> {
        guard let creds = m.arguments().first?.vardictValue,
              let uid = creds["UnixUserID"]?.uint32Value,
              let pid = creds["ProcessID"]?.uint32Value else {
            return .failure(.accessDenied("The bus gave no uid and pid for the caller"))
        }
        // The AppArmor label of the connection (bytes, then a NUL), when the
        // kernel has one: the only proof of a Snap (AppIdentityResolver rule 1).
        var label: [UInt8]? = nil
        if let items = creds["LinuxSecurityLabel"]?.arrayValue, items.count <= 4096 {
            label = items.compactMap { if case .byte(let b) = $0 { return b } else { return nil } }
        }
        // Opened before the resolution, checked after it: the proof in
        // `ProcessExitDescriptor.isRunning` needs the descriptor to exist
        // before the first read of /proc/PID.
        placement.prefetch(name, uid: uid, pid: pid)
        var descriptor = openBeforeResolving(pid)
        let resolved = identity.resolve(pid: pid, uid: uid, firstStart: nil, securityLabel: label)
        if let fd = descriptor, case .success = resolved, ProcessExitDescriptor.isRunning(fd) {
            // Proven: the process of `fd` is the one whose start time was read.
        } else if let fd = descriptor {
            // Not proven (it has exited, or was not resolved): not kept. A session
            // call then opens its own pidfd and checks it as before.
            close(fd)
            descriptor = nil
        }
        switch resolved {
        case .success(let app):
            placement.resolvedCgroup(name, uid: uid, app.cgroup)
            var caller = Caller(session: .connection(name), uid: uid, pid: pid, appID: intern(app.appID),
                                identity: app.identity, executable: intern(app.executable))
            caller.script = app.script.map(intern) ?? ""
            caller.installed = app.installed
            Log.debug("\(name) (pid \(pid), uid \(uid)) is \(app.identity.rawValue) \(Log.field(app.appID))")
            if let why = app.notVerified {
                Log.byCaller(uid: uid, .info, "\(name) (pid \(pid), uid \(uid)) claims a Flatpak, not verified: \(why); " +
                             "treated as sandboxed, and config naming it does not apply: app \(Log.field(app.appID))")
            }
            return .success((caller, app.startTime, descriptor))
        case .failure(let e):
            placement.notResolved(name)
            Log.byCaller(uid: uid, .info, "could not resolve the app of \(name) (pid \(pid), uid \(uid)): \(e)")
            return .failure(CallerResolver.denied(e))
        }
    }

    /// The `AccessDenied` a refused caller gets: what went wrong, in a line
    /// (`IdentityError` texts are display-safe; cut to keep the reply small).
    static func denied(_ e: IdentityError) -> DBusError {
        .accessDenied("The calling process could not be identified: " + String(e.description.prefix(512)))
    }

    private func intern(_ s: String) -> String {
        if let i = interned.firstIndex(of: s) { return interned[i] }
        // Bounded: distinct executables on a machine are few; start over if not.
        if interned.count >= 4096 { interned.removeAll() }
        interned.insert(s)
        return s
    }

    /// Forgets a peer that left the bus.
    func forget(_ name: String) {
        dropExitDescriptor(name)
        known[name] = nil
        // Dictionaries keep their largest capacity: once nobody is known, start afresh.
        if known.isEmpty { known = [:] }
    }
}

/// What resolving a caller tells the one who places it in its login session.
protocol CallerPlacement: AnyObject {
    /// The bus has said who a new connection is (uid, pid), before its app is
    /// resolved: placing it starts then, so that logind answers while /proc is read.
    func prefetch(_ name: String, uid: UInt32, pid: UInt32)
    /// A new connection's app is resolved; `cgroup` is its process's, when read
    /// (`ResolvedApp.cgroup`): its placement may be known already. Told before its calls go on.
    func resolvedCgroup(_ name: String, uid: UInt32, _ cgroup: String?)
    /// A new connection's app could not be resolved: its calls fail.
    func notResolved(_ name: String)
}

extension LogindWatch: CallerPlacement {}
