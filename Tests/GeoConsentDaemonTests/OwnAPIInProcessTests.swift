import XCTest
import GeoCore
import GeoDBus
import GeoTestSupport
import GeoConsentAPI
@testable import GeoConsentDaemon

/// Our own API's front end in process (OwnAPI.swift), on a `MemoryBus` with
/// the recording host of the facade's in-process tests: a call reaches the
/// core as its request, wrong types are refused before it, and a fix is
/// streamed to each session in order, the first eight at once, the rest in
/// batches, every signal to its own session alone.
final class OwnAPIInProcessTests: XCTestCase {
    private var host: GeoClueFacadeInProcessTests.RecordingHost!
    private var api: OwnAPI!

    override func setUp() {
        host = GeoClueFacadeInProcessTests.RecordingHost()
        api = OwnAPI(host: host)
        api.serve()
    }

    private func call(_ member: String, _ args: [DBusValue], from sender: String) throws -> [Message] {
        let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                       interface: GeoConsentAPI.interfaceName, member: member)
        try m.append(args)
        host.bus.deliver(m, from: sender)
        return host.bus.takeSent()
    }

    func testACallReachesTheCoreAsItsRequestAndAWrongTypeDoesNot() throws {
        XCTAssertEqual(try call("RequestOneTimeAuthorization", [.vardict(["reason": .string("lunch")])], from: ":1.5").count, 0)
        guard case .request(_, let caller, .requestOneTime(let o))? = host.fed.last else {
            return XCTFail("\(String(describing: host.fed.last))")
        }
        XCTAssertEqual(caller.session, .connection(":1.5"))
        XCTAssertEqual(o.reason, "lunch")
        let refused = try call("RequestOneTimeAuthorization", [.vardict(["reason": .uint32(7)])], from: ":1.5")
        XCTAssertEqual(refused.first?.errorName, DBusError.invalidArgsName)
        XCTAssertEqual(host.fed.count, 1, "a wrong type never reaches the core")
    }

    func testAFixIsStreamedInOrderFirstEightAtOnceTheRestInBatches() throws {
        let fix = Fix(latitude: 52.52, longitude: 13.4, mode: .threeD, horizontalAccuracy: 5)
        let first = LocationService.signalsBeforeYield, batch = LocationService.signalBatch
        let names = (0..<(first + batch + 1)).map { ":1.\(100 + $0)" }
        for name in names.prefix(first) { api.sendFix(to: .connection(name), fix, .full) }
        XCTAssertEqual(host.bus.sent.count, first, "the first ones at once")
        for name in names.dropFirst(first).prefix(batch - 1) { api.sendFix(to: .connection(name), fix, .full) }
        XCTAssertEqual(host.bus.sent.count, first, "the next wait for their batch")
        api.sendFix(to: .connection(names[first + batch - 1]), fix, .full)
        XCTAssertEqual(host.bus.sent.count, first + batch, "a full batch goes at once")
        api.sendFix(to: .connection(names[first + batch]), fix, .full)
        XCTAssertEqual(host.bus.sent.count, first + batch, "the last waits for the flush")
        api.flushFixes()
        let sent = host.bus.takeSent()
        XCTAssertEqual(sent.map { $0.destination ?? "" }, names, "each session once, in the order given")
        XCTAssertTrue(sent.allSatisfy { $0.member == LocationUpdatedSignal.member && $0.signature == "a{sv}" })
        // The next fix counts from one again.
        api.sendFix(to: .connection(":1.200"), fix, .reduced)
        XCTAssertEqual(host.bus.sent.count, 1)
    }
}
