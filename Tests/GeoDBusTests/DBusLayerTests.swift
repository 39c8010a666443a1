import XCTest
import Glibc
import GeoDBus
import GeoTestSupport

/// An object with one echo method of each signature, declared as a table.
final class Echo {
    var lastSender = ""
    static func interface(_ signatures: [String]) -> Interface<Echo> {
        Interface("org.geoconsent.Test.Echo",
                  methods: signatures.enumerated().map { i, sig in
                      MethodEntry("Echo\(i)", in: [Arg("value", sig)], out: [Arg("value", sig)]) { echo, call in
                          echo.lastSender = call.sender
                          call.reply(call.arguments)
                      }
                  } + [
                      MethodEntry("Later", in: [Arg("seconds", "d")], out: [Arg("done", "b")]) { _, call in
                          // A reply sent after the handler returned.
                          let loop = LaterLoop.loop!
                          loop.schedule(after: call.arguments[0].doubleValue ?? 0) { call.reply([.bool(true)]) }
                      },
                      MethodEntry("Shout", in: [Arg("to", "s")]) { echo, call in
                          _ = echo
                          call.reply()
                      },
                  ],
                  signals: [SignalEntry("Said", [Arg("what", "s")])],
                  properties: [PropertyEntry("Count", "u", get: { _ in .uint32(7) })])
    }
}

enum LaterLoop { static var loop: EventLoop? }

final class DBusLayerTests: XCTestCase {
    var bus: TestBus!
    var peers: PeerLoop!

    override func setUpWithError() throws {
        bus = try TestBus()
        peers = PeerLoop()
        LaterLoop.loop = peers.loop
    }

    override func tearDown() {
        bus?.stop()
    }

    static let values: [DBusValue] = [
        .byte(255), .bool(true), .bool(false), .int16(-32768), .uint16(65535), .int32(-7), .uint32(4_000_000_000),
        .int64(Int64.min), .uint64(UInt64.max), .double(-1.5e-300), .double(.infinity),
        .string(""), .string("grüße, 世界 \u{1F30D}"), .objectPath("/org/geoconsent/GeoConsent1"), .signature("a{sv}(iu)"),
        .array(element: "s", []), .array(element: "i", [.int32(1), .int32(2)]),
        .array(element: "as", [.strings(["a", "b"]), .strings([])]),
        .dict(key: "s", value: "v", []),
        .vardict(["latitude": .double(52.52), "fix": .string("3d"), "nested": .vardict(["t": .uint64(1)])]),
        .dict(key: "u", value: "as", [.init(.uint32(1), .strings(["x"]))]),
        .structure([.uint32(1), .string("app"), .vardict(["b": .bool(true)])]),
        .array(element: "(susub)", [.structure([.string(":1.1"), .uint32(0), .string("/usr/bin/x"), .uint32(4), .bool(true)])]),
        .variant(.variant(.int32(3))),
        .variant(.array(element: "y", (0..<200).map { .byte(UInt8($0)) })),
    ]

    func testEveryTypeRoundTripsThroughARealBus() throws {
        let server = try peers.connect(bus.address)
        let client = try peers.connect(bus.address)
        let echo = Echo()
        server.server.export(echo, at: "/echo", interfaces: [Echo.interface(Self.values.map(\.signature))])
        for (i, v) in Self.values.enumerated() {
            let r = client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo\(i)", [v])
            XCTAssertEqual(try r.get(), [v], "\(v.signature)")
        }
        XCTAssertEqual(echo.lastSender, client.uniqueName, "the sender is the caller's unique name")
    }

