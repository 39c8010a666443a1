import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A private bus, a gpsd fed over UDP and the real daemon, torn down after the test.
final class Stack {
    let bus: TestBus
    let gpsd: GpsdInstance
    private(set) var daemon: DaemonInstance
    let peers = PeerLoop()
    let stateDir: TempDir
    let configText: String

    /// `executable`: another build of the daemon (the front-end lab's).
    init(config: String = "", stateDir: TempDir? = nil, executable: String? = nil) throws {
        bus = try TestBus()
        gpsd = try GpsdInstance()
        self.stateDir = try stateDir ?? TempDir()
        configText = config
        daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port, configText: config,
                                    stateDir: self.stateDir.path, executable: executable)
    }

    /// Stops the daemon and starts it again on the same bus and state directory.
    func restartDaemon(config: String? = nil) throws {
        daemon.stop()
        daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port, configText: config ?? configText,
                                    stateDir: stateDir.path)
    }

    func stop() {
        daemon.stop()
        gpsd.stop()
        bus.stop()
    }

    func peer() throws -> BusPeer { try peers.connect(bus.address) }

    /// Runs geoconsentctl against this stack's bus, optionally as another user;
    /// its standard error goes to `stderrPath`.
    func ctl(_ args: [String], asUID uid: UInt32? = nil, timeout: Double = 20,
             environment: [String: String] = [:], stderrPath: String = "/dev/null") throws -> (status: Int32?, output: String) {
        let exe = TestPaths.binDir + "/geoconsentctl"
        if let uid {
            return try ChildProcess.run("/usr/bin/setpriv",
                                        ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", exe, "--bus", bus.address] + args,
                                        timeout: timeout, logPath: stderrPath)
        }
        return try ChildProcess.run(exe, ["--bus", bus.address] + args, timeout: timeout, logPath: stderrPath,
                                    environment: environment)
    }
}

/// A test case with a fresh `Stack` per test (its daemon started with
/// `stackConfig`), stopped after the test whether it passed or not.
class StackTestCase: XCTestCase {
    var stack: Stack!

    /// The daemon's config text for this test case.
    var stackConfig: String { "" }

    override func setUpWithError() throws {
        stack = try Stack(config: stackConfig)
    }

    override func tearDown() {
        stack?.stop()
        stack = nil
    }
}

extension BusPeer {
    /// Calls a method of the daemon's client interface.
    @discardableResult
    func geo(_ member: String, _ args: [DBusValue] = [], interface: String = GeoConsentAPI.interfaceName,
             timeout: Double = 30) -> Result<[DBusValue], DBusError> {
        call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, interface, member, args, timeout: timeout)
    }

    func geoAsync(_ member: String, _ args: [DBusValue] = [], timeout: Double = 120) -> PendingCall {
        callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName, member, args, timeout: timeout)
    }

    /// `RequestOneTimeAuthorization` with `options`; returns the status's number (999 for
    /// a reply that is not a status) or the error.
    func tap(_ options: AuthOptions = AuthOptions(), timeout: Double = 30) -> Result<UInt32, DBusError> {
        tap(rawOptions: OptionDictionary.encode(options), timeout: timeout)
    }

    /// `RequestOneTimeAuthorization` with an options dictionary as given (wrong types too).
    func tap(_ options: [String: DBusValue], timeout: Double = 30) -> Result<UInt32, DBusError> {
        tap(rawOptions: .vardict(options), timeout: timeout)
    }

    private func tap(rawOptions: DBusValue, timeout: Double) -> Result<UInt32, DBusError> {
        geo("RequestOneTimeAuthorization", [rawOptions], timeout: timeout).map { StatusReply.decode($0)?.rawValue ?? 999 }
    }

    /// `GetAuthorization`, decoded.
    func authorization() throws -> AuthorizationInfo {
        try decoded(geo("GetAuthorization").get(), AuthorizationReply.decode)
    }

    /// `ListConsents`, decoded.
    func consents() throws -> [StoredConsent] {
        try decoded(geo("ListConsents").get(), ConsentListReply.decode)
    }

    /// `ListSessions`, decoded.
    func sessions() throws -> [SessionInfo] {
        try decoded(geo("ListSessions").get(), SessionListReply.decode)
    }

    private func decoded<T>(_ values: [DBusValue], _ decode: ([DBusValue]) -> T?) throws -> T {
        guard let v = decode(values) else { throw DBusError.failed("a reply of the wrong shape: \(values)") }
        return v
    }

    func property(_ name: String) -> DBusValue? {
        try? geo("Get", [.string(GeoConsentAPI.interfaceName), .string(name)], interface: ObjectServer.properties)
            .get().first?.unwrapped
    }
}

