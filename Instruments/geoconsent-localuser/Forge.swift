import Glibc
import GeoDBus

/// `forge`: a process of this uid shows another program's identity, in each of
/// the ways Linux lets any user do it, and then asks for what admin config
/// grants that identity: a grant without a prompt and the agent slot
/// (`forgedCalls`). `--how`:
/// - `exec --target EXE`: connect, then the connecting process execs EXE
///   (`EXE 60`) while a child keeps the connection and calls once the
///   connection's PID runs EXE;
/// - `bind-mount --target EXE`: a user and mount namespace of its own, this
///   program bind-mounted over EXE, then EXE run, which connects and calls;
/// - `wait --go-file FILE`: connect, wait for FILE (the tests move this process
///   into a cgroup named like an app unit meanwhile), then call;
/// - `flatpak-root --dir DIR --app-id ID [--bind-root]`: DIR/.flatpak-info naming
///   ID, connect, a user namespace of its own, chroot into DIR, call. With
///   `--bind-root`, first a mount namespace of its own and DIR bind-mounted on
///   itself, so that the root is a mount, as in a sandbox bwrap made. With
///   `--geoclue-desktop-id X`, the call is a GeoClue client's `Start` with
///   `DesktopId` X instead (`geoclueStart`);
/// - `calls`: connect and call (what `bind-mount` runs).
func runForge(bus: String, how: String, options: Options) -> Int32 {
    switch how {
    case "exec":
        forgeByExec(bus: bus, target: options.required("--target"))
    case "bind-mount":
        forgeByBindMount(bus: bus, target: options.required("--target"))
    case "wait":
        let c = connect(bus)
        say("connected pid=\(getpid()) name=\(c.uniqueName)")
        waitForFile(options.required("--go-file"))
        forgedCalls(c)
    case "flatpak-root":
        let dir = options.required("--dir")
        let id = options.required("--app-id")
        writeText(dir + "/.flatpak-info", """
            [Application]
            name=\(id)
            runtime=runtime/org.freedesktop.Platform/x86_64/23.08

            [Instance]
            instance-id=4242

            """)
        chmod(dir, 0o755)
        let c = connect(bus)
        say("connected pid=\(getpid()) name=\(c.uniqueName)")
        enterOwnRoot(dir, bindMounted: options.flags.contains("--bind-root"))
        say("chrooted uid=\(getuid())")
        if let desktopID = options.values["--geoclue-desktop-id"] {
            geoclueStart(c, desktopID: desktopID)
            return 0
        }
        forgedCalls(c)
    case "calls":
        let c = connect(bus)
        say("connected pid=\(getpid()) exe=\(readLinkText("/proc/self/exe") ?? "?")")
        forgedCalls(c)
    default:
        fail("unknown --how \(how)")
    }
    return 0
}

/// What config grants the forged identity: `GetAuthorization` (status and
/// app-id), a tap (status 3 without a prompt for `policy = always`), a fix, and
/// `RegisterAgent` (`[agents] allow`).
private func forgedCalls(_ c: Connection) {
    report("GetAuthorization", call(c, "GetAuthorization")) { v in
        "status \(v.first?.uint32Value ?? 999) app-id \(v.dropFirst().first?.vardictValue?["app-id"]?.stringValue ?? "")"
    }
    report("RequestOneTimeAuthorization", call(c, "RequestOneTimeAuthorization", [.vardict([:])], timeout: 10)) {
        "status \($0.first?.uint32Value ?? 999)"
    }
    report("RequestLocation", call(c, "RequestLocation", [.vardict(["timeout": .double(5)])], timeout: 10)) { v in
        v.first?.vardictValue?["latitude"] != nil ? "fix" : "no fix"
    }
    report("RegisterAgent", call(c, "RegisterAgent", [.objectPath(PrintingAgent.path)])) { _ in "registered" }
}

/// The connecting process becomes `target`; its child, holding the same
/// connection, calls as soon as the connection's PID shows `target`.
private func forgeByExec(bus: String, target: String) -> Never {
    let c = connect(bus)
    let parent = getpid()
    say("connected pid=\(parent) name=\(c.uniqueName)")
    typealias Fork = @convention(c) () -> pid_t
    let child = libc("fork", as: Fork.self)()
    if child < 0 { fail("fork: \(String(cString: strerror(errno)))") }
    if child == 0 {
        let deadline = monotonic() + 10
        while readLinkText("/proc/\(parent)/exe") != target {
            if monotonic() > deadline {
                kill(parent, SIGKILL)
                fail("PID \(parent) did not become \(target)")
            }
            usleep(5_000)
        }
        say("pid \(parent) runs \(target) now")
        forgedCalls(c)
        kill(parent, SIGKILL)
        exit(0)
    }
    // The bus's socket is close-on-exec: the connection lives on in the child only.
    var args = [strdup(target), strdup("60"), nil]
    execv(target, &args)
    fail("exec \(target): \(String(cString: strerror(errno)))")
}

/// This program at `target`'s path, in a mount namespace of its own, then run
/// as `target`: `/proc/PID/exe` then reads `target` to everyone.
private func forgeByBindMount(bus: String, target: String) -> Never {
    guard let me = readLinkText("/proc/self/exe") else { fail("cannot read /proc/self/exe") }
    typealias Unshare = @convention(c) (Int32) -> Int32
    typealias Mount = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                      UInt, UnsafeRawPointer?) -> Int32
    let cloneNewUser: Int32 = 0x1000_0000, cloneNewNS: Int32 = 0x0002_0000
    let msBind: UInt = 4096
    guard libc("unshare", as: Unshare.self)(cloneNewUser | cloneNewNS) == 0 else {
        fail("unshare(CLONE_NEWUSER|CLONE_NEWNS): \(String(cString: strerror(errno)))")
    }
    guard libc("mount", as: Mount.self)(me, target, nil, msBind, nil) == 0 else {
        fail("bind-mount \(me) over \(target): \(String(cString: strerror(errno)))")
    }
    say("bound \(me) over \(target)")
    let args = [target, "--bus", bus, "forge", "--how", "calls"]
    var cArgs = args.map { strdup($0) } + [nil]
    execv(target, &cArgs)
    fail("exec \(target): \(String(cString: strerror(errno)))")
}

private func waitForFile(_ path: String) {
    let deadline = monotonic() + 60
    while access(path, F_OK) != 0 {
        if monotonic() > deadline { fail("gave up waiting for \(path)") }
        usleep(10_000)
    }
}

private func readLinkText(_ path: String) -> String? {
    var buf = [CChar](repeating: 0, count: 4097)
    let n = buf.withUnsafeMutableBufferPointer { readlink(path, $0.baseAddress!, $0.count - 1) }
    guard n >= 0 else { return nil }
    return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

private func writeText(_ path: String, _ text: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { fail("create \(path): \(String(cString: strerror(errno)))") }
    let bytes = Array(text.utf8)
    guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
        fail("write \(path): \(String(cString: strerror(errno)))")
    }
    close(fd)
}
