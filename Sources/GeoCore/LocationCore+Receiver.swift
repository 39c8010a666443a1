/// The receiver's connection (gpsd) and the end of its chance: connected
/// only while some session needs a fix, lingering a little, reconnecting
/// with backoff while it is away; GPS found silent after `gps-wait`; and what
/// the sessions are told when no source can answer.
extension LocationCore {
    /// While someone needs a position, GPS not yet found silent and another
    /// source has one (or Wi-Fi may find one), a timer checks that GPS still speaks: it goes off
    /// `gpsWait` after the last GPS fix (`fired`), not at every fix. Pointless
    /// with no other source, so it is not armed then.
    func armGPSWait(after seconds: Double? = nil) {
        guard demand, !choice.gpsSilent, !choice.others.isEmpty || wifiEnabled, !gpsWaitScheduled else { return }
        gpsWaitScheduled = true
        effects.append(.scheduleTimer(.gpsWait, after: seconds ?? choice.gpsWait))
    }

    func demandChanged() {
        let use = demand
        if use != inUse {
            inUse = use
            effects.append(.inUseChanged(use))
        }
        if use {
            if lingerScheduled { cancel(.linger) }
            armGPSWait()
            if choice.gpsEnabled && !receiverConnected && !connecting && !reconnectScheduled { connect() }
            wantWiFi()
        } else {
            if gpsWaitScheduled { cancel(.gpsWait) }
            if wifiTimerScheduled { cancel(.wifiLookup) }
            // Nobody needs a position and no grant holds: a lookup under way is
            // dropped too, before it reaches the network if it has not yet.
            if wifiOpen && !grantsHeld { closeWiFi() }
            if receiverConnected && !lingerScheduled {
                lingerScheduled = true
                effects.append(.scheduleTimer(.linger, after: linger))
            } else if !receiverConnected && reconnectScheduled {
                cancel(.reconnect)
            }
        }
    }

    func connect() {
        connecting = true
        effects.append(.open(.gps))
    }

    func connected() {
        connecting = false
        // An outage (and the backoff) ends with the first fix, not the first connect:
        // a port that accepts and then hangs up, floods or talks junk must not make the
        // daemon reconnect, log and signal every 0.1 s (see received(_:_:)).
        if !outage { effects.append(.log(.info, "connected to \(receiverName)")) }
        setConnected(true)
        demandChanged()
    }

    func fired(_ timer: LocationTimer, _ grants: (SessionID) -> Accuracy?) {
        switch timer {
        case .timeout(let call):
            timedOut(call)
        case .linger:
            guard lingerScheduled else { return }
            lingerScheduled = false
            if !demand { disconnect(reason: nil, grants) }
        case .reconnect:
            guard reconnectScheduled else { return }
            reconnectScheduled = false
            if demand && !receiverConnected && !connecting { connect() }
        case .wifiLookup:
            guard wifiTimerScheduled else { return }
            wifiTimerScheduled = false
            wantWiFi()
        case .gpsWait:
            guard gpsWaitScheduled else { return }
            gpsWaitScheduled = false
            if let last = choice.lastGPS, case let age = Double(now &- last.at) / 1e9, age < choice.gpsWait {
                armGPSWait(after: choice.gpsWait - age)
            } else {
                gpsWaitEnded(grants)
            }
        }
    }

    func disconnect(reason: String?, _ grants: (SessionID) -> Accuracy?) {
        effects.append(.close(.gps))
        setConnected(false)
        if let reason { receiverFailed(reason, grants) }
        else { effects.append(.log(.info, "disconnected from \(receiverName): no session needs fixes")) }
    }

    /// A connection attempt failed or the receiver went away: GPS is silent.
    /// Another source's position answers if there is one, or a Wi-Fi lookup
    /// is made; else the subscribers are told (once) and waiting requests
    /// fail. The receiver is retried with backoff while anyone still needs fixes.
    func receiverFailed(_ why: String, _ grants: (SessionID) -> Accuracy?) {
        choice.gpsWentSilent()
        if gpsWaitScheduled { cancel(.gpsWait) }
        if !outage { effects.append(.log(.warning, why)) }
        outage = true
        if let fallback = choice.fallback(now: now) {
            var shown = Shown(fallback, grid: grid)
            serve(&shown, grants)
        } else if wifiEnabled && (wifiInFlight || wantWiFi()) {
            // A lookup is under way: its outcome answers or fails them.
        } else {
            announce(currentFailure(why))
        }
        guard demand, !reconnectScheduled else { return }
        let delay = backoff
        backoff = min(backoff * 2, 5)
        reconnectScheduled = true
        effects.append(.scheduleTimer(.reconnect, after: delay))
    }

    /// Nothing can answer a waiting request now: no other source's position,
    /// the receiver away or off and no attempt to reach it under way, and no
    /// Wi-Fi lookup running.
    var nothingCanAnswer: Bool {
        demand && choice.fallback(now: now) == nil && !receiverConnected && !connecting
            && (outage || !choice.gpsEnabled) && !wifiInFlight
    }

    /// Why no position can be had, naming each source's cause: `gpsWhy`, or
    /// the receiver unreachable (or off), and Wi-Fi's last failure.
    func currentFailure(_ gpsWhy: String?) -> LocationFailure {
        let gps = choice.gpsEnabled ? gpsWhy ?? unreachable : "GPS is off"
        guard wifiEnabled else { return .gpsUnavailable(choice.gpsEnabled ? gps : Self.noSource) }
        return .positionUnavailable("\(gps); Wi-Fi: \(wifiFailure ?? "no lookup was possible")")
    }

    /// No source can give a position now: the subscribers hear it once (until
    /// a position is served again), and every waiting request fails with it.
    func announce(_ failure: LocationFailure) {
        if unavailable == nil {
            for session in subscribers.keys.sorted() where paused[session] == nil {
                effects.append(.locationError(session: session, failure))
            }
        }
        unavailable = failure
        let waiting = pending
        pending = [:]
        pendingSession = [:]
        for calls in waiting.values {
            for call in calls {
                cancel(.timeout(call))
                effects.append(.fail(call, failure))
            }
        }
        if !waiting.isEmpty { demandChanged() }
    }

    /// `GpsdConnected` follows the receiver.
    func setConnected(_ value: Bool) {
        guard value != receiverConnected else { return }
        receiverConnected = value
        effects.append(.receiverConnectedChanged(value))
    }

    /// The receiver cannot be reached, for messages.
    var unreachable: String { "\(receiverName) cannot be reached" }

    /// Why nothing answers with GPS off and no other source.
    static let noSource = "GPS is off ([sources] gps = false) and no other source has a position"

    /// A timer the core no longer wants, and its flag.
    func cancel(_ timer: LocationTimer) {
        switch timer {
        case .linger: lingerScheduled = false
        case .reconnect: reconnectScheduled = false
        case .gpsWait: gpsWaitScheduled = false
        case .wifiLookup: wifiTimerScheduled = false
        case .timeout: break
        }
        effects.append(.cancelTimer(timer))
    }
}
