import GeoCore
import GeoDBus
import GeoGPS
import GeoConsentAPI
import Glibc

/// The I/O half of location: feeds `LocationCore` the calls the consent core let
/// through, its sources' fixes and outcomes (Sources/) and its own timers, and
/// carries out the effects: replies, fixes and their errors through the front
/// end that owns each session (FrontEnd.swift: our own API's signals are its),
/// opening and closing sources, and event-loop timers. It names no protocol and
/// no source but by its kind.
///
/// Every event asks `consent` for the sessions' grants at delivery time (a
/// required argument of the core's `handle`), so a fix never reaches a session
/// whose grant has ended.
final class LocationService: SourceSink {
    private let core: LocationCore
    private let consent: ConsentCore
    private let loop: EventLoop
    /// The sources, by kind (`PositionSourceDriver`).
    private var sources: [PositionSource: PositionSourceDriver] = [:]
    private var timers: [LocationTimer: EventLoop.Token] = [:]
    /// Calls the core has not answered yet, by the consent core's ids, with their session.
    private var held: [CallID: (call: MethodCall, session: SessionID)] = [:]
    /// The front ends (FrontEnd.swift): fixes for client objects' sessions and
    /// `InUse` changes go to them.
    private let frontEnds: FrontEnds

    var receiverConnected: Bool { core.receiverConnected }
    var sourcesOn: [PositionSource] { core.sourcesOn }
    var wifiEnabled: Bool { core.wifiEnabled }
    /// Where each session's last position came from, by its name (`ListSessionDetails`).
    var lastSources: [String: PositionSource] {
        Dictionary(core.lastSources.map { ($0.key.description, $0.value) }, uniquingKeysWith: { a, _ in a })
    }
    var inUse: Bool { core.inUse }

    /// The sources `[sources]` turns on: the receiver at `host:port`, the
    /// static file, Wi-Fi lookups (NetworkManager through `outgoing`, and the
    /// network helper). The static file is read before this returns.
    /// `wifiOn`: root's Wi-Fi switch as the state directory keeps it.
    init(loop: EventLoop, consent: ConsentCore, frontEnds: FrontEnds, outgoing: OutgoingCalls,
         host: String, port: UInt16, linger: Double, gridSize: Double, wifiOn: Bool) {
        self.loop = loop
        self.frontEnds = frontEnds
        self.consent = consent
        let config = consent.config
        let receiverName = "gpsd at \(host):\(port)"
        self.core = LocationCore(linger: linger, gridSize: gridSize, receiverName: receiverName,
                                 gpsWait: config.sources.gpsWait, gpsEnabled: config.sources.gps,
                                 wifiEnabled: !config.sources.wifiURL.isEmpty, wifiOn: wifiOn,
                                 wifiInterval: config.sources.wifiInterval,
                                 requestsPerSession: config.limits.locationRequestsPerSession)
        if config.sources.gps {
            sources[.gps] = GPSSource(loop: loop, host: host, port: port, sink: self)
        }
        if !config.sources.wifiURL.isEmpty {
            if outgoing.register(NetworkManagerReader.purpose) {
                sources[.wifi] = WiFiSource(loop: loop, outgoing: outgoing, helperPath: config.sources.wifiHelper, sink: self)
            } else {
                Log.error("Wi-Fi positioning is off: no call budget is left for NetworkManager")
            }
        }
        if !config.sources.staticFile.isEmpty {
            let file = StaticSource(loop: loop, path: config.sources.staticFile, sink: self)
            sources[.static] = file
            file.start()
        }
    }

    // MARK: Requests (already past the consent gate)

    func locate(_ call: MethodCall, id: CallID, session: SessionID, options: LocationOptions) {
        held[id] = (call, session)
        feed(.locate(id, session: session, options))
    }

    /// `call`: nil for a front end's own request (nothing to answer).
    func startUpdates(_ call: MethodCall?, id: CallID, session: SessionID, options: UpdateOptions) {
        if let call { held[id] = (call, session) }
        feed(.startUpdates(id, session: session, options))
    }

    /// `call`: the `StopUpdates` call to answer, if there is one.
    func stopUpdates(_ call: (id: CallID, call: MethodCall)?, session: SessionID) {
        if let call { held[call.id] = (call.call, session) }
        feed(.stopUpdates(call?.id, session: session))
    }

    /// New filters for a session whose updates run (a client object's thresholds).
    func setUpdateOptions(session: SessionID, _ options: UpdateOptions) {
        feed(.setUpdateOptions(session: session, options))
    }

    /// The session's grant ended (or it left): nothing more reaches it.
    func drop(session: SessionID) {
        feed(.drop(session: session))
    }

    /// Root switched Wi-Fi positioning; false when it cannot be switched on
    /// (no `wifi-url`). Front ends hear of it when it changed.
    func wifiSwitched(_ on: Bool) {
        let before = wifiEnabled
        feed(.wifiSwitched(on))
        if wifiEnabled != before { for frontEnd in frontEnds.all { frontEnd.sourcesChanged() } }
    }

