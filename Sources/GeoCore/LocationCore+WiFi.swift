/// Wi-Fi positioning: a lookup only while a session needs a position and
/// GPS is silent, one at a time and at most one each `wifi-interval`; the
/// helper readied while a grant holds; root's switch.
extension LocationCore {
    /// Opens a Wi-Fi lookup if one is wanted now: Wi-Fi is on, someone needs
    /// a position, GPS is silent, and no lookup runs. A Wi-Fi position younger
    /// than `wifiInterval` is not looked up again, nor is a lookup made within
    /// `wifiInterval` of a failed one: the wait is a timer instead (only while
    /// updates run: a waiting request was answered by that position already).
    /// True when a lookup was opened.
    @discardableResult
    func wantWiFi() -> Bool {
        guard wifiEnabled, demand, choice.gpsSilent, !wifiInFlight, !wifiTimerScheduled else { return false }
        var wait = 0.0
        if let age = choice.age(of: .wifi, now: now), age < wifiInterval {
            wait = wifiInterval - age
            guard subscribers.keys.contains(where: { paused[$0] == nil }) else { return false }
        }
        if now < wifiNotBefore { wait = max(wait, Double(wifiNotBefore - now) / 1e9) }
        if wait > 0 {
            wifiTimerScheduled = true
            effects.append(.scheduleTimer(.wifiLookup, after: wait))
            return false
        }
        wifiInFlight = true
        wifiOpen = true
        effects.append(.open(.wifi))
        return true
    }

    /// While a grant holds and GPS is silent, the helper is started before
    /// its first lookup is needed: no network is touched until then, and its
    /// start-up (an exec and libcurl's libraries, docs/performance.md) is off
    /// the path of the app's first request. Closed when no grant holds.
    func warmWiFi() {
        guard wifiEnabled, choice.gpsSilent, !wifiOpen else { return }
        wifiOpen = true
        effects.append(.warm(.wifi))
    }

    /// Closes the helper's connection; a lookup under way ends with it (its
    /// result, if any, is dropped by the source).
    func closeWiFi() {
        wifiOpen = false
        wifiInFlight = false
        effects.append(.close(.wifi))
    }

    /// A lookup failed (or found nothing): logged once per reason, tried
    /// again `wifiInterval` later while needed. Requests fail with the cause
    /// when no other source can answer: the receiver is away or off (a
    /// receiver that is connected may still give a fix before they time out).
    func wifiFailed(_ reason: String, _ grants: (SessionID) -> Accuracy?) {
        wifiInFlight = false
        if reason != wifiFailure { effects.append(.log(.warning, "Wi-Fi positioning: \(reason)")) }
        wifiFailure = reason
        wifiNotBefore = now &+ UInt64(wifiInterval * 1e9)
        if let fallback = choice.fallback(now: now) {
            var shown = Shown(fallback, grid: grid)
            return serve(&shown, grants)
        }
        if nothingCanAnswer { announce(currentFailure(nil)) }
        demandChanged()
    }
}
