/// Fixes to granted sessions, as a pure state machine: one-shot requests,
/// streaming updates with per-session filters, reduced accuracy, and gpsd's
/// connection life cycle (connected only while some session needs a fix,
/// lingering a little, reconnecting with backoff while gpsd is away).
///
/// No I/O and no clock of its own: each event brings `now` (monotonic
/// nanoseconds) and the consent core's `grants`, asked at every delivery so a
/// fix never reaches a session whose grant has ended, whatever order events
/// arrive in. The daemon's location service carries out the effects, in order.
public final class LocationCore {
    struct Subscriber {
        var options: UpdateOptions
        var lastSent: Fix?
        var lastSentAt: UInt64 = 0
    }

    /// Seconds gpsd stays open after the last session stops needing fixes.
    public let linger: Double
    public let grid: ReducedGrid
    /// `RequestLocation` calls one session may have waiting (`Limits`).
    public let requestsPerSession: Int
    /// `host:port`, for messages.
    let gpsdLabel: String

    public private(set) var gpsdConnected = false
    public private(set) var inUse = false
    private var connecting = false
    private var lingerScheduled = false
    private var reconnectScheduled = false
    /// Seconds before the next reconnect attempt: 0.1 doubling up to 5, reset by a fix.
    private var backoff = 0.1
    /// A LocationError episode is under way: log and signal once.
    private var outage = false
    private var lastFix: (fix: Fix, at: UInt64)?
    /// Waiting `RequestLocation` calls, per session in arrival order.
    private var pending: [SessionID: [CallID]] = [:]
    private var pendingSession: [CallID: SessionID] = [:]
    private var subscribers: [SessionID: Subscriber] = [:]
    /// Sessions whose login session is paused (`pause`): their updates stay
    /// but get no fix and keep no gpsd connection open.
    private var paused: [SessionID: PauseReason] = [:]

    private var effects: [LocationEffect] = []
    /// During `handleFix(_:now:grants:send:)`: where replies and signals go as they are decided.
    private var sink: ((LocationEffect) -> Void)?
    private var now: UInt64 = 0
    /// Where the next fix's fan-out starts among the subscribers (see `fanOutOrder()`).
    private var rotation = 0

    /// Fixes older than this are not sent to a new subscriber.
    static let startCacheAge: UInt64 = 5_000_000_000

    public init(linger: Double, gridSize: Double, gpsdLabel: String,
                requestsPerSession: Int = Limits().locationRequestsPerSession) {
        self.linger = linger
        self.requestsPerSession = requestsPerSession
        self.grid = ReducedGrid(cellSize: gridSize)
        self.gpsdLabel = gpsdLabel
    }

    /// Some session needs fixes: a waiting request, or updates not paused.
    private var demand: Bool {
        if !pending.isEmpty { return true }
        if paused.isEmpty { return !subscribers.isEmpty }
        return subscribers.keys.contains { paused[$0] == nil }
    }

    /// Handles one event at monotonic time `now` (ns). `grants` is the accuracy a
    /// session may receive at this moment (nil: none), asked for every delivery.
    public func handle(_ event: LocationEvent, now: UInt64, grants: (SessionID) -> Accuracy?) -> [LocationEffect] {
        self.now = now
        effects = []
        switch event {
        case .locate(let call, let session, let options):
            locate(call, session, options, grants)
        case .startUpdates(let call, let session, let options):
            startUpdates(call, session, options, grants)
        case .setUpdateOptions(let session, let options):
            subscribers[session]?.options = options
        case .stopUpdates(let call, let session):
            subscribers[session] = nil
            if let call { effects.append(.reply(call, .empty)) }
            demandChanged()
        case .drop(let session):
            drop(session)
        case .pause(let session, let reason):
            pause(session, reason)
        case .resume(let session):
            resume(session, grants)
        case .fix(let fix):
            received(fix, grants)
        case .gpsdConnected:
            connected()
        case .gpsdConnectFailed(let reason):
            connecting = false
            gpsdFailed("cannot connect to gpsd at \(gpsdLabel): \(reason)")
        case .gpsdClosed:
            guard gpsdConnected else { break }
            disconnect(reason: "gpsd at \(gpsdLabel) closed the connection")
        case .timerFired(let timer):
            fired(timer)
        }
        return effects
    }

