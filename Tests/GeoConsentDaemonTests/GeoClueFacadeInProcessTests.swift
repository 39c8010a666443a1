import XCTest
import GeoCore
import GeoDBus
import GeoTestSupport
import GeoConsentAPI
@testable import GeoConsentDaemon

/// The GeoClue facade's D-Bus side in process, with no bus daemon and no
/// daemon process: its object server on a `MemoryBus`, a loop with manual
/// time, and a host that resolves every caller to one app and keeps what the
/// facade hands the consent core. The calls arrive as the bus would deliver
/// them; what the facade sends is read back in order.
final class GeoClueFacadeInProcessTests: XCTestCase {
    /// A host that answers as the daemon would, minus the cores: callers are
    /// one app of uid 1000; the events fed are kept.
    final class RecordingHost: FrontEndHost {
        let clock = ManualClock()
        lazy var loop = EventLoop(clock: clock)
        let bus = MemoryBus()
        lazy var server = ObjectServer(bus: bus)
        let core = ConsentCore()
        var consent: ConsentQueries { core }
        var limits = Limits()
        var fed: [CoreEvent] = []
        var abandoned: [CallID] = []
        var retained: [String] = []
        var released: [String] = []
        private var nextID: CallID = 1

        func caller(_ connection: String) -> Caller {
            Caller(session: .connection(connection), uid: 1000, pid: 4200, appID: "/usr/bin/maps", executable: "/usr/bin/maps")
        }
        func resolveCaller(_ call: MethodCall, _ body: @escaping (Caller) -> Void) { body(caller(call.sender)) }
        func resolveCaller(connection: String, _ done: @escaping (Caller?) -> Void) { done(caller(connection)) }
        func retain(_ caller: Caller) { retained.append(caller.connection) }
        func release(connection: String) { released.append(connection) }
        func feed(_ event: CoreEvent) { fed.append(event) }
        func hold(_ call: MethodCall) -> CallID { holdWithoutCall() }
        func holdWithoutCall() -> CallID {
            defer { nextID += 1 }
            return nextID
        }
        func abandon(_ id: CallID, _ error: DBusError) { abandoned.append(id) }
        func register(_ purpose: CallBudgets.Purpose) -> Bool { true }
        func call(_ message: Message, purpose: CallBudgets.Purpose, uid: UInt32, callee: String, timeout: Double,
                  _ done: @escaping (Result<Message, DBusError>) -> Void) -> CallBudgets.Refusal? { nil }
        func noteAttack(_ connection: String, uid: UInt32, _ what: String) {}
        func setUpdateOptions(session: SessionID, _ options: UpdateOptions) {}
        var locationInUse: Bool { false }
        var locationReceiverConnected: Bool { true }
        var lastSources: [String: PositionSource] { [:] }
        var locationSources: [PositionSource] { [.gps] }
        var wifiEnabled: Bool { false }
    }

    private var host: RecordingHost!
    private var facade: GeoClueFacade!

    override func setUp() {
        host = RecordingHost()
        facade = GeoClueFacade(host: host, settings: GeoClueSettings())
        facade.serve()
    }

