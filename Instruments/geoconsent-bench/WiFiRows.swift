import CCurl
import GeoGeolocate
import Foundation
import GeoConsentAPI
import GeoCore
import GeoDBus
import GeoSystem
import GeoTestSupport

// Wi-Fi positioning (docs/dbus-api.md "Sources", "Wi-Fi"), on a bus of its own:
// NetworkManager (python-dbusmock), the real helper socket-activated per
// connection, the loopback HTTPS geolocate server, and the release daemon with
// GPS off. Rows:
// - a RequestLocation answered by a Wi-Fi lookup, cold (a daemon started for
//   each sample, so its helper starts for it: the path of an app's first
//   request), against the server's own round trip measured from this process in
//   the same run, taking turns: a new TLS connection and one POST with libcurl.
//   Target: at most that plus 5 ms;
// - the cost of reading access points: the same with 64 visible against 2;
// - idle with Wi-Fi on and no grant: no wake-up of the daemon, no helper
//   process, no call to NetworkManager, no request to the server.

/// One POST of `body` on a new TLS connection, in milliseconds.
func httpsRoundTrip(url: String, caFile: String, body: [UInt8]) -> Double? {
    guard let h = curl_easy_init() else { return nil }
    defer { curl_easy_cleanup(h) }
    geo_curl_set_string(h, CURLOPT_URL, url)
    geo_curl_set_string(h, CURLOPT_CAINFO, caFile)
    geo_curl_set_string(h, CURLOPT_PROXY, "")
    geo_curl_set_long(h, CURLOPT_NOSIGNAL, 1)
    let headers = curl_slist_append(nil, "Content-Type: application/json")
    defer { curl_slist_free_all(headers) }
    geo_curl_set_slist(h, CURLOPT_HTTPHEADER, headers)
    geo_curl_set_callback(h, CURLOPT_WRITEFUNCTION) { _, size, count, _ in size * count }
    let t0 = nowNanos()
    let code: CURLcode = body.withUnsafeBufferPointer { b in
        geo_curl_set_size(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(b.count))
        geo_curl_set_pointer(h, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: b.baseAddress))
        return curl_easy_perform(h)
    }
    let t = nowNanos() - t0
    return code == CURLE_OK && geo_curl_response_code(h) == 200 ? Double(t) / 1e6 : nil
}

/// The helper alone, as the daemon talks to it: a connection to its socket
/// (which starts it), then `lookups` requests of access points not asked
/// before (no cache); the milliseconds of each from request to answer,
/// the first one including the helper's start.
func helperLookups(socketPath: String, lookups: Int, first: Int) throws -> [Double] {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket failed") }
    defer { close(fd) }
    let t0 = nowNanos()
    let rc = withUnixSocketAddress(socketPath) { connect(fd, $0, $1) }
    guard rc == 0 else { throw HarnessError("cannot connect to \(socketPath)") }
    var times: [Double] = []
    for i in 0..<lookups {
        let start = i == 0 ? t0 : nowNanos()
        let n = first + i
        let line = WiFiLookupWire.encodeRequest([
            AccessPoint(bssid: String(format: "00:1b:%02x:%02x:00:01", n >> 8, n & 0xFF), signal: -50, ageMilliseconds: 0),
            AccessPoint(bssid: String(format: "00:1b:%02x:%02x:00:02", n >> 8, n & 0xFF), signal: -70, ageMilliseconds: 0)])
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != 0x0A { answer.append(byte) }
        guard String(decoding: answer, as: UTF8.self).hasPrefix("position") else {
            throw HarnessError("the helper answered '\(String(decoding: answer, as: UTF8.self))'")
        }
        times.append(Double(nowNanos() - start) / 1e6)
    }
    return times
}