    /// Whether any session holds a grant (the grant journal's count).
    func grantsHeld(_ held: Bool) {
        feed(.grantsHeld(held))
    }

    /// The session's login session is paused: no fix reaches it until `resume`.
    func pause(session: SessionID, _ reason: PauseReason) {
        feed(.pause(session: session, reason))
    }

    func resume(session: SessionID) {
        feed(.resume(session: session))
    }

    /// Closes the sources at shutdown.
    func shutdown() {
        for source in sources.values { source.shutdown() }
    }

    // MARK: Core

    private func feed(_ event: LocationEvent) {
        execute(core.handle(event, now: EventLoop.monotonicNanos(), grants: consent.grantedAccuracy(for:)))
    }

    /// The first signals of a fan-out go out one by one, each as soon as its
    /// session passes; then the daemon gives up the processor once, and the rest
    /// go out in batches (below). Each signal wakes the bus, which wakes its
    /// subscriber; on a machine with few cores those need the core the daemon
    /// holds, and the kernel lets a running task use up its time slice (around a
    /// millisecond) before a woken one gets in, so without the yield the first
    /// subscriber of 100 hears only when most of the fan-out is out. Only once:
    /// each `sched_yield` can hand a whole time slice to any busy process on the
    /// machine (docs/performance.md, "Fan-out"). With nothing else waiting it
    /// returns at once.
    static let signalsBeforeYield = 8
    /// After the yield, signals are decided this many at a time and then sent
    /// back to back: alternating the core's work with a system call per session
    /// costs more processor time than doing each in a run.
    static let signalBatch = 16

    /// A fix from a source, streamed: each reply and the first subscribers' signals
    /// leave as soon as the core has checked that session's grant and filters
    /// (in an order that rotates from fix to fix), so the first subscriber hears
    /// it as if it were alone; the others follow in short batches.
    func sourceFix(_ fix: Fix) {
        var delivery = FixDelivery(frontEnds: frontEnds)
        let rest = core.handleFix(fix, now: EventLoop.monotonicNanos(), grants: consent.grantedAccuracy(for:)) { effect in
            perform(effect, &delivery)
        }
        execute(rest, &delivery)
    }

    private func execute(_ effects: [LocationEffect]) {
        var delivery = FixDelivery(frontEnds: frontEnds)
        execute(effects, &delivery)
    }

    private func execute(_ effects: [LocationEffect], _ delivery: inout FixDelivery) {
        for effect in effects { perform(effect, &delivery) }
        delivery.flush()
    }

    /// Carries out one effect. Every fix, streamed or not, takes the one path of
    /// `FixDelivery`; whatever else the core says comes after the fixes decided
    /// before it.
    private func perform(_ effect: LocationEffect, _ delivery: inout FixDelivery) {
        if case .locationUpdated(let sessions, let acc, let fix) = effect {
            return delivery.add(sessions, acc, fix)
        }
        delivery.flush()
        switch effect {
        case .locationUpdated:
            break
        case .reply(let id, .empty):
            held.removeValue(forKey: id)?.call.reply()
        case .reply(let id, .location(let fix, let acc)):
            guard let h = held.removeValue(forKey: id) else { break }
            h.call.reply(frontEnds.owner(of: h.session)?.locationReply(fix, acc) ?? [])
        case .fail(let id, let failure):
            held.removeValue(forKey: id)?.call.fail(DBusError(failure.dbusName, failure.message))
        case .locationError(let session, let failure):
            frontEnds.owner(of: session)?.locationError(session, name: failure.dbusName, message: failure.message)
        case .receiverConnectedChanged(let value):
            for frontEnd in frontEnds.all { frontEnd.receiverChanged(connected: value) }
        case .inUseChanged(let value):
            for frontEnd in frontEnds.all { frontEnd.inUseChanged(value) }
        case .open(let kind):
            sources[kind]?.open()
        case .warm(let kind):
            sources[kind]?.warm()
        case .close(let kind):
            sources[kind]?.close()
        case .sourcesChanged:
            for frontEnd in frontEnds.all { frontEnd.sourcesChanged() }
        case .served(let session, let source):
            if let caller = consent.caller(of: session) {
                let note = GrantNote(caller, .served(source))
                Log.byCaller(uid: note.uid, .info, note.description)
            }
        case .scheduleTimer(let timer, let seconds):
            if let old = timers[timer] { loop.cancelTimer(old) }
            timers[timer] = loop.schedule(after: seconds) { [weak self] in
                guard let self else { return }
                self.timers[timer] = nil
                self.feed(.timerFired(timer))
            }
        case .cancelTimer(let timer):
            if let t = timers.removeValue(forKey: timer) { loop.cancelTimer(t) }
        case .log(.warning, let line):
            Log.warning(line)
        case .log(.notice, let line):
            Log.notice(line)
        case .log(.info, let line):
            Log.info(line)
        }
    }

    // MARK: Sources

    func sourceEvent(_ event: LocationEvent) { feed(event) }
}