    /// Delivers a method call from `sender` and returns what the facade sent for it.
    @discardableResult
    private func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue] = [],
                      from sender: String) throws -> [Message] {
        let m = try Message.methodCall(destination: GeoClueAPI.busName, path: path, interface: interface, member: member)
        try m.append(args)
        host.bus.deliver(m, from: sender)
        host.loop.runOnce(timeoutMillis: 0)
        return host.bus.takeSent()
    }

    private func getClient(_ sender: String) throws -> String {
        let sent = try call(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "GetClient", from: sender)
        let reply = try XCTUnwrap(sent.first { $0.type == .methodReturn }, "\(sent.map(\.type))")
        return try XCTUnwrap(reply.arguments().first?.stringValue)
    }

    private func startID() -> (CallID, SessionID)? {
        for e in host.fed.reversed() {
            if case .request(let id, let caller, .start) = e { return (id, caller.session) }
        }
        return nil
    }

    func testAClientIsMadeStartedAndFedItsFixesAloneAndStopped() throws {
        let path = try getClient(":1.5")
        XCTAssertTrue(path.hasPrefix(GeoClueAPI.clientsPath + "/"), path)
        XCTAssertEqual(host.retained, [":1.5"], "what its Start's grant rests on is kept from GetClient")

        // Start goes to the consent core; a second Start joins it.
        XCTAssertEqual(try call(path, GeoClueAPI.clientInterfaceName, "Start", from: ":1.5").count, 0)
        let (id, session) = try XCTUnwrap(startID())
        XCTAssertEqual(session.description, ":1.5/geoclue/\(GeoClueAPI.clientNumber(of: path) ?? 0)")
        XCTAssertEqual(try call(path, GeoClueAPI.clientInterfaceName, "Start", from: ":1.5").count, 0, "joined, not asked again")
        XCTAssertEqual(host.fed.filter { if case .request = $0 { return true } else { return false } }.count, 1)

        // Granted: the joined Start is answered, and Active goes true, to the owner alone.
        facade.updatesStarted(id)
        let granted = host.bus.takeSent()
        XCTAssertEqual(granted.filter { $0.type == .methodReturn }.count, 1, "the joined Start")
        let active = try XCTUnwrap(granted.first { $0.member == "PropertiesChanged" })
        XCTAssertEqual(active.destination, ":1.5")

        // A fix: LocationUpdated("/", Location/0), to the owner alone.
        facade.deliver([session], Fix(latitude: 52.52, longitude: 13.4, mode: .threeD, horizontalAccuracy: 5))
        host.loop.runOnce(timeoutMillis: 0)
        let fixSent = host.bus.takeSent()
        let updated = try XCTUnwrap(fixSent.first { $0.member == GeoClueLocationUpdated.member }, "\(fixSent.map(\.member))")
        XCTAssertEqual(updated.destination, ":1.5")
        let paths = try XCTUnwrap(GeoClueLocationUpdated.decode(signature: updated.signature, updated.arguments()))
        XCTAssertEqual(paths.old, "/")
        XCTAssertEqual(paths.new, path + "/Location/0")
        XCTAssertTrue(fixSent.allSatisfy { $0.destination == ":1.5" }, "nothing for anyone else")

        // Another connection cannot use it: the object is answered as missing.
        let other = try call(path, GeoClueAPI.clientInterfaceName, "Stop", from: ":1.6")
        XCTAssertEqual(other.first?.type, .error)
        XCTAssertEqual(other.first?.destination, ":1.6")

        // Stop: the session ends, and Active goes false.
        let stopped = try call(path, GeoClueAPI.clientInterfaceName, "Stop", from: ":1.5")
        XCTAssertTrue(stopped.contains { $0.type == .methodReturn })
        XCTAssertTrue(stopped.contains { $0.member == "PropertiesChanged" && $0.destination == ":1.5" })
        guard case .sessionEnded(session)? = host.fed.last else { return XCTFail("\(String(describing: host.fed.last))") }
    }

    /// A `Start` the core does not answer in time is given up at the facade's
    /// deadline, on the loop's manual clock: the call fails, joined ones with it.
    func testAStartNotAnsweredInTimeIsGivenUp() throws {
        let path = try getClient(":1.5")
        try call(path, GeoClueAPI.clientInterfaceName, "Start", from: ":1.5")
        let (id, _) = try XCTUnwrap(startID())
        host.clock.advance(GeoClueFacade.startDeadline - 0.5)
        host.loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(host.abandoned, [], "not yet")
        host.clock.advance(1)
        host.loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(host.abandoned, [id], "given up at its deadline")
        guard case .sessionEnded? = host.fed.last else { return XCTFail("\(String(describing: host.fed.last))") }
        // DeleteClient: the object goes, and what GetClient retained is let go.
        try call(GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "DeleteClient", [.objectPath(path)], from: ":1.5")
        XCTAssertEqual(host.released, [":1.5"])
    }
}
