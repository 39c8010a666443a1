// geoconsent-wifi-helper: the one process of geoconsent that reaches the
// network. Socket-activated per connection (geoconsent-wifi.socket, Accept=yes):
// its standard input and output are the daemon's connection. For each line
// `lookup BSSID,DBM,AGE …` it answers one line (WiFiLookupWire), asking the
// configured ichnaea geolocate server over HTTPS at most as WiFiLookupPolicy
// allows. It is never told which app asked, keeps nothing on disk, and exits
// when the daemon closes the connection or sends nothing for --idle-exit seconds.
import Glibc
import GeoCore
import GeoGeolocate
import GeoSystem

let usage = """
Usage: geoconsent-wifi-helper [--config FILE] [--idle-exit SECONDS] [--timeout SECONDS]

Looks up the position of visible Wi-Fi access points for geoconsentd, one
request a line on standard input, one answer a line on standard output
(started by systemd for each connection of geoconsentd to
/run/geoconsent/wifi.sock). The server is [sources] wifi-url of
geoconsent.conf (an ichnaea geolocate API over HTTPS, such as BeaconDB's);
only BSSIDs, signal strengths and ages are sent, never SSIDs, never with an
IP fallback, never a submission.

  --config FILE        read only FILE (default: /etc/geoconsent/geoconsent.conf
                       and /etc/geoconsent/conf.d/*.conf)
  --idle-exit SECONDS  exit after this long with no request (default 60)
  --timeout SECONDS    give up a request to the server after this long (default 10)
  --help, --version
"""

/// journald's `<N>` priority prefix, and none on a terminal.
let prefixes = isatty(2) == 0
func priority(_ n: Int) -> String { prefixes ? "<\(n)>" : "" }

func fail(_ message: String) -> Never {
    var line = "\(priority(3))geoconsent-wifi-helper: \(message)\n"
    _ = line.withUTF8 { write(2, $0.baseAddress, $0.count) }
    exit(1)
}

func log(_ message: String) {
    var line = "\(priority(4))\(message)\n"
    _ = line.withUTF8 { write(2, $0.baseAddress, $0.count) }
}

var configFile: String?
var idleExit = 60.0
var timeout = HTTPPost.defaultTimeout
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--help", "-h": print(usage); exit(0)
    case "--version": print("geoconsent-wifi-helper \(geoconsentVersion)"); exit(0)
    case "--config":
        guard let v = args.popFirst() else { fail("--config needs a FILE") }
        configFile = v
    case "--idle-exit":
        guard let v = args.popFirst(), let s = Double(v), s > 0, s <= 86_400 else { fail("--idle-exit needs SECONDS") }
        idleExit = s
    case "--timeout":
        guard let v = args.popFirst(), let s = Double(v), s > 0, s <= 60 else { fail("--timeout needs SECONDS, up to 60") }
        timeout = s
    default: fail("unknown argument '\(arg)' (see --help)")
    }
}

let config: Config
do {
    // The daemon's own file: the [geoclue] section is its facade's, not read here.
    config = try ConfigLoader.load(explicitFile: configFile, frontEndSections: ["geoclue"])
} catch {
    fail("\(error)")
}
let sources = config.sources
let userAgent = "geoconsent/\(geoconsentVersion) (Wi-Fi positioning of a Linux location service)"

/// The answer when no lookup can be made at all.
var refusal: String?
var http: HTTPPost?
if sources.wifiURL.isEmpty {
    refusal = "Wi-Fi positioning is off: [sources] wifi-url is empty"
} else if let h = HTTPPost(url: sources.wifiURL, caFile: sources.wifiCAFile, userAgent: userAgent, timeout: timeout) {
    http = h
    TLSWarmUp.run(caFile: sources.wifiCAFile)
} else {
    refusal = "libcurl cannot be started"
}

var policy = WiFiLookupPolicy()

func answer(_ line: [UInt8]) -> WiFiLookupWire.Answer {
    let aps: [AccessPoint]
    do throws(WiFiLookupError) {
        aps = try WiFiLookupWire.decodeRequest(line)
    } catch {
        return .failed("the helper got a bad request: \(error)")
    }
    if let refusal { return .failed(refusal) }
    if let cached = policy.before(aps, now: monotonicSeconds()) { return cached }
    let reply = http!.post(GeolocateAPI.requestBody(aps)).map { response in
        (GeolocateAPI.decode(status: response.status, body: response.body),
         retryAfter: response.retryAfter.flatMap(GeolocateAPI.retryAfter))
    }
    let result = policy.after(aps, reply, now: monotonicSeconds())
    switch result {
    case .failed(let why), .retry(_, let why): log("geoconsent-wifi-helper: \(why)")
    case .position, .notFound: break
    }
    return result
}

func send(_ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(1, $0.baseAddress! + offset, bytes.count - offset) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        offset += n
    }
    return true
}

// One request a line; a line longer than the protocol allows ends the conversation.
var pending: [UInt8] = []
var chunk = [UInt8](repeating: 0, count: 4096)
while true {
    var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0)]
    let ready = poll(&fds, 1, Int32(idleExit * 1000))
    if ready < 0 && errno == EINTR { continue }
    if ready == 0 { exit(0) }   // idle
    let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
    if n < 0 && errno == EINTR { continue }
    if n <= 0 { exit(0) }       // the daemon closed the connection
    pending += chunk[0..<n]
    while let newline = pending.firstIndex(of: 0x0A) {
        let line = Array(pending[..<newline])
        pending.removeSubrange(...newline)
        if !send(WiFiLookupWire.encodeAnswer(answer(line))) { exit(0) }
    }
    if pending.count > WiFiLookupWire.maxRequestBytes {
        _ = send(WiFiLookupWire.encodeAnswer(.failed("request longer than \(WiFiLookupWire.maxRequestBytes) bytes")))
        exit(1)
    }
}
