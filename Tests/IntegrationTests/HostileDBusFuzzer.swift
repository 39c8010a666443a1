import GeoDBus
import GeoConsentAPI

/// Random D-Bus traffic for the daemon, from a seed.
struct DBusFuzzer {
    enum Kind {
        case call(dest: String, path: String, iface: String?, member: String, args: [DBusValue], noReply: Bool)
        case signal(path: String, iface: String, member: String, args: [DBusValue], dest: String?)
    }
    struct Item {
        var category: String
        var kind: Kind
    }

    var rng: SeededRNG
    var victim = ""
    var daemonUniqueName: String?
    private let huge: [String]

    init(seed: UInt64) {
        rng = SeededRNG(seed: seed)
        huge = [String(repeating: "x", count: 1 << 20), String(repeating: "\u{00e9}\u{4e16}", count: 1 << 18) + "\u{1F4CD}"]
    }

    static let clientMethods: [(String, String)] = GeoConsentAPI.interface.methods.map { ($0.name, $0.inSignature) }
    static let optionKeys = ["reason", "accuracy", "app-name", "parent-window", "max-age", "timeout",
                             "distance-filter", "min-interval", "uid", "x-unknown", ""]

    mutating func next(forceHuge: Bool = false) -> Item {
        let dest = (rng.chance(0.2) ? daemonUniqueName : nil) ?? GeoConsentAPI.busName
        let here = GeoConsentAPI.objectPath
        let geo = GeoConsentAPI.interfaceName
        if forceHuge {
            return Item(category: "huge", kind: .call(dest: dest, path: here, iface: geo, member: "RequestOneTimeAuthorization",
                                                      args: [.vardict(["reason": .string(rng.pick(huge))])], noReply: false))
        }
        let r = rng.int(0...99)
        var item: Item
        switch r {
        case 0..<24:
            let (m, _) = rng.pick(Self.clientMethods)
            item = Item(category: "wrong-args", kind: .call(dest: dest, path: here, iface: geo, member: m,
                                                            args: randomArgs(), noReply: false))
        case 24..<50:
            item = fuzzedContent(dest)
        case 50..<57:
            let m = rng.pick(["Confirm", "Cancel", "Release", rngMember()])
            let args: [DBusValue] = m == "Confirm"
                ? [.string(randomString()), .string(randomString()), .string(rng.pick(["one-time", "when-in-use", "x"])), randomVardict()]
                : m == "Cancel" ? [.string(randomString())] : randomArgs()
            item = Item(category: "agent-iface-on-daemon",
                        kind: .call(dest: dest, path: here, iface: GeoConsentAPI.agentInterfaceName, member: m, args: args, noReply: false))
        case 57..<64:
            let m = rng.chance(0.6) ? rng.pick(Self.clientMethods).0 : rng.pick(["Ping", "Introspect", "Get", "GetAll", "Set", "GetMachineId", rngMember()])
            item = Item(category: "no-interface", kind: .call(dest: dest, path: here, iface: nil, member: m,
                                                              args: rng.chance(0.5) ? [] : randomArgs(), noReply: false))
        case 64..<71:
            let iface: String? = rng.chance(0.3) ? nil : rng.pick([geo, ObjectServer.peer, ObjectServer.introspectable,
                                                                    ObjectServer.properties, randomInterface()])
            let m = rng.chance(0.5) ? rng.pick(Self.clientMethods).0 : rng.pick(["Ping", "Introspect", "GetAll", rngMember()])
            item = Item(category: "other-path", kind: .call(dest: dest, path: randomPath(), iface: iface, member: m,
                                                            args: rng.chance(0.5) ? [] : randomArgs(), noReply: false))
        case 71..<78:
            item = Item(category: "random-member", kind: .call(dest: dest, path: here, iface: rng.chance(0.5) ? geo : randomInterface(),
                                                               member: rngMember(), args: randomArgs(), noReply: false))
        case 78..<84:
            item = randomSignal()
        case 84..<91:
            var inner = rng.chance(0.5) ? fuzzedContent(dest) : Item(category: "", kind: .call(
                dest: dest, path: here, iface: geo, member: rng.pick(Self.clientMethods).0, args: randomArgs(), noReply: false))
            if case .call(let d, let p, let i, let m, let a, _) = inner.kind {
                inner = Item(category: "no-reply", kind: .call(dest: d, path: p, iface: i, member: m, args: a, noReply: true))
            }
            item = inner
        case 91..<98:
            item = Item(category: "deep", kind: .call(dest: dest, path: here, iface: rng.chance(0.8) ? geo : nil,
                                                      member: rng.pick(Self.clientMethods).0, args: [deepValue()], noReply: false))
        default:
            let args: [DBusValue] = rng.chance(0.5) ? [.vardict(["reason": .string(rng.pick(huge))])] : [.string(rng.pick(huge))]
            item = Item(category: "huge", kind: .call(dest: dest, path: here, iface: geo,
                                                      member: rng.pick(["RequestOneTimeAuthorization", "ResetConsent", "RegisterAgent", "GetAuthorization"]),
                                                      args: args, noReply: false))
            if rng.chance(0.6) {   // most of this slot: cheaper edge values instead of another megabyte
                item = Item(category: "deep", kind: .call(dest: dest, path: here, iface: geo,
                                                          member: rng.pick(Self.clientMethods).0, args: [deepValue()], noReply: false))
            }
        }
        return item
    }

