import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

// The GeoClue2 facade's fix latency: NMEA sent -> LocationUpdated -> the new
// Location object's properties in hand (the GetAll every GeoClue client does
// on the new path), for `n` client objects, each on its own connection.
//
// The facade runs in a daemon of its own ([geoclue] serve = true) on a bus of
// its own, fed by the same gpsd, so the other phases measure the daemon they
// always did; the comparison is with our own API's rows of the same run, and,
// for C clients, with the protocol served from C (CGeoClueFloor.swift).

/// Per round: when the first and the last client had the fix's properties in hand,
/// and where that time went: when the first and the last `LocationUpdated` was
/// in, and each client's `GetAll` round trip (sent to reply in hand).
struct InHandTimes {
    var first = Sample(), last = Sample()
    var signalFirst = Sample(), signalLast = Sample()
    var getAll = Sample()
    /// Round trips to the daemon with no fix going on, alternating call by call:
    /// `Peer.Ping` (the floor of a call) and the `GetAll` of the latest Location.
    var quietPing = Sample(), quietGetAll = Sample()
    /// The daemon's time on a CPU per fix, in ms, over all rounds.
    var daemonCPUPerFix = Double.nan
    /// The same fix at C clients, from the facade and from the C floor of the
    /// protocol, in alternating rounds (CGeoClueFloor.swift).
    var c: (facade: CGeoClueTimes, floor: CGeoClueTimes, relay: CGeoClueTimes?)?
}

/// An agent that answers Allow While Using: the first `Start` prompts and
/// stores it, every later one is answered from the store (no prompt per client).
final class AllowWhileUsingAgent {
    static let interface = Interface<AllowWhileUsingAgent>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { _, call in call.reply(ConfirmReply.encode(.allowWhileUsing)) },
        CancelCall.member: { _, call in call.reply() },
        // Registered with RegisterAgent (no features): never sent these.
        NoticeCall.member: { _, call in call.reply() },
        CheckFocusCall.member: { _, call in call.reply(CheckFocusReply.encode(focused: .unknown, press: .unknown, via: "none")) },
    ])
}

