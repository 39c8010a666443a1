import Foundation
import GeoConsentAPI
import GeoDBus
import GeoTestSupport

// RSS per session at 1,000 and 10,000 sessions that stay within the per-uid
// limits (docs/dbus-api.md, "Limits": 64 sessions per uid; root, which the
// memory phase of main.swift taps as, is exempt). Each uid is a child process:
// this bench run again through setpriv as that uid (`--sessions-child`), so that
// the bus reads the uid from the socket and the daemon finds /proc/PID owned by
// it (after exec the process is dumpable again: a child that only called
// setuid would show as root's and be refused). Each child registers a consent
// agent of its own that allows once, taps on one connection (one prompt, to
// itself), then on the others (silent), says "ready" and waits.
// The daemon looks no uid up, but dbus-daemon admits only uids whose groups it
// can look up (policy.c, bus_policy_allow_unix_user): the sessions' bus runs in
// a mount namespace of its own, where /etc/passwd and /etc/group also name the
// bench's uids (UidsBus). Adding users to the machine would outlive the bench.

/// Sessions per uid: under `sessions-per-user` (64) with room to spare.
/// BENCH_SESSIONS_PER_UID=N changes it (1...60), to tell a uid's cost from a session's.
let sessionsPerUid = ProcessInfo.processInfo.environment["BENCH_SESSIONS_PER_UID"].flatMap { Int($0) }
    .map { min(max($0, 1), 60) } ?? 50

/// `geoconsent-bench --sessions-child BUS COUNT`: one uid's sessions, held until
/// the bench that started it is gone or ends it. Prints "ready COUNT" when every
/// session holds its grant.
func runSessionsChild(_ args: ArraySlice<String>) -> Never {
    let a = Array(args)
    guard a.count == 2, let count = Int(a[1]), count > 0 else {
        FileHandle.standardError.write("usage: geoconsent-bench --sessions-child BUS COUNT\n".data(using: .utf8)!)
        exit(2)
    }
    func die(_ why: String) -> Never {
        FileHandle.standardError.write("sessions-child (uid \(getuid())): \(why)\n".data(using: .utf8)!)
        exit(1)
    }
    let dest = GeoConsentAPI.busName, path = GeoConsentAPI.objectPath, iface = GeoConsentAPI.interfaceName
    let parent = getppid()
    let peers = PeerLoop()
    do {
        let agentPeer = try peers.connect(a[0])
        let agent = AllowAgent()
        agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [AllowAgent.interface])
        if case .failure(let e) = agentPeer.call(dest, path, iface, "RegisterAgent", [.objectPath("/bench/Agent")]) {
            die("RegisterAgent: \(e)")
        }
        let sessions = try (0..<count).map { _ in try peers.connect(a[0]) }
        // The first tap asks this uid's agent (this process), the rest are silent;
        // pipelined, they would all wait on that one prompt (`waiting-per-user`).
        var calls = [sessions[0].callAsync(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])])]
        peers.pump(timeout: 30) { calls[0].isDone }
        calls += sessions.dropFirst().map { $0.callAsync(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]) }
        peers.pump(timeout: 60) { calls.allSatisfy(\.isDone) }
        for (i, c) in calls.enumerated() {
            guard case .success(let r)? = c.result, StatusReply.decode(r) == .whenInUse else {
                die("tap \(i) of \(count): \(c.result.map { "\($0)" } ?? "no reply"); \(calls.filter(\.isDone).count) answered")
            }
        }
        print("ready \(count)")
        // Connections and agent stay as they are; nothing is expected from the
        // daemon, so wake rarely. The bench kills this process; if the bench
        // died instead, this one is reparented and leaves too.
        // (The peers are named once more here: a connection is closed when the
        // last reference to it goes, and the optimizer may drop one after its last use.)
        withExtendedLifetime((agentPeer, agent, sessions)) {
            while getppid() == parent { peers.loop.runOnce(timeoutMillis: 1000) }
        }
        exit(0)
    } catch {
        die("\(error)")
    }
}

/// A private bus with the tests' config, in a mount namespace of its own whose
/// /etc/passwd and /etc/group also have a user and group for each of `uids`.
final class UidsBus {
    let address: String
    private let process: ChildProcess
    private let dir: TempDir

    init(uids: Range<UInt32>) throws {
        dir = try TempDir()
        chmod(dir.path, 0o711)   // the socket's directory: every uid must reach it
        var passwd = try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
        var group = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        for uid in uids {
            passwd += "geobench\(uid):x:\(uid):\(uid)::/nonexistent:/usr/sbin/nologin\n"
            group += "geobench\(uid):x:\(uid):\n"
        }
        try passwd.write(toFile: dir.file("passwd"), atomically: true, encoding: .utf8)
        try group.write(toFile: dir.file("group"), atomically: true, encoding: .utf8)
        chmod(dir.file("passwd"), 0o644)
        chmod(dir.file("group"), 0o644)
        guard let unshare = TestPaths.findExecutable("unshare"), let dbus = TestPaths.findExecutable("dbus-daemon") else {
            throw BenchFloorError(description: "no unshare or dbus-daemon")
        }
        let socketDir = dir.file("bus")
        mkdir(socketDir, 0o711)
        let script = #"mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group && "#
            + #"exec "$3" --config-file="$4" --nofork --print-address=1 --address=unix:dir="$5""#
        process = try ChildProcess(executable: unshare,
                                   arguments: ["--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh",
                                               dir.file("passwd"), dir.file("group"), dbus, TestPaths.testBusConfig, socketDir],
                                   logPath: dir.file("dbus-daemon.log"), captureStdout: true)
        guard let line = process.readStdoutLine(timeout: 10), line.hasPrefix("unix:") else {
            process.stop()
            let log = (try? String(contentsOfFile: dir.file("dbus-daemon.log"), encoding: .utf8)) ?? ""
            throw BenchFloorError(description: "the bus for other uids did not start: \(log)")
        }
        address = line.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        process.stop()
        dir.remove()
    }
}

