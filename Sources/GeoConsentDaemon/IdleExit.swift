import Glibc
import GeoDBus
import GeoSystem
import GeoConsentAPI

/// Exit when idle, as timedated and hostnamed do: with no session, agent,
/// prompt, call in progress or pending write for `idle-exit` seconds, the daemon
/// gives up its name and exits, and the bus starts it again for the next call
/// (system bus: D-Bus activation through geoconsentd.service). An idle machine
/// then runs no geoconsentd at all.
///
/// No call is lost in the race with a client: the name is released first, and
/// the daemon exits only once the bus has told it the name is gone (`NameLost`).
/// The bus delivers that after every message it routed to the name before, so
/// everything sent to the old owner is answered here, and everything sent after
/// goes to the next one. A call answered in that short drain may have started
/// a session; it ends when this process does, like any session whose daemon
/// leaves, and the client's next call reaches the new daemon.
extension Daemon {
    /// Nothing to keep: no client, agent, session watcher, prompt, call in progress (ours, or
    /// one the daemon made and waits on: an agent's level, logind) or pending write.
    var isIdle: Bool {
        core.sessionCount == 0 && core.agentCount == 0 && core.watcherCount == 0 && core.openPromptCount == 0
            && calls.isEmpty
            && !callers.isResolving && !logind.isPlacing && outgoing.inFlight == 0 && !persistence.isPending
            && frontEnds.all.allSatisfy(\.isIdle)
    }

    /// Hands the loop the rule (`EventLoop.exitWhenIdle`): it asks `isIdle`
    /// before every wait, so no event of any part needs to remember to.
    func watchForIdle() {
        guard config.idleExit > 0 else { return }
        loop.exitWhenIdle(after: config.idleExit, isIdle: { [unowned self] in self.isIdle },
                          onIdle: { [unowned self] in self.idleTimedOut() })
    }

    private func idleTimedOut() {
        loop.stopIdleWatch()
        Log.info("idle for \(formatSeconds(config.idleExit)): giving up \(GeoConsentAPI.busName)"
                 + frontEnds.all.flatMap(\.busNames).map { " and " + $0 }.joined() + " and exiting; "
                 + "the bus starts geoconsentd again on the next call")
        releasedName = true
        notifyServiceManager("STOPPING=1")
        // The front ends' names first: the drain waits for NameLost of ours, which
        // the bus sends after everything it routed to any of the names before.
        for name in frontEnds.all.flatMap(\.busNames) + [GeoConsentAPI.busName] {
            do {
                let m = try BusDriver.call("ReleaseName", [.string(name)])
                connection.call(m, timeout: 10) { result in
                    if case .failure(let e) = result { Log.error("ReleaseName failed: \(e.name): \(e.message)") }
                }
            } catch {
                Log.error("cannot release \(name): \(error)")
                loop.stop()
            }
        }
        // Should the bus never say NameLost, do not linger for ever.
        releaseDeadline = loop.schedule(after: 10) { [weak self] in
            Log.error("no NameLost within 10 s of ReleaseName; exiting")
            self?.loop.stop()
        }
    }

    /// `NameLost` for our name after `ReleaseName`: everything sent to the name
    /// before has been received. Answers what is still in progress, then stops.
    func nameLost(_ m: Message) -> Bool {
        guard BusDriver.isSignal(m, "NameLost"), m.arguments().first == .string(GeoConsentAPI.busName) else { return false }
        guard releasedName else {
            Log.error("lost \(GeoConsentAPI.busName) without giving it up; exiting")
            loop.stop()
            return true
        }
        if let t = releaseDeadline { loop.cancelTimer(t); releaseDeadline = nil }
        drainThenStop()
        return true
    }

    /// Stops once no call is being resolved or waits for the core (a prompt
    /// that a call in the drain opened is answered when its agent answers, or
    /// at the prompt timeout).
    private func drainThenStop() {
        if calls.isEmpty && !callers.isResolving && !logind.isPlacing && outgoing.inFlight == 0 {
            Log.info("gave up \(GeoConsentAPI.busName); exiting"
                     + (core.sessionCount > 0 ? " (\(core.sessionCount) sessions began while the name was given up)" : ""))
            return loop.stop()
        }
        _ = loop.schedule(after: 0.01) { [weak self] in self?.drainThenStop() }
    }

    /// `sd_notify(3)` without libsystemd: one datagram to $NOTIFY_SOCKET, if set
    /// (the unit's NotifyAccess=main lets the main process say STOPPING=1, so
    /// that systemd queues an activation meanwhile instead of taking it as served).
    private func notifyServiceManager(_ state: String) {
        guard let path = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }), !path.isEmpty else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        // "@name" is an abstract socket (withUnixSocketAddress).
        _ = state.withCString { s in
            withUnixSocketAddress(path) { sendto(fd, s, strlen(s), Int32(MSG_NOSIGNAL), $0, $1) }
        }
    }

    private func formatSeconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}
