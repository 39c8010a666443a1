import CBenchFloor
import Foundation
import GeoConsentAPI
import GeoTestSupport

// The GeoClue2 facade's fix against a floor in plain C (Instruments/CBenchFloor,
// geoclue_floor.c): the same C receivers, each a GeoClue client, are served a
// fix by the facade and by a C thread that speaks the facade's side of the
// protocol, in alternating rounds. Per client and fix both cost four messages
// through the bus (LocationUpdated, PropertiesChanged, GetAll, its reply).

/// When the first and the last C client had the fix's properties in hand, and
/// when the first and the last `LocationUpdated` was in, each from its round's start.
struct CGeoClueTimes {
    var inHand = FanoutTimes(), signal = FanoutTimes()

    mutating func add(signalAt: [UInt64], inHandAt: [UInt64], since start: UInt64) {
        inHand.add(inHandAt, since: start)
        signal.add(signalAt, since: start)
    }
}

extension CReceivers {
    /// Makes every receiver a GeoClue client of the facade (GetClient, DesktopId,
    /// RequestedAccuracyLevel, Start); `pump` runs while the Starts are answered
    /// (a consent agent of this process may be asked).
    func becomeGeoClueClients(desktopID: String, level: UInt32, pump: () -> Void) throws {
        var error = [CChar](repeating: 0, count: 256)
        if bf_gc_clients_setup(raw, GeoClueAPI.busName, desktopID, level, &error, Int32(error.count)) != 0 {
            throw BenchFloorError(description: "C GeoClue clients: " + String(cString: error))
        }
        let deadline = nowNanos() + 30_000_000_000
        while true {
            let left = bf_gc_clients_started(raw, 5, &error, Int32(error.count))
            if left < 0 { throw BenchFloorError(description: "C GeoClue clients: " + String(cString: error)) }
            if left == 0 { return }
            if nowNanos() > deadline { throw BenchFloorError(description: "C GeoClue clients: \(left) Start calls unanswered") }
            pump()
        }
    }

    /// When each client had the LocationUpdated and the properties of the fix
    /// with Timestamp `stamp` in hand; nil if some client did not within `timeout` seconds.
    func waitGeoClueFix(stamp: UInt64, timeout: Double) -> (signalAt: [UInt64], inHandAt: [UInt64])? {
        var signalAt = [UInt64](repeating: 0, count: count), inHandAt = [UInt64](repeating: 0, count: count)
        let ok = bf_gc_clients_wait(raw, stamp, &signalAt, &inHandAt, Int32(timeout * 1000))
        return ok == 0 ? (signalAt, inHandAt) : nil
    }
}

/// `n` C GeoClue clients of the facade at `busAddress`, and the floor: a C
/// thread serving the same clients the same protocol. With `relay` (a second
/// gpsd, and how to start the C relay in GeoClue mode for the clients' names),
/// also the C relay serving them each fix from that gpsd. `rounds` measured
/// fixes (after 2 warm-up ones) of each, alternating.
func cGeoClueInHand(busAddress: String, n: Int, rounds: Int, gpsd: GpsdInstance,
                    relay: (gpsd: GpsdInstance, start: ([String]) throws -> ChildProcess)? = nil, pump: () -> Void,
                    epoch: () -> (sentences: [String], micros: UInt64, iso: String)) throws
    -> (facade: CGeoClueTimes, floor: CGeoClueTimes, relay: CGeoClueTimes?) {
    let receivers = try CReceivers(address: busAddress, count: n)
    try receivers.becomeGeoClueClients(desktopID: "geoconsent-bench", level: GeoClueAccuracyLevel.exact, pump: pump)
    var error = [CChar](repeating: 0, count: 256)
    let sender = try receivers.names.withCStrings { list in
        guard let s = bf_gc_floor_start(busAddress, list, Int32(n), &error, Int32(error.count)) else {
            throw BenchFloorError(description: "C GeoClue floor: " + String(cString: error))
        }
        return s
    }
    defer { bf_gc_floor_stop(sender) }
    let relayRounds = try relay.map { CRelayRounds(gpsd: $0.gpsd, process: try $0.start(receivers.names)) }
    defer { relayRounds?.process.stop() }

    var facade = CGeoClueTimes(), floor = CGeoClueTimes(), relayed = CGeoClueTimes()
    for round in 0..<(rounds + 2) {
        let measured = round >= 2   // two warm-up rounds
        // The facade: NMEA to gpsd, a fix at every client.
        let e = epoch()
        receivers.drain()
        let t0 = nowNanos()
        gpsd.send(e.sentences)
        if let t = receivers.waitGeoClueFix(stamp: e.micros, timeout: 5), measured {
            facade.add(signalAt: t.signalAt, inHandAt: t.inHandAt, since: t0)
        }
        usleep(10_000)
        // The floor: the same clients, served by the C thread.
        let stamp = UInt64(1_000_000 + round)
        receivers.drain()
        bf_gc_floor_fire(sender, stamp)
        let t = receivers.waitGeoClueFix(stamp: stamp, timeout: 5)
        let start = bf_gc_floor_finish(sender)
        if let t, start != 0, measured { floor.add(signalAt: t.signalAt, inHandAt: t.inHandAt, since: start) }
        usleep(10_000)
        // The C relay: NMEA to its own gpsd, the same clients served from C.
        if let relayRounds {
            receivers.drain()
            let r = try relayRounds.round(epoch) { receivers.waitGeoClueFix(stamp: $0, timeout: 5) }
            if let r, measured { relayed.add(signalAt: r.result.signalAt, inHandAt: r.result.inHandAt, since: r.start) }
            usleep(10_000)
        }
    }
    if facade.inHand.last.count == 0 || floor.inHand.last.count == 0 || (relay != nil && relayed.inHand.last.count == 0) {
        throw BenchFloorError(description: "C GeoClue clients: no fix reached all \(n) (facade \(facade.inHand.last.count), "
                              + "floor \(floor.inHand.last.count), relay \(relayed.inHand.last.count) rounds)")
    }
    return (facade, floor, relay == nil ? nil : relayed)
}