    /// Handles a fix like `handle(.fix(fix), …)`, but streams: each reply to a
    /// waiting `RequestLocation` and each session's `LocationUpdated` (one
    /// `.locationUpdated` per session) goes to `send` as soon as it is decided,
    /// before the next session's grant is even asked, so the first subscriber
    /// need not wait for the whole fan-out to be prepared. The other effects
    /// (timers, logs, `InUse`) are returned, to be carried out after those sends.
    /// `send` must not call back into this core.
    public func handleFix(_ fix: Fix, now: UInt64, grants: (SessionID) -> Accuracy?,
                          send: (LocationEffect) -> Void) -> [LocationEffect] {
        withoutActuallyEscaping(send) { send in
            sink = send
            defer { sink = nil }
            return handle(.fix(fix), now: now, grants: grants)
        }
    }

    /// A reply or signal: to the streaming sink if there is one, else among the effects.
    private func out(_ effect: LocationEffect) {
        if let sink { sink(effect) } else { effects.append(effect) }
    }

    // MARK: Requests (already past the consent gate)

    /// `RequestLocation`: a cached fix younger than `maxAge`, else the next one.
    private func locate(_ call: CallID, _ session: SessionID, _ options: LocationOptions, _ grants: (SessionID) -> Accuracy?) {
        if let p = paused[session] { return effects.append(.fail(call, .sessionPaused(p))) }
        if let last = lastFix, Double(now &- last.at) / 1e9 < options.maxAge, let acc = grants(session) {
            var shown = Shown(last.fix, grid: grid)
            return effects.append(.reply(call, .location(shown.view(acc), acc)))
        }
        if pending[session]?.count ?? 0 >= requestsPerSession {
            return effects.append(.fail(call, .tooManyRequests(requestsPerSession)))
        }
        effects.append(.scheduleTimer(.timeout(call), after: options.timeout))
        pending[session, default: []].append(call)
        pendingSession[call] = session
        demandChanged()
        if !gpsdConnected && !connecting {
            // Try now rather than at the next backoff step: the caller is waiting.
            if reconnectScheduled { cancel(.reconnect) }
            connect()
        }
    }

    private func timedOut(_ call: CallID) {
        guard let session = pendingSession.removeValue(forKey: call) else { return }
        pending[session]?.removeAll { $0 == call }
        if pending[session]?.isEmpty == true { pending[session] = nil }
        effects.append(.fail(call, gpsdConnected ? .timeout : .gpsUnavailable("gpsd at \(gpsdLabel) cannot be reached")))
        demandChanged()
    }

    /// `StartUpdates`: replaces the session's options and restarts its filters.
    private func startUpdates(_ call: CallID, _ session: SessionID, _ options: UpdateOptions,
                              _ grants: (SessionID) -> Accuracy?) {
        subscribers[session] = Subscriber(options: options)
        effects.append(.reply(call, .empty))
        if let p = paused[session] {
            // Accepted (the grant holds), and told at once why no fix comes yet.
            effects.append(.locationError(session: session, .sessionPaused(p)))
            return demandChanged()
        }
        sendRecent(to: session, grants)
        demandChanged()
    }

    /// A fix younger than `startCacheAge` goes to a session whose updates just
    /// started or resumed; during a gpsd outage it is told so.
    private func sendRecent(to session: SessionID, _ grants: (SessionID) -> Accuracy?) {
        if let last = lastFix, now &- last.at < Self.startCacheAge {
            var shown = Shown(last.fix, grid: grid)
            deliver(&shown, to: [session], grants)
        }
        // During an outage say so, even after a cached fix: no next fix can come,
        // and the episode's LocationError went out before this session subscribed.
        if !gpsdConnected && outage {
            effects.append(.locationError(session: session,
                                          .gpsUnavailable("gpsd at \(gpsdLabel) cannot be reached; retrying")))
        }
    }