    /// A known method with the right signature and random contents.
    private mutating func fuzzedContent(_ dest: String) -> Item {
        let here = GeoConsentAPI.objectPath
        let geo = GeoConsentAPI.interfaceName
        func call(_ m: String, _ args: [DBusValue], iface: String = GeoConsentAPI.interfaceName) -> Item {
            Item(category: "fuzzed-content", kind: .call(dest: dest, path: here, iface: iface, member: m, args: args, noReply: false))
        }
        switch rng.int(0...9) {
        case 0, 1: return call(rng.pick(["RequestOneTimeAuthorization", "RequestWhenInUseAuthorization"]), [randomVardict()])
        case 2: return call(rng.pick(["RequestLocation", "StartUpdates"]), [randomVardict()])
        case 3: return call("ResetConsent", [.string(randomString()), randomVardict()])
        case 4:
            // Mostly invalid paths as strings; rarely a valid path (the fuzzer then is this uid's "agent",
            // which answers nothing: every prompt is an error, never a grant).
            if rng.chance(0.05) { return call(rng.pick(["RegisterAgent", "UnregisterAgent"]), [.objectPath(randomPath())]) }
            return call("RegisterAgent", [.string(rng.pick(["", "x", "//", "/a/", "no/slash", "/a b", randomString()]))])
        case 5: return call(rng.pick(["GetAuthorization", "ListConsents", "ListSessions", "StopUpdates", "Revoke"]), [])
        case 6:
            let iface = rng.pick([geo, "", GeoConsentAPI.agentInterfaceName, randomString()])
            let prop = rng.pick(["Version", "Enabled", "GpsdConnected", "InUse", "", randomString()])
            return call("Get", [.string(iface), .string(prop)], iface: ObjectServer.properties)
        case 7: return call("GetAll", [.string(rng.pick([geo, "", ObjectServer.peer, randomString()]))], iface: ObjectServer.properties)
        case 8:
            let prop = rng.pick(["Version", "Enabled", "GpsdConnected", "InUse", randomString()])
            // Enabled set to true only (a false would make the rest of the run "restricted").
            let value: DBusValue = prop == "Enabled" && rng.chance(0.5) ? .bool(true) : randomValue(depth: 2)
            return call("Set", [.string(rng.pick([geo, ""])), .string(prop), .variant(value)], iface: ObjectServer.properties)
        default:
            return call(rng.pick(["Introspect", "Ping", "GetMachineId"]), [],
                        iface: rng.pick([ObjectServer.introspectable, ObjectServer.peer]))
        }
    }

    private mutating func randomSignal() -> Item {
        if rng.chance(0.3) {
            // A forged NameOwnerChanged: claims the victim left.
            return Item(category: "signal", kind: .signal(path: "/org/freedesktop/DBus", iface: "org.freedesktop.DBus",
                                                          member: "NameOwnerChanged",
                                                          args: [.string(victim), .string(victim), .string("")],
                                                          dest: rng.chance(0.5) ? GeoConsentAPI.busName : nil))
        }
        return Item(category: "signal", kind: .signal(path: rng.chance(0.5) ? GeoConsentAPI.objectPath : randomPath(),
                                                      iface: rng.pick([GeoConsentAPI.interfaceName, randomInterface(), ObjectServer.properties]),
                                                      member: rng.pick(["LocationUpdated", "AuthorizationChanged", "PropertiesChanged", rngMember()]),
                                                      args: randomArgs(), dest: rng.chance(0.8) ? GeoConsentAPI.busName : nil))
    }

    private mutating func randomArgs() -> [DBusValue] {
        (0..<rng.int(0...3)).map { _ in randomValue(depth: 3) }
    }

    private mutating func randomVardict() -> DBusValue {
        var d: [String: DBusValue] = [:]
        for _ in 0..<rng.int(0...5) {
            let key = rng.chance(0.8) ? rng.pick(Self.optionKeys) : randomString()
            d[key] = knownishValue(for: key)
        }
        return .vardict(d)
    }

    /// Usually the right type with odd values; often the wrong type.
    private mutating func knownishValue(for key: String) -> DBusValue {
        if rng.chance(0.45) { return randomValue(depth: 2) }
        switch key {
        case "reason", "app-name", "parent-window": return .string(randomString())
        case "accuracy": return .string(rng.pick(["full", "reduced", "", "FULL", "exact", randomString()]))
        case "max-age", "timeout", "distance-filter", "min-interval":
            return .double(rng.pick([0, -1, 1e-300, 5, 1e308, .infinity, -.infinity, .nan, Double.random(in: -1e6...1e6, using: &rng)]))
        case "uid": return .uint32(rng.pick([0, 65534, UInt32.max, UInt32.random(in: 0...UInt32.max, using: &rng)]))
        default: return randomValue(depth: 2)
        }
    }

