import Glibc
import GeoDBus

/// `tap`: what the daemon calls this process (app-id, as hex), then a tap and
/// how long its answer took (`tap-ms N`).
func runTap(bus: String, appName: String) -> Int32 {
    let c = connect(bus)
    let auth = call(c, "GetAuthorization")
    if case .success(let v) = auth {
        say("app-id hex=\(hex(v.dropFirst().first?.vardictValue?["app-id"]?.stringValue ?? ""))")
    }
    report("GetAuthorization", auth) { "status \($0.first?.uint32Value ?? 999)" }
    let t0 = monotonic()
    let tap = call(c, "RequestOneTimeAuthorization", [.vardict(["app-name": .string(appName), "reason": .string("tap")])])
    let ms = (monotonic() - t0) * 1000
    report("RequestOneTimeAuthorization", tap) { "status \($0.first?.uint32Value ?? 999)" }
    say("tap-ms \(Int(ms.rounded()))")
    return 0
}

/// `sandbox-marker`: the sandbox marker a process controls once it has a root of
/// its own. DIR/.flatpak-info becomes a FIFO (an open that waits for a writer
/// forever), a symbolic link to /dev/zero (endless data), a 33 MiB `name=`
/// (more than the bus carries in one message). Then, with the
/// bus connection already open: a user namespace of its own (where this uid
/// may chroot), chroot into DIR, and the calls, each of which makes the daemon
/// look at `/proc/PID/root/.flatpak-info`, which is now DIR/.flatpak-info.
func runSandboxMarker(bus: String, dir: String, kind: String, calls: Int) -> Int32 {
    let marker = dir + "/.flatpak-info"
    unlink(marker)
    switch kind {
    case "fifo":
        guard mkfifo(marker, 0o644) == 0 else { fail("mkfifo \(marker): \(String(cString: strerror(errno)))") }
    case "devzero":
        guard symlink("/dev/zero", marker) == 0 else { fail("symlink \(marker): \(String(cString: strerror(errno)))") }
    case "huge":
        var bytes = Array("[Application]\nname=".utf8)
        bytes += [UInt8](repeating: UInt8(ascii: "a"), count: 33 << 20)
        bytes.append(0x0A)
        writeFile(marker, bytes)
    default:
        fail("unknown --kind \(kind)")
    }
    chmod(dir, 0o755)
    let c = connect(bus)
    say("connected pid=\(getpid()) name=\(c.uniqueName)")
    enterOwnRoot(dir)
    say("chrooted uid=\(getuid())")
    for i in 0..<calls {
        report("GetAuthorization-\(i)", call(c, "GetAuthorization", timeout: 10)) { v in
            let id = v.dropFirst().first?.vardictValue?["app-id"]?.stringValue ?? ""
            return "status \(v.first?.uint32Value ?? 999) app-id-bytes \(id.utf8.count)"
        }
        report("RequestOneTimeAuthorization-\(i)", call(c, "RequestOneTimeAuthorization", [.vardict([:])], timeout: 10)) {
            "status \($0.first?.uint32Value ?? 999)"
        }
        usleep(50_000)
    }
    return 0
}

/// A user namespace of this process's own, then chroot into `dir`. With
/// `bindMounted`, a mount namespace too, with `dir` bind-mounted on itself
/// first, so that the new root is a mount (as the root bwrap pivots into is).
/// Must run while the process has one thread (unshare(CLONE_NEWUSER) refuses
/// otherwise).
func enterOwnRoot(_ dir: String, bindMounted: Bool = false) {
    typealias Unshare = @convention(c) (Int32) -> Int32
    typealias Mount = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                      UInt, UnsafeRawPointer?) -> Int32
    let cloneNewUser: Int32 = 0x1000_0000, cloneNewNS: Int32 = 0x0002_0000
    guard libc("unshare", as: Unshare.self)(cloneNewUser | (bindMounted ? cloneNewNS : 0)) == 0 else {
        fail("unshare(CLONE_NEWUSER\(bindMounted ? "|CLONE_NEWNS" : "")): \(String(cString: strerror(errno)))")
    }
    let msBind: UInt = 4096
    if bindMounted, libc("mount", as: Mount.self)(dir, dir, nil, msBind, nil) != 0 {
        fail("bind-mount \(dir) on itself: \(String(cString: strerror(errno)))")
    }
    guard chroot(dir) == 0, chdir("/") == 0 else { fail("chroot \(dir): \(String(cString: strerror(errno)))") }
}

/// `spoof-exe`: a program whose path reads, in a prompt that renders bidi
/// controls, as "(system app)" under a reversed "org.Gnome.Maps". The copy
/// then runs `tap`, so the daemon resolves this path.
func runSpoofExe(bus: String, dir: String) -> Int32 {
    let name = "\u{202E}spaM.emonG.gro\n(system app)"
    let path = dir + "/" + name
    guard let me = readAll("/proc/self/exe") else { fail("cannot read /proc/self/exe") }
    writeFile(path, me)
    chmod(path, 0o755)
    say("copied to hex=\(hex(path))")
    let args = [path, "--bus", bus, "tap", "--app-name", "Maps\u{202E}ppa metsys"]
    var cArgs = args.map { strdup($0) } + [nil]
    execv(path, &cArgs)
    fail("exec \(path): \(String(cString: strerror(errno)))")
}

/// `borrow-pid`: the connection outlives the process that made it. The child
/// keeps it (in a session of its own, so that the parent's PID is free once the
/// parent is reaped); the parent exits at once. Whoever the tests let take that
/// PID next is then what the daemon finds at the connection's PID.
func runBorrowPID(bus: String, goFile: String, resolveFirst: Bool) -> Int32 {
    let c = connect(bus)
    say("connected pid=\(getpid()) name=\(c.uniqueName)")
    if resolveFirst {
        report("GetAuthorization-first", call(c, "GetAuthorization")) { v in
            "status \(v.first?.uint32Value ?? 999) app-id \(v.dropFirst().first?.vardictValue?["app-id"]?.stringValue ?? "")"
        }
    }
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
    fflush(stdout)
    typealias Fork = @convention(c) () -> pid_t
    let child = libc("fork", as: Fork.self)()
    if child < 0 { fail("fork: \(String(cString: strerror(errno)))") }
    if child > 0 {
        // Parent: leave as soon as the child is out of this process group, without
        // closing the connection (it is the child's now).
        close(fds[1])
        var b: UInt8 = 0
        _ = read(fds[0], &b, 1)
        _exit(0)
    }
    setsid()
    close(fds[0])
    var b: UInt8 = 1
    _ = write(fds[1], &b, 1)
    close(fds[1])
    say("holder pid=\(getpid())")
    let deadline = monotonic() + 120
    while access(goFile, F_OK) != 0 {
        if monotonic() > deadline {
            say("holder gave up waiting")
            exit(1)
        }
        usleep(10_000)
    }
    report("GetAuthorization", call(c, "GetAuthorization")) { v in
        "status \(v.first?.uint32Value ?? 999) app-id \(v.dropFirst().first?.vardictValue?["app-id"]?.stringValue ?? "")"
    }
    report("RequestLocation", call(c, "RequestLocation", [.vardict(["timeout": .double(5)])], timeout: 10)) { v in
        v.first?.vardictValue?["latitude"] != nil ? "fix" : "no fix"
    }
    return 0
}
