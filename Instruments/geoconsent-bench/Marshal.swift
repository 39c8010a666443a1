import GeoDBus
import GeoConsentAPI

// Why GeoDBus has two marshallers, measured in every run: the signals the
// GeoClue2 facade sends per client and fix (`LocationUpdated(old, new)` and its
// client's `PropertiesChanged` of `Location`) built by WireEncoder in one pass
// (and then checked by libdbus's `dbus_message_demarshal`, as a message read
// from the bus is) against libdbus appending the same arguments one by one.
// WireEncoder stays while it is the cheaper (target ≤ 1×); everything else,
// and whatever WireEncoder does not write, goes through libdbus.

/// Nanoseconds per build of `args` each way: the median of five runs of `builds`.
private func perBuild(builds: Int, _ build: () -> Message?) -> Double {
    var runs: [Double] = []
    for _ in 0..<5 {
        let t0 = nowNanos()
        for _ in 0..<builds { guard build() != nil else { return .nan } }
        runs.append(Double(nowNanos() - t0) / Double(builds))
    }
    return runs.sorted()[2]
}

/// The rows of the marshallers' section.
func marshalRows(builds: Int) -> [Row] {
    let client = GeoClueAPI.clientPath(2_891_234_567)
    let signals: [(name: String, interface: String, member: String, args: [DBusValue])] = [
        ("LocationUpdated", GeoClueAPI.clientInterfaceName, "LocationUpdated",
         [.objectPath(GeoClueAPI.locationPath(client: 2_891_234_567, 41)),
          .objectPath(GeoClueAPI.locationPath(client: 2_891_234_567, 42))]),
        ("PropertiesChanged of Location", ObjectServer.properties, "PropertiesChanged",
         [.string(GeoClueAPI.clientInterfaceName),
          .vardict([ClientProperty.location: .objectPath(GeoClueAPI.locationPath(client: 2_891_234_567, 42))]),
          .strings([])]),
    ]
    var rows: [Row] = []
    for s in signals {
        let wire = perBuild(builds: builds) {
            Message.signal(wire: client, interface: s.interface, member: s.member, destination: ":1.42", s.args)
        }
        let appended = perBuild(builds: builds) {
            guard let m = try? Message.signal(path: client, interface: s.interface, member: s.member, destination: ":1.42"),
                  (try? m.append(s.args)) != nil else { return nil }
            return m
        }
        rows.append(Row(section: "marshallers", name: "\(s.name): WireEncoder (one pass, checked)", value: wire / 1000,
                        unit: "µs", floorName: "libdbus append", floor: appended / 1000, target: .ratioAtMost(1)))
        rows.append(Row(section: "marshallers", name: "\(s.name): libdbus append", value: appended / 1000, unit: "µs"))
    }
    return rows
}