    mutating func randomValue(depth: Int) -> DBusValue {
        let k = rng.int(0...(depth > 0 ? 17 : 12))
        switch k {
        case 0: return .byte(UInt8.random(in: 0...255, using: &rng))
        case 1: return .bool(rng.chance(0.5))
        case 2: return .int16(Int16.random(in: .min ... .max, using: &rng))
        case 3: return .uint16(UInt16.random(in: 0 ... .max, using: &rng))
        case 4: return .int32(Int32.random(in: .min ... .max, using: &rng))
        case 5: return .uint32(UInt32.random(in: 0 ... .max, using: &rng))
        case 6: return .int64(Int64.random(in: .min ... .max, using: &rng))
        case 7: return .uint64(UInt64.random(in: 0 ... .max, using: &rng))
        case 8: return .double(rng.pick([0, -0.0, .nan, .infinity, 1e308, Double.random(in: -1e9...1e9, using: &rng)]))
        case 9, 10: return .string(randomString())
        case 11: return .objectPath(randomPath())
        case 12: return .signature(rng.pick(["", "s", "a{sv}", "(ii)", "aaai", "v"]))
        case 13:
            let proto = randomValue(depth: depth - 1)
            return .array(element: proto.signature, Array(repeating: proto, count: rng.int(0...4)))
        case 14:
            let key = randomBasic()
            let val = randomValue(depth: depth - 1)
            return .dict(key: key.signature, value: val.signature,
                         rng.chance(0.5) ? [] : [.init(key, val)])
        case 15: return .structure((0..<rng.int(1...4)).map { _ in randomValue(depth: depth - 1) })
        case 16: return .variant(randomValue(depth: depth - 1))
        default: return randomVardict()
        }
    }

    private mutating func randomBasic() -> DBusValue {
        switch rng.int(0...4) {
        case 0: return .string(randomString())
        case 1: return .uint32(UInt32.random(in: 0 ... .max, using: &rng))
        case 2: return .int64(Int64.random(in: .min ... .max, using: &rng))
        case 3: return .objectPath(randomPath())
        default: return .byte(UInt8.random(in: 0...255, using: &rng))
        }
    }

    /// Nesting near libdbus's limits: up to 32 arrays, 32 structs, 60 variants, or 20 a{sv} in a{sv}
    /// (the bus accepts 64 levels in all, counting variants; past that it drops the sender).
    private mutating func deepValue() -> DBusValue {
        var v: DBusValue = randomBasic()
        switch rng.int(0...3) {
        case 0: for _ in 0..<rng.int(1...32) { v = .array(element: v.signature, rng.chance(0.3) ? [] : [v]) }
        case 1: for _ in 0..<rng.int(1...32) { v = .structure(rng.chance(0.5) ? [v] : [v, randomBasic()]) }
        case 2: for _ in 0..<rng.int(1...60) { v = .variant(v) }
        default: for _ in 0..<rng.int(1...20) { v = .vardict([rng.pick(Self.optionKeys): v]) }
        }
        return v
    }

    mutating func randomString() -> String {
        switch rng.int(0...9) {
        case 0: return ""
        case 1: return String(repeating: rng.pick(["a", "\u{202E}", "\u{1F4CD}", "%", "\t", "\u{7F}"]), count: rng.int(1...4096))
        case 2: return "/usr/bin/" + String((0..<rng.int(1...20)).map { _ in rng.pick(Array("abc.-_/\\\"'$;`")) })
        default:
            let alphabet = Array("abcXYZ019 -_./:%\n\r\t\u{1}\u{1f}\u{7f}\u{e9}\u{4e16}\u{1F30D}\u{FFFD}\u{200B}\"'<>&{}[]")
            return String((0..<rng.int(1...40)).map { _ in rng.pick(alphabet) })
        }
    }

    private mutating func randomPath() -> String {
        if rng.chance(0.1) { return "/" }
        let parts = (0..<rng.int(1...6)).map { _ in
            String((0..<rng.int(1...12)).map { _ in rng.pick(Array("abcdefgXYZ0123456789_")) })
        }
        return "/" + parts.joined(separator: "/")
    }

    private mutating func rngMember() -> String {
        let first = Array("abcXYZ_")
        let rest = Array("abcXYZ_0123456789")
        return String(rng.pick(first)) + String((0..<rng.int(0...40)).map { _ in rng.pick(rest) })
    }

    private mutating func randomInterface() -> String {
        (0..<rng.int(2...5)).map { _ in
            String(rng.pick(Array("abcXYZ_"))) + String((0..<rng.int(0...10)).map { _ in rng.pick(Array("abcXYZ_09")) })
        }.joined(separator: ".")
    }
}
