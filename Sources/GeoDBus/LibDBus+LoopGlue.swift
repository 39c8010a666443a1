// Part of the LibDBus+*.swift family, the only files that call libdbus-1.
// Event-loop glue: libdbus's watches and timeouts become EventLoop fd watches and
// timers, and its dispatching runs from the loop, never inline from a libdbus callback.
import CDBus

extension Connection {
    /// Hands libdbus's watches, timeouts and dispatching to `loop`.
    public func attach(to loop: EventLoop) {
        self.loop = loop
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = dbus_connection_set_watch_functions(raw, { w, d in
            Connection.from(d).addWatch(w!)
            return 1
        }, { w, d in
            Connection.from(d).removeWatch(w!)
        }, { w, d in
            Connection.from(d).updateWatch(w!)
        }, me, nil)
        _ = dbus_connection_set_timeout_functions(raw, { t, d in
            let c = Connection.from(d)
            c.liveTimeouts.insert(t!)
            c.armTimeout(t!)
            return 1
        }, { t, d in
            let c = Connection.from(d)
            c.liveTimeouts.remove(t!)
            c.disarmTimeout(t!)
        }, { t, d in
            let c = Connection.from(d)
            c.disarmTimeout(t!)
            c.armTimeout(t!)
        }, me, nil)
        // Never dispatch inline from this callback: libdbus holds its lock here.
        dbus_connection_set_dispatch_status_function(raw, { _, status, d in
            if status == DBUS_DISPATCH_DATA_REMAINS { Connection.from(d).scheduleDrain() }
        }, me, nil)
        scheduleDrain()
    }

    private static func from(_ d: UnsafeMutableRawPointer?) -> Connection {
        Unmanaged<Connection>.fromOpaque(d!).takeUnretainedValue()
    }

    private func scheduleDrain() {
        guard !drainScheduled, let loop else { return }
        drainScheduled = true
        loop.later { [weak self] in self?.drain() }
    }

    private func drain() {
        drainScheduled = false
        guard !closed else { return }
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    private func events(of w: OpaquePointer) -> EventLoop.Events {
        guard dbus_watch_get_enabled(w) != 0 else { return [] }
        let flags = dbus_watch_get_flags(w)
        var e: EventLoop.Events = []
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { e.insert(.readable) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { e.insert(.writable) }
        return e
    }

    private func addWatch(_ w: OpaquePointer) {
        guard let loop else { return }
        let token = loop.watch(fd: dbus_watch_get_unix_fd(w), events: events(of: w)) { [weak self] ready in
            var flags: UInt32 = 0
            if ready.readable { flags |= DBUS_WATCH_READABLE.rawValue }
            if ready.writable { flags |= DBUS_WATCH_WRITABLE.rawValue }
            if ready.hangup { flags |= DBUS_WATCH_HANGUP.rawValue }
            if ready.error { flags |= DBUS_WATCH_ERROR.rawValue }
            _ = dbus_watch_handle(w, flags)
            self?.scheduleDrain()
        }
        watches[w] = token
    }

    private func removeWatch(_ w: OpaquePointer) {
        if let t = watches.removeValue(forKey: w) { loop?.unwatch(t) }
    }

    private func updateWatch(_ w: OpaquePointer) {
        if let t = watches[w] { loop?.update(t, events: events(of: w)) }
    }

    private func armTimeout(_ t: OpaquePointer) {
        guard let loop, dbus_timeout_get_enabled(t) != 0 else { return }
        let seconds = Double(dbus_timeout_get_interval(t)) / 1000
        timeouts[t] = loop.schedule(after: seconds) { [weak self] in
            guard let self, self.timeouts.removeValue(forKey: t) != nil else { return }
            _ = dbus_timeout_handle(t)
            // libdbus timeouts repeat until removed: re-arm one it still holds.
            if !self.closed, self.liveTimeouts.contains(t), self.timeouts[t] == nil { self.armTimeout(t) }
            self.scheduleDrain()
        }
    }

    private func disarmTimeout(_ t: OpaquePointer) {
        if let token = timeouts.removeValue(forKey: t) { loop?.cancelTimer(token) }
    }
}
