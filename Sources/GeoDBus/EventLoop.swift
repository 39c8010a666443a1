import Glibc

/// A single-threaded event loop over `poll(2)`: file descriptors, one-shot
/// timers and deferred work. It is the only place the daemon blocks.
///
/// Why poll and not Dispatch: one thread, no locks, deterministic ordering of
/// D-Bus dispatch and gpsd reads, and when nothing is due it sleeps in one
/// `poll` with an infinite timeout, so an idle daemon makes no system calls.
public final class EventLoop {
    /// Identifies a registered descriptor or timer.
    public typealias Token = Int

    /// Interest in a descriptor.
    public struct Events: OptionSet, Sendable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int16(POLLIN))
        public static let writable = Events(rawValue: Int16(POLLOUT))
    }

    /// What `poll` reported for a descriptor (readable, writable, hang-up, error).
    public struct Readiness: Sendable {
        public let revents: Int16
        public var readable: Bool { revents & Int16(POLLIN) != 0 }
        public var writable: Bool { revents & Int16(POLLOUT) != 0 }
        public var hangup: Bool { revents & Int16(POLLHUP) != 0 }
        public var error: Bool { revents & Int16(POLLERR | POLLNVAL) != 0 }
    }

    private struct Source {
        var fd: Int32
        var events: Events
        var handler: (Readiness) -> Void
    }

    private var sources: [Token: Source] = [:]
    /// One-shot timers in a heap (TimerHeap.swift): a turn never scans them.
    private var timers = TimerHeap()
    private var deferred: [() -> Void] = []
    /// Exit when idle (`exitWhenIdle`): the rule, and its countdown while idle.
    private var idleRule: (seconds: Double, isIdle: () -> Bool, onIdle: () -> Void)?
    private var idleTimer: Token?
    private var nextToken: Token = 1
    private var stopped = false

    // Work posted from other threads, and the pipe that wakes poll() for it.
    private var postLock = pthread_mutex_t()
    private var posted: [() -> Void] = []
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1

    /// The loop's time in nanoseconds: CLOCK_MONOTONIC, or a test's `ManualClock`.
    private let clock: () -> UInt64
    /// Timers wait for `clock` to move (a manual clock): a turn never sleeps for them.
    private let manualTime: Bool

    public init() {
        clock = EventLoop.monotonicNanos
        manualTime = false
        pthread_mutex_init(&postLock, nil)
    }

    /// A loop whose timers follow `clock` alone, as swift-nio's
    /// `EmbeddedEventLoop` does: a turn runs what is due at the clock's time
    /// and never sleeps for a timer, so a test moves time itself
    /// (`ManualClock.advance`, then `runOnce(timeoutMillis: 0)`).
    public init(clock: ManualClock) {
        self.clock = { clock.now }
        manualTime = true
        pthread_mutex_init(&postLock, nil)
    }

    /// The loop's time now (nanoseconds).
    public var now: UInt64 { clock() }

    deinit {
        if wakeRead >= 0 { close(wakeRead); close(wakeWrite) }
        pthread_mutex_destroy(&postLock)
    }

    /// Makes `post(_:)` usable: call on the loop's thread before other threads post.
    public func enablePosting() {
        guard wakeRead < 0 else { return }
        var fds: [Int32] = [-1, -1]
        makeNonBlockingPipe(&fds)
        wakeRead = fds[0]
        wakeWrite = fds[1]
        watch(fd: wakeRead, events: .readable) { [unowned self] _ in
            var buf = [UInt8](repeating: 0, count: 64)
            while read(self.wakeRead, &buf, buf.count) > 0 {}
            pthread_mutex_lock(&self.postLock)
            let work = self.posted
            self.posted.removeAll()
            pthread_mutex_unlock(&self.postLock)
            for w in work { w() }
        }
    }

    /// Runs `work` on the loop's thread; callable from any thread (after `enablePosting()`).
    public func post(_ work: @escaping () -> Void) {
        pthread_mutex_lock(&postLock)
        posted.append(work)
        pthread_mutex_unlock(&postLock)
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Monotonic time in nanoseconds.
    public static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Watches `fd` for `events`; `handler` runs on the loop when it is ready.
    @discardableResult
    public func watch(fd: Int32, events: Events, handler: @escaping (Readiness) -> Void) -> Token {
        let t = nextToken
        nextToken += 1
        sources[t] = Source(fd: fd, events: events, handler: handler)
        return t
    }

    /// Changes what a watched descriptor is polled for (empty: not polled).
    public func update(_ token: Token, events: Events) {
        sources[token]?.events = events
    }

    public func unwatch(_ token: Token) {
        sources[token] = nil
    }

    /// Runs `handler` once, `seconds` from now.
    @discardableResult
    public func schedule(after seconds: Double, handler: @escaping () -> Void) -> Token {
        let t = nextToken
        nextToken += 1
        let delay = seconds <= 0 ? 0 : UInt64(min(seconds, 1e9) * 1e9)
        timers.insert(t, deadline: clock() &+ delay, handler: handler)
        return t
    }

    public func cancelTimer(_ token: Token) {
        timers.cancel(token)
    }

    /// Timers armed and not yet fired or cancelled (docs/dbus-api.md, "Limits", lists what arms them).
    public var armedTimerCount: Int { timers.count }

    /// Runs `work` on the loop after the current event has been handled.
    /// Used where doing it inline would re-enter a C library (libdbus).
    public func later(_ work: @escaping () -> Void) {
        deferred.append(work)
    }

    /// Makes `run()` return after the current iteration.
    public func stop() { stopped = true }

    /// Idle exit as a property of the loop, as systemd's
    /// `bus_event_loop_with_idle` has it: before every wait, `isIdle` is asked;
    /// once it has said yes for `seconds` in a row (no turn in between said
    /// no), `onIdle` runs. The parts of a program need not remember to check
    /// after each of their events: every event is a turn.
    public func exitWhenIdle(after seconds: Double, isIdle: @escaping () -> Bool, onIdle: @escaping () -> Void) {
        idleRule = (seconds, isIdle, onIdle)
    }

    /// No idle exit any more (the program is on its way out).
    public func stopIdleWatch() {
        idleRule = nil
        if let t = idleTimer { cancelTimer(t); idleTimer = nil }
    }

    private func checkIdle() {
        guard let rule = idleRule else { return }
        if rule.isIdle() {
            guard idleTimer == nil else { return }
            idleTimer = schedule(after: rule.seconds) { [unowned self] in
                self.idleTimer = nil
                guard let r = self.idleRule, r.isIdle() else { return }
                r.onIdle()
            }
        } else if let t = idleTimer {
            cancelTimer(t)
            idleTimer = nil
        }
    }

    /// Runs until `stop()`.
    public func run() {
        stopped = false
        while !stopped {
            runOnce(timeoutMillis: nil)
        }
    }

    /// One iteration: deferred work, one `poll`, ready handlers, due timers,
    /// and the deferred work they queued (so that, for example, libdbus
    /// dispatches a reply that just arrived before this returns).
    /// `timeoutMillis` bounds the wait (nil: until something happens).
    public func runOnce(timeoutMillis: Int32?) {
        runDeferred()
        if stopped { return }
        checkIdle()

        var wait: Int32 = timeoutMillis ?? -1
        if let next = timers.nextDeadline() {
            let now = clock()
            // On manual time only a timer already due shortens the wait: a
            // later one comes when the test moves the clock, not by sleeping.
            if next <= now {
                wait = 0
            } else if !manualTime {
                let ms = Int32(clamping: (next - now + 999_999) / 1_000_000)
                wait = wait < 0 ? ms : min(wait, ms)
            }
        }
        if !deferred.isEmpty { wait = 0 }

        let active = sources.filter { !$0.value.events.isEmpty }.sorted { $0.key < $1.key }
        var fds = active.map { pollfd(fd: $0.value.fd, events: $0.value.events.rawValue, revents: 0) }
        let n = fds.withUnsafeMutableBufferPointer { buf in
            poll(buf.baseAddress, nfds_t(buf.count), wait)
        }
        if n > 0 {
            for (i, entry) in active.enumerated() where fds[i].revents != 0 {
                // A handler may have removed or changed another source meanwhile.
                guard let current = sources[entry.key], current.fd == entry.value.fd else { continue }
                current.handler(Readiness(revents: fds[i].revents))
            }
        }
        runDueTimers()
        runDeferred()
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            let work = deferred
            deferred.removeAll()
            for w in work { w() }
        }
    }

    /// Runs the timers due now, earliest first, one at a time: a handler that
    /// cancels another due timer stops it. A timer a handler arms (its
    /// deadline is past `now`) runs at a later turn, after a poll.
    private func runDueTimers() {
        let now = clock()
        while let handler = timers.popDue(now: now) { handler() }
    }
}

/// Time that moves only when a test moves it (`EventLoop(clock:)`).
public final class ManualClock {
    public private(set) var now: UInt64
    public init(now: UInt64 = 1_000_000_000) { self.now = now }
    /// Moves time forward by `seconds`.
    public func advance(_ seconds: Double) { now &+= UInt64(seconds * 1e9) }
}