    /// The session's login session is paused: its updates say why and get no
    /// fix, its waiting requests fail. A new reason is said again.
    private func pause(_ session: SessionID, _ reason: PauseReason) {
        let old = paused.updateValue(reason, forKey: session)
        if old != reason, subscribers[session] != nil {
            effects.append(.locationError(session: session, .sessionPaused(reason)))
        }
        for call in pending.removeValue(forKey: session) ?? [] {
            pendingSession[call] = nil
            cancel(.timeout(call))
            effects.append(.fail(call, .sessionPaused(reason)))
        }
        demandChanged()
    }

    /// The pause ended (or the session did): its updates get fixes again, a
    /// recent one at once.
    private func resume(_ session: SessionID, _ grants: (SessionID) -> Accuracy?) {
        guard paused.removeValue(forKey: session) != nil else { return }
        if paused.isEmpty { paused = [:] }
        if subscribers[session] != nil { sendRecent(to: session, grants) }
        demandChanged()
    }

    /// The session's grant ended (or it left): nothing more reaches it.
    private func drop(_ session: SessionID) {
        subscribers[session] = nil
        for call in pending.removeValue(forKey: session) ?? [] {
            pendingSession[call] = nil
            cancel(.timeout(call))
            effects.append(.fail(call, .notAuthorized))
        }
        demandChanged()
    }

    // MARK: Fixes

    /// One fix as each accuracy shows it, reduced once per fix and shared by every
    /// session that receives it (fan-out to hundreds of sessions).
    struct Shown {
        let fix: Fix
        let grid: ReducedGrid
        private var reduced: Fix?

        init(_ fix: Fix, grid: ReducedGrid) {
            self.fix = fix
            self.grid = grid
        }

        mutating func view(_ acc: Accuracy) -> Fix {
            guard acc == .reduced else { return fix }
            if let reduced { return reduced }
            let r = grid.reduce(fix)
            reduced = r
            return r
        }
    }

    private func received(_ fix: Fix, _ grants: (SessionID) -> Accuracy?) {
        backoff = 0.1
        if outage {
            outage = false
            effects.append(.log(.notice, "gpsd at \(gpsdLabel) is back"))
        }
        // gpsd may report one receiver epoch twice (seen for 50 s and more with
        // a real receiver: two TPVs with the same time). One fix per epoch
        // reaches the sessions, whatever the API.
        if let t = fix.timestamp, lastFix?.fix.timestamp == t { return }
        lastFix = (fix, now)
        var shown = Shown(fix, grid: grid)
        if !pending.isEmpty {
            let waiting = pending
            pending = [:]
            pendingSession = [:]
            for (session, calls) in waiting {
                let acc = grants(session)
                for call in calls {
                    cancel(.timeout(call))
                    if let acc {
                        out(.reply(call, .location(shown.view(acc), acc)))
                    } else {
                        out(.fail(call, .notAuthorized))
                    }
                }
            }
        }
        deliver(&shown, to: fanOutOrder(), grants)
        demandChanged()
    }

    /// The subscribers in the order this fix goes out to them: each fix starts one
    /// session further along, so over time no session is always the last to hear.
    private func fanOutOrder() -> [SessionID] {
        let keys = Array(subscribers.keys)
        guard keys.count > 1 else { return keys }
        let start = rotation % keys.count
        rotation = start + 1
        return Array(keys[start...] + keys[..<start])
    }

