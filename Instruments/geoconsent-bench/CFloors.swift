import CBenchFloor
import Foundation
import GeoConsentAPI
import GeoTestSupport

// The fan-out and churn rows against floors in plain C on libdbus (Instruments/CBenchFloor):
// the daemon's signals are received by the same C receivers as the floor's, and its
// churn cycles run in the same C loop as the floor's, so a row and its floor differ
// only in what stands between the client and the bus.

struct BenchFloorError: Error, CustomStringConvertible {
    let description: String
}

/// `count` C connections on the bus that receive signals and time their arrival.
final class CReceivers {
    /// The C receivers (bf_receivers), for the GeoClue clients' extension (CGeoClueFloor.swift).
    let raw: OpaquePointer
    let count: Int

    init(address: String, count: Int) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard let r = bf_receivers_open(address, Int32(count), &error, Int32(error.count)) else {
            throw BenchFloorError(description: "C receivers: " + String(cString: error))
        }
        raw = r
        self.count = count
    }

    deinit { bf_receivers_close(raw) }

    var names: [String] { (0..<count).map { String(cString: bf_receivers_name(raw, Int32($0))) } }

    /// `count` receivers subscribed to the daemon's fixes (tap, then StartUpdates).
    /// The app must be approved already: the taps are then silent.
    static func subscribed(address: String, count: Int) throws -> CReceivers {
        let r = try CReceivers(address: address, count: count)
        let dest = GeoConsentAPI.busName, path = GeoConsentAPI.objectPath, iface = GeoConsentAPI.interfaceName
        if r.callAll(dest, path, iface, "RequestOneTimeAuthorization") > 0 || r.callAll(dest, path, iface, "StartUpdates") > 0 {
            throw BenchFloorError(description: "C receivers: tap or StartUpdates failed")
        }
        return r
    }

    /// The floor's C sender (bf_sender) of one prebuilt LocationUpdated to each
    /// of these receivers per round; the caller stops it (bf_sender_stop).
    func floorSender(busAddress: String) throws -> OpaquePointer {
        var error = [CChar](repeating: 0, count: 256)
        return try names.withCStrings { list in
            guard let s = bf_sender_start(busAddress, list, Int32(count), GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                          LocationUpdatedSignal.member, &error, Int32(error.count)) else {
                throw BenchFloorError(description: "C sender: " + String(cString: error))
            }
            return s
        }
    }

    /// `member` with an empty a{sv} from every receiver at once; the number that failed.
    func callAll(_ dest: String, _ path: String, _ iface: String, _ member: String) -> Int {
        Int(bf_receivers_call_all(raw, dest, path, iface, member, 30_000))
    }

    func drain() { bf_receivers_drain(raw) }

    /// Arrival times (bf_now) of the signal `member` with location timestamp `stamp`
    /// at every receiver; nil if some receiver did not get it within `timeout` seconds.
    func wait(member: String, stamp: UInt64, timeout: Double) -> [UInt64]? {
        var arrivals = [UInt64](repeating: 0, count: count)
        let ok = bf_receivers_wait(raw, member, stamp, &arrivals, Int32(timeout * 1000))
        return ok == 0 ? arrivals : nil
    }
}

/// First and last arrival of a fan-out, each from its own start time.
struct FanoutTimes {
    var first = Sample(), last = Sample()

    mutating func add(_ arrivals: [UInt64], since start: UInt64) {
        first.add(micros(arrivals.min()! &- start))
        last.add(micros(arrivals.max()! &- start))
    }
}

/// On-CPU time of a process in ns (/proc/PID/schedstat, first field): finer than clock ticks.
func cpuNanos(_ pid: pid_t) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/schedstat", encoding: .utf8) else { return .nan }
    return Double(s.split(separator: " ").first ?? "") ?? .nan
}

