import Glibc
import GeoDBus
import GeoSystem

/// Watches, for each session, the process its first call came from (a pidfd
/// polled by the event loop), and reports when that process exits while its
/// connection is still on the bus: another process (a child that inherited
/// the socket) holds it now. The daemon then feeds the core `processExited`.
///
/// Bounded: one descriptor per session, opened at its first call and closed
/// when its process exits or its name leaves the bus; and at most `limit` at
/// once, below the daemon's descriptor limit (`LimitNOFILE=` of the unit), so
/// that many sessions of many uids (root has no session limit) never leave the
/// daemon without descriptors for its state writes, gpsd or `/proc`. A session
/// beyond that is not watched. Idle costs nothing: the descriptors sit in the
/// one `poll`, and only an exit wakes the daemon. Where `pidfd_open` is missing
/// (Linux before 5.3) or refused (a seccomp filter), this is said once in the
/// log and nothing is watched. A session not watched ends only when its name
/// leaves the bus, as before.
final class SessionProcessWatch {
    private let loop: EventLoop
    private let connection: Connection
    /// Sessions seen, with their descriptor and its loop token while watched
    /// (nil: its process is gone already, or no descriptor could be opened).
    private var sessions: [String: (fd: Int32, token: EventLoop.Token)?] = [:]
    /// `pidfd_open` cannot work here: stop trying (logged once).
    private var unavailable = false
    /// The most descriptors open at once.
    let limit: Int
    private var descriptors = 0
    /// A session went unwatched for want of a descriptor (logged once).
    private var warnedUnwatched = false
    /// Called with a session whose process exited while its connection lives on.
    var onProcessExited: (String) -> Void = { _ in }

    /// The descriptors the daemon keeps for everything else (bus, gpsd, the
    /// identity helper, state writes, `/proc` handles, libdbus): about ten.
    static let reserved = 64

    /// `limit`: at most so many descriptors at once; by default the soft
    /// descriptor limit of the process less `reserved`.
    init(loop: EventLoop, connection: Connection, limit: Int? = nil) {
        self.loop = loop
        self.connection = connection
        self.limit = limit ?? SessionProcessWatch.defaultLimit()
    }

    private static func defaultLimit() -> Int {
        var r = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &r) == 0 else { return 0 }
        // RLIM_INFINITY is the largest value: the cap covers it.
        return max(0, Int(min(UInt64(r.rlim_cur), 1 << 20)) - reserved)
    }

    /// Starts watching `session`'s process (`pid`) unless it is watched already.
    /// `isFirstProcess` says whether the PID still is the process first seen
    /// for the session (start time, `CallerResolver.isFirstProcess`); asked
    /// after the descriptor is open, a yes proves the descriptor is that
    /// process's, whatever happened to the PID before.
    func watch(session: String, pid: UInt32, isFirstProcess: () -> Bool) {
        guard !unavailable, sessions[session] == nil else { return }
        guard descriptors < limit else {
            sessions[session] = .some(nil)
            return unwatched(session, pid: pid, "\(limit) sessions are watched already, the most the daemon's " +
                             "descriptor limit leaves room for")
        }
        switch ProcessExitDescriptor.open(pid: pid) {
        case .success(let fd):
            guard isFirstProcess() else {
                close(fd)
                sessions[session] = .some(nil)
                return exited(session, pid: pid)
            }
            let token = loop.watch(fd: fd, events: .readable) { [weak self] _ in
                self?.readable(session, pid: pid)
            }
            sessions[session] = (fd, token)
            descriptors += 1
        case .failure(.exited):
            sessions[session] = .some(nil)
            exited(session, pid: pid)
        case .failure(.unsupported(let e)):
            unavailable = true
            Log.warning("\(ProcessExitDescriptor.Failure.unsupported(errno: e)): a temporary grant ends only " +
                        "when the session's connection leaves the bus, not when the process that asked for it exits")
        case .failure(let e):
            // EMFILE and the like: this session is not watched (its name leaving still ends it).
            sessions[session] = .some(nil)
            unwatched(session, pid: pid, "\(e)")
        }
    }

    private func unwatched(_ session: String, pid: UInt32, _ why: String) {
        guard !warnedUnwatched else { return Log.debug("not watching the process of \(session): \(why)") }
        warnedUnwatched = true
        Log.warning("not watching the process of \(session) (pid \(pid)): \(why); such a session's temporary " +
                    "grant ends only when its connection leaves the bus (said once)")
    }

    /// The session's name left the bus: its descriptor (if any) is closed.
    func forget(_ session: String) {
        guard let entry = sessions.removeValue(forKey: session) else { return }
        if let (fd, token) = entry { release(fd, token) }
        // Dictionaries keep their largest capacity: once empty, start afresh.
        if sessions.isEmpty { sessions = [:] }
    }

    private func readable(_ session: String, pid: UInt32) {
        guard let entry = sessions[session], let (fd, token) = entry else { return }
        release(fd, token)
        sessions[session] = .some(nil)
        exited(session, pid: pid)
    }

    private func release(_ fd: Int32, _ token: EventLoop.Token) {
        loop.unwatch(token)
        close(fd)
        descriptors -= 1
    }

    /// The process has exited. Most often its connection went with it, and the
    /// bus is about to say so (`NameOwnerChanged`, which ends the session as
    /// always); so ask the bus first whether the name still has an owner. The
    /// kernel closes an exiting process's descriptors before it makes the pidfd
    /// readable, so the bus has seen the socket close before this question
    /// reaches it, and it answers in order: a departure is known by then.
    private func exited(_ session: String, pid: UInt32) {
        guard let m = try? Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                              interface: "org.freedesktop.DBus", member: "NameHasOwner"),
              (try? m.append([.string(session)])) != nil else { return }
        connection.call(m, timeout: 25) { [weak self] result in
            guard let self, self.sessions[session] != nil else { return }   // it left meanwhile
            guard case .success(let reply) = result, reply.arguments().first?.boolValue == true else { return }
            Log.info("the process of \(session) (pid \(pid)) has exited while its connection lives on in another " +
                     "process: its temporary grant ends")
            self.onProcessExited(session)
        }
    }
}
