import GeoCore
import GeoDBus
import GeoGPS
import GeoConsentAPI

/// Fixes from gpsd to granted sessions: one-shot requests, streaming updates
/// with per-session filters, reduced accuracy, and gpsd's connection life cycle
/// (connected only while some granted session needs a fix, lingering a little,
/// reconnecting with backoff when gpsd goes away).
///
/// Every delivery asks `accuracy(session)` first, so a fix never reaches a
/// session whose grant has ended, whatever order events arrive in.
final class LocationService {
    struct Subscriber {
        var options: UpdateOptions
        var lastSent: Fix?
        var lastSentAt: UInt64 = 0   // monotonic ns
    }

    struct Pending {
        var call: MethodCall
        var timer: EventLoop.Token
    }

    private let loop: EventLoop
    private let connector: GPSDConnector
    private let gpsdLabel: String
    var linger: Double
    var grid: ReducedGrid

    /// The accuracy a session may receive now (nil: none).
    var accuracy: (String) -> Accuracy? = { _ in nil }
    /// Unicast a signal to a session.
    var emit: (_ session: String, _ member: String, _ args: [DBusValue]) -> Void = { _, _, _ in }
    /// Unicast the same signal to several sessions (arguments marshalled once).
    var emitEach: (_ sessions: [String], _ member: String, _ args: [DBusValue]) -> Void = { _, _, _ in }
    /// `GpsdConnected` / `InUse` changed.
    var propertiesChanged: ([String: DBusValue]) -> Void = { _ in }

    private var client: GPSDClient?
    private var clientWatch: EventLoop.Token?
    private var connecting = false
    private var reconnectTimer: EventLoop.Token?
    private var lingerTimer: EventLoop.Token?
    private var backoff = 0.1
    private var outage = false   // a LocationError episode is under way: log and signal once
    private var lastFix: (fix: Fix, at: UInt64)?
    private var pending: [String: [Pending]] = [:]
    private var subscribers: [String: Subscriber] = [:]

    private(set) var gpsdConnected = false
    private(set) var inUse = false

    init(loop: EventLoop, host: String, port: UInt16, linger: Double, gridSize: Double) {
        self.loop = loop
        self.connector = GPSDConnector(loop: loop, host: host, port: port)
        self.gpsdLabel = "\(host):\(port)"
        self.linger = linger
        self.grid = ReducedGrid(cellSize: gridSize)
    }

    private var demand: Bool { !pending.isEmpty || !subscribers.isEmpty }

    // MARK: Requests (already past the consent gate)

    /// `RequestLocation`: a cached fix younger than `maxAge`, else the next one.
    func locate(_ call: MethodCall, session: String, options: LocationOptions) {
        if let last = lastFix, Double(EventLoop.monotonicNanos() &- last.at) / 1e9 < options.maxAge,
           let acc = accuracy(session) {
            var shown = Shown(last.fix, grid: grid)
            return call.reply([shown.view(acc).value])
        }
        let timer = loop.schedule(after: options.timeout) { [weak self] in self?.locateTimedOut(session, call) }
        pending[session, default: []].append(Pending(call: call, timer: timer))
        demandChanged()
        if !gpsdConnected && !connecting {
            // Try now rather than at the next backoff step: the caller is waiting.
            if let t = reconnectTimer { loop.cancelTimer(t); reconnectTimer = nil }
            connect()
        }
    }

    private func locateTimedOut(_ session: String, _ call: MethodCall) {
        pending[session]?.removeAll { $0.call === call }
        if pending[session]?.isEmpty == true { pending[session] = nil }
        if gpsdConnected {
            call.fail(DBusError(GeoConsentAPI.ErrorName.timeout, "No fix arrived in time"))
        } else {
            call.fail(DBusError(GeoConsentAPI.ErrorName.gpsUnavailable, "gpsd at \(gpsdLabel) cannot be reached"))
        }
        demandChanged()
    }

    /// `StartUpdates`: replaces the session's options and restarts its filters.
    func startUpdates(_ call: MethodCall, session: String, options: UpdateOptions) {
        subscribers[session] = Subscriber(options: options)
        call.reply()
        if let last = lastFix, EventLoop.monotonicNanos() &- last.at < 5_000_000_000 {
            var shown = Shown(last.fix, grid: grid)
            deliver(&shown, to: [session])
        }
        // During an outage say so, even after a cached fix: no next fix can come,
        // and the episode's LocationError went out before this session subscribed.
        if !gpsdConnected && outage {
            emit(session, "LocationError", [.string(GeoConsentAPI.ErrorName.gpsUnavailable),
                                            .string("gpsd at \(gpsdLabel) cannot be reached; retrying")])
        }
        demandChanged()
    }

    func stopUpdates(_ call: MethodCall?, session: String) {
        subscribers[session] = nil
        call?.reply()
        demandChanged()
    }

    /// The session's grant ended (or it left): nothing more reaches it.
    func drop(session: String) {
        subscribers[session] = nil
        for p in pending.removeValue(forKey: session) ?? [] {
            loop.cancelTimer(p.timer)
            p.call.fail(DBusError(GeoConsentAPI.ErrorName.notAuthorized, "The grant of this session ended"))
        }
        demandChanged()
    }

    // MARK: Fixes

    /// One fix as each accuracy shows it, built once per fix and shared by every
    /// session that receives it (fan-out to hundreds of sessions).
    private struct Shown {
        let fix: Fix
        let grid: ReducedGrid
        private var views: [Accuracy: (fix: Fix, value: DBusValue)] = [:]

        init(_ fix: Fix, grid: ReducedGrid) {
            self.fix = fix
            self.grid = grid
        }

