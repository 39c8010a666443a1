import Glibc
import GeoDBus
import GeoConsentAPI

/// `hand-over`: a granted connection outlives the process the user tapped in.
/// This process taps (this uid's agent answers), starts updates, forks, and
/// exits; the child keeps the connection and prints, in order: the parent's
/// exit (`parent exited pid=P`), each `AuthorizationChanged` that comes after
/// it with its delay from the exit (`changed status S after-us N`; `changed
/// none` if none came in `--wait` seconds), then its own `RequestLocation`
/// and `GetAuthorization` replies, and `done`; it keeps the connection
/// `--linger` seconds more (for the tests to look at its session).
func runHandOver(bus: String, waitSeconds: Double, lingerSeconds: Double) -> Int32 {
    let c = connect(bus)
    say("connected pid=\(getpid()) name=\(c.uniqueName)")
    let tap = call(c, "RequestOneTimeAuthorization", [.vardict(["reason": .string("hand-over")])])
    report("RequestOneTimeAuthorization", tap) { "status \($0.first?.uint32Value ?? 999)" }
    report("StartUpdates", call(c, "StartUpdates", [.vardict([:])]))

    // The parent tells the child when it exits: its monotonic clock (the same
    // clock in every process) just before _exit, through a pipe only it writes;
    // it exits once the child says it has taken the connection over.
    var fds: [Int32] = [-1, -1], ready: [Int32] = [-1, -1]
    guard pipe(&fds) == 0, pipe(&ready) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
    fflush(stdout)
    typealias Fork = @convention(c) () -> pid_t
    let child = libc("fork", as: Fork.self)()
    if child < 0 { fail("fork: \(String(cString: strerror(errno)))") }
    if child > 0 {
        // Parent: leave without touching the connection (it is the child's now).
        close(fds[0])
        close(ready[1])
        var b: UInt8 = 0
        _ = read(ready[0], &b, 1)
        var exitAt = monotonicNanos()
        _ = write(fds[1], &exitAt, MemoryLayout<UInt64>.size)
        _exit(0)
    }
    close(fds[1])
    close(ready[0])
    // A session of its own: test harnesses sweep a finished child's process group.
    setsid()
    say("holder pid=\(getpid())")
    let parent = getppid()

    let loop = EventLoop()
    var exitedAt: UInt64?
    var changes: [(status: UInt32, at: UInt64)] = []
    c.onMessage = { m in
        if m.type == .signal, m.member == AuthorizationChangedSignal.member, let st = m.arguments().first?.uint32Value {
            changes.append((st, monotonicNanos()))
        }
        return m.type == .signal
    }
    c.attach(to: loop)
    // What arrived before the hand-over (the tap's AuthorizationChanged) is
    // dispatched now, before the parent may exit.
    loop.runOnce(timeoutMillis: 0)
    var b: UInt8 = 1
    _ = write(ready[1], &b, 1)
    close(ready[1])
    loop.watch(fd: fds[0], events: .readable) { _ in
        var at: UInt64 = 0
        if read(fds[0], &at, MemoryLayout<UInt64>.size) == MemoryLayout<UInt64>.size, exitedAt == nil { exitedAt = at }
    }
    let deadline = monotonicNanos() + UInt64(waitSeconds * 1e9)
    func changedAfterExit() -> [(status: UInt32, at: UInt64)] {
        guard let e = exitedAt else { return [] }
        return changes.filter { $0.at >= e }
    }
    while changedAfterExit().isEmpty && monotonicNanos() < deadline {
        loop.runOnce(timeoutMillis: 50)
    }
    say("parent exited pid=\(parent)")
    let after = changedAfterExit()
    if after.isEmpty { say("changed none") }
    for ch in after { say("changed status \(ch.status) after-us \((ch.at - exitedAt!) / 1000)") }

    report("RequestLocation", call(c, "RequestLocation", [.vardict(["timeout": .double(2)])], timeout: 10)) { v in
        v.first?.vardictValue?["latitude"] != nil ? "fix" : "no fix"
    }
    report("GetAuthorization", call(c, "GetAuthorization")) { "status \($0.first?.uint32Value ?? 999)" }
    say("done")
    if lingerSeconds > 0 { usleep(useconds_t(min(lingerSeconds, 600) * 1e6)) }
    return 0
}

/// Monotonic nanoseconds (CLOCK_MONOTONIC: one clock for every process).
func monotonicNanos() -> UInt64 { EventLoop.monotonicNanos() }
