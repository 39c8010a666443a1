// nmea-replay: play an NMEA track file to gpsd (or anything) over UDP, one
// epoch per 1/rate seconds, the way a receiver would emit it. Used by
// scripts/run-stack.sh (`make run`) and handy for poking a test gpsd by hand.
import Foundation
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: nmea-replay [--loop] [--rate HZ] [--now] [--quiet] HOST:PORT FILE

    Sends the NMEA sentences of FILE (one per line, e.g. data/track.nmea) to
    HOST:PORT as UDP datagrams, one datagram per sentence (CRLF appended),
    one epoch (the sentences sharing a GGA/RMC time) every 1/HZ seconds.

      --loop      start over at the end of the file, forever
      --rate HZ   epochs per second (default 1)
      --now       rewrite each GGA/RMC time and RMC date to the current UTC
                  time, as a live receiver would (checksums recomputed);
                  without it the file's own times are sent, and with --loop
                  they jump back at every lap
      --quiet     no progress line on stderr
      --help      this text

    Feed a gpsd started as `gpsd -N -n -S PORT udp://127.0.0.1:UDPPORT`
    with `nmea-replay --loop --now 127.0.0.1:UDPPORT data/track.nmea`.
    Exits 0 at the end of the file (without --loop) and on SIGTERM/SIGINT;
    2 on a usage error, 1 on other errors.

    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("nmea-replay: \(message)\n".utf8))
    if code == 2 { FileHandle.standardError.write(Data(usage.utf8)) }
    exit(code)
}

// MARK: arguments

var loop = false
var rate = 1.0
var now = false
var quiet = false
var positional: [String] = []
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    case "--loop": loop = true
    case "--now": now = true
    case "--quiet", "-q": quiet = true
    case "--rate":
        guard let v = args.popFirst(), let r = Double(v), r > 0, r.isFinite else {
            fail("--rate needs a positive number", code: 2)
        }
        rate = r
    case let s where s.hasPrefix("--rate="):
        guard let r = Double(s.dropFirst(7)), r > 0, r.isFinite else { fail("--rate needs a positive number", code: 2) }
        rate = r
    case let s where s.hasPrefix("-") && s != "-":
        fail("unknown option \(s)", code: 2)
    default:
        positional.append(a)
    }
}
guard positional.count == 2 else { fail("need HOST:PORT and FILE", code: 2) }

// HOST:PORT, with [v6]:PORT accepted.
let target = positional[0]
guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]) else {
    fail("bad target \(target) (want HOST:PORT)", code: 2)
}
var host = String(target[..<colon])
if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
if host.isEmpty { host = "127.0.0.1" }

let epochs: [[String]]
do {
    epochs = try NMEA.loadTrack(path: positional[1])
} catch {
    fail("\(error)", code: 1)
}
guard !epochs.isEmpty else { fail("\(positional[1]): no sentences", code: 1) }

// MARK: socket

var hints = addrinfo()
hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
hints.ai_family = AF_UNSPEC
var res: UnsafeMutablePointer<addrinfo>?
let gai = getaddrinfo(host, String(port), &hints, &res)
guard gai == 0, let ai = res else { fail("cannot resolve \(host): \(String(cString: gai_strerror(gai)))", code: 1) }
let fd = socket(ai.pointee.ai_family, ai.pointee.ai_socktype, ai.pointee.ai_protocol)
guard fd >= 0 else { fail("socket: \(String(cString: strerror(errno)))", code: 1) }
let destAddr = ai.pointee.ai_addr!
let destLen = ai.pointee.ai_addrlen

// MARK: signals

// SIGTERM/SIGINT end the replay with status 0: nothing is buffered, so
// leaving straight from the handler is fine (and async-signal-safe).
for sig in [SIGTERM, SIGINT] {
    var sa = sigaction()
    sa.__sigaction_handler.sa_handler = { _ in _exit(0) }
    sigemptyset(&sa.sa_mask)
    sigaction(sig, &sa, nil)
}
// A full socket buffer or an ICMP "port unreachable" (gpsd restarting)
// must not kill us: errors from sendto are ignored below.
signal(SIGPIPE, SIG_IGN)

// MARK: replay

func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func sleepUntil(_ t: Double) {
    let d = t - monotonic()
    guard d > 0 else { return }
    var req = timespec(tv_sec: Int(d), tv_nsec: Int((d - Double(Int(d))) * 1e9))
    var rem = timespec()
    while nanosleep(&req, &rem) != 0 && errno == EINTR { req = rem }
}

if !quiet {
    FileHandle.standardError.write(Data(
        "nmea-replay: \(epochs.count) epochs from \(positional[1]) to \(host):\(port) at \(rate) Hz\(loop ? ", looping" : "")\(now ? ", live times" : "")\n".utf8))
}

let period = 1.0 / rate
var next = monotonic()
repeat {
    for epoch in epochs {
        sleepUntil(next)
        let stamp = Date()
        for s in epoch {
            let line = (now ? NMEA.retime(s, to: stamp) : s) + "\r\n"
            _ = line.utf8CString.withUnsafeBufferPointer { buf in
                sendto(fd, buf.baseAddress, buf.count - 1, Int32(MSG_NOSIGNAL), destAddr, destLen)
            }
        }
        next += period
        // Fell far behind (suspended, slow machine): resync instead of bursting.
        if monotonic() - next > 5 * period { next = monotonic() }
    }
} while loop
exit(0)