/// The daemon's fan-out to `n` subscribed C receivers, and the floor: a C thread
/// sending `n` prebuilt unicast signals of the same size to the same receivers.
/// With `relay` (a second gpsd, and how to start the C relay for the receivers'
/// names), also the C relay's fan-out from that gpsd to the same receivers: the
/// third process alone, without the daemon's work. Rounds alternate so that the
/// machine's load hits all alike.
/// `cpuPerFix`: the daemon's CPU time per fix over its rounds (µs).
func cFanout(busAddress: String, n: Int, rounds: Int, daemonPID: pid_t, gpsd: GpsdInstance,
             relay: (gpsd: GpsdInstance, start: ([String]) throws -> ChildProcess)? = nil,
             epoch: () -> (sentences: [String], micros: UInt64, iso: String)) throws
    -> (daemon: FanoutTimes, floor: FanoutTimes, relay: FanoutTimes?, cpuPerFix: Double) {
    let dest = GeoConsentAPI.busName, path = GeoConsentAPI.objectPath, iface = GeoConsentAPI.interfaceName
    let member = LocationUpdatedSignal.member
    let receivers = try CReceivers.subscribed(address: busAddress, count: n)
    let names = receivers.names
    let sender = try receivers.floorSender(busAddress: busAddress)
    defer { bf_sender_stop(sender) }
    let relayRounds = try relay.map { CRelayRounds(gpsd: $0.gpsd, process: try $0.start(names)) }
    defer { relayRounds?.process.stop() }

    var daemon = FanoutTimes(), floor = FanoutTimes(), relayed = FanoutTimes()
    var cpu = 0.0, fixes = 0
    for round in 0..<(rounds + 2) {
        let measured = round >= 2   // two warm-up rounds
        // The daemon: NMEA to gpsd, a LocationUpdated at every receiver.
        let e = epoch()
        receivers.drain()
        let cpu0 = cpuNanos(daemonPID)
        let t0 = nowNanos()
        gpsd.send(e.sentences)
        if let arrivals = receivers.wait(member: member, stamp: e.micros, timeout: 5), measured {
            daemon.add(arrivals, since: t0)
            cpu += cpuNanos(daemonPID) - cpu0
            fixes += 1
        }
        usleep(10_000)
        // The floor: the same receivers, prebuilt signals from a C thread.
        let stamp = UInt64(1_000_000 + round)
        receivers.drain()
        bf_sender_fire(sender, stamp)
        let arrivals = receivers.wait(member: member, stamp: stamp, timeout: 5)
        let start = bf_sender_finish(sender)
        if let arrivals, measured { floor.add(arrivals, since: start) }
        usleep(10_000)
        // The C relay: NMEA to its own gpsd (the daemon does not hear it).
        if let relayRounds {
            receivers.drain()
            let r = try relayRounds.round(epoch) { receivers.wait(member: member, stamp: $0, timeout: 5) }
            if let r, measured { relayed.add(r.result, since: r.start) }
            usleep(10_000)
        }
    }
    _ = receivers.callAll(dest, path, iface, "StopUpdates")
    if relay != nil && relayed.last.count == 0 {
        throw BenchFloorError(description: "the C relay's fix reached no round's \(n) receivers")
    }
    return (daemon, floor, relay == nil ? nil : relayed, fixes > 0 ? cpu / Double(fixes) / 1000 : .nan)
}

/// The child processes of `pid` (found by their parent PID in /proc/*/stat).
func childPIDs(of pid: pid_t) -> [pid_t] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { entry -> pid_t? in
        guard let child = pid_t(entry),
              let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After "comm)": state, then the parent PID.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 && pid_t(fields[1]) == pid ? child : nil
    }
}

