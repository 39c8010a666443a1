import GeoConsentDaemon
import GeoCore
import GeoDBus

/// A front end made only for the tests (`org.geoconsent.TestLab1`, an
/// interface of its own), served through the host alone: it proves that a
/// protocol can be added without a change to the cores, the daemon or the
/// location service. Each connection has one session (`lab` object 1):
/// `Ask(reason)` is a consent request (prompt, grant) that starts fixes;
/// each fix comes as `Fix(latitude, longitude)` to the asker alone, and
/// `Ended` says its grant ended. `Stop()` ends it.
final class LabFrontEnd: FrontEnd {
    static let busName = "org.geoconsent.TestLab1"
    static let path = "/org/geoconsent/TestLab1"
    static let kind = ObjectKind(word: "lab")

    private unowned let host: FrontEndHost
    /// The connections that asked, by their session.
    private var askers: [SessionID: String] = [:]

    init(host: FrontEndHost) { self.host = host }

    var busNames: [String] { [Self.busName] }
    var objectKind: ObjectKind? { Self.kind }
    var isIdle: Bool { askers.isEmpty }

    private static let interface = Interface<LabFrontEnd>(
        busName,
        methods: [
            MethodEntry("Ask", in: [Arg("reason", "s")]) { lab, call in lab.ask(call) },
            MethodEntry("Stop") { lab, call in lab.stop(call) },
        ],
        signals: [SignalEntry("Fix", [Arg("latitude", "d"), Arg("longitude", "d")]), SignalEntry("Ended")])

    func serve() { host.server.export(self, at: Self.path, interfaces: [Self.interface]) }

    private func session(of connection: String) -> SessionID { .clientObject(connection: connection, kind: Self.kind, number: 1) }

    /// A request for consent; once granted, the location side answers the call and streams fixes.
    private func ask(_ call: MethodCall) {
        let reason = call.arguments.first?.stringValue ?? ""
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            let session = caller.clientSession(1, kind: Self.kind)
            self.askers[session.session] = call.sender
            self.host.feed(.request(self.host.hold(call), session,
                                   .start(AuthOptions(reason: reason, appName: "lab"), UpdateOptions())))
        }
    }

    private func stop(_ call: MethodCall) {
        let s = session(of: call.sender)
        if askers.removeValue(forKey: s) != nil { host.feed(.sessionEnded(s)) }
        call.reply()
    }

    func deliver(_ sessions: [SessionID], _ fix: Fix) {
        for s in sessions {
            guard let owner = askers[s] else { continue }
            host.server.emit(path: Self.path, interface: Self.busName, member: "Fix",
                             [.double(fix.latitude), .double(fix.longitude)], destination: owner)
        }
    }

    func grantEnded(session: SessionID, byPause: Bool) {
        guard let owner = askers[session] else { return }
        host.server.emit(path: Self.path, interface: Self.busName, member: "Ended", [], destination: owner)
    }

    func connectionLeft(_ name: String) { askers[session(of: name)] = nil }
}
