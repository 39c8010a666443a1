import XCTest
@testable import GeoDBus
import GeoTestSupport

/// The total nesting limit, checked against the real libdbus on both sides.
///
/// Found empirically with libdbus and dbus-daemon 1.14.10 (dbus_message_marshal,
/// then dbus_message_demarshal, which runs the reader's checks; and over a bus): a
/// message body may hold 64 containers one inside the other, arrays, structs,
/// dict entries and variants alike. At 65 libdbus still appends and sends the
/// message, but reading it fails with "Message is corrupted (Variants cannot be
/// used to create a hugely recursive tree of values)", even with no variant in
/// it, and the bus drops the sender. libdbus only walks into arrays that have
/// elements of a type that is not fixed-size, so an empty array, or an array of
/// `i`, may sit at level 65.
final class NestingDepthTests: XCTestCase {
    var bus: TestBus!
    var peers: PeerLoop!

    override func setUpWithError() throws {
        bus = try TestBus()
        peers = PeerLoop()
    }

    override func tearDown() {
        bus?.stop()
    }

    static func variants(_ n: Int, around v: DBusValue) -> DBusValue {
        (0..<n).reduce(v) { inner, _ in .variant(inner) }
    }

    /// `n` containers alternating variant (innermost) and array of variants (`av`).
    static func arraysOfVariants(_ n: Int) -> DBusValue {
        (0..<n).reduce(DBusValue.int32(1)) { inner, i in i % 2 == 0 ? .variant(inner) : .array(element: "v", [inner]) }
    }

    /// Options dictionaries in options dictionaries: 3 levels each (array, dict entry, variant).
    static func vardicts(_ n: Int) -> DBusValue {
        (0..<n).reduce(DBusValue.string("x")) { inner, _ in .vardict(["k": inner]) }
    }

    /// `s` structs around `d` dicts `a{ia{i…}}`: no variant, every signature valid.
    static func structsAroundDicts(_ s: Int, _ d: Int) -> DBusValue {
        let dicts = (0..<d).reduce((value: DBusValue.int32(1), signature: "i")) { inner, _ in
            (.dict(key: "i", value: inner.signature, [.init(.int32(0), inner.value)]), "a{i" + inner.signature + "}")
        }.value
        return (0..<s).reduce(dicts) { inner, _ in .structure([inner]) }
    }

    /// Each case: a value at the limit (64 levels, libdbus accepts it) and one just past it (65).
    static let cases: [(label: String, atLimit: DBusValue, pastLimit: DBusValue)] = [
        ("nested variants", variants(64, around: .int32(1)), variants(65, around: .int32(1))),
        ("arrays of variants", arraysOfVariants(64), arraysOfVariants(65)),
        ("a{sv} in a{sv} in variants", variants(1, around: vardicts(21)), variants(2, around: vardicts(21))),
        ("a dict entry is a level of its own", variants(62, around: .dict(key: "i", value: "i", [.init(.int32(1), .int32(2))])),
         variants(63, around: .dict(key: "i", value: "i", [.init(.int32(1), .int32(2))]))),
        ("structs around dicts, no variant", structsAroundDicts(16, 24), structsAroundDicts(17, 24)),
        ("an array of strings is walked into", variants(63, around: .strings(["x"])), variants(64, around: .strings(["x"]))),
    ]

    /// Values at level 65 that libdbus does not walk into, so it accepts them.
    static let notWalkedInto: [(label: String, value: DBusValue)] = [
        ("an array of i", variants(64, around: .array(element: "i", [.int32(1), .int32(2)]))),
        ("an empty array of strings", variants(64, around: .strings([]))),
        ("an empty a{sv}", variants(64, around: .vardict([:]))),
    ]

    func testValidationRefusesNestingPastTheLimitAndOnlyThat() throws {
        let m = try Message.methodCall(destination: "org.example", path: "/", interface: "org.example", member: "M")
        for c in Self.cases {
            XCTAssertNoThrow(try c.atLimit.validateForWire(), c.label)
            XCTAssertNoThrow(try m.append([c.atLimit]), c.label)
            XCTAssertThrowsError(try c.pastLimit.validateForWire(), c.label) { e in
                XCTAssertEqual((e as? DBusError)?.name, DBusError.invalidArgsName, c.label)
            }
            XCTAssertThrowsError(try m.append([c.pastLimit]), c.label)
            // The same value one level down, inside another argument's variant, is past it too.
            XCTAssertThrowsError(try m.append([.variant(c.atLimit)]), c.label)
        }
        for c in Self.notWalkedInto {
            XCTAssertNoThrow(try m.append([c.value]), c.label)
        }
    }

    func testTheLimitIsTheBusLimit() throws {
        let server = try peers.connect(bus.address)
        let echo = Echo()   // exported objects are held weakly: the test keeps it alive
        let accepted = Self.cases.map(\.atLimit) + Self.notWalkedInto.map(\.value)
        server.server.export(echo, at: "/echo", interfaces: [Echo.interface(accepted.map(\.signature))])
        defer { withExtendedLifetime(echo) {} }
        let client = try peers.connect(bus.address)
        // What validation lets through, the bus carries and the peer (which replies
        // through the same validation) sends back.
        for (i, v) in accepted.enumerated() {
            XCTAssertEqual(try client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo\(i)", [v]).get(), [v],
                           "\(i): \(v.signature)")
        }
        // What it refuses, built without the check, makes the bus drop the sender.
        for c in Self.cases {
            let sender = try peers.connect(bus.address)
            let m = try Message.methodCall(destination: server.uniqueName, path: "/echo",
                                           interface: "org.geoconsent.Test.Echo", member: "Echo0")
            try m.append([c.pastLimit], nestingLimit: .max)
            var result: Result<Message, DBusError>?
            sender.connection.call(m, timeout: 5) { result = $0 }
            peers.pump(timeout: 10) { result != nil }
            if case .failure(let e) = result {
                XCTAssertEqual(e.name, DBusError.disconnectedName, c.label)
            } else {
                XCTFail("\(c.label): expected the bus to drop the sender, got \(String(describing: result))")
            }
            XCTAssertFalse(sender.connection.isConnected, c.label)
        }
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo0", [accepted[0]]).get(),
                       [accepted[0]], "the others are still served")
    }
}
