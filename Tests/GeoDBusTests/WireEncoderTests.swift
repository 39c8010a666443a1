import XCTest
@testable import GeoDBus

/// Signals written by `WireEncoder` are the very bytes libdbus writes for the
/// same signal built argument by argument (both marshalled with
/// `dbus_message_marshal`, unsent, so with no serial), for every type.
final class WireEncoderTests: XCTestCase {
    private func libdbusBytes(_ path: String, _ iface: String, _ member: String, _ dest: String?, _ args: [DBusValue]) throws -> [UInt8] {
        let m = try Message.signal(path: path, interface: iface, member: member, destination: dest)
        try m.append(args)
        return try XCTUnwrap(m.marshalled())
    }

    private func assertSame(_ args: [DBusValue], destination: String? = ":1.42", path: String = "/org/freedesktop/GeoClue2/Client/7",
                            file: StaticString = #filePath, line: UInt = #line) throws {
        let expected = try libdbusBytes(path, "org.freedesktop.DBus.Properties", "PropertiesChanged", destination, args)
        let wire = try XCTUnwrap(Message.signal(wire: path, interface: "org.freedesktop.DBus.Properties",
                                                member: "PropertiesChanged", destination: destination, args),
                                 "libdbus refused the encoder's bytes", file: file, line: line)
        XCTAssertEqual(try XCTUnwrap(wire.marshalled()), expected, file: file, line: line)
        XCTAssertEqual(wire.arguments(), args, file: file, line: line)
        XCTAssertEqual(wire.destination, destination, file: file, line: line)
        XCTAssertEqual(wire.path, path, file: file, line: line)
    }

    func testPropertiesChangedAndLocationUpdatedShapes() throws {
        try assertSame([.string("org.freedesktop.GeoClue2.Client"),
                        .vardict(["Location": .objectPath("/org/freedesktop/GeoClue2/Client/7/Location/12")]), .strings([])])
        try assertSame([.string("org.freedesktop.GeoClue2.Client"), .vardict(["Active": .bool(false)]), .strings([])])
        try assertSame([.objectPath("/"), .objectPath("/org/freedesktop/GeoClue2/Client/7/Location/0")])
        try assertSame([.objectPath("/org/freedesktop/GeoClue2/Client/7/Location/1"),
                        .objectPath("/org/freedesktop/GeoClue2/Client/7/Location/2")], destination: nil)
    }

    func testEveryTypeAndAlignment() throws {
        let basics: [DBusValue] = [.byte(7), .bool(true), .int16(-3), .uint16(9), .int32(-70000), .uint32(4_000_000_000),
                                   .int64(-5_000_000_000), .uint64(1 << 60), .double(-33.5), .string("grüß"),
                                   .objectPath("/a/b"), .signature("a{sv}")]
        // Each basic type after a byte, so that every alignment is exercised.
        for b in basics { try assertSame([.byte(1), b]) }
        try assertSame([.byte(1), .variant(.double(2.5)), .byte(2), .variant(.int64(9))])
        try assertSame([.array(element: "x", []), .byte(1), .array(element: "x", [.int64(1), .int64(2)])])
        try assertSame([.array(element: "(yd)", [.structure([.byte(1), .double(2)]), .structure([.byte(3), .double(4)])])])
        try assertSame([.dict(key: "s", value: "v", []), .strings(["a", "", "ccc"])])
        try assertSame([.vardict(["Latitude": .double(51.5), "Timestamp": .structure([.uint64(1), .uint64(2)]),
                                  "Description": .string(""), "n": .vardict(["x": .array(element: "y", [.byte(1)])])])])
        try assertSame([])
    }

    func testWhatLibdbusWouldRejectGivesNoMessage() throws {
        XCTAssertNil(Message.signal(wire: "/a", interface: "x.y", member: "M", destination: nil, [.string("nul\0inside")]))
        XCTAssertNil(Message.signal(wire: "not a path", interface: "x.y", member: "M", destination: nil, []))
        XCTAssertNil(Message.signal(wire: "/a", interface: "x.y", member: "M", destination: nil, [.unixFD(0)]))
        // Items of another type than their array's or dict's, which appending refuses too.
        for wrong: DBusValue in [.array(element: "u", [.int32(-1)]),
                                 .dict(key: "s", value: "v", [.init(.string("k"), .string("not a variant"))]),
                                 .dict(key: "s", value: "v", [.init(.uint32(1), .variant(.bool(true)))])] {
            XCTAssertNil(Message.signal(wire: "/a", interface: "x.y", member: "M", destination: nil, [wrong]), "\(wrong)")
            let m = try Message.signal(path: "/a", interface: "x.y", member: "M")
            XCTAssertThrowsError(try m.append([wrong]), "\(wrong)")
        }
    }
}
