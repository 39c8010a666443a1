import Glibc
import GeoDBus
import GeoSystem

/// Watches, for each connection with a session (or a GeoClue client object,
/// from its `GetClient`: `Daemon.watchProcessNow`), the process its first call
/// came from (a pidfd polled by the event loop), and reports when that
/// process exits while the connection is still on the bus: another process (a
/// child that inherited the socket) holds it now. The daemon then feeds the
/// core `processExited`.
///
/// Bounded: one descriptor per connection with a session (its own, or a
/// client object's) or a client object, opened at its first session call (or
/// `GetClient`) and closed when its process exits, its last session ends, its
/// last client object goes with no session, or its name leaves the bus; at most
/// `perUIDLimit` for one uid other than root, and at most `limit` at once,
/// below the daemon's descriptor limit (`LimitNOFILE=` of the unit), so that
/// many sessions of many uids never leave the daemon without descriptors for
/// its state writes, gpsd or `/proc`. A connection beyond either is watched
/// differently, with no descriptor: its process is checked (start time) once
/// a second while it has a session (`pollInterval`), so that no set of users
/// can switch off process watching for another. Idle costs nothing: the descriptors
/// sit in one epoll set, which the loop polls as one descriptor, and only an
/// exit wakes the daemon. One set, not a descriptor each in the loop's `poll`:
/// the loop sorts and polls all its descriptors at every turn, and a fan-out
/// to N subscribers takes more turns the larger N (its messages drain over
/// many wake-ups once the bus lags), so N pidfds there made a fix cost more
/// than N times one (docs/performance.md, "How cost grows"). Where
/// `pidfd_open` is missing (Linux before 5.3) or refused (a seccomp filter),
/// this is said once in the log and nothing is watched. The temporary grants
/// of a connection not watched end only when its name leaves the bus, as before.
final class SessionProcessWatch {
    private let loop: EventLoop
    private let connection: Connection
    /// Connections seen (unique names), with their descriptor while watched
    /// (nil: its process is gone already, or none could be opened).
    private var watched: [String: Int32?] = [:]
    /// The watched descriptors, polled by the loop as one, and its loop token;
    /// open while a descriptor is watched.
    private var exitSet: (set: ProcessExitSet, token: EventLoop.Token)?
    /// The connection and process of each descriptor in the set.
    private var ownerOf: [Int32: (name: String, pid: UInt32)] = [:]
    /// `pidfd_open` cannot work here: stop trying (logged once).
    private var unavailable = false
    /// The most descriptors open at once.
    let limit: Int
    private var descriptors = 0
    /// A connection went unwatched for want of a descriptor (logged once).
    private var warnedUnwatched = false
    /// Told of a connection whose process exited while the connection lives on (an init argument).
    private let onProcessExited: (String) -> Void
    /// Descriptors one uid other than root may have at once. Every watched
    /// connection has a session or a GeoClue client object, and a uid has at
    /// most `sessions-per-user` of each (64 by default): this bounds a uid
    /// with both, or whose limit the configuration raised.
    static let perUIDLimit = 64
    private var countOf: [UInt32: Int] = [:]
    private var uidOf: [String: UInt32] = [:]
    /// Connections watched without a descriptor: their process and its check
    /// (still the process first seen for the connection), every `pollInterval`.
    private var polled: [String: (pid: UInt32, isFirstProcess: () -> Bool)] = [:]
    private var pollTimer: EventLoop.Token?
    static let pollInterval = 1.0

    /// The descriptors the daemon keeps for everything else (bus, gpsd, the
    /// identity helper, state writes, `/proc` handles, libdbus, the epoll set
    /// the watched ones are in): about ten; and
    /// the pidfds `CallerResolver` holds while first calls are handled, at most
    /// `CallerResolver.heldDescriptorLimit`.
    static let reserved = 64

