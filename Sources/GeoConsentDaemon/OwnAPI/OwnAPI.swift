import Glibc
import GeoCore
import GeoDBus
import GeoConsentAPI

/// Our own API, `org.geoconsent.GeoConsent1` (docs/dbus-api.md), as a front
/// end like the GeoClue facade: it reaches the daemon through the host alone,
/// and the effects on its sessions (a connection's own, `SessionID.connection`)
/// come to it alone. Its method handlers are bound by name to the table
/// declared in `GeoConsentAPI.interface`; each decodes its options (wrong types:
/// `InvalidArgs`), resolves the caller from bus credentials and hands the
/// request to the core. Its signals are unicast to their session; its
/// properties are the same for every caller.
final class OwnAPI: FrontEnd {
    unowned let host: FrontEndHost
    /// Each view (accuracy) of the latest fix encoded once, its signal marshalled once.
    private var sends: FixSends
    /// Fixes sent since the last `flushFixes`, and those held back for a batch.
    private var sentSinceFlush = 0
    private var batch: [(name: String, signal: UnicastSignal)] = []

    init(host: FrontEndHost) {
        self.host = host
        sends = FixSends(server: host.server)
        precondition(host.register(PolkitCheck.purpose), "the budgets of all purposes would pass the bus's share")
    }

    var busNames: [String] { [] }   // the daemon owns GeoConsentAPI.busName itself
    var objectKind: ObjectKind? { nil }   // no client objects: its sessions are connections' own
    var servesConnectionSessions: Bool { true }

    func serve() {
        host.server.export(self, at: GeoConsentAPI.objectPath, interfaces: [Self.interface])
    }

    static let interface = Interface<OwnAPI>(
        GeoConsentAPI.interface,
        methods: [
            "RequestOneTimeAuthorization": { d, call in
                d.decoded(call, { try OptionDictionary.decodeAuth(call.arguments[0]) }) { d.request(call, .requestOneTime($0)) }
            },
            "RequestWhenInUseAuthorization": { d, call in
                d.decoded(call, { try OptionDictionary.decodeAuth(call.arguments[0]) }) { d.request(call, .requestWhenInUse($0)) }
            },
            "GetAuthorization": { d, call in d.request(call, .getAuthorization) },
            "RequestLocation": { d, call in
                d.decoded(call, { try OptionDictionary.decodeLocation(call.arguments[0]) }) { d.request(call, .requestLocation($0)) }
            },
            "StartUpdates": { d, call in
                d.decoded(call, { try OptionDictionary.decodeUpdates(call.arguments[0]) }) { d.request(call, .startUpdates($0)) }
            },
            "StopUpdates": { d, call in d.request(call, .stopUpdates) },
            "Revoke": { d, call in d.request(call, .revoke) },
            "RegisterAgent": { d, call in
                d.decoded(call, { try OptionDictionary.agentPath(call.arguments[0]) }) { d.management(call, .registerAgent(path: $0)) }
            },
            "RegisterAgentWithOptions": { d, call in
                d.decoded(call, { (try OptionDictionary.agentPath(call.arguments[0]),
                                   try OptionDictionary.decodeAgentOptions(call.arguments[1])) }) {
                    d.management(call, .registerAgent(path: $0.0, features: $0.1))
                }
            },
            "EndGrants": { d, call in
                d.decoded(call, { (try OptionDictionary.appID(call.arguments[0]), try OptionDictionary.decodeReset(call.arguments[1])) }) {
                    d.management(call, .endGrants(appID: $0.0, uid: $0.1))
                }
            },
            "UnregisterAgent": { d, call in
                d.decoded(call, { try OptionDictionary.agentPath(call.arguments[0]) }) { d.management(call, .unregisterAgent(path: $0)) }
            },
            "ListConsents": { d, call in d.management(call, .listConsents) },
            "ResetConsent": { d, call in
                d.decoded(call, { (try OptionDictionary.appID(call.arguments[0]), try OptionDictionary.decodeReset(call.arguments[1])) }) {
                    d.management(call, .resetConsent(appID: $0.0, uid: $0.1))
                }
            },
            "SetConsent": { d, call in
                d.decoded(call, { (try OptionDictionary.appID(call.arguments[0]), try OptionDictionary.decodeSetConsent(call.arguments[1])) }) {
                    d.management(call, .setConsent(appID: $0.0, uid: $0.1.uid, decision: $0.1.decision, accuracy: $0.1.accuracy))
                }
            },
            "SetUserLocation": { d, call in
                d.decoded(call, { (call.arguments[0].boolValue ?? false, try OptionDictionary.decodeReset(call.arguments[1])) }) {
                    d.management(call, .setUserLocation(on: $0.0, uid: $0.1))
                }
            },
            "GetUserLocation": { d, call in
                d.decoded(call, { try OptionDictionary.decodeReset(call.arguments[0]) }) { d.management(call, .getUserLocation(uid: $0)) }
            },
            "ListSessions": { d, call in d.management(call, .listSessions) },
            "ListSessionDetails": { d, call in d.management(call, .listSessionDetails) },
            "WatchSessions": { d, call in d.management(call, .watchSessions) },
        ],
        getters: [
            DaemonProperties.version: { _ in .string(geoconsentVersion) },
            DaemonProperties.enabled: { d in .bool(d.host.consent.enabled) },
            DaemonProperties.gpsdConnected: { d in .bool(d.host.locationReceiverConnected) },
            DaemonProperties.inUse: { d in .bool(d.host.locationInUse) },
            DaemonProperties.sources: { d in DaemonProperties.encode(sources: d.host.locationSources) },
            DaemonProperties.wifiEnabled: { d in .bool(d.host.wifiEnabled) },
        ],
        setters: [
            DaemonProperties.enabled: { d, call, value in
                let on = value.boolValue ?? false
                d.administrative(call, PolkitCheck.setEnabled) { .setEnabled(on, authorized: $0) }
            },
            DaemonProperties.wifiEnabled: { d, call, value in
                let on = value.boolValue ?? false
                d.administrative(call, PolkitCheck.setWiFi) { .setWiFiEnabled(on, authorized: $0) }
            },
        ])

