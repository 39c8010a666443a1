import Glibc
import GeoDBus

// Attacks on what the daemon holds for one uid: calls it must keep while they
// wait, sessions, pending location requests. Each prints what the daemon
// answered (Burst's `reply` lines) for the tests to count.

/// `taps`: `calls` taps at once, each on a connection of its own (one app, so
/// they join one prompt when this uid's agent is silent), each carrying
/// `fds` file descriptors under unknown option keys and, with `stringKey`, a
/// string of `stringBytes` bytes under that key. Prints `sent N` once all are
/// out, then the answers, until all are answered, SIGTERM, or `waitSeconds`.
func runTaps(bus: String, calls: Int, fds: Int, stringKey: String?, stringBytes: Int, waitSeconds: Double) -> Int32 {
    let burst = Burst()
    var options: [String: DBusValue] = ["reason": .string("flood")]
    if fds > 0 {
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard devNull >= 0 else { fail("open /dev/null: \(String(cString: strerror(errno)))") }
        // libdbus duplicates each descriptor into the message: one is enough here.
        for i in 0..<fds { options["fd\(i)"] = .unixFD(devNull) }
    }
    if let key = stringKey { options[key] = .string(String(repeating: "j", count: stringBytes)) }
    var connections: [Connection] = []
    for i in 0..<calls {
        let c = connect(bus, on: burst)
        connections.append(c)
        burst.send(c, label: "tap-\(i)", "RequestOneTimeAuthorization", [.vardict(options)], timeout: 300) {
            "status \($0.first?.uint32Value ?? 999)"
        }
    }
    options = [:]
    say("sent \(calls)")
    burst.wait(seconds: waitSeconds)
    burst.finish()
    return 0
}

/// `flood-sessions`: `connections` connections, GetAuthorization on each in
/// turn (`reply auth-I …`); then closes the first `close` that were served
/// and calls again, every 50 ms for up to 10 s, on the first `close` that were
/// refused (`reply retry-I … after N tries`).
func runFloodSessions(bus: String, connections n: Int, close closeCount: Int) -> Int32 {
    var served: [Connection] = []
    var refused: [(Int, Connection)] = []
    var all: [Connection] = []
    for i in 0..<n {
        let c = connect(bus)
        all.append(c)
        let r = call(c, "GetAuthorization", timeout: 10)
        report("auth-\(i)", r) { "status \($0.first?.uint32Value ?? 999)" }
        if case .success = r { served.append(c) } else { refused.append((i, c)) }
    }
    for c in served.prefix(closeCount) { c.close() }
    say("closed \(min(closeCount, served.count))")
    for (i, c) in refused.prefix(closeCount) {
        var tries = 0
        var r: Result<[DBusValue], DBusError>
        let deadline = monotonic() + 10
        repeat {
            tries += 1
            r = call(c, "GetAuthorization", timeout: 10)
            if case .success = r { break }
            usleep(50_000)
        } while monotonic() < deadline
        report("retry-\(i)", r) { "status \($0.first?.uint32Value ?? 999) after \(tries) tries" }
    }
    _ = all
    return 0
}

/// `flood-locate`: a tap (this uid's agent must allow it), one RequestLocation
/// that waits for the next fix (so that the next one is a whole fix interval
/// away), then `requests` RequestLocation calls at once on the same
/// connection, none of which a cached fix answers (`max-age` 0).
func runFloodLocate(bus: String, requests: Int) -> Int32 {
    let burst = Burst()
    let c = connect(bus, on: burst)
    report("tap", call(c, "RequestOneTimeAuthorization", [.vardict(["reason": .string("locate")])])) {
        "status \($0.first?.uint32Value ?? 999)"
    }
    let fresh: [DBusValue] = [.vardict(["max-age": .double(0), "timeout": .double(30)])]
    report("first-fix", call(c, "RequestLocation", fresh, timeout: 35)) { v in
        v.first?.vardictValue?["latitude"] != nil ? "fix" : "no fix"
    }
    for i in 0..<requests {
        burst.send(c, label: "locate-\(i)", "RequestLocation", fresh, timeout: 35) { v in
            v.first?.vardictValue?["latitude"] != nil ? "fix" : "no fix"
        }
    }
    say("sent \(requests)")
    burst.wait(seconds: 40)
    burst.finish()
    return 0
}
