import CBenchFloor
import Foundation
import GeoConsentAPI
import GeoDBus
import GeoTestSupport

// First call with logind present: what placing a new connection in
// its login session costs. The daemon asks logind about each new connection
// before its first call reaches the consent core (LogindWatch.place); the bench
// otherwise runs with no logind on its bus, where that costs nothing. Here the
// same C client loop runs three ways in the same run, taking turns round by
// round so that a change in the machine's load hits all three alike: with no
// logind, with the stand-in placing every caller in a session, and with the
// stand-in placing none (the user's Display is then its session), each against
// the same daemon (LogindStandIn.swift: a process of its own, started and
// stopped between turns; the daemon follows logind's arrival and departure).

/// What one way of running measured: the first call of each new connection
/// (µs) and the churn cycle (µs per connect + tap + StartUpdates + leave).
struct LogindCase {
    var firstCall = Sample()
    var churnNanos: UInt64 = 0, churnCycles = 0
    /// The first call of a connection from a cgroup never seen before (`FreshCgroups`).
    var freshFirstCall = Sample()
    var churn: Double { Double(churnNanos) / Double(max(1, churnCycles)) / 1000 }
}

/// The three ways, `rounds` turns each, and the rows with their targets.
func logindRows(bus: TestBus, firstCalls: Int, churnCycles: Int, rounds: Int, executable: String) throws -> [Row] {
    let peer = try Connection(bus: .address(bus.address))
    defer { peer.close() }
    func hasLogind() -> Bool {
        guard let m = try? Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                              interface: "org.freedesktop.DBus", member: "NameHasOwner"),
              (try? m.append([.string("org.freedesktop.login1")])) != nil,
              let r = try? peer.callBlocking(m, timeout: 2) else { return false }
        return r.arguments().first?.boolValue == true
    }
    func waitFor(_ present: Bool) throws {
        let deadline = Date().addingTimeInterval(10)
        while hasLogind() != present {
            if Date() > deadline { throw BenchFloorError(description: "logind stand-in: never \(present ? "came" : "left")") }
            usleep(2000)
        }
    }
    let dir = try TempDir()
    let fresh = FreshCgroups()
    let modes: [String?] = [nil, "unplaced", "placed"]
    var cases = [LogindCase](repeating: LogindCase(), count: modes.count)
    var error = [CChar](repeating: 0, count: 256)
    let (dest, path, iface) = (GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName)
    for _ in 0..<rounds {
        for (i, mode) in modes.enumerated() {
            var standIn: ChildProcess?
            if let mode {
                standIn = try ChildProcess(executable: executable, arguments: ["--logind", bus.address, mode],
                                           logPath: dir.file("logind-\(mode).log"))
                try waitFor(true)
            }
            defer {
                standIn?.stop()
                if standIn != nil { try? waitFor(false) }
            }
            // A few connections first, so that what the daemon learns once (the
            // session's properties) is learnt before the measured ones.
            var warm = [UInt64](repeating: 0, count: 3)
            guard bf_first_calls(bus.address, dest, path, iface, "RequestOneTimeAuthorization", Int32(warm.count), &warm,
                                 &error, Int32(error.count)) == 1 else {
                throw BenchFloorError(description: "first calls (\(mode ?? "no logind")): " + String(cString: error))
            }
            let n = max(1, firstCalls / rounds)
            var nanos = [UInt64](repeating: 0, count: n)
            guard bf_first_calls(bus.address, dest, path, iface, "RequestOneTimeAuthorization", Int32(n), &nanos,
                                 &error, Int32(error.count)) == 1 else {
                throw BenchFloorError(description: "first calls (\(mode ?? "no logind")): " + String(cString: error))
            }
            for v in nanos { cases[i].firstCall.add(micros(v)) }
            let c = max(1, churnCycles / rounds)
            let t = bf_churn(bus.address, dest, path, iface, "RequestOneTimeAuthorization", "StartUpdates", Int32(c),
                             &error, Int32(error.count))
            if t == 0 { throw BenchFloorError(description: "churn (\(mode ?? "no logind")): " + String(cString: error)) }
            cases[i].churnNanos += t
            cases[i].churnCycles += c
            // The same first calls, each from an app scope of its own, as a desktop starts apps.
            if let fresh, mode != "placed" {
                defer { fresh.leave() }
                var one = [UInt64](repeating: 0, count: 1)
                for _ in 0..<n {
                    try fresh.enterNew()
                    guard bf_first_calls(bus.address, dest, path, iface, "RequestOneTimeAuthorization", 1, &one,
                                         &error, Int32(error.count)) == 1 else {
                        throw BenchFloorError(description: "first calls from fresh cgroups (\(mode ?? "no logind")): " +
                                              String(cString: error))
                    }
                    cases[i].freshFirstCall.add(micros(one[0]))
                }
            }
        }
    }
    let none = cases[0]
    var rows: [Row] = [
        Row(section: "logind", name: "no logind: first tap of a new connection p50", value: none.firstCall.p50, unit: "µs"),
        Row(section: "logind", name: "no logind: first tap of a new connection p99", value: none.firstCall.p99, unit: "µs"),
        Row(section: "logind", name: "no logind: churn, connect+tap+StartUpdates+disconnect", value: none.churn, unit: "µs"),
    ]
    for (i, how) in [(1, "places it in no session (its user's Display)"), (2, "places it in a session")] {
        let c = cases[i]
        rows.append(Row(section: "logind", name: "logind \(how): first tap p50", value: c.firstCall.p50, unit: "µs",
                        floorName: "no logind: first tap p50", floor: none.firstCall.p50, target: .ratioAtMost(1.2)))
        rows.append(Row(section: "logind", name: "logind \(how): first tap p99", value: c.firstCall.p99, unit: "µs",
                        floorName: "no logind: first tap p99", floor: none.firstCall.p99, target: .ratioAtMost(1.2)))
        rows.append(Row(section: "logind", name: "logind \(how): churn per cycle", value: c.churn, unit: "µs",
                        floorName: "no logind: churn per cycle", floor: none.churn, target: .ratioAtMost(1.2)))
    }
    if fresh != nil {
        // Each caller from an app scope of its own (user@UID.service/app.slice/app-*.scope):
        // logind places none of them in a session, so their user's Display is theirs.
        let a = cases[1].freshFirstCall
        rows.append(Row(section: "logind", name: "no logind, each caller in a fresh app scope: first tap p50",
                        value: none.freshFirstCall.p50, unit: "µs"))
        rows.append(Row(section: "logind", name: "logind, each caller in a fresh app scope: first tap p50", value: a.p50, unit: "µs",
                        floorName: "no logind, fresh app scopes: first tap p50", floor: none.freshFirstCall.p50,
                        target: .ratioAtMost(1.1)))
        rows.append(Row(section: "logind", name: "logind, each caller in a fresh app scope: first tap p99", value: a.p99, unit: "µs",
                        floorName: "no logind, fresh app scopes: first tap p99", floor: none.freshFirstCall.p99,
                        target: .ratioAtMost(1.2)))
    } else {
        print("bench: no writable cgroup v2 hierarchy: the rows of callers in fresh app scopes are left out")
    }
    return rows
}
