/// Fixes to granted sessions, as a pure state machine: one-shot requests,
/// streaming updates with per-session filters, reduced accuracy, the choice
/// among sources (`SourceChoice`: GPS first, another source when GPS is
/// silent), and the receiver's connection life cycle (connected only while
/// some session needs a fix, lingering a little, reconnecting with backoff
/// while it is away).
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
        /// The sources this session has had fixes from (`PositionSource.bit`).
        var served: UInt8 = 0
    }

    /// Seconds gpsd stays open after the last session stops needing fixes.
    public let linger: Double
    public let grid: ReducedGrid
    /// `RequestLocation` calls one session may have waiting (`Limits`).
    public let requestsPerSession: Int
    /// The receiver as messages name it ("gpsd at HOST:PORT").
    let receiverName: String

    public internal(set) var receiverConnected = false
    public internal(set) var inUse = false
    var connecting = false
    var lingerScheduled = false
    var reconnectScheduled = false
    /// Seconds before the next reconnect attempt: 0.1 doubling up to 5, reset by a fix.
    var backoff = 0.1
    /// A LocationError episode is under way: log and signal once.
    var outage = false
    /// The sources' latest fixes, and which of them a session gets.
    var choice: SourceChoice
    var gpsWaitScheduled = false
    /// Wi-Fi lookups are configured (`[sources] wifi-url`).
    public let wifiConfigured: Bool
    /// Root's switch (`WiFiEnabled`), kept in the state directory.
    public internal(set) var wifiOn: Bool
    /// Lookups may be made: configured and switched on.
    public var wifiEnabled: Bool { wifiConfigured && wifiOn }
    /// Seconds between Wi-Fi lookups while a session streams, and after a
    /// failed one (`[sources] wifi-interval`).
    let wifiInterval: Double
    /// The Wi-Fi source was opened and not closed since.
    var wifiOpen = false
    var wifiInFlight = false
    var wifiTimerScheduled = false
    /// No Wi-Fi lookup before this time (after a failure).
    var wifiNotBefore: UInt64 = 0
    /// Why the last Wi-Fi lookup failed, while it stays failed: logged once.
    var wifiFailure: String?
    /// No source can give a position: the failure the sessions were told
    /// (once), until a position is served again.
    var unavailable: LocationFailure?
    /// Some session holds a grant (`grantsHeld`).
    var grantsHeld = false
    /// Sources each session without updates has had fixes from (with updates:
    /// `Subscriber.served`), so the journal names each source once per session.
    var servedOnce: [SessionID: UInt8] = [:]
    /// The source of the last answer to each session's `RequestLocation`
    /// (with updates, `Subscriber.lastSent` says it).
    var lastReplySource: [SessionID: PositionSource] = [:]
    /// Waiting `RequestLocation` calls, per session in arrival order.
    var pending: [SessionID: [CallID]] = [:]
    var pendingSession: [CallID: SessionID] = [:]
    var subscribers: [SessionID: Subscriber] = [:]
    /// Sessions whose login session is paused (`pause`): their updates stay
    /// but get no fix and keep no gpsd connection open.
    var paused: [SessionID: PauseReason] = [:]

    var effects: [LocationEffect] = []
    /// During `handleFix(_:now:grants:send:)`: where replies and signals go as they are decided.
    var sink: ((LocationEffect) -> Void)?
    var now: UInt64 = 0
    /// Where the next fix's fan-out starts among the subscribers (see `fanOutOrder()`).
    var rotation = 0

    /// Fixes older than this are not sent to a new subscriber.
    static let startCacheAge: UInt64 = 5_000_000_000

    /// `gpsWait`: seconds GPS is waited for before another source answers;
    /// `gpsEnabled`: false, no receiver is ever opened.
    /// `wifiEnabled`: lookups of the visible access points may be made,
    /// one every `wifiInterval` seconds at most.
    public init(linger: Double, gridSize: Double, receiverName: String,
                gpsWait: Double = SourcesConfig().gpsWait, gpsEnabled: Bool = true,
                wifiEnabled: Bool = false, wifiOn: Bool = true, wifiInterval: Double = SourcesConfig().wifiInterval,
                requestsPerSession: Int = Limits().locationRequestsPerSession) {
        self.linger = linger
        self.requestsPerSession = requestsPerSession
        self.grid = ReducedGrid(cellSize: gridSize)
        self.receiverName = receiverName
        self.wifiConfigured = wifiEnabled
        self.wifiOn = wifiOn
        self.wifiInterval = wifiInterval
        choice = SourceChoice(gpsWait: gpsWait, gpsEnabled: gpsEnabled, wifiLifetime: 2 * wifiInterval)
    }

    /// Some session needs fixes: a waiting request, or updates not paused.
    var demand: Bool {
        if !pending.isEmpty { return true }
        if paused.isEmpty { return !subscribers.isEmpty }
        return subscribers.keys.contains { paused[$0] == nil }
    }

    /// The sources there are, best first (`Sources`): the receiver if GPS is
    /// on, Wi-Fi if configured (root's switch says whether it is on), the
    /// static position while the file gives one.
    public var sourcesOn: [PositionSource] {
        var out: [PositionSource] = []
        if choice.gpsEnabled { out.append(.gps) }
        if wifiConfigured { out.append(.wifi) }
        if choice.others[.static] != nil { out.append(.static) }
        return out
    }

    func noteSources(_ before: [PositionSource]) {
        let now = sourcesOn
        if now != before { effects.append(.sourcesChanged(now)) }
    }

    /// Root's Wi-Fi switch: off, the helper is closed, its position dropped
    /// and no lookup made; on, lookups may be made again when needed.
    func switchWiFi(_ on: Bool, _ grants: (SessionID) -> Accuracy?) {
        guard on != wifiOn else { return }
        wifiOn = on
        effects.append(.log(.notice, "Wi-Fi positioning switched \(on ? "on" : "off")"))
        if on {
            wifiNotBefore = 0
            wifiFailure = nil
            armGPSWait()   // GPS not yet found silent: Wi-Fi waits for its chance
            if grantsHeld { warmWiFi() }
            wantWiFi()
            return
        }
        if wifiTimerScheduled { cancel(.wifiLookup) }
        choice.set(.wifi, nil, at: now)
        if wifiOpen {
            wifiOpen = false
            effects.append(.close(.wifi))
        }
        wifiInFlight = false
        if nothingCanAnswer { announce(currentFailure(nil)) }
    }

    /// Where each session's last position came from (`ListSessionDetails`).
    public var lastSources: [SessionID: PositionSource] {
        var out = lastReplySource
        for (session, sub) in subscribers { if let source = sub.lastSent?.source { out[session] = source } }
        return out
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
            if let sub = subscribers.removeValue(forKey: session), sub.served != 0 { servedOnce[session] = sub.served }
            if let call { effects.append(.reply(call, .empty)) }
            demandChanged()
        case .drop(let session):
            drop(session)
        case .pause(let session, let reason):
            pause(session, reason)
        case .resume(let session):
            resume(session, grants)
        case .fix(let fix) where fix.source == .gps:
            received(fix, grants)
        case .fix(let fix) where fix.source == .wifi && !wifiEnabled:
            wifiInFlight = false   // a lookup that ended after Wi-Fi was switched off
        case .fix(let fix):
            let before = sourcesOn
            receivedOther(fix, grants)
            noteSources(before)
        case .opened(.gps):
            connected()
        case .openFailed(.gps, let reason):
            connecting = false
            receiverFailed("cannot connect to \(receiverName): \(reason)", grants)
        case .lost(.gps, _):
            guard receiverConnected else { break }
            disconnect(reason: "\(receiverName) closed the connection", grants)
        case .openFailed(.wifi, let reason):
            wifiFailed(reason, grants)
        case .lost(.wifi, let reason):
            choice.set(.wifi, nil, at: now)
            wifiFailed(reason, grants)
        case .lost(let source, _):
            let before = sourcesOn
            choice.set(source, nil, at: now)   // the source said why in its own words
            noteSources(before)
        case .wifiSwitched(let on):
            let before = sourcesOn
            switchWiFi(on, grants)
            noteSources(before)
        case .opened, .openFailed:
            break   // only the receiver is opened and closed
        case .grantsHeld(let held):
            grantsHeld = held
            if held { warmWiFi() } else if !demand && wifiOpen { closeWiFi() }
        case .timerFired(let timer):
            fired(timer, grants)
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
    func out(_ effect: LocationEffect) {
        if let sink { sink(effect) } else { effects.append(effect) }
    }

    // MARK: Requests (already past the consent gate)

    /// `RequestLocation`: a GPS fix younger than `maxAge` or another source's
    /// position once GPS is silent, else the next fix.
    func locate(_ call: CallID, _ session: SessionID, _ options: LocationOptions, _ grants: (SessionID) -> Accuracy?) {
        if let p = paused[session] { return effects.append(.fail(call, .sessionPaused(p))) }
        if let fix = choice.gps(youngerThan: options.maxAge, now: now) ?? choice.fallback(now: now),
           let acc = grants(session) {
            var shown = Shown(fix, grid: grid)
            return reply(call, session, &shown, acc)
        }
        if !choice.anySourceLeft && !wifiEnabled {
            return effects.append(.fail(call, .gpsUnavailable(Self.noSource)))
        }
        if pending[session]?.count ?? 0 >= requestsPerSession {
            return effects.append(.fail(call, .tooManyRequests(requestsPerSession)))
        }
        effects.append(.scheduleTimer(.timeout(call), after: options.timeout))
        pending[session, default: []].append(call)
        pendingSession[call] = session
        demandChanged()
        if choice.gpsEnabled && !receiverConnected && !connecting {
            // Try now rather than at the next backoff step: the caller is waiting.
            if reconnectScheduled { cancel(.reconnect) }
            connect()
        }
        if nothingCanAnswer { announce(currentFailure(nil)) }
    }

    func timedOut(_ call: CallID) {
        guard let session = pendingSession.removeValue(forKey: call) else { return }
        pending[session]?.removeAll { $0 == call }
        if pending[session]?.isEmpty == true { pending[session] = nil }
        // A receiver connected, or a lookup still under way: no fix in time.
        let failure: LocationFailure = receiverConnected || wifiInFlight ? .timeout : currentFailure(nil)
        effects.append(.fail(call, failure))
        demandChanged()
    }

    /// `StartUpdates`: replaces the session's options and restarts its filters.
    func startUpdates(_ call: CallID, _ session: SessionID, _ options: UpdateOptions,
                              _ grants: (SessionID) -> Accuracy?) {
        subscribers[session] = Subscriber(options: options, served: servedOnce.removeValue(forKey: session)
                                          ?? subscribers[session]?.served ?? 0)
        effects.append(.reply(call, .empty))
        if let p = paused[session] {
            // Accepted (the grant holds), and told at once why no fix comes yet.
            effects.append(.locationError(session: session, .sessionPaused(p)))
            return demandChanged()
        }
        sendRecent(to: session, grants)
        demandChanged()
        // Nothing can come (GPS off or away, no other source, no lookup): said at once.
        if nothingCanAnswer { announce(currentFailure(nil)) }
    }

    /// A GPS fix younger than `startCacheAge`, or another source's position
    /// once GPS is silent, goes to a session whose updates just started or
    /// resumed; during a receiver outage with no other source it is told so.
    func sendRecent(to session: SessionID, _ grants: (SessionID) -> Accuracy?) {
        let fallback = choice.fallback(now: now)
        if let fix = choice.gps(youngerThan: Double(Self.startCacheAge) / 1e9, now: now) ?? fallback {
            var shown = Shown(fix, grid: grid)
            deliver(&shown, to: [session], grants)
        }
        // During an outage say so, even after a cached fix: no next fix can come,
        // and the episode's LocationError went out before this session subscribed.
        if fallback == nil, !receiverConnected, !wifiInFlight, let unavailable {
            let now: LocationFailure
            if case .gpsUnavailable = unavailable, choice.gpsEnabled { now = .gpsUnavailable("\(unreachable); retrying") }
            else { now = unavailable.retrying }
            effects.append(.locationError(session: session, now))
        }
    }

    /// The session's login session is paused: its updates say why and get no
    /// fix, its waiting requests fail. A new reason is said again.
    func pause(_ session: SessionID, _ reason: PauseReason) {
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
    func resume(_ session: SessionID, _ grants: (SessionID) -> Accuracy?) {
        guard paused.removeValue(forKey: session) != nil else { return }
        if paused.isEmpty { paused = [:] }
        if subscribers[session] != nil { sendRecent(to: session, grants) }
        demandChanged()
    }

    /// The session's grant ended (or it left): nothing more reaches it.
    func drop(_ session: SessionID) {
        subscribers[session] = nil
        servedOnce[session] = nil
        lastReplySource[session] = nil
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
        var reduced: Fix?

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

    func received(_ fix: Fix, _ grants: (SessionID) -> Accuracy?) {
        backoff = 0.1
        if outage {
            outage = false
            effects.append(.log(.notice, "\(receiverName) is back"))
        }
        // gpsd may report one receiver epoch twice (seen for 50 s and more with
        // a real receiver: two TPVs with the same time). One fix per epoch
        // reaches the sessions, whatever the API.
        if let t = fix.timestamp, choice.lastGPS?.fix.timestamp == t { return }
        choice.gpsFix(fix, at: now)
        if wifiOpen { closeWiFi() }   // GPS speaks: no lookup is needed, not even one under way
        var shown = Shown(fix, grid: grid)
        serve(&shown, grants)
    }

    /// Another source's position: it answers at once if GPS is silent, else
    /// it waits for GPS's chance to end (`gpsWait`).
    func receivedOther(_ fix: Fix, _ grants: (SessionID) -> Accuracy?) {
        choice.set(fix.source, fix, at: now)
        if fix.source == .wifi {
            wifiInFlight = false
            if wifiFailure != nil { effects.append(.log(.notice, "Wi-Fi positioning works again")) }
            wifiFailure = nil
        }
        if let best = choice.fallback(now: now) {
            var shown = Shown(best, grid: grid)
            serve(&shown, grants)
        } else {
            armGPSWait()
            // GPS spoke while the lookup ran: no other is needed.
            if fix.source == .wifi && wifiOpen { closeWiFi() }
        }
    }

    /// GPS had its chance: another source's position goes out, if there is one.
    func gpsWaitEnded(_ grants: (SessionID) -> Accuracy?) {
        choice.gpsWentSilent()
        if grantsHeld { warmWiFi() }
        wantWiFi()
        guard let best = choice.fallback(now: now) else { return }
        effects.append(.log(.info, "no fix from \(receiverName) for \(choice.gpsWait) s: " +
                                   "positions come from the \(best.source.rawValue) source until its next fix"))
        var shown = Shown(best, grid: grid)
        serve(&shown, grants)
    }

    /// Answers every waiting request with `shown` and sends it to the subscribers.
    func serve(_ shown: inout Shown, _ grants: (SessionID) -> Accuracy?) {
        unavailable = nil
        if !pending.isEmpty {
            let waiting = pending
            pending = [:]
            pendingSession = [:]
            for (session, calls) in waiting {
                let acc = grants(session)
                for call in calls {
                    cancel(.timeout(call))
                    if let acc {
                        reply(call, session, &shown, acc)
                    } else {
                        out(.fail(call, .notAuthorized))
                    }
                }
            }
        }
        deliver(&shown, to: fanOutOrder(), grants)
        demandChanged()
    }

    /// A `RequestLocation`'s answer, and the journal's first word of its source.
    func reply(_ call: CallID, _ session: SessionID, _ shown: inout Shown, _ acc: Accuracy) {
        out(.reply(call, .location(shown.view(acc), acc)))
        lastReplySource[session] = shown.fix.source
        let bit = shown.fix.source.bit
        if var sub = subscribers[session] {
            guard sub.served & bit == 0 else { return }
            sub.served |= bit
            subscribers[session] = sub
        } else {
            let served = servedOnce[session] ?? 0
            guard served & bit == 0 else { return }
            servedOnce[session] = served | bit
        }
        effects.append(.served(session: session, shown.fix.source))
    }

    /// The subscribers in the order this fix goes out to them: each fix starts one
    /// session further along, so over time no session is always the last to hear.
    func fanOutOrder() -> [SessionID] {
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
    func deliver(_ shown: inout Shown, to sessions: [SessionID], _ grants: (SessionID) -> Accuracy?) {
        var groups: [Accuracy: [SessionID]] = [:]
        var firstFromSource: [SessionID] = []
        for session in sessions {
            guard var sub = subscribers[session], paused[session] == nil else { continue }
            guard let acc = grants(session) else {
                subscribers[session] = nil
                continue
            }
            let view = shown.view(acc)
            if let last = sub.lastSent {
                // A standing position is sent once, not again at each event that serves it.
                if view.source != .gps && last == view { continue }
                if sub.options.minInterval > 0, Double(now &- sub.lastSentAt) / 1e9 < sub.options.minInterval { continue }
                if sub.options.distanceFilter > 0, last.distance(to: view) < sub.options.distanceFilter { continue }
            }
            sub.lastSent = view
            sub.lastSentAt = now
            let bit = view.source.bit
            if sub.served & bit == 0 {
                sub.served |= bit
                firstFromSource.append(session)
            }
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
        for session in firstFromSource { effects.append(.served(session: session, shown.fix.source)) }
    }
}