    func testSignatureChecksAndStandardErrors() throws {
        let server = try peers.connect(bus.address)
        let client = try peers.connect(bus.address)
        let echo = Echo()   // exported objects are held weakly: the test keeps it alive
        server.server.export(echo, at: "/echo", interfaces: [Echo.interface(["s"])])
        defer { withExtendedLifetime(echo) {} }
        func error(_ r: Result<[DBusValue], DBusError>) -> String? {
            if case .failure(let e) = r { return e.name } else { return nil }
        }
        XCTAssertEqual(error(client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo0", [.uint32(1)])),
                       DBusError.invalidArgsName)
        XCTAssertEqual(error(client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo0", [])),
                       DBusError.invalidArgsName)
        XCTAssertEqual(error(client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Nope", [])),
                       DBusError.unknownMethodName)
        XCTAssertEqual(error(client.call(server.uniqueName, "/echo", "org.example.Other", "Echo0", [.string("x")])),
                       DBusError.unknownInterfaceName)
        XCTAssertEqual(error(client.call(server.uniqueName, "/nowhere", "org.geoconsent.Test.Echo", "Echo0", [.string("x")])),
                       DBusError.unknownObjectName)
        // Without an interface the member is looked up in every interface.
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", nil, "Echo0", [.string("x")]).get(), [.string("x")])
        // Properties: Get, GetAll, Set of a read-only one.
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", ObjectServer.properties, "Get",
                                       [.string("org.geoconsent.Test.Echo"), .string("Count")]).get(), [.variant(.uint32(7))])
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", ObjectServer.properties, "GetAll",
                                       [.string("org.geoconsent.Test.Echo")]).get(), [.vardict(["Count": .uint32(7)])])
        XCTAssertEqual(error(client.call(server.uniqueName, "/echo", ObjectServer.properties, "Set",
                                         [.string("org.geoconsent.Test.Echo"), .string("Count"), .variant(.uint32(1))])),
                       DBusError.propertyReadOnlyName)
        // Still serving.
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Echo0", [.string("y")]).get(),
                       [.string("y")])
    }

    func testLaterRepliesUnicastSignalsAndCallTimeouts() throws {
        let server = try peers.connect(bus.address)
        let client = try peers.connect(bus.address)
        let other = try peers.connect(bus.address)
        try other.addMatch("type='signal'")
        let echo = Echo()   // exported objects are held weakly: the test keeps it alive
        server.server.export(echo, at: "/echo", interfaces: [Echo.interface(["s"])])
        defer { withExtendedLifetime(echo) {} }
        // A reply sent 0.2 s after the handler returned arrives.
        let t0 = EventLoop.monotonicNanos()
        XCTAssertEqual(try client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Later", [.double(0.2)]).get(),
                       [.bool(true)])
        XCTAssertGreaterThanOrEqual(EventLoop.monotonicNanos() - t0, 190_000_000)
        // A call whose reply comes too late fails with NoReply, and the loop keeps going.
        let r = client.call(server.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Later", [.double(2)], timeout: 0.3)
        if case .failure(let e) = r {
            XCTAssertEqual(e.name, DBusError.noReplyName)
            XCTAssertTrue(e.isLocalTimeout, "libdbus's own timeout: the bus still counts the call")
        } else {
            XCTFail("expected NoReply")
        }
        // A callee that leaves without answering: the bus's NoReply, not a timeout of ours.
        let leaving = try Connection(bus: BusAddress(argument: bus.address))   // never reads its socket
        let held = client.callAsync(leaving.uniqueName, "/echo", "org.geoconsent.Test.Echo", "Later", [.double(0)], timeout: 20)
        peers.settle(0.2)
        leaving.close()
        XCTAssertTrue(peers.pump(timeout: 10) { held.isDone })
        if case .failure(let e)? = held.result {
            XCTAssertEqual(e.name, DBusError.noReplyName, e.message)
            XCTAssertFalse(e.isLocalTimeout, "the bus said the callee left: \(e.message)")
        } else {
            XCTFail("expected the bus's NoReply: \(String(describing: held.result))")
        }
        // A unicast signal reaches its destination only, even with a catch-all match rule elsewhere.
        server.server.emit(path: "/echo", interface: "org.geoconsent.Test.Echo", member: "Said", [.string("hi")],
                           destination: client.uniqueName)
        XCTAssertNotNil(client.waitForSignal("Said", timeout: 5))
        peers.settle(0.2)
        XCTAssertTrue(other.signals(named: "Said").isEmpty, "unicast signal leaked to another connection")
        // A broadcast reaches the matching connection.
        server.server.emit(path: "/echo", interface: "org.geoconsent.Test.Echo", member: "Said", [.string("all")])
        XCTAssertNotNil(other.waitForSignal("Said", timeout: 5))
    }

    func testInvalidValuesAreRefusedBeforeLibdbusSeesThem() throws {
        let m = try Message.methodCall(destination: "org.example", path: "/", interface: "org.example", member: "M")
        for bad: DBusValue in [.objectPath("no/slash"), .objectPath("/trailing/"), .signature("a"), .string("nul\u{0}inside"),
                               .array(element: "s", [.int32(1)]), .structure([]),
                               .dict(key: "s", value: "v", [.init(.string("k"), .string("not a variant"))])] {
            XCTAssertThrowsError(try m.append([bad]), "\(bad)")
        }
        XCTAssertThrowsError(try Message.methodCall(destination: nil, path: "bad", interface: nil, member: "M"))
        XCTAssertThrowsError(try Message.methodCall(destination: nil, path: "/", interface: "no", member: "M"))
        XCTAssertThrowsError(try Message.methodCall(destination: nil, path: "/", interface: nil, member: "1bad"))
        // Nesting deeper than D-Bus allows (64 levels in all, 32 of arrays).
        var deep: DBusValue = .int32(1)
        for _ in 0..<40 { deep = .array(element: deep.signature, [deep]) }
        XCTAssertThrowsError(try m.append([deep]))
        // Inside a variant: a container's whole type is still checked, strings still for NUL.
        XCTAssertThrowsError(try m.append([.variant(deep)]))
        XCTAssertThrowsError(try m.append([.vardict(["k": .string("nul\u{0}inside")])]))
        XCTAssertThrowsError(try m.append([.vardict(["k": .variant(.objectPath("no/slash"))])]))
        XCTAssertNoThrow(try m.append([.vardict(["k": .variant(.array(element: "i", [.int32(1)]))])]))
    }

    func testAnOwnedObjectServesItsOwnerAlone() throws {
        let server = try peers.connect(bus.address)
        let owner = try peers.connect(bus.address)
        let other = try peers.connect(bus.address)
        let mine = Echo(), public_ = Echo()
        server.server.export(mine, at: "/objects/mine", interfaces: [Echo.interface(["s"])], owner: owner.uniqueName)
        server.server.export(public_, at: "/objects/public", interfaces: [Echo.interface(["s"])])
        defer { withExtendedLifetime((mine, public_)) {} }
        let iface = "org.geoconsent.Test.Echo"
        let props = "org.freedesktop.DBus.Properties", intro = "org.freedesktop.DBus.Introspectable"

        XCTAssertEqual(try owner.call(server.uniqueName, "/objects/mine", iface, "Echo0", [.string("x")]).get(), [.string("x")])
        XCTAssertEqual(try owner.call(server.uniqueName, "/objects/mine", props, "Get", [.string(iface), .string("Count")]).get(),
                       [.variant(.uint32(7))])
        let calls: [(String?, String, [DBusValue])] = [
            (iface, "Echo0", [.string("x")]), (props, "Get", [.string(iface), .string("Count")]),
            (props, "GetAll", [.string(iface)]), (props, "Set", [.string(iface), .string("Count"), .variant(.uint32(1))]),
            (intro, "Introspect", []), (nil, "Echo0", [.string("x")]),
        ]
        for (i, member, args) in calls {
            // Answered word for word as for a path with no object: another peer
            // must not learn that the object exists.
            let r = other.call(server.uniqueName, "/objects/mine", i, member, args)
            let missing = other.call(server.uniqueName, "/objects/none", i, member, args)
            guard case .failure(let e) = r, case .failure(let m) = missing else { XCTFail("\(member) by another peer succeeded"); continue }
            XCTAssertEqual(e.name, DBusError.unknownObjectName, member)
            XCTAssertEqual(e.message.replacingOccurrences(of: "/objects/mine", with: "P"),
                           m.message.replacingOccurrences(of: "/objects/none", with: "P"), member)
        }
        XCTAssertNoThrow(try other.call(server.uniqueName, "/objects/mine", "org.freedesktop.DBus.Peer", "Ping").get())

        // The parent lists the object to its owner only.
        func children(_ p: BusPeer) throws -> String {
            try p.call(server.uniqueName, "/objects", intro, "Introspect").get().first?.stringValue ?? ""
        }
        XCTAssertTrue(try children(owner).contains("<node name=\"mine\"/>"))
        XCTAssertFalse(try children(other).contains("mine"))
        XCTAssertTrue(try children(other).contains("<node name=\"public\"/>"))
    }

    /// Objects exported with one interface value (whose tables they share)
    /// each get their own calls, and an object gone is answered as such: a
    /// method fails, a property has no value, the other object is served.
    func testObjectsOfOneInterfaceAreServedApartAndAnObjectGoneIsSaidSo() throws {
        final class Counter { var calls = 0 }
        let iface = "org.geoconsent.Test.Counter"
        let interface = Interface<Counter>(iface, methods: [
            MethodEntry("Tick", out: [Arg("calls", "u")]) { c, call in
                c.calls += 1
                call.reply([.uint32(UInt32(c.calls))])
            },
        ], properties: [PropertyEntry("Calls", "u", get: { .uint32(UInt32($0.calls)) })])
        let server = try peers.connect(bus.address)
        let client = try peers.connect(bus.address)
        var first: Counter? = Counter()
        let second = Counter()
        server.server.export(first!, at: "/c/1", interfaces: [interface])
        server.server.export(second, at: "/c/2", interfaces: [interface])
        let props = "org.freedesktop.DBus.Properties"
        XCTAssertEqual(try client.call(server.uniqueName, "/c/1", iface, "Tick").get(), [.uint32(1)])
        XCTAssertEqual(try client.call(server.uniqueName, "/c/1", iface, "Tick").get(), [.uint32(2)])
        XCTAssertEqual(try client.call(server.uniqueName, "/c/2", iface, "Tick").get(), [.uint32(1)])
        XCTAssertEqual(try client.call(server.uniqueName, "/c/2", props, "Get", [.string(iface), .string("Calls")]).get(),
                       [.variant(.uint32(1))])
        XCTAssertEqual(second.calls, 1)

        first = nil   // the server holds its objects weakly
        guard case .failure(let e) = client.call(server.uniqueName, "/c/1", iface, "Tick") else {
            return XCTFail("a call to an object gone succeeded")
        }
        XCTAssertEqual(e.message, "object gone")
        guard case .failure(let g) = client.call(server.uniqueName, "/c/1", props, "Get", [.string(iface), .string("Calls")]) else {
            return XCTFail("a property of an object gone was read")
        }
        XCTAssertEqual(g.name, DBusError.unknownPropertyName)
        XCTAssertEqual(try client.call(server.uniqueName, "/c/2", iface, "Tick").get(), [.uint32(2)], "the other object still served")
    }

    /// A property whose value depends on the reader, answered later: `Get` and
    /// `GetAll` wait for it, each reader gets its own, and the others' values stay.
    func testAPropertyForTheCallerIsAnsweredLater() throws {
        final class Mirror {}
        let iface = "org.geoconsent.Test.Mirror"
        let interface = Interface<Mirror>(iface, properties: [
            PropertyEntry("Fixed", "u", get: { _ in .uint32(3) }),
            PropertyEntry("Reader", "s", get: { _ in .string("nobody") }, getForCaller: { _, sender, done in
                LaterLoop.loop!.schedule(after: 0.05) { done(.string(sender)) }
            }),
        ])
        let server = try peers.connect(bus.address)
        let a = try peers.connect(bus.address), b = try peers.connect(bus.address)
        let mirror = Mirror()
        server.server.export(mirror, at: "/mirror", interfaces: [interface])
        defer { withExtendedLifetime(mirror) {} }
        let props = "org.freedesktop.DBus.Properties"
        for p in [a, b] {
            XCTAssertEqual(try p.call(server.uniqueName, "/mirror", props, "Get", [.string(iface), .string("Reader")]).get(),
                           [.variant(.string(p.uniqueName))])
            XCTAssertEqual(try p.call(server.uniqueName, "/mirror", props, "GetAll", [.string(iface)]).get(),
                           [.vardict(["Fixed": .uint32(3), "Reader": .string(p.uniqueName)])])
        }
    }

    func testConstantObjectsServeTheirValuesToTheirOwnerAlone() throws {
        let server = try peers.connect(bus.address)
        let owner = try peers.connect(bus.address)
        let other = try peers.connect(bus.address)
        let iface = "org.geoconsent.Test.Fix", props = "org.freedesktop.DBus.Properties"
        let interface = ConstantInterface(InterfaceDescription(name: iface, methods: [], signals: [], properties: [
            .init(name: "Latitude", signature: "d", access: .read, emitsChanged: .const),
            .init(name: "Time", signature: "(tt)", access: .read, emitsChanged: .const),
        ]))
        let first = ConstantValues(["Latitude": .double(52.5), "Time": .structure([.uint64(1), .uint64(2)])])
        let second = ConstantValues(["Latitude": .double(-33.9), "Time": .structure([.uint64(3), .uint64(4)])])
        // Two objects share `first`: each GetAll reply is a copy of one marshalled
        // once, addressed to its own call.
        server.server.export(constant: first, of: interface, at: "/fix/0", owner: owner.uniqueName)
        server.server.export(constant: first, of: interface, at: "/fix/1", owner: owner.uniqueName)
        server.server.export(constant: second, of: interface, at: "/fix/2", owner: owner.uniqueName)
        func getAll(_ path: String) throws -> [String: DBusValue] {
            try XCTUnwrap(owner.call(server.uniqueName, path, props, "GetAll", [.string(iface)]).get().first?.vardictValue)
        }
        for _ in 0..<2 {
            XCTAssertEqual(try getAll("/fix/0"), ["Latitude": .double(52.5), "Time": .structure([.uint64(1), .uint64(2)])])
            XCTAssertEqual(try getAll("/fix/1"), try getAll("/fix/0"))
            XCTAssertEqual(try getAll("/fix/2"), ["Latitude": .double(-33.9), "Time": .structure([.uint64(3), .uint64(4)])])
        }
        // Pipelined: every call gets its own reply.
        let pending = (0..<20).map { owner.callAsync(server.uniqueName, "/fix/\($0 % 3)", props, "GetAll", [.string(iface)]) }
        peers.pump(timeout: 10) { pending.allSatisfy(\.isDone) }
        for (i, p) in pending.enumerated() {
            let lat = try XCTUnwrap(p.result?.get().first?.vardictValue?["Latitude"])
            XCTAssertEqual(lat, .double(i % 3 == 2 ? -33.9 : 52.5))
        }
        XCTAssertEqual(try owner.call(server.uniqueName, "/fix/2", props, "Get", [.string(iface), .string("Latitude")]).get(),
                       [.variant(.double(-33.9))])
        XCTAssertEqual(try owner.call(server.uniqueName, "/fix/2", props, "Get", [.string(""), .string("Time")]).get(),
                       [.variant(.structure([.uint64(3), .uint64(4)]))])
        XCTAssertDBusErrorName(owner.call(server.uniqueName, "/fix/2", props, "Get", [.string(iface), .string("Nope")]),
                               DBusError.unknownPropertyName)
        XCTAssertDBusErrorName(owner.call(server.uniqueName, "/fix/2", props, "Set",
                                          [.string(iface), .string("Latitude"), .variant(.double(0))]),
                               DBusError.propertyReadOnlyName)
        XCTAssertDBusErrorName(owner.call(server.uniqueName, "/fix/2", iface, "Anything"), DBusError.unknownMethodName)
        XCTAssertEqual(try owner.call(server.uniqueName, "/fix/2", props, "GetAll", [.string("org.freedesktop.DBus.Peer")]).get(),
                       [.vardict([:])])
        // Owner only, for every call; gone once unexported.
        for (member, args) in [("GetAll", [DBusValue.string(iface)]), ("Get", [.string(iface), .string("Latitude")])] {
            XCTAssertDBusErrorName(other.call(server.uniqueName, "/fix/0", props, member, args), DBusError.unknownObjectName)
        }
        XCTAssertDBusErrorName(other.call(server.uniqueName, "/fix/0", "org.freedesktop.DBus.Introspectable", "Introspect"),
                               DBusError.unknownObjectName)
        server.server.unexport("/fix/0")
        XCTAssertDBusErrorName(owner.call(server.uniqueName, "/fix/0", props, "GetAll", [.string(iface)]),
                               DBusError.unknownObjectName)
        XCTAssertEqual(try getAll("/fix/1")["Latitude"], .double(52.5))
    }

    /// Fails unless `result` is the error `name`.
    func XCTAssertDBusErrorName(_ result: Result<[DBusValue], DBusError>, _ name: String,
                                file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(let e) = result else { return XCTFail("succeeded: \(result)", file: file, line: line) }
        XCTAssertEqual(e.name, name, e.message, file: file, line: line)
    }

    func testIntrospectionComesFromTheTable() {
        let xml = Introspection.xml(interfaces: [Echo.interface(["s", "a{sv}"]).description], children: ["child"])
        XCTAssertTrue(xml.hasPrefix("<!DOCTYPE node PUBLIC"))
        XCTAssertTrue(xml.contains("<method name=\"Echo1\">\n      <arg name=\"value\" type=\"a{sv}\" direction=\"in\"/>"))
        XCTAssertTrue(xml.contains("<signal name=\"Said\">\n      <arg name=\"what\" type=\"s\"/>"))
        XCTAssertTrue(xml.contains("<property name=\"Count\" type=\"u\" access=\"read\"/>"))
        XCTAssertTrue(xml.contains("<node name=\"child\"/>"))
    }

    func testEventLoopTimersOrderAndCancel() {
        let loop = EventLoop()
        var fired: [Int] = []
        loop.schedule(after: 0.03) { fired.append(3) }
        loop.schedule(after: 0.01) { fired.append(1) }
        let cancelled = loop.schedule(after: 0.02) { fired.append(2) }
        loop.cancelTimer(cancelled)
        loop.later { fired.append(0) }
        let deadline = EventLoop.monotonicNanos() + 1_000_000_000
        while fired.count < 3 && EventLoop.monotonicNanos() < deadline { loop.runOnce(timeoutMillis: 50) }
        XCTAssertEqual(fired, [0, 1, 3])
    }

    func testEventLoopWatchesDescriptorsAndStops() {
        let loop = EventLoop()
        var fds: [Int32] = [-1, -1]
        makeNonBlockingPipe(&fds)
        defer { close(fds[0]); close(fds[1]) }
        var got: [UInt8] = []
        loop.watch(fd: fds[0], events: .readable) { _ in
            var b: UInt8 = 0
            while read(fds[0], &b, 1) == 1 { got.append(b) }
            loop.stop()
        }
        loop.schedule(after: 0.01) { var b: UInt8 = 42; _ = write(fds[1], &b, 1) }
        loop.run()
        XCTAssertEqual(got, [42])
    }
}
