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
    /// Where fixes for client objects' sessions go (`Caller.isClientSession`)
    /// when the GeoClue facade is served, and `InUse` changes with them.
    var clientFixes: ((_ sessions: [String], _ fix: Fix) -> Void)?
    var inUseChanged: ((Bool) -> Void)?

    var gpsdConnected: Bool { core.gpsdConnected }
    var inUse: Bool { core.inUse }

    init(loop: EventLoop, server: ObjectServer, consent: ConsentCore,
         host: String, port: UInt16, linger: Double, gridSize: Double) {
        self.loop = loop
        self.server = server
        self.consent = consent
        self.connector = GPSDConnector(loop: loop, host: host, port: port)
        self.core = LocationCore(linger: linger, gridSize: gridSize, gpsdLabel: "\(host):\(port)",
                                 requestsPerSession: consent.config.limits.locationRequestsPerSession)
    }

    // MARK: Requests (already past the consent gate)

    func locate(_ call: MethodCall, id: CallID, session: String, options: LocationOptions) {
        held[id] = call
        feed(.locate(id, session: session, options))
    }

    func startUpdates(_ call: MethodCall, id: CallID, session: String, options: UpdateOptions) {
        held[id] = call
        feed(.startUpdates(id, session: session, options))
    }

    /// `call`: the `StopUpdates` call to answer, if there is one.
    func stopUpdates(_ call: (id: CallID, call: MethodCall)?, session: String) {
        if let call { held[call.id] = call.call }
        feed(.stopUpdates(call?.id, session: session))
    }

    /// New filters for a session whose updates run (a client object's thresholds).
    func setUpdateOptions(session: String, _ options: UpdateOptions) {
        feed(.setUpdateOptions(session: session, options))
    }

    /// The session's grant ended (or it left): nothing more reaches it.
    func drop(session: String) {
        feed(.drop(session: session))
    }

    /// The session's login session is paused: no fix reaches it until `resume`.
    func pause(session: String, _ reason: PauseReason) {
        feed(.pause(session: session, reason))
    }

    func resume(session: String) {
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
    /// it as if it were alone; the others follow in short batches. Client
    /// objects' fixes (the GeoClue facade) go over after the core is done, in one
    /// batch per accuracy as before: the facade encodes its properties once per
    /// batch.
    private func received(_ fix: Fix) {
        var sends = Sends(server: server)
        var clients: [Accuracy: (fix: Fix, sessions: [String])] = [:]
        var signals = 0
        var batch: [(session: String, signal: UnicastSignal)] = []
        func flush() {
            for b in batch { b.signal.send(to: b.session) }
            batch.removeAll(keepingCapacity: true)
        }
        let rest = core.handleFix(fix, now: EventLoop.monotonicNanos(), grants: consent.grantedAccuracy(for:)) { effect in
            guard case .locationUpdated(let sessions, let acc, let view) = effect else {
                flush()   // in the core's order
                return send(effect, &sends)
            }
            if clientFixes != nil, sessions.contains(where: Caller.isClientSession) {
                clients[acc, default: (view, [])].sessions.append(contentsOf: sessions)
                return
            }
            let signal = sends.signal(view, acc)
            for session in sessions {
                signals += 1
                if signals <= Self.signalsBeforeYield {
                    signal.send(to: session)
                    if signals == Self.signalsBeforeYield { sched_yield() }
                } else {
                    batch.append((session, signal))
                    if batch.count == Self.signalBatch { flush() }
                }
            }
        }
        flush()
        for acc in [Accuracy.full, .reduced] {
            if let c = clients[acc] { clientFixes?(c.sessions, c.fix) }
        }
        execute(rest, sends: &sends)
    }

    private func execute(_ effects: [LocationEffect]) {
        var sends = Sends(server: server)
        execute(effects, sends: &sends)
    }

    /// Carries out a reply or a signal to sessions (our API's; client objects' are
    /// split off before this).
    private func send(_ effect: LocationEffect, _ sends: inout Sends) {
        switch effect {
        case .reply(let id, .empty):
            held.removeValue(forKey: id)?.reply()
        case .reply(let id, .location(let fix, let acc)):
            held.removeValue(forKey: id)?.reply(LocationBody.encode(sends.value(fix, acc)))
        case .fail(let id, let failure):
            held.removeValue(forKey: id)?.fail(DBusError(failure.dbusName, failure.message))
        case .locationUpdated(let sessions, let acc, let fix):
            let signal = sends.signal(fix, acc)
            for s in sessions { signal.send(to: s) }
        default:
            break
        }
    }

    private func execute(_ effects: [LocationEffect], sends: inout Sends) {
        for effect in effects {
            switch effect {
            case .reply, .fail:
                send(effect, &sends)
            case .locationUpdated(var sessions, let acc, let fix):
                if let clientFixes {
                    let clients = sessions.filter(Caller.isClientSession)
                    if !clients.isEmpty {
                        clientFixes(clients, fix)
                        sessions.removeAll(where: Caller.isClientSession)
                    }
                }
                guard !sessions.isEmpty else { continue }
                send(.locationUpdated(sessions: sessions, acc, fix), &sends)
            case .locationError(let session, _) where Caller.isClientSession(session):
                break   // GeoClue has no such signal: its clients just get no fix
            case .locationError(let session, let failure):
                server.emit(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                            member: LocationErrorSignal.member,
                            LocationErrorSignal.encode(name: failure.dbusName, message: failure.message),
                            destination: session)
            case .gpsdConnectedChanged(let value):
                propertyChanged(DaemonProperties.gpsdConnected, value)
            case .inUseChanged(let value):
                propertyChanged(DaemonProperties.inUse, value)
                inUseChanged?(value)
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