    /// Decodes options; a wrong type is answered with `InvalidArgs` before anything else happens.
    private func decoded<T>(_ call: MethodCall, _ decode: () throws -> T, then body: (T) -> Void) {
        do {
            body(try decode())
        } catch let e as DBusError {
            call.fail(e)
        } catch {
            call.fail(.invalidArgs("\(error)"))
        }
    }

    /// A switch for everyone written (`Enabled`, `WiFiEnabled`): root's at
    /// once; anyone else's once polkit says that caller may do `action`
    /// (`PolkitCheck`), the core then taking it as the administrator's.
    private func administrative(_ call: MethodCall, _ action: PolkitCheck.Action,
                                _ request: @escaping (_ authorized: Bool) -> ManagementRequest) {
        call.releaseArguments()
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            let id = self.host.hold(call)
            guard !caller.isRoot else { return self.host.feed(.management(id, caller, request(false))) }
            PolkitCheck.check(self.host, caller, action: action) { [weak self] refusal in
                guard let self else { return }
                if let refusal { return self.host.abandon(id, refusal) }
                self.host.feed(.management(id, caller, request(true)))
            }
        }
    }

    /// An app's request: starts the caller's session if it has none.
    private func request(_ call: MethodCall, _ request: AppRequest) {
        // `request` holds what was decoded; a call that waits keeps no more.
        call.releaseArguments()
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            self.host.feed(.request(self.host.hold(call), caller, request))
        }
    }

    private func management(_ call: MethodCall, _ request: ManagementRequest) {
        call.releaseArguments()
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            self.host.feed(.management(self.host.hold(call), caller, request))
        }
    }

    // MARK: Effects on its sessions

    /// The body of the core's reply to one of its calls, in its wire shapes.
    func replyArguments(_ reply: CoreReply) -> [DBusValue] {
        switch reply {
        case .empty:
            return []
        case .status(let s):
            return StatusReply.encode(s)
        case .authorization(let a):
            return AuthorizationReply.encode(a)
        case .consents(let list):
            return ConsentListReply.encode(list)
        case .sessions(let list):
            return SessionListReply.encode(list)
        case .flag(let on):
            return [.bool(on)]
        case .sessionDetails(var list):
            let sources = host.lastSources
            for i in list.indices { list[i].source = sources[list[i].name] }
            return SessionDetailsReply.encode(list)
        }
    }

    func authorizationChanged(_ session: SessionID, _ status: AuthorizationStatus) {
        guard let name = session.busName else { return }
        emit(AuthorizationChangedSignal.member, AuthorizationChangedSignal.encode(status), to: name)
    }

    func locationError(_ session: SessionID, name errorName: String, message: String) {
        guard let name = session.busName else { return }
        emit(LocationErrorSignal.member, LocationErrorSignal.encode(name: errorName, message: message), to: name)
    }

    /// `SessionsChanged` to each watcher: no arguments, the watcher reads
    /// `ListSessionDetails`, which shows it its own uid's.
    func sessionsChanged(watchers: [String]) {
        for name in watchers { emit(SessionsChangedSignal.member, [], to: name) }
    }

    /// Its status signal (`AuthorizationChanged`) says so; the location side has dropped the session.
    func grantEnded(session: SessionID, byPause: Bool) {}

    func enabledChanged() { propertyChanged(DaemonProperties.enabled, host.consent.enabled) }
    func inUseChanged(_ value: Bool) { propertyChanged(DaemonProperties.inUse, value) }
    func receiverChanged(connected: Bool) { propertyChanged(DaemonProperties.gpsdConnected, connected) }
    func sourcesChanged() {
        host.server.propertiesChanged(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                      changed: [DaemonProperties.sources: DaemonProperties.encode(sources: host.locationSources),
                                                DaemonProperties.wifiEnabled: .bool(host.wifiEnabled)])
    }

    // MARK: Fixes

    var streamsFixes: Bool { true }

    /// Its fixes are streamed (`sendFix`), never gathered.
    func deliver(_ sessions: [SessionID], _ fix: Fix) {}

    /// A fix for one of its sessions, in the location core's order: a unicast
    /// `LocationUpdated`, the first `signalsBeforeYield` one by one (then the
    /// processor is given up once), then in batches of `signalBatch`.
    func sendFix(to session: SessionID, _ fix: Fix, _ acc: Accuracy) {
        guard let name = session.busName else { return }
        let s = sends.signal(fix, acc)
        sentSinceFlush += 1
        if sentSinceFlush <= LocationService.signalsBeforeYield {
            s.send(to: name)
            if sentSinceFlush == LocationService.signalsBeforeYield { sched_yield() }
        } else {
            batch.append((name, s))
            if batch.count == LocationService.signalBatch { sendBatch() }
        }
    }

    func flushFixes() {
        if !batch.isEmpty { sendBatch() }
        sentSinceFlush = 0
    }

    private func sendBatch() {
        for b in batch { b.signal.send(to: b.name) }
        batch.removeAll(keepingCapacity: true)
    }

    /// `RequestLocation`'s reply: the same dictionary its signal carries.
    func locationReply(_ fix: Fix, _ acc: Accuracy) -> [DBusValue] { LocationBody.encode(sends.value(fix, acc)) }

    private func emit(_ member: String, _ args: [DBusValue], to name: String) {
        host.server.emit(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName, member: member, args,
                         destination: name)
    }

    private func propertyChanged(_ name: String, _ value: Bool) {
        host.server.propertiesChanged(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                      changed: DaemonProperties.changed(name, value))
    }
}

/// Each accuracy's view of the latest fix encoded once, and its
/// `LocationUpdated` marshalled once: one fix goes to every waiting call and
/// subscriber of that accuracy.
struct FixSends {
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
