import GeoCore
import GeoDBus
import GeoGPS
import GeoConsentAPI
import Glibc

/// The I/O half of location: feeds `LocationCore` the calls the consent core let
/// through, gpsd's fixes and connection outcomes and its own timers, and carries
/// out the effects: replies, `LocationUpdated`/`LocationError` signals,
/// `PropertiesChanged`, the gpsd connection and event-loop timers.
///
/// Every event asks `consent` for the sessions' grants at delivery time (a
/// required argument of the core's `handle`), so a fix never reaches a session
/// whose grant has ended.
final class LocationService {
    private let core: LocationCore
    private let consent: ConsentCore
    private let loop: EventLoop
    private let server: ObjectServer
    private let connector: GPSDConnector

    private var client: GPSDClient?
    private var clientWatch: EventLoop.Token?
    private var timers: [LocationTimer: EventLoop.Token] = [:]
    /// Calls the core has not answered yet, by the consent core's ids.
    private var held: [CallID: MethodCall] = [:]
    /// The front ends (FrontEnd.swift): fixes for client objects' sessions and
    /// `InUse` changes go to them.
    private let frontEnds: FrontEnds

    var gpsdConnected: Bool { core.gpsdConnected }
    var inUse: Bool { core.inUse }

    init(loop: EventLoop, server: ObjectServer, consent: ConsentCore, frontEnds: FrontEnds,
         host: String, port: UInt16, linger: Double, gridSize: Double) {
        self.loop = loop
        self.frontEnds = frontEnds
        self.server = server
        self.consent = consent
        self.connector = GPSDConnector(loop: loop, host: host, port: port)
        self.core = LocationCore(linger: linger, gridSize: gridSize, gpsdLabel: "\(host):\(port)",
                                 requestsPerSession: consent.config.limits.locationRequestsPerSession)
    }

    // MARK: Requests (already past the consent gate)

    func locate(_ call: MethodCall, id: CallID, session: SessionID, options: LocationOptions) {
        held[id] = call
        feed(.locate(id, session: session, options))
    }

    /// `call`: nil for a front end's own request (nothing to answer).
    func startUpdates(_ call: MethodCall?, id: CallID, session: SessionID, options: UpdateOptions) {
        if let call { held[id] = call }
        feed(.startUpdates(id, session: session, options))
    }

