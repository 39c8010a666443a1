import Glibc

/// `tap-copies`: `copies` programs of their own, each an app of its own to
/// the daemon (the app id of an unsandboxed process is its executable's path),
/// each running `tap`. DIR/app-0 is a copy of this program, DIR/app-1… hard
/// links to it: a path of their own each, without copying megabytes per app.
///
/// All at once (each copy's output in DIR/out-I), or `oneByOne`, each to its
/// end. All at once, the copies still running once none has ended for
/// `quietSeconds` are killed: they wait on prompts that no one answers.
/// Prints every line of copy I's output as `copy I LINE`, `copy I unanswered`
/// when its tap got no answer, then `summary copies=N answered=M`.
func runTapCopies(bus: String, dir: String, copies: Int, oneByOne: Bool, quietSeconds: Double) -> Int32 {
    guard let me = readAll("/proc/self/exe") else { fail("cannot read /proc/self/exe") }
    let first = dir + "/app-0"
    writeFile(first, me)
    chmod(first, 0o755)
    var paths = [first]
    for i in 1..<max(copies, 1) {
        let p = dir + "/app-\(i)"
        unlink(p)
        guard link(first, p) == 0 else { fail("link \(p): \(String(cString: strerror(errno)))") }
        paths.append(p)
    }

    var running: [pid_t: Int] = [:]
    var lastExit = monotonic()
    func reap(blocking: Bool) {
        var status: Int32 = 0
        while !running.isEmpty {
            let pid = waitpid(-1, &status, blocking ? 0 : WNOHANG)
            if pid <= 0 { return }
            if running.removeValue(forKey: pid) != nil { lastExit = monotonic() }
            if blocking { return }
        }
    }
    for (i, path) in paths.prefix(copies).enumerated() {
        running[spawnTap(path, bus: bus, output: dir + "/out-\(i)")] = i
        if oneByOne {
            let deadline = monotonic() + 30
            while !running.isEmpty && monotonic() < deadline { reap(blocking: false); usleep(10_000) }
            killAll(&running)
        }
    }
    lastExit = monotonic()
    while !running.isEmpty && monotonic() - lastExit < quietSeconds {
        reap(blocking: false)
        usleep(10_000)
    }
    killAll(&running)

    var answered = 0
    for i in 0..<copies {
        let text = String(decoding: readAll(dir + "/out-\(i)") ?? [], as: UTF8.self)
        let lines = text.split(separator: "\n")
        for line in lines { say("copy \(i) \(line)") }
        if lines.contains(where: { $0.hasPrefix("reply RequestOneTimeAuthorization ") }) {
            answered += 1
        } else {
            say("copy \(i) unanswered")
        }
    }
    say("summary copies=\(copies) answered=\(answered)")
    return 0
}

/// `PATH --bus BUS tap` in the background, its stdout in `output`.
private func spawnTap(_ path: String, bus: String, output: String) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    let args = [path, "--bus", bus, "tap"]
    var cArgs = args.map { strdup($0) } + [nil]
    defer { for a in cArgs { free(a) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, &cArgs, environ)
    guard rc == 0 else { fail("spawn \(path): \(String(cString: strerror(rc)))") }
    return pid
}

/// SIGKILL to each child still running, then reaps them.
private func killAll(_ running: inout [pid_t: Int]) {
    for pid in running.keys { kill(pid, SIGKILL) }
    var status: Int32 = 0
    for pid in running.keys { waitpid(pid, &status, 0) }
    running.removeAll()
}
