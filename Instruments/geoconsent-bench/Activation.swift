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
            let p = try peers.connect(bus.address)
            open.append(p)
            let t0 = nowNanos()
            let call = p.callAsync(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                   "GetAuthorization", [], timeout: 20)
            peers.pump(timeout: 20) { call.isDone }
            let us = micros(nowNanos() - t0)
            guard case .success? = call.result else { fail("activation: GetAuthorization failed: \(String(describing: call.result))") }
            if sample == 0 { cold.add(us) } else { warm.add(us) }
        }
        if let pid = owner() { started.insert(pid) }
        for p in open { p.connection.close() }
        peers.settle(0.01)
    }
    return (cold, warm)
}