func wifiRows(samples: Int, idleSeconds: Double) throws -> [Row] {
    print("bench: Wi-Fi positioning (\(samples) cold requests a way)")
    guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else { throw HarnessError("curl_global_init failed") }
    let bus = try TestBus()
    let loop = PeerLoop()
    let dir = try TempDir()
    let server = try GeolocateServer()
    defer { server.stop(); dir.remove(); bus.stop() }
    let helperConfig = dir.file("helper.conf")
    try HelperSocket.config(for: server).write(toFile: helperConfig, atomically: true, encoding: .utf8)
    let socket = try HelperSocket(path: dir.file("wifi.sock"),
                                  program: [TestPaths.binDir + "/geoconsent-wifi-helper", "--config", helperConfig],
                                  logPath: dir.file("helper.log"))
    defer { socket.stop() }
    let peer = try loop.connect(bus.address)
    let nm = try NetworkManagerStandIn(busAddress: bus.address, peer: peer, loop: loop, logPath: dir.file("nm.log"),
                                       callLog: dir.file("nm-calls.log"))
    defer { nm.stop() }
    try nm.addAccessPoint("ap0", ssid: "a", bssid: "00:1a:2b:3c:00:00", strength: 70)
    try nm.addAccessPoint("ap1", ssid: "b", bssid: "00:1a:2b:3c:00:01", strength: 50)
    let config = "[sources]\ngps = false\nwifi-url = \(server.url)\nwifi-helper = \(socket.path)\n"
    let (dest, path, iface) = (GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName)
    let body = GeolocateAPI.requestBody([AccessPoint(bssid: "00:1a:2b:3c:00:00", signal: -50, ageMilliseconds: 0),
                                         AccessPoint(bssid: "00:1a:2b:3c:00:01", signal: -70, ageMilliseconds: 0)])

    /// One cold request on a daemon started for it, `afterTap` seconds after
    /// the tap, in milliseconds.
    func coldRequest(afterTap: Double = 0) throws -> Double {
        let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: 1, configText: config)
        defer { daemon.stop() }
        let agentPeer = try loop.connect(bus.address)
        let app = try loop.connect(bus.address)
        defer { app.connection.close(); agentPeer.connection.close() }
        let agent = AllowAgent()   // the server holds exported objects weakly
        agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [AllowAgent.interface])
        _ = try agentPeer.call(dest, path, iface, "RegisterAgent", [.objectPath("/bench/Agent")]).get()
        _ = try app.call(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]).get()
        withExtendedLifetime(agent) {}
        if afterTap > 0 { loop.settle(afterTap) }
        let t0 = nowNanos()
        let reply = try app.call(dest, path, iface, "RequestLocation",
                                 [OptionDictionary.encode(LocationOptions(maxAge: 0, timeout: 10))], timeout: 15).get()
        let t = nowNanos() - t0
        guard LocationBody.decode(reply)?.fix.source == .wifi else {
            throw HarnessError("RequestLocation gave no Wi-Fi position: \(reply)\n\(daemon.log().suffix(2000))")
        }
        return Double(t) / 1e6
    }

    var cold = Sample(), roundTrip = Sample(), helperCold = Sample(), helperWarm = Sample(), readied = Sample()
    for i in 0..<samples {
        guard let r = httpsRoundTrip(url: server.url, caFile: server.caFile, body: body) else {
            throw HarnessError("the server's own round trip failed")
        }
        roundTrip.add(r)
        cold.add(try coldRequest())
        readied.add(try coldRequest(afterTap: 0.05))
        let alone = try helperLookups(socketPath: socket.path, lookups: 2, first: 2 * i)
        helperCold.add(alone[0])
        helperWarm.add(alone[1])
    }
    // 62 more access points: the cost of reading them, with the same turns.
    for i in 2..<64 {
        try nm.addAccessPoint("ap\(i)", ssid: "n\(i)", bssid: String(format: "00:1a:2b:3c:00:%02x", i), strength: 40)
    }
    var many = Sample()
    for _ in 0..<samples { many.add(try coldRequest()) }

    // Idle with Wi-Fi on: an app's grant ended after its lookup; then nothing.
    let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: 1, configText: config)
    defer { daemon.stop() }
    let agentPeer = try loop.connect(bus.address)
    let agent = AllowAgent()
    agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [AllowAgent.interface])
    _ = try agentPeer.call(dest, path, iface, "RegisterAgent", [.objectPath("/bench/Agent")]).get()
    let app = try loop.connect(bus.address)
    _ = try app.call(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]).get()
    withExtendedLifetime(agent) {}
    _ = try app.call(dest, path, iface, "RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 0, timeout: 10))],
                     timeout: 15).get()
    app.connection.close()
    loop.pump(timeout: 5) { socket.helperProcesses().isEmpty }
    loop.settle(0.5)
    let requests0 = server.requests().count, nmCalls0 = nm.calls().split(separator: "\n").count
    let ctx0 = contextSwitches(daemon.pid)
    Thread.sleep(forTimeInterval: idleSeconds)
    let wakeUps = contextSwitches(daemon.pid) - ctx0
    let helpers = socket.helperProcesses().count
    let requests = server.requests().count - requests0, nmCalls = nm.calls().split(separator: "\n").count - nmCalls0

    let floorName = "the server's own round trip: a new TLS connection and one POST (libcurl, in process)"
    let perAP = (many.p50 - cold.p50) / 62
    return [
        Row(section: "wifi", name: "RequestLocation → Wi-Fi position right after the tap (the helper still starting)", value: cold.p50,
            unit: "ms", floorName: floorName, floor: roundTrip.p50),
        Row(section: "wifi", name: "  beyond the server's own round trip (the helper's start on the path)",
            value: cold.p50 - roundTrip.p50, unit: "ms"),
        Row(section: "wifi", name: "RequestLocation → Wi-Fi position, 50 ms after the tap (the helper readied while the grant holds)",
            value: readied.p50, unit: "ms", floorName: floorName, floor: roundTrip.p50),
        Row(section: "wifi", name: "  beyond the server's own round trip", value: readied.p50 - roundTrip.p50, unit: "ms",
            target: .atMost(5)),
        Row(section: "wifi", name: "the helper alone, started for the connection (no daemon, no NetworkManager)",
            value: helperCold.p50, unit: "ms", floorName: floorName, floor: roundTrip.p50),
        Row(section: "wifi", name: "the helper alone, a second lookup on its connection (TLS kept)", value: helperWarm.p50,
            unit: "ms", floorName: floorName, floor: roundTrip.p50),
        Row(section: "wifi", name: "reading the access points, per access point (64 visible against 2; NetworkManager is dbusmock)",
            value: perAP * 1000, unit: "µs"),
        Row(section: "wifi", name: "idle, Wi-Fi on, no grant: daemon wake-ups over \(fmt(idleSeconds)) s", value: wakeUps, unit: "",
            target: .atMost(0)),
        Row(section: "wifi", name: "idle, Wi-Fi on, no grant: helper processes", value: Double(helpers), unit: "", target: .atMost(0)),
        Row(section: "wifi", name: "idle, Wi-Fi on, no grant: NetworkManager calls and server requests", value: Double(requests + nmCalls),
            unit: "", target: .atMost(0)),
    ]
}