        mutating func view(_ acc: Accuracy) -> (fix: Fix, value: DBusValue) {
            if let v = views[acc] { return v }
            let shown = acc == .reduced ? grid.reduce(fix) : fix
            let v = (shown, LocationDictionary.encode(shown, accuracy: acc))
            views[acc] = v
            return v
        }
    }

    private func handle(_ fix: Fix) {
        backoff = 0.1
        if outage {
            outage = false
            Log.notice("gpsd at \(gpsdLabel) is back")
        }
        let now = EventLoop.monotonicNanos()
        lastFix = (fix, now)
        var shown = Shown(fix, grid: grid)
        if !pending.isEmpty {
            let waiting = pending
            pending = [:]
            for (session, calls) in waiting {
                for p in calls {
                    loop.cancelTimer(p.timer)
                    if let acc = accuracy(session) {
                        p.call.reply([shown.view(acc).value])
                    } else {
                        p.call.fail(DBusError(GeoConsentAPI.ErrorName.notAuthorized, "The grant of this session ended"))
                    }
                }
            }
        }
        deliver(&shown, to: Array(subscribers.keys))
        demandChanged()
    }

    /// Sends the fix to those of `sessions` whose grant still holds and whose
    /// filters let it through, grouped by accuracy so each group's signal body
    /// is marshalled once.
    private func deliver(_ shown: inout Shown, to sessions: [String]) {
        let now = EventLoop.monotonicNanos()
        var groups: [Accuracy: [String]] = [:]
        for session in sessions {
            guard var sub = subscribers[session] else { continue }
            guard let acc = accuracy(session) else {
                subscribers[session] = nil
                continue
            }
            let view = shown.view(acc)
            if let last = sub.lastSent {
                if sub.options.minInterval > 0, Double(now &- sub.lastSentAt) / 1e9 < sub.options.minInterval { continue }
                if sub.options.distanceFilter > 0, last.distance(to: view.fix) < sub.options.distanceFilter { continue }
            }
            sub.lastSent = view.fix
            sub.lastSentAt = now
            subscribers[session] = sub
            groups[acc, default: []].append(session)
        }
        for acc in [Accuracy.full, .reduced] {
            if let group = groups[acc] { emitEach(group, "LocationUpdated", [shown.view(acc).value]) }
        }
    }

    // MARK: gpsd connection

    private func demandChanged() {
        let use = demand
        if use != inUse {
            inUse = use
            propertiesChanged(["InUse": .bool(use)])
        }
        if use {
            if let t = lingerTimer { loop.cancelTimer(t); lingerTimer = nil }
            if client == nil && !connecting && reconnectTimer == nil { connect() }
        } else if client != nil && lingerTimer == nil {
            lingerTimer = loop.schedule(after: linger) { [weak self] in
                guard let self else { return }
                self.lingerTimer = nil
                if !self.demand { self.disconnect(reason: nil) }
            }
        } else if client == nil, let t = reconnectTimer {
            loop.cancelTimer(t)
            reconnectTimer = nil
        }
    }

    private func connect() {
        connecting = true
        connector.connect { [weak self] result in self?.connected(result) }
    }

    private func connected(_ result: Result<GPSDClient, GPSDError>) {
        connecting = false
        switch result {
        case .success(let c):
            client = c
            // An outage (and the backoff) ends with the first fix, not the first connect:
            // a port that accepts and then hangs up, floods or talks junk must not make the
            // daemon reconnect, log and signal every 0.1 s (see handle(_:)).
            if !outage { Log.info("connected to gpsd at \(gpsdLabel)") }
            clientWatch = loop.watch(fd: c.fd, events: .readable) { [weak self] _ in self?.readable() }
            setConnected(true)
            demandChanged()
        case .failure(let e):
            gpsdFailed("cannot connect to gpsd at \(gpsdLabel): \(e)")
        }
    }

    private func readable() {
        guard let c = client else { return }
        let r = c.readAvailable()
        for f in r.fixes { handle(f) }
        if r.closed { disconnect(reason: "gpsd at \(gpsdLabel) closed the connection") }
    }

    private func disconnect(reason: String?) {
        if let w = clientWatch { loop.unwatch(w); clientWatch = nil }
        client?.close()
        client = nil
        setConnected(false)
        if let reason { gpsdFailed(reason) }
        else { Log.info("disconnected from gpsd at \(gpsdLabel): no session needs fixes") }
    }

    /// A connection attempt failed or gpsd went away: tell the waiting sessions
    /// (once per outage) and retry with backoff while anyone still needs fixes.
    private func gpsdFailed(_ why: String) {
        if !outage {
            Log.warning(why)
            for session in subscribers.keys.sorted() {
                emit(session, "LocationError", [.string(GeoConsentAPI.ErrorName.gpsUnavailable), .string(why)])
            }
        }
        outage = true
        // One-shot requests fail at once: no fix can come from this attempt.
        let waiting = pending
        pending = [:]
        for calls in waiting.values {
            for p in calls {
                loop.cancelTimer(p.timer)
                p.call.fail(DBusError(GeoConsentAPI.ErrorName.gpsUnavailable, why))
            }
        }
        if !waiting.isEmpty { demandChanged() }
        guard demand, reconnectTimer == nil else { return }
        let delay = backoff
        backoff = min(backoff * 2, 5)
        reconnectTimer = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            self.reconnectTimer = nil
            if self.demand && self.client == nil && !self.connecting { self.connect() }
        }
    }

    private func setConnected(_ value: Bool) {
        guard value != gpsdConnected else { return }
        gpsdConnected = value
        propertiesChanged(["GpsdConnected": .bool(value)])
    }

    /// Closes gpsd at shutdown.
    func shutdown() {
        if let w = clientWatch { loop.unwatch(w) }
        client?.close()
        client = nil
    }
}