    /// `call`: the `StopUpdates` call to answer, if there is one.
    func stopUpdates(_ call: (id: CallID, call: MethodCall)?, session: SessionID) {
        if let call { held[call.id] = call.call }
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

    /// The session's login session is paused: no fix reaches it until `resume`.
    func pause(session: SessionID, _ reason: PauseReason) {
        feed(.pause(session: session, reason))
    }

    func resume(session: SessionID) {
        feed(.resume(session: session))
    }

    /// Closes gpsd at shutdown.
    func shutdown() {
        if let w = clientWatch { loop.unwatch(w) }
        client?.close()
        client = nil
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

    /// A fix from gpsd, streamed: each reply and the first subscribers' signals
    /// leave as soon as the core has checked that session's grant and filters
    /// (in an order that rotates from fix to fix), so the first subscriber hears
    /// it as if it were alone; the others follow in short batches.
    private func received(_ fix: Fix) {
        var delivery = FixDelivery(server: server, frontEnds: frontEnds)
        let rest = core.handleFix(fix, now: EventLoop.monotonicNanos(), grants: consent.grantedAccuracy(for:)) { effect in
            perform(effect, &delivery)
        }
        execute(rest, &delivery)
    }

    private func execute(_ effects: [LocationEffect]) {
        var delivery = FixDelivery(server: server, frontEnds: frontEnds)
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
            held.removeValue(forKey: id)?.reply()
        case .reply(let id, .location(let fix, let acc)):
            held.removeValue(forKey: id)?.reply(LocationBody.encode(delivery.sends.value(fix, acc)))
        case .fail(let id, let failure):
            held.removeValue(forKey: id)?.fail(DBusError(failure.dbusName, failure.message))
        case .locationError(.connection(let name), let failure):
            server.emit(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                        member: LocationErrorSignal.member,
                        LocationErrorSignal.encode(name: failure.dbusName, message: failure.message),
                        destination: name)
        case .locationError(.clientObject, _):
            break   // GeoClue has no such signal: its clients just get no fix
        case .gpsdConnectedChanged(let value):
            propertyChanged(DaemonProperties.gpsdConnected, value)
        case .inUseChanged(let value):
            propertyChanged(DaemonProperties.inUse, value)
            for frontEnd in frontEnds.all { frontEnd.inUseChanged(value) }
        case .connect:
            connector.connect { [weak self] result in self?.connected(result) }
        case .disconnect:
            if let w = clientWatch { loop.unwatch(w); clientWatch = nil }
            client?.close()
            client = nil
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

    /// The one path a fix takes to its sessions, from gpsd's stream or from a
    /// batch of effects (a cached fix at `StartUpdates`, a resume). Our API's
    /// sessions get a unicast `LocationUpdated` as soon as they are decided: the
    /// first `signalsBeforeYield` one by one, then in batches of `signalBatch`.
    /// Client objects' sessions are gathered per view of the fix and handed to the front
    /// ends at `flush`, so each encodes its properties once per group.
    private struct FixDelivery {
        var sends: Sends
        let frontEnds: FrontEnds
        private var signals = 0
        private var batch: [(name: String, signal: UnicastSignal)] = []
        private var clients: [(fix: Fix, sessions: [SessionID])] = []

        init(server: ObjectServer, frontEnds: FrontEnds) {
            sends = Sends(server: server)
            self.frontEnds = frontEnds
        }

        mutating func add(_ sessions: [SessionID], _ acc: Accuracy, _ fix: Fix) {
            var signal: UnicastSignal?
            for session in sessions {
                guard case .connection(let name) = session else {
                    // One group per view of the fix (full, reduced), whatever the order.
                    if let i = clients.firstIndex(where: { $0.fix == fix }) {
                        clients[i].sessions.append(session)
                    } else {
                        clients.append((fix, [session]))
                    }
                    continue
                }
                let s = signal ?? sends.signal(fix, acc)
                signal = s
                signals += 1
                if signals <= LocationService.signalsBeforeYield {
                    s.send(to: name)
                    if signals == LocationService.signalsBeforeYield { sched_yield() }
                } else {
                    batch.append((name, s))
                    if batch.count == LocationService.signalBatch { sendBatch() }
                }
            }
        }

        private mutating func sendBatch() {
            for b in batch { b.signal.send(to: b.name) }
            batch.removeAll(keepingCapacity: true)
        }

        /// Sends what is decided: before any other effect, and at the end.
        mutating func flush() {
            if !batch.isEmpty { sendBatch() }
            guard !clients.isEmpty else { return }
            // Each front end gets its own sessions of the group (a group mixes them only when several are served).
            for group in clients {
                guard let first = group.sessions.first, let owner = frontEnds.owner(of: first) else { continue }
                if frontEnds.all.count == 1 { owner.deliver(group.sessions, group.fix); continue }
                for frontEnd in frontEnds.all {
                    let own = group.sessions.filter { frontEnds.owner(of: $0) === frontEnd }
                    if !own.isEmpty { frontEnd.deliver(own, group.fix) }
                }
            }
            clients.removeAll()
        }
    }

    /// Each accuracy's view of the fix encoded once per batch of effects, and its
    /// `LocationUpdated` marshalled once: one fix goes to every waiting call and
    /// subscriber of that accuracy.
    private struct Sends {
        let server: ObjectServer
        private var values: [Accuracy: (fix: Fix, value: DBusValue)] = [:]
        private var signals: [Accuracy: (fix: Fix, signal: UnicastSignal)] = [:]
        private var last: (acc: Accuracy, fix: Fix, signal: UnicastSignal)?

        init(server: ObjectServer) { self.server = server }

        mutating func value(_ fix: Fix, _ acc: Accuracy) -> DBusValue {
            if let c = values[acc], c.fix == fix { return c.value }
            let v = LocationDictionary.encode(fix, accuracy: acc)
            values[acc] = (fix, v)
            return v
        }

        mutating func signal(_ fix: Fix, _ acc: Accuracy) -> UnicastSignal {
            // A fan-out asks for the same one again and again.
            if let last, last.acc == acc, last.fix == fix { return last.signal }
            if let c = signals[acc], c.fix == fix {
                last = (acc, fix, c.signal)
                return c.signal
            }
            let s = server.unicastSignal(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                         member: LocationUpdatedSignal.member, LocationBody.encode(value(fix, acc)))
            signals[acc] = (fix, s)
            last = (acc, fix, s)
            return s
        }
    }

    private func propertyChanged(_ name: String, _ value: Bool) {
        server.propertiesChanged(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                 changed: DaemonProperties.changed(name, value))
    }

    // MARK: gpsd

    private func connected(_ result: Result<GPSDClient, GPSDError>) {
        switch result {
        case .success(let c):
            client = c
            clientWatch = loop.watch(fd: c.fd, events: .readable) { [weak self] _ in self?.readable() }
            feed(.gpsdConnected)
        case .failure(let e):
            feed(.gpsdConnectFailed(reason: "\(e)"))
        }
    }

    private func readable() {
        guard let c = client else { return }
        // Each fix goes out as soon as libgps has decoded it, before the read that
        // finds the socket empty. A fix's effects may close the client (`client`
        // is then another or nil): that is no gpsd going away.
        let closed = c.readAvailable { received($0) }
        if closed, client === c { feed(.gpsdClosed) }
    }
}
