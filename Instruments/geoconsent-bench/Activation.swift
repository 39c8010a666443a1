import Foundation
import Glibc
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// What exit-when-idle costs the first call after it: `GetAuthorization` when
/// the bus has to start the daemon (D-Bus activation, from a `.service` file, as
/// the system bus does through systemd) against the same call to a running
/// daemon, on one private bus in the same run. The daemon exits after 0.05 s
/// idle here, so each round finds it gone.
func measureActivation(rounds: Int, daemonExecutable: String) throws -> (cold: Sample, warm: Sample) {
    let services = try TempDir()
    let bus = try TestBus(serviceDirectory: services.path)
    defer { bus.stop() }
    let state = try TempDir()
    let config = state.file("geoconsent.conf")
    try "[daemon]\nidle-exit = 0.05\n".write(toFile: config, atomically: true, encoding: .utf8)
    try """
    [D-BUS Service]
    Name=\(GeoConsentAPI.busName)
    Exec=\(daemonExecutable) --bus \(bus.address) --gpsd 127.0.0.1:\(try FreePort.pick()) --config \(config) --state-dir \(state.path)/state
    """.write(toFile: services.file("\(GeoConsentAPI.busName).service"), atomically: true, encoding: .utf8)

    let peers = PeerLoop()
    let watcher = try peers.connect(bus.address)
    func owner() -> UInt32? {
        let r = watcher.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "GetConnectionUnixProcessID", [.string(GeoConsentAPI.busName)], timeout: 5)
        return (try? r.get())?.first?.uint32Value
    }
    var cold = Sample(), warm = Sample()
    var started: Set<UInt32> = []
    defer { for pid in started where kill(pid_t(pid), 0) == 0 { kill(pid_t(pid), SIGTERM) } }
    for _ in 0..<rounds {
        // Wait for the previous instance to have exited: the name has no owner.
        let deadline = Date().addingTimeInterval(10)
        while owner() != nil {
            if Date() > deadline { fail("activation: the daemon did not exit when idle") }
            peers.settle(0.01)
        }
        // Cold: the bus starts the daemon for this call. Warm: the same call on a
        // second connection while the first one's session keeps the daemon up.
        var open: [BusPeer] = []
        for sample in [0, 1] {
            let (p, us) = timedFirstCall(peers, bus.address, GeoConsentAPI.busName, GeoConsentAPI.objectPath,
                                         GeoConsentAPI.interfaceName, "GetAuthorization")
            open.append(p)
            if sample == 0 { cold.add(us) } else { warm.add(us) }
        }
        if let pid = owner() { started.insert(pid) }
        for p in open { p.connection.close() }
        peers.settle(0.01)
    }
    return (cold, warm)
}

/// GeoClue 2.6's cold start on the same kind of bus, for the same path a
/// client takes (cold start): `Manager.GetClient` when the bus has
/// to start GeoClue (a `.service` file, as its system bus activation does),
/// GeoClue exiting after 5 s idle (`-t 5`), so each round finds it gone. (With
/// `-t 1` it left before answering: a cold `GetClient` first waits about a
/// second for agents to register, as GeoClue does at start-up.) It reads only /etc/geoclue/geoclue.conf: the service runs it in a
/// mount namespace with the harness's config bound there (GeoClueInstance's
/// way; root only). Nil when GeoClue cannot run here.
func measureGeoClueActivation(rounds: Int) throws -> Sample? {
    guard GeoClueInstance.isInstalled, getuid() == 0 else {
        print("bench: GeoClue 2.6 activation not measured: needs /usr/libexec/geoclue and root")
        return nil
    }
    let services = try TempDir()
    let bus = try TestBus(serviceDirectory: services.path)
    defer { bus.stop() }
    let nmea = try NMEASocketServer(path: services.file("nmea.sock"))
    _ = nmea
    let config = services.file("geoclue.conf")
    try GeoClueInstance.config(nmeaSocket: services.file("nmea.sock"), agentWhitelist: ["gnome-shell"])
        .write(toFile: config, atomically: true, encoding: .utf8)
    let unshare = TestPaths.findExecutable("unshare", candidates: ["/usr/bin/unshare"]) ?? "/usr/bin/unshare"
    try """
    [D-BUS Service]
    Name=org.freedesktop.GeoClue2
    Exec=\(unshare) -m /bin/sh -c "mount --bind \(config) /etc/geoclue/geoclue.conf && DBUS_SYSTEM_BUS_ADDRESS='\(bus.address)' exec \(GeoClueInstance.executable) -t 5"
    """.write(toFile: services.file("org.freedesktop.GeoClue2.service"), atomically: true, encoding: .utf8)

    // GNOME Shell's agent, as on a desktop: it watches the name and calls
    // AddAgent each time the bus starts GeoClue, and GeoClue answers a cold
    // GetClient once an agent is there (it waits for one first).
    let agent = try ShellAgentStandIn(busAddress: bus.address)
    defer { agent.stop() }
    let peers = PeerLoop()
    let watcher = try peers.connect(bus.address)
    func owned() -> Bool {
        let r = watcher.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "NameHasOwner", [.string(GeoClueAPI.busName)], timeout: 5)
        return (try? r.get())?.first?.boolValue ?? false
    }
    var cold = Sample()
    for _ in 0..<rounds {
        let deadline = Date().addingTimeInterval(15)
        while owned() {
            if Date() > deadline { fail("GeoClue activation: geoclue did not exit when idle") }
            peers.settle(0.1)
        }
        let (p, us) = timedFirstCall(peers, bus.address, GeoClueAPI.busName, GeoClueAPI.managerPath,
                                     GeoClueAPI.managerInterfaceName, "GetClient")
        cold.add(us)
        p.connection.close()
        peers.settle(0.01)
    }
    return cold
}

