import GeoCore
import GeoDBus
import GeoGPS
import GeoConsentAPI

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

    private func execute(_ effects: [LocationEffect]) {
        var encoded = Encoded()
        for effect in effects {
            switch effect {
            case .reply(let id, .empty):
                held.removeValue(forKey: id)?.reply()
            case .reply(let id, .location(let fix, let acc)):
                held.removeValue(forKey: id)?.reply(LocationBody.encode(encoded.value(fix, acc)))
            case .fail(let id, let failure):
                held.removeValue(forKey: id)?.fail(DBusError(failure.dbusName, failure.message))
            case .locationUpdated(var sessions, let acc, let fix):
                if let clientFixes {
                    let clients = sessions.filter(Caller.isClientSession)
                    if !clients.isEmpty {
                        clientFixes(clients, fix)
                        sessions.removeAll(where: Caller.isClientSession)
                    }
                }
                guard !sessions.isEmpty else { continue }
                server.emit(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                            member: LocationUpdatedSignal.member, LocationBody.encode(encoded.value(fix, acc)),
                            destinations: sessions)
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

    /// Each accuracy's view of the fix encoded once per batch of effects: one fix
    /// goes to every waiting call and subscriber of that accuracy.
    private struct Encoded {
        private var cache: [Accuracy: (fix: Fix, value: DBusValue)] = [:]

        mutating func value(_ fix: Fix, _ acc: Accuracy) -> DBusValue {
            if let c = cache[acc], c.fix == fix { return c.value }
            let v = LocationDictionary.encode(fix, accuracy: acc)
            cache[acc] = (fix, v)
            return v
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
        let r = c.readAvailable()
        for f in r.fixes { feed(.fix(f)) }
        if r.closed { feed(.gpsdClosed) }
    }
}