/// A consent agent inside the test: records what it is asked and answers as told.
final class TestAgent {
    enum Behaviour {
        case answer(String)
        case never
        case wrongType
        case error
    }

    static let path = "/org/geoconsent/test/Agent"

    let peer: BusPeer
    var behaviour: Behaviour
    private(set) var confirms: [AgentPrompt] = []
    /// Each `Confirm`'s details as sent: key and D-Bus signature of its value.
    private(set) var rawDetails: [[String: String]] = []
    private(set) var cancels: [String] = []
    private(set) var held: [String: MethodCall] = [:]

    init(peer: BusPeer, behaviour: Behaviour) {
        self.peer = peer
        self.behaviour = behaviour
        peer.server.export(self, at: TestAgent.path, interfaces: [TestAgent.interface])
    }

    static let interface = Interface<TestAgent>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { a, call in a.confirm(call) },
        CancelCall.member: { a, call in
            a.cancels.append(CancelCall.decode(call.arguments) ?? "")
            call.reply()
        },
        NoticeCall.member: { a, call in
            if let n = NoticeCall.decode(call.arguments) { a.notices.append(n) }
            call.reply()
        },
        CheckFocusCall.member: { a, call in
            a.focusPIDs.append(CheckFocusCall.decode(call.arguments) ?? 0)
            call.reply(CheckFocusReply.encode(focused: a.focus.0, press: a.focus.1, via: "test"))
        },
    ])

    /// What it answers to `CheckFocus`, and what it was asked and told.
    var focus: (FocusFact, FocusFact) = (.yes, .yes)
    private(set) var focusPIDs: [UInt32] = []
    private(set) var notices: [(appID: String, kind: String, witness: TapWitness?, always: Bool)] = []

    func registerWith(features: [String]) -> Result<[DBusValue], DBusError> {
        peer.geo("RegisterAgentWithOptions", [.objectPath(TestAgent.path), OptionDictionary.encodeAgentOptions(features: features)])
    }

    private func confirm(_ call: MethodCall) {
        guard let c = ConfirmCall.decode(call.arguments) else { return call.fail(.invalidArgs("not a Confirm")) }
        confirms.append(c)
        rawDetails.append((call.arguments.last?.vardictValue ?? [:]).mapValues(\.signature))
        switch behaviour {
        case .answer(let d): call.reply(ConfirmReply.encode(word: d))
        case .never: held[c.requestID] = call
        case .wrongType:
            // Bypass the declared out-signature: answer with a uint32.
            if let r = Message.methodReturn(to: call.replyAddress) {
                try? r.append([.uint32(1)])
                peer.connection.send(r)
            }
        case .error: call.fail(.failed("the agent broke"))
        }
    }

    /// Answers a held prompt now.
    func answer(_ requestID: String, _ decision: String) {
        held.removeValue(forKey: requestID)?.reply(ConfirmReply.encode(word: decision))
    }

    func register() -> Result<[DBusValue], DBusError> {
        peer.geo("RegisterAgent", [.objectPath(TestAgent.path)])
    }
}

func XCTAssertDBusError<T>(_ r: Result<T, DBusError>, _ name: String, file: StaticString = #filePath, line: UInt = #line) {
    switch r {
    case .success(let v): XCTFail("expected \(name), got success \(v)", file: file, line: line)
    case .failure(let e): XCTAssertEqual(e.name, name, "message: \(e.message)", file: file, line: line)
    }
}

extension Message {
    /// The status of an `AuthorizationChanged` signal; nil for other messages.
    var changedStatus: AuthorizationStatus? {
        member == AuthorizationChangedSignal.member ? AuthorizationChangedSignal.decode(arguments()) : nil
    }

    /// The changed properties of a `PropertiesChanged` about the daemon's interface.
    var changedProperties: [String: DBusValue]? {
        member == "PropertiesChanged" ? DaemonProperties.decodeChanged(arguments()) : nil
    }
}