/// Measures `rounds` fixes (after 2 warm-up ones) for each client count in
/// `clientCounts`; `epoch` makes the next unique NMEA epoch.
func geoClueInHandLatency(gpsd: GpsdInstance, clientCounts: [Int], rounds: Int,
                          epoch: () -> (sentences: [String], micros: UInt64, iso: String)) throws -> [Int: InHandTimes] {
    let bus = try TestBus()
    defer { bus.stop() }
    let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port,
                                    configText: "[daemon]\ngpsd-linger = 0.5\n[geoclue]\nserve = true\n",
                                    executable: ProcessInfo.processInfo.environment["BENCH_DAEMON"])
    defer { daemon.stop() }
    let peers = PeerLoop()
    func must(_ r: Result<[DBusValue], DBusError>, _ what: String) throws -> [DBusValue] {
        switch r {
        case .success(let v): return v
        case .failure(let e): throw HarnessError("GeoClue bench: \(what): \(e)\n\(daemon.log().suffix(3000))")
        }
    }
    let agentPeer = try peers.connect(bus.address)
    // The object server holds exported objects weakly: keep the agent for the whole run.
    let agent = AllowWhileUsingAgent()
    defer { withExtendedLifetime(agent) {} }
    agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [AllowWhileUsingAgent.interface])
    _ = try must(agentPeer.call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                "RegisterAgent", [.objectPath("/bench/Agent")]), "RegisterAgent")
    let dest = GeoClueAPI.busName, props = ObjectServer.properties

    var out: [Int: InHandTimes] = [:]
    for n in clientCounts {
        print("bench: GeoClue2 facade, \(n) client\(n == 1 ? "" : "s")")
        // As where-am-i: GetClient, Set accuracy (exact), Start; one connection each.
        var clients: [(peer: BusPeer, path: String)] = []
        for _ in 0..<n {
            let p = try peers.connect(bus.address)
            let r = try must(p.call(dest, GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "GetClient"), "GetClient")
            guard let path = r.first?.stringValue else { throw HarnessError("GetClient returned \(r)") }
            _ = try must(p.call(dest, path, props, "Set", [.string(GeoClueAPI.clientInterfaceName),
                                                           .string("RequestedAccuracyLevel"), .variant(.uint32(8))]), "Set")
            _ = try must(p.call(dest, path, GeoClueAPI.clientInterfaceName, "Start"), "Start")
            clients.append((p, path))
        }
        var times = InHandTimes()
        let cpu0 = onCPUNanos(daemon.pid)
        for round in 0..<(rounds + 2) {
            let e = epoch()
            let before = clients.map { $0.peer.signals.count }
            var reads: [BusPeer.PendingCall?] = Array(repeating: nil, count: n)
            var signalAt = [UInt64](repeating: 0, count: n), sentAt = [UInt64](repeating: 0, count: n)
            let t0 = nowNanos()
            gpsd.send(e.sentences)
            // Each client reads its new Location as soon as its LocationUpdated is in.
            let ok = peers.pump(timeout: 10) {
                var all = true
                for i in 0..<n {
                    if let r = reads[i] { all = all && r.isDone; continue }
                    let c = clients[i].peer
                    guard let k = c.signals.indices[before[i]...].first(where: { c.signals[$0].member == "LocationUpdated" }),
                          let new = c.signals[k].arguments().last?.stringValue else { all = false; continue }
                    signalAt[i] = c.signalTimes[k]
                    sentAt[i] = nowNanos()
                    reads[i] = c.callAsync(dest, new, props, "GetAll", [.string(GeoClueAPI.locationInterfaceName)])
                    all = false
                }
                return all
            }
            let done = reads.compactMap { $0 }
            // Only fixes of this epoch count (a fix gpsd dropped in warm-up is skipped).
            let fresh = done.filter {
                guard case .success(let v)? = $0.result,
                      let loc = LocationProperties.decode(v.first?.vardictValue ?? [:]) else { return false }
                return loc.timestamp == e.micros
            }
            if ok && fresh.count == n && round >= 2 {
                let at = fresh.map(\.completedAt)
                times.first.add(micros(at.min()! - t0))
                times.last.add(micros(at.max()! - t0))
                times.signalFirst.add(micros(signalAt.min()! - t0))
                times.signalLast.add(micros(signalAt.max()! - t0))
                for (r, sent) in zip(done, sentAt) { times.getAll.add(micros(r.completedAt - sent)) }
            }
            peers.settle(0.01)
        }
        times.daemonCPUPerFix = (onCPUNanos(daemon.pid) - cpu0) / 1e6 / Double(rounds + 2)
        if let (peer, client) = clients.first,
           case .success(let v) = peer.call(dest, client, props, "Get", [.string(GeoClueAPI.clientInterfaceName),
                                                                         .string("Location")]),
           let location = v.first?.unwrapped.stringValue {
            for _ in 0..<rounds {
                for (member, args, sample) in [("Ping", [DBusValue](), \InHandTimes.quietPing),
                                               ("GetAll", [.string(GeoClueAPI.locationInterfaceName)], \InHandTimes.quietGetAll)] {
                    let sent = nowNanos()
                    let c = peer.callAsync(dest, member == "Ping" ? GeoClueAPI.managerPath : location,
                                           member == "Ping" ? ObjectServer.peer : props, member, args)
                    peers.pump(timeout: 5) { c.isDone }
                    if case .success? = c.result { times[keyPath: sample].add(micros(c.completedAt - sent)) }
                    peers.settle(0.002)
                }
            }
        }
        if times.last.count == 0 { throw HarnessError("GeoClue bench: no fix reached all \(n) clients\n\(daemon.log().suffix(3000))") }
        for c in clients { c.peer.connection.close() }
        peers.settle(0.2)
        // The same client count in C, against the C floor of the protocol; the
        // agent above has stored its answer, and runs if it is asked again.
        print("bench: GeoClue2 facade, \(n) C client\(n == 1 ? "" : "s"), against the protocol served from C")
        do {
            // The C relay serves the protocol from its own gpsd: the facade does not hear it.
            let relayGpsd = try GpsdInstance()
            defer { relayGpsd.stop() }
            let relayDir = try TempDir()
            times.c = try cGeoClueInHand(busAddress: bus.address, n: n, rounds: rounds, gpsd: gpsd,
                                         relay: (relayGpsd, { names in
                                             try startCRelay(bus: bus.address, gpsd: relayGpsd, destinations: names,
                                                             geoclue: true, log: relayDir.file("relay-c.log"))
                                         }),
                                         pump: { peers.settle(0.005) }, epoch: epoch)
        } catch {
            throw HarnessError("GeoClue bench: \(error)\n\(daemon.log().suffix(3000))")
        }
        out[n] = times
        peers.settle(0.2)
    }
    return out
}

/// Time the process's threads have run on a CPU, in nanoseconds (schedstat:
/// exact, where utime and stime count 10 ms ticks).
func onCPUNanos(_ pid: pid_t) -> Double {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return .nan }
    return tasks.reduce(0) { sum, tid in
        let s = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/schedstat", encoding: .utf8)) ?? ""
        return sum + (Double(s.split(separator: " ").first ?? "") ?? 0)
    }
}