/// BENCH_HOLD_SECONDS=N: the row waits N seconds after each RSS reading (idle,
/// then with the sessions held), having printed the daemon's pid, for a look
/// at it (/proc/PID/smaps, `malloc_info` through gdb; docs/performance.md).
private func holdForALook(_ what: String, _ pid: pid_t) {
    guard let s = ProcessInfo.processInfo.environment["BENCH_HOLD_SECONDS"].flatMap({ Double($0) }), s > 0 else { return }
    print("bench: \(what) for \(s) s; daemon pid \(pid)")
    fflush(stdout)
    Thread.sleep(forTimeInterval: s)
}

/// The daemon's RSS per session (bytes) with `sessions` held by children of
/// `sessionsPerUid` sessions each, on a fresh daemon (`daemon` starts one on a
/// bus address) on a bus of its own (UidsBus): (RSS with them − RSS idle before
/// them) ÷ sessions. Idle is measured after a warm-up: one more uid holds a few
/// sessions and leaves, so that the code a session runs (the prompt, the
/// consent record, the process watch) is paged in once, not counted per session:
/// those pages are the binary's, shared, and a second session does not add them. Nil, with the reason printed, when this process cannot act
/// as other uids (not root, no setpriv, or no mount namespace to be had).
func rssPerSessionOverUids(sessions: Int, executable: String, daemon: (String) throws -> DaemonInstance)
    throws -> (bytes: Double, anonBytes: Double, uids: Int)? {
    guard getuid() == 0, let setpriv = TestPaths.findExecutable("setpriv", candidates: ["/usr/bin/setpriv"]) else {
        print("bench: RSS per session over uids skipped: needs root and setpriv to act as other uids")
        return nil
    }
    let firstUid: UInt32 = 200_000
    let uids = (sessions + sessionsPerUid - 1) / sessionsPerUid
    let bus: UidsBus
    // The last uid is the warm-up's.
    do { bus = try UidsBus(uids: firstUid..<(firstUid + UInt32(uids) + 1)) } catch {
        print("bench: RSS per session over uids skipped: \(error)")
        return nil
    }
    defer { bus.stop() }
    let d = try daemon(bus.address)
    defer { d.stop() }
    let dir = try TempDir()
    defer { dir.remove() }
    Thread.sleep(forTimeInterval: 1)
    let warmUid = firstUid + UInt32(uids)
    let warm = try ChildProcess(executable: setpriv,
                                arguments: ["--reuid=\(warmUid)", "--regid=\(warmUid)", "--clear-groups", "--",
                                            executable, "--sessions-child", bus.address, "5"],
                                logPath: dir.file("uid-\(warmUid).log"), captureStdout: true)
    guard let ready = warm.readStdoutLine(timeout: 60), ready.hasPrefix("ready") else {
        warm.stop()
        throw BenchFloorError(description: "the warm-up uid's sessions not ready\n\(d.log())")
    }
    warm.signal(SIGTERM)
    warm.stop()
    waitUntilQuiet(d.pid, timeout: 30)
    let idle = rssKiB(d.pid), idleAnon = anonKiB(d.pid)
    holdForALook("idle after the warm-up", d.pid)
    var children: [ChildProcess] = []
    defer {
        // SIGTERM to all first, so that they leave together; then reap each.
        for c in children { c.signal(SIGTERM) }
        for c in children { c.stop() }
    }
    // Sixteen at a time: the daemon asks at most 48 agents at once ("Limits",
    // outgoing calls), and a first tap beyond that would get no grant.
    var next = 0
    while next < uids {
        let batch = next..<min(uids, next + 16)
        for i in batch {
            let uid = firstUid + UInt32(i)
            let count = min(sessionsPerUid, sessions - i * sessionsPerUid)
            children.append(try ChildProcess(executable: setpriv,
                                             arguments: ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--",
                                                         executable, "--sessions-child", bus.address, String(count)],
                                             logPath: dir.file("uid-\(uid).log"), captureStdout: true))
        }
        for i in batch {
            guard let line = children[i].readStdoutLine(timeout: 60), line.hasPrefix("ready") else {
                let log = (try? String(contentsOfFile: dir.file("uid-\(firstUid + UInt32(i)).log"), encoding: .utf8)) ?? ""
                throw BenchFloorError(description: "sessions of uid \(firstUid + UInt32(i)) not ready: \(log)\n\(d.log())")
            }
        }
        next = batch.upperBound
    }
    waitUntilQuiet(d.pid, timeout: 30)
    let held = rssKiB(d.pid), heldAnon = anonKiB(d.pid)
    holdForALook("holding \(sessions) sessions of \(uids) uids", d.pid)
    return ((held - idle) * 1024 / Double(sessions), (heldAnon - idleAnon) * 1024 / Double(sessions), uids)
}
