import Foundation
import GeoConsentAPI
import GeoCore
import GeoDBus
import GeoTestSupport

// A call's cost with many timers armed in the daemon's loop, against none:
// the loop keeps its timers in a heap (GeoDBus/TimerHeap.swift), so a turn
// looks at the earliest one only, and no turn grows with the callers' timers
// (red team round 4: 35,000 agent-wait timers kept a loop that scanned them
// all at 93 % of a core). The timers are those a caller can arm: each
// `RequestLocation` waiting for a fix arms its timeout (`location-requests-
// per-session` is lifted for the bench's daemon: one session holds them all).
// No fix is sent meanwhile, so they stay armed. The calls measured are
// pre-approved taps of another session, and Peer.Ping beside them, taking
// turns with and without, round by round, so that a change in the machine's
// load hits both alike.
//
// What is the daemon's: its processor time per tap (schedstat), the row with
// the target. The round trips are reported too: each of the armed requests is
// a call the bus waits on a reply for, and dbus-daemon looks through the calls
// it waits on whenever a reply passes, so every reply (Ping's as much as the
// tap's) costs the bus more while they wait; that share is the bus's, not the
// loop's, and the Ping rows show it.

struct ArmedTimerCounts {
    var timers = 10_000, calls = 1000, rounds = 4
    static let quick = ArmedTimerCounts(timers: 100, calls: 20, rounds: 1)
}

/// The round trips of `n` calls of `member` by `caller` (µs), one after another.
private func roundTrips(_ caller: BusPeer, _ peers: PeerLoop, _ n: Int, _ interface: String, _ member: String,
                        _ args: [DBusValue], into sample: inout Sample) {
    let (dest, path) = (GeoConsentAPI.busName, GeoConsentAPI.objectPath)
    for _ in 0..<n {
        let t0 = nowNanos()
        let call = caller.callAsync(dest, path, interface, member, args)
        peers.pump(timeout: 10) { call.isDone }
        guard case .success? = call.result else { fail("\(member) with timers armed failed: \(String(describing: call.result))") }
        sample.add(micros(nowNanos() - t0))
    }
}

/// Taps and pings, and the daemon's processor time over the taps alone.
private struct Phase {
    var tap = Sample(), ping = Sample()
    var cpuNanos = 0.0, taps = 0
    var cpuPerTap: Double { cpuNanos / Double(max(1, taps)) / 1000 }

    mutating func measure(_ tapper: BusPeer, _ peers: PeerLoop, _ n: Int, daemonPID: pid_t) {
        let cpu0 = onCPUNanos(daemonPID)
        roundTrips(tapper, peers, n, GeoConsentAPI.interfaceName, "RequestOneTimeAuthorization", [.vardict([:])], into: &tap)
        cpuNanos += onCPUNanos(daemonPID) - cpu0
        taps += n
        roundTrips(tapper, peers, n, ObjectServer.peer, "Ping", [], into: &ping)
    }
}

func armedTimerRows(peers: PeerLoop, busAddress: String, daemonPID: pid_t, counts c: ArmedTimerCounts,
                    approve: (BusPeer) -> Void) throws -> [Row] {
    let (dest, path, iface) = (GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName)
    let tapper = try peers.connect(busAddress)
    approve(tapper)
    var with = Phase(), without = Phase()
    for _ in 0..<c.rounds {
        without.measure(tapper, peers, c.calls, daemonPID: daemonPID)
        // Armed: one session's requests, each waiting for a fix with its timeout.
        let armer = try peers.connect(busAddress)
        approve(armer)
        let waiting = (0..<c.timers).map { _ in
            armer.callAsync(dest, path, iface, "RequestLocation",
                            [OptionDictionary.encode(LocationOptions(maxAge: 0, timeout: 3600))], timeout: 7200)
        }
        // The daemon reads a connection's calls in order: once this is answered, every request is armed.
        let ping = armer.callAsync(dest, path, ObjectServer.peer, "Ping", [])
        peers.pump(timeout: 120) { ping.isDone }
        if let done = waiting.first(where: \.isDone) {
            fail("a RequestLocation was answered, so its timer is not armed: \(String(describing: done.result))")
        }
        with.measure(tapper, peers, c.calls, daemonPID: daemonPID)
        // Its connection leaves: the session ends, and its timers are cancelled with its requests.
        armer.connection.close()
        peers.pump(timeout: 0.2) { false }
    }
    let n = c.timers
    return [
        Row(section: "timers", name: "daemon CPU per pre-approved tap, no timer armed", value: without.cpuPerTap, unit: "µs"),
        Row(section: "timers", name: "daemon CPU per pre-approved tap, \(n) timers armed (waiting RequestLocation)",
            value: with.cpuPerTap, unit: "µs", floorName: "no timer armed", floor: without.cpuPerTap, target: .ratioAtMost(1.1)),
        Row(section: "timers", name: "pre-approved tap p50, no timer armed", value: without.tap.p50, unit: "µs"),
        Row(section: "timers", name: "pre-approved tap p50, \(n) timers armed", value: with.tap.p50, unit: "µs",
            floorName: "no timer armed", floor: without.tap.p50),
        Row(section: "timers", name: "floor: Peer.Ping p50, \(n) calls waiting on the daemon (the bus's share)",
            value: with.ping.p50, unit: "µs", floorName: "none waiting", floor: without.ping.p50),
    ]
}