    /// `limit`: at most so many descriptors at once; by default the soft
    /// descriptor limit of the process less `reserved`.
    init(loop: EventLoop, connection: Connection, limit: Int? = nil, onProcessExited: @escaping (String) -> Void) {
        self.loop = loop
        self.connection = connection
        self.onProcessExited = onProcessExited
        self.limit = limit ?? SessionProcessWatch.defaultLimit()
    }

    private static func defaultLimit() -> Int {
        var r = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &r) == 0 else { return 0 }
        // RLIM_INFINITY is the largest value: the cap covers it.
        return max(0, Int(min(UInt64(r.rlim_cur), 1 << 20)) - reserved)
    }

    /// Starts watching the process (`pid`) of the connection `name` unless it
    /// was seen already. `provenDescriptor` hands over a pidfd already proven to
    /// be the process first seen for the connection (`CallerResolver.takeExitDescriptor`:
    /// opened before that process was resolved and found running after), which
    /// this then owns; asked only once the watch is to start. Without one, a
    /// pidfd is opened here and `isFirstProcess` says whether the PID still is
    /// the process first seen for the connection (start time,
    /// `CallerResolver.isFirstProcess`); asked after the descriptor is open, a
    /// yes proves the descriptor is that process's, whatever happened to the
    /// PID before.
    func watch(connection name: String, uid: UInt32, pid: UInt32, provenDescriptor: () -> Int32? = { nil },
               isFirstProcess: @escaping () -> Bool) {
        guard !unavailable, watched[name] == nil else { return }
        uidOf[name] = uid
        let overUID = uid != 0 && countOf[uid, default: 0] >= Self.perUIDLimit
        guard descriptors < limit, !overUID else {
            if let fd = provenDescriptor() { close(fd) }
            watched[name] = .some(nil)
            return poll(name, pid: pid, isFirstProcess, overUID
                        ? "uid \(uid) has \(Self.perUIDLimit) processes watched already, its limit"
                        : "\(limit) connections are watched already, the most the daemon's descriptor limit leaves room for")
        }
        // A process that exits after its descriptor was proven makes it readable:
        // the loop reports that at once, as it would an exit after the watch began.
        if let fd = provenDescriptor() { return start(name, pid: pid, fd, isFirstProcess) }
        switch ProcessExitDescriptor.open(pid: pid) {
        case .success(let fd):
            guard isFirstProcess() else {
                close(fd)
                watched[name] = .some(nil)
                return exited(name, pid: pid)
            }
            start(name, pid: pid, fd, isFirstProcess)
        case .failure(.exited):
            watched[name] = .some(nil)
            exited(name, pid: pid)
        case .failure(.unsupported(let e)):
            unavailable = true
            Log.warning("\(ProcessExitDescriptor.Failure.unsupported(errno: e)): a temporary grant ends only " +
                        "when the session's connection leaves the bus, not when the process that asked for it exits")
        case .failure(let e):
            // EMFILE and the like: not watched (its name leaving still ends its sessions).
            watched[name] = .some(nil)
            poll(name, pid: pid, isFirstProcess, "\(e)")
        }
    }

    private func start(_ name: String, pid: UInt32, _ fd: Int32, _ isFirstProcess: @escaping () -> Bool) {
        let set = exitSet?.set ?? {
            let set = ProcessExitSet()
            let token = loop.watch(fd: set.descriptor, events: .readable) { [weak self] _ in self?.exitsReady() }
            exitSet = (set, token)
            return set
        }()
        guard set.add(fd) else {
            // As when no descriptor could be opened: checked once a second instead.
            let e = errno
            close(fd)
            watched[name] = .some(nil)
            return poll(name, pid: pid, isFirstProcess, "epoll: \(String(cString: strerror(e)))")
        }
        ownerOf[fd] = (name, pid)
        watched[name] = fd
        descriptors += 1
        if let uid = uidOf[name] { countOf[uid, default: 0] += 1 }
    }

    /// The processes of some watched descriptors have exited.
    private func exitsReady() {
        for fd in exitSet?.set.ready() ?? [] {
            // (One that is no connection's would stay ready: out of the set with it.)
            if let owner = ownerOf[fd] { readable(owner.name, pid: owner.pid) } else { exitSet?.set.remove(fd) }
        }
    }

    /// Watches `name` with no descriptor: its process is checked every `pollInterval`.
    private func poll(_ name: String, pid: UInt32, _ isFirstProcess: @escaping () -> Bool, _ why: String) {
        polled[name] = (pid, isFirstProcess)
        unwatched(name, pid: pid, why)
        guard pollTimer == nil else { return }
        pollTimer = loop.schedule(after: Self.pollInterval) { [weak self] in self?.pollTick() }
    }

    private func pollTick() {
        pollTimer = nil
        for (name, p) in polled.sorted(by: { $0.key < $1.key }) where !p.isFirstProcess() {
            polled[name] = nil
            exited(name, pid: p.pid)
        }
        if polled.isEmpty { polled = [:]; return }
        pollTimer = loop.schedule(after: Self.pollInterval) { [weak self] in self?.pollTick() }
    }

    private func unwatched(_ name: String, pid: UInt32, _ why: String) {
        guard !warnedUnwatched else { return Log.debug("not watching the process of \(name): \(why)") }
        warnedUnwatched = true
        Log.warning("watching the process of \(name) (pid \(pid)) with no descriptor: \(why); it is checked " +
                    "once a second instead (said once)")
    }

    /// The connection left the bus, or its last session ended: its descriptor
    /// (if any) is closed. A later session of the connection is watched afresh.
    func forget(_ name: String) {
        polled[name] = nil
        if polled.isEmpty, let t = pollTimer { loop.cancelTimer(t); pollTimer = nil; polled = [:] }
        guard let entry = watched.removeValue(forKey: name) else { uidOf[name] = nil; return }
        if let fd = entry { release(fd, name) }
        uidOf[name] = nil
        // Dictionaries keep their largest capacity: once empty, start afresh.
        if watched.isEmpty { watched = [:]; ownerOf = [:] }
    }

    private func readable(_ name: String, pid: UInt32) {
        guard let entry = watched[name], let fd = entry else { return }
        release(fd, name)
        watched[name] = .some(nil)
        exited(name, pid: pid)
    }

    private func release(_ fd: Int32, _ name: String) {
        exitSet?.set.remove(fd)
        ownerOf[fd] = nil
        close(fd)
        descriptors -= 1
        // The set goes with the last one: an idle daemon holds no descriptor for it.
        if descriptors == 0, let (_, token) = exitSet { loop.unwatch(token); exitSet = nil }
        if let uid = uidOf[name] {
            let n = (countOf[uid] ?? 1) - 1
            countOf[uid] = n > 0 ? n : nil
        }
    }

    /// The process has exited. Most often its connection went with it, and the
    /// bus is about to say so (`NameOwnerChanged`, which ends the sessions as
    /// always); so ask the bus whether the name still has an owner, twice. The
    /// kernel closes an exiting process's descriptors before it makes the pidfd
    /// readable, so the bus sees the socket's hang-up no later than the first
    /// question; but dbus-daemon may answer that question before it dispatches
    /// the departure it read in the same turn of its loop (seen once in a CI
    /// run: a process leaving with its connection taken for a hand-over). The second question is read in a later turn, after
    /// that dispatch: a yes to it means the connection really lives on.
    private func exited(_ name: String, pid: UInt32, asked: Int = 0) {
        guard let m = try? BusDriver.call("NameHasOwner", [.string(name)]) else { return }
        connection.call(m, timeout: 25) { [weak self] result in
            guard let self, self.watched[name] != nil else { return }   // it left meanwhile
            guard case .success(let reply) = result, reply.arguments().first?.boolValue == true else { return }
            guard asked + 1 >= 2 else { return self.exited(name, pid: pid, asked: asked + 1) }
            Log.byCaller(uid: self.uidOf[name], .info, "the process of \(name) (pid \(pid)) has exited while its connection lives on in another " +
                     "process: its temporary grants end")
            self.onProcessExited(name)
        }
    }
}