/// The activation rows: our cold and warm first call, and GeoClue 2.6's cold
/// one in the same run, whose half is the target (docs/performance.md, cold start).
/// `quick` (make test's run) leaves GeoClue out: each of its rounds waits 5 s for it to exit.
func activationRows(rounds: Int, quick: Bool) throws -> [Row] {
    print("bench: activation (\(rounds) rounds)")
    let activation = try measureActivation(rounds: rounds,
                                           daemonExecutable: ProcessInfo.processInfo.environment["BENCH_DAEMON"]
                                               ?? TestPaths.binDir + "/geoconsentd")
    var rows = [
        Row(section: "activation", name: "GetAuthorization via activation (cold) p50", value: activation.cold.p50, unit: "µs",
            floorName: "GetAuthorization warm p50", floor: activation.warm.p50),
        Row(section: "activation", name: "GetAuthorization via activation (cold) max", value: activation.cold.percentile(100),
            unit: "µs"),
    ]
    if quick { return rows }
    let geoclueRounds = min(rounds, 5)
    print("bench: GeoClue 2.6 activation (\(geoclueRounds) rounds)")
    if let geoclueCold = try measureGeoClueActivation(rounds: geoclueRounds) {
        rows.append(Row(section: "activation", name: "GeoClue 2.6: GetClient via activation (cold) p50", value: geoclueCold.p50,
                        unit: "µs"))
        rows.append(Row(section: "activation", name: "geoconsentd cold GetAuthorization p50, vs GeoClue 2.6 cold GetClient",
                        value: activation.cold.p50, unit: "µs", floorName: "GeoClue 2.6 cold GetClient p50",
                        floor: geoclueCold.p50, target: .ratioAtMost(0.5)))
    }
    return rows
}

/// A new connection's first call, timed from the send to the reply in hand
/// (the activation rounds' measure); a failed call ends the bench.
func timedFirstCall(_ peers: PeerLoop, _ address: String, _ destination: String, _ path: String,
                    _ interface: String, _ member: String) -> (BusPeer, Double) {
    guard let p = try? peers.connect(address) else { fail("activation: cannot connect to \(address)") }
    let t0 = nowNanos()
    let call = p.callAsync(destination, path, interface, member, [], timeout: 20)
    peers.pump(timeout: 20) { call.isDone }
    let us = micros(nowNanos() - t0)
    guard case .success? = call.result else { fail("activation: \(member) failed: \(String(describing: call.result))") }
    return (p, us)
}

/// The stand-in for GNOME Shell's GeoClue agent (tests/geoclue/gnome-shell-agent.py),
/// authorizing at level 8, on the bus at `busAddress` (its system bus there).
final class ShellAgentStandIn {
    let process: ChildProcess
    private let log: TempDir

    init(busAddress: String) throws {
        log = try TempDir()
        process = try ChildProcess(executable: "/usr/bin/python3",
                                   arguments: [TestPaths.sourceRoot + "/tests/geoclue/gnome-shell-agent.py", "true", "8"],
                                   logPath: log.file("agent.log"), environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
    }

    /// What it printed (`registered` once per AddAgent that succeeded).
    var output: String { (try? String(contentsOfFile: log.file("agent.log"), encoding: .utf8)) ?? "" }

    func stop() {
        process.stop()
        log.remove()
    }
}