    /// Sends the fix to those of `sessions` whose grant still holds and whose
    /// filters let it through, in that order. Streaming, each session's signal goes
    /// out as soon as it passes; else they are grouped by accuracy so each group's
    /// signal body is built once. A subscriber without a grant is dropped.
    private func deliver(_ shown: inout Shown, to sessions: [SessionID], _ grants: (SessionID) -> Accuracy?) {
        var groups: [Accuracy: [SessionID]] = [:]
        for session in sessions {
            guard var sub = subscribers[session], paused[session] == nil else { continue }
            guard let acc = grants(session) else {
                subscribers[session] = nil
                continue
            }
            let view = shown.view(acc)
            if let last = sub.lastSent {
                if sub.options.minInterval > 0, Double(now &- sub.lastSentAt) / 1e9 < sub.options.minInterval { continue }
                if sub.options.distanceFilter > 0, last.distance(to: view) < sub.options.distanceFilter { continue }
            }
            sub.lastSent = view
            sub.lastSentAt = now
            subscribers[session] = sub
            if let sink {
                sink(.locationUpdated(sessions: [session], acc, view))
            } else {
                groups[acc, default: []].append(session)
            }
        }
        for acc in [Accuracy.full, .reduced] {
            if let group = groups[acc] { effects.append(.locationUpdated(sessions: group, acc, shown.view(acc))) }
        }
    }

    // MARK: gpsd connection

    private func demandChanged() {
        let use = demand
        if use != inUse {
            inUse = use
            effects.append(.inUseChanged(use))
        }
        if use {
            if lingerScheduled { cancel(.linger) }
            if !gpsdConnected && !connecting && !reconnectScheduled { connect() }
        } else if gpsdConnected && !lingerScheduled {
            lingerScheduled = true
            effects.append(.scheduleTimer(.linger, after: linger))
        } else if !gpsdConnected && reconnectScheduled {
            cancel(.reconnect)
        }
    }

    private func connect() {
        connecting = true
        effects.append(.connect)
    }

    private func connected() {
        connecting = false
        // An outage (and the backoff) ends with the first fix, not the first connect:
        // a port that accepts and then hangs up, floods or talks junk must not make the
        // daemon reconnect, log and signal every 0.1 s (see received(_:_:)).
        if !outage { effects.append(.log(.info, "connected to gpsd at \(gpsdLabel)")) }
        setConnected(true)
        demandChanged()
    }

    private func fired(_ timer: LocationTimer) {
        switch timer {
        case .timeout(let call):
            timedOut(call)
        case .linger:
            guard lingerScheduled else { return }
            lingerScheduled = false
            if !demand { disconnect(reason: nil) }
        case .reconnect:
            guard reconnectScheduled else { return }
            reconnectScheduled = false
            if demand && !gpsdConnected && !connecting { connect() }
        }
    }

    private func disconnect(reason: String?) {
        effects.append(.disconnect)
        setConnected(false)
        if let reason { gpsdFailed(reason) }
        else { effects.append(.log(.info, "disconnected from gpsd at \(gpsdLabel): no session needs fixes")) }
    }

    /// A connection attempt failed or gpsd went away: tell the subscribers (once
    /// per outage) and retry with backoff while anyone still needs fixes.
    private func gpsdFailed(_ why: String) {
        if !outage {
            effects.append(.log(.warning, why))
            for session in subscribers.keys.sorted() where paused[session] == nil {
                effects.append(.locationError(session: session, .gpsUnavailable(why)))
            }
        }
        outage = true
        // One-shot requests fail at once: no fix can come from this attempt.
        let waiting = pending
        pending = [:]
        pendingSession = [:]
        for calls in waiting.values {
            for call in calls {
                cancel(.timeout(call))
                effects.append(.fail(call, .gpsUnavailable(why)))
            }
        }
        if !waiting.isEmpty { demandChanged() }
        guard demand, !reconnectScheduled else { return }
        let delay = backoff
        backoff = min(backoff * 2, 5)
        reconnectScheduled = true
        effects.append(.scheduleTimer(.reconnect, after: delay))
    }

    private func setConnected(_ value: Bool) {
        guard value != gpsdConnected else { return }
        gpsdConnected = value
        effects.append(.gpsdConnectedChanged(value))
    }

    private func cancel(_ timer: LocationTimer) {
        switch timer {
        case .linger: lingerScheduled = false
        case .reconnect: reconnectScheduled = false
        case .timeout: break
        }
        effects.append(.cancelTimer(timer))
    }
}