/// Churn per client in µs: connect + Hello + tap + StartUpdates + disconnect against
/// the daemon, and the floor: connect + Hello + two round trips to a C echo service
/// (a thread of this process with its own connection) + disconnect. The same C loop
/// runs both, in alternating batches, and two more against C echoes that know
/// their callers: one asks the bus for each new caller's credentials before its
/// first reply (`identifying`), the least a service that knows its callers pays;
/// the other also has a helper thread read the caller's /proc over a socketpair
/// (`separated`), as the daemon's identity helper does.
/// `cpuPerCycle`: on-CPU time (µs) of the daemon and of its children (the identity
/// helper, when it runs one) per cycle, over the daemon's batches only: what a new
/// connection costs the service, free of the wall-clock noise of a shared machine.
func cChurn(busAddress: String, cycles: Int, daemonPID: pid_t) throws
    -> (daemon: Double, floor: Double, identifying: Double, separated: Double, cpuPerCycle: Double) {
    // The helper is started with the daemon and lives as long: found once.
    let measured = [daemonPID] + childPIDs(of: daemonPID)
    func cpu() -> Double { measured.reduce(0) { $0 + cpuNanos($1) } }
    var error = [CChar](repeating: 0, count: 256)
    guard let echo = bf_echo_start(busAddress, 0, &error, Int32(error.count)) else {
        throw BenchFloorError(description: "C echo service: " + String(cString: error))
    }
    defer { bf_echo_stop(echo) }
    let echoName = String(cString: bf_echo_name(echo))
    guard let identifyingEcho = bf_echo_start(busAddress, 1, &error, Int32(error.count)) else {
        throw BenchFloorError(description: "C identifying echo service: " + String(cString: error))
    }
    defer { bf_echo_stop(identifyingEcho) }
    let identifyingName = String(cString: bf_echo_name(identifyingEcho))
    guard let separatedEcho = bf_echo_start(busAddress, 2, &error, Int32(error.count)) else {
        throw BenchFloorError(description: "C echo service with a /proc helper: " + String(cString: error))
    }
    defer { bf_echo_stop(separatedEcho) }
    let separatedName = String(cString: bf_echo_name(separatedEcho))
    let batches = 10, each = max(1, cycles / batches)
    var daemonNanos: UInt64 = 0, floorNanos: UInt64 = 0, identifyingNanos: UInt64 = 0, separatedNanos: UInt64 = 0,
        cpuNanosUsed = 0.0
    for _ in 0..<batches {
        let cpu0 = cpu()
        let d = bf_churn(busAddress, GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                         "RequestOneTimeAuthorization", "StartUpdates", Int32(each), &error, Int32(error.count))
        if d == 0 { throw BenchFloorError(description: "churn against the daemon: " + String(cString: error)) }
        cpuNanosUsed += cpu() - cpu0
        let f = bf_churn(busAddress, echoName, "/bench/Echo", "org.geoconsent.BenchEcho", "Echo", "Echo",
                         Int32(each), &error, Int32(error.count))
        if f == 0 { throw BenchFloorError(description: "churn floor: " + String(cString: error)) }
        let i = bf_churn(busAddress, identifyingName, "/bench/Echo", "org.geoconsent.BenchEcho", "Echo", "Echo",
                         Int32(each), &error, Int32(error.count))
        if i == 0 { throw BenchFloorError(description: "churn against the identifying echo: " + String(cString: error)) }
        let h = bf_churn(busAddress, separatedName, "/bench/Echo", "org.geoconsent.BenchEcho", "Echo", "Echo",
                         Int32(each), &error, Int32(error.count))
        if h == 0 { throw BenchFloorError(description: "churn against the echo with a /proc helper: " + String(cString: error)) }
        daemonNanos += d
        floorNanos += f
        identifyingNanos += i
        separatedNanos += h
    }
    // Each cycle is a new connection: the references must have identified every one.
    for (echo, what) in [(identifyingEcho, "identifying echo"), (separatedEcho, "echo with a /proc helper")]
    where bf_echo_identified(echo) < batches * each {
        throw BenchFloorError(description: "the \(what) identified \(bf_echo_identified(echo)) callers in \(batches * each) cycles")
    }
    let total = Double(batches * each)
    return (Double(daemonNanos) / total / 1000, Double(floorNanos) / total / 1000, Double(identifyingNanos) / total / 1000,
            Double(separatedNanos) / total / 1000, cpuNanosUsed / total / 1000)
}

extension Array where Element == String {
    /// Calls `body` with the strings as a C array of C strings, valid during the call.
    func withCStrings<R>(_ body: ([UnsafePointer<CChar>?]) throws -> R) rethrows -> R {
        let copies = map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return try body(copies.map { UnsafePointer($0) })
    }
}
