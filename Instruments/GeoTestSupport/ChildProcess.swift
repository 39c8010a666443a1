import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process for tests: dbus-daemon, gpsd, geoconsentd, busctl, ...
///
/// Why not Foundation's `Process`: started off the main thread (as XCTest
/// does), it hands the child a *blocked* SIGTERM, so `terminate()` followed by
/// `waitUntilExit()` hangs forever. It also likes to share the test's own
/// stdout/stderr pipes, which keeps `swift test`'s output pipe open after the
/// test process dies. So children are started here with `posix_spawn`:
///
/// - `POSIX_SPAWN_SETSIGMASK` with an empty mask, and `POSIX_SPAWN_SETSIGDEF`
///   for SIGTERM/SIGINT/SIGPIPE/SIGCHLD/SIGHUP: the child starts with default
///   dispositions and nothing blocked, whatever thread spawned it.
/// - `POSIX_SPAWN_SETPGROUP` (group 0): each child leads its own process group,
///   so `stop()` can sweep grandchildren (e.g. `sh -c '...; sleep 30'`) and a
///   Ctrl-C on the terminal does not race our own orderly shutdown.
/// - stdin is `/dev/null`; stdout and stderr go to `logPath` (appended), or
///   stdout goes to a pipe this object reads when `captureStdout` is true.
///   Every other descriptor is closed in the child (`addclosefrom_np` when
///   glibc has it; all our own descriptors are O_CLOEXEC anyway).
///
/// Every live child is recorded in a process-wide registry. An `atexit`
/// handler kills and reaps whatever is still registered when the test process
/// exits, and fatal-signal handlers (SIGSEGV, SIGABRT, SIGTRAP, ..., chained to
/// whatever handler was there before) kill them when the test process crashes,
/// so a failing or crashing test leaves no daemons behind. Only a SIGKILL of
/// the test process itself escapes this.
///
/// Thread-safe: all state is behind locks (stdout reads have their own, so
/// `signal`/`stop` work while another thread waits for output).
public final class ChildProcess: @unchecked Sendable {
    /// The child's process id (also its process group id).
    public let pid: pid_t
    /// The executable as given to `init`.
    public let executable: String
    /// The arguments as given to `init` (without argv[0]).
    public let arguments: [String]
    /// Where the child's stderr (and stdout, unless captured) goes.
    public let logPath: String

    private let lock = NSLock()             // process state
    private let stdoutLock = NSLock()       // stdout buffer (reads may block a while)
    private var exitStatus: Int32?          // set once reaped
    private var stdoutFD: Int32 = -1        // read end of the stdout pipe, or -1
    private var stdoutBuffer: [UInt8] = []
    private var stdoutEOF = false

    /// Starts `executable` (a path, or a name looked up in PATH) with `arguments`.
    ///
    /// - Parameters:
    ///   - logPath: file that receives stderr, and stdout unless captured; created
    ///     if missing, appended to otherwise. `/dev/null` is fine.
    ///   - captureStdout: send stdout to a pipe read with `readStdoutLine(timeout:)`.
    ///   - environment: variables added to (or replacing those of) this process's
    ///     environment.
    /// - Throws: `HarnessError` when the spawn fails (e.g. no such executable).
    public init(executable: String, arguments: [String], logPath: String,
                captureStdout: Bool = false, environment: [String: String] = [:]) throws {
        self.executable = executable
        self.arguments = arguments
        self.logPath = logPath
        ChildRegistry.installHandlersOnce()

        var fa = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fa)
        defer { posix_spawn_file_actions_destroy(&fa) }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }

        // Signals: nothing blocked, default dispositions for the ones that matter.
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2] {
            sigaddset(&defaults, s)
        }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        // Descriptors: stdin /dev/null, stdout pipe or log, stderr log.
        var pipeFDs: [Int32] = [-1, -1]
        if captureStdout {
            guard ChildRegistry.cloexecPipe(&pipeFDs) == 0 else {
                throw HarnessError("pipe2: \(String(cString: strerror(errno)))")
            }
        }
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)
        if captureStdout {
            // dup2 onto 1 clears O_CLOEXEC on the child's copy; both pipe ends
            // themselves are O_CLOEXEC and vanish at exec.
            posix_spawn_file_actions_adddup2(&fa, pipeFDs[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&fa, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        posix_spawn_file_actions_addopen(&fa, 2, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        ChildRegistry.addCloseFrom(&fa, 3)

        // Environment: ours plus the additions.
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let envStrings = env.map { "\($0.key)=\($0.value)" }
        let argvStrings = [executable] + arguments

        var cArgv: [UnsafeMutablePointer<CChar>?] = argvStrings.map { strdup($0) } + [nil]
        var cEnv: [UnsafeMutablePointer<CChar>?] = envStrings.map { strdup($0) } + [nil]
        defer {
            for p in cArgv { free(p) }
            for p in cEnv { free(p) }
        }

        var child: pid_t = 0
        // Hold the registry lock across the spawn so the atexit/crash paths
        // never miss a child that exists but is not registered yet.
        let rc: Int32 = ChildRegistry.withLock {
            let r = posix_spawnp(&child, executable, &fa, &attr, &cArgv, &cEnv)
            if r == 0 { ChildRegistry.registerLocked(child) }
            return r
        }
        if captureStdout { close(pipeFDs[1]) }
        guard rc == 0 else {
            if captureStdout { close(pipeFDs[0]) }
            throw HarnessError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        self.pid = child
        self.stdoutFD = captureStdout ? pipeFDs[0] : -1
    }

    deinit {
        stop()
        if stdoutFD >= 0 { close(stdoutFD) }
    }

    // MARK: stdout

    /// Reads one line (without its `\n`) from the captured stdout.
    /// Returns nil on timeout, or at end of file with nothing left, or when
    /// stdout is not captured. A final line without `\n` is returned at EOF.
    public func readStdoutLine(timeout: Double) -> String? {
        stdoutLock.lock(); defer { stdoutLock.unlock() }
        guard stdoutFD >= 0 else { return nil }
        let deadline = monotonicNow() + timeout
        while true {
            if let nl = stdoutBuffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(stdoutBuffer[..<nl])
                stdoutBuffer.removeSubrange(...nl)
                return String(decoding: line, as: UTF8.self)
            }
            if stdoutEOF {
                if stdoutBuffer.isEmpty { return nil }
                let line = stdoutBuffer
                stdoutBuffer.removeAll()
                return String(decoding: line, as: UTF8.self)
            }
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return nil }
            if !fillStdoutLocked(timeout: remaining) { return nil }
        }
    }

    /// Reads captured stdout until end of file (the child closed it or exited)
    /// or until `timeout`; returns what was read, including any partial line.
    public func readAllStdout(timeout: Double) -> String {
        stdoutLock.lock(); defer { stdoutLock.unlock() }
        guard stdoutFD >= 0 else { return "" }
        let deadline = monotonicNow() + timeout
        while !stdoutEOF {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 || !fillStdoutLocked(timeout: remaining) { break }
        }
        let all = stdoutBuffer
        stdoutBuffer.removeAll()
        return String(decoding: all, as: UTF8.self)
    }

    /// One poll + read into the buffer. False on timeout.
    private func fillStdoutLocked(timeout: Double) -> Bool {
        var pfd = pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(max(timeout * 1000, 0), 3_600_000).rounded(.up))
        let n = poll(&pfd, 1, ms)
        if n < 0 { return errno == EINTR }
        if n == 0 { return false }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let r = chunk.withUnsafeMutableBytes { read(stdoutFD, $0.baseAddress, $0.count) }
        if r > 0 {
            stdoutBuffer.append(contentsOf: chunk[0..<r])
        } else if r == 0 || (errno != EINTR && errno != EAGAIN) {
            stdoutEOF = true
        }
        return true
    }

    // MARK: signals and exit

    /// Sends `sig` to the child (not its group). No-op once it has been reaped.
    public func signal(_ sig: Int32) {
        lock.lock(); defer { lock.unlock() }
        if exitStatus == nil { _ = kill(pid, sig) }
    }

    /// True until the child has exited (and then it is reaped).
    public var isRunning: Bool {
        lock.lock(); defer { lock.unlock() }
        return !reapIfExitedLocked()
    }

    /// The exit status once known: the exit code, or 128+signal for a signal death.
    public var exitCode: Int32? {
        lock.lock(); defer { lock.unlock() }
        _ = reapIfExitedLocked()
        return exitStatus
    }

    /// Waits up to `timeout` seconds for the child to exit. Returns its exit
    /// code, or 128+signal if a signal killed it; nil if it is still running.
    @discardableResult
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = monotonicNow() + timeout
        var pause = 0.001
        while true {
            lock.lock()
            let done = reapIfExitedLocked()
            let status = exitStatus
            lock.unlock()
            if done { return status }
            let remaining = deadline - monotonicNow()
            if remaining <= 0 { return nil }
            sleepSeconds(min(pause, remaining))
            pause = min(pause * 2, 0.02)
        }
    }

    /// Stops the child: SIGTERM, up to 3 s for it to exit, then SIGKILL to its
    /// whole process group, and reaps it. Idempotent; safe from any thread.
    public func stop() {
        lock.lock()
        let alreadyDone = reapIfExitedLocked()
        if !alreadyDone { _ = kill(pid, SIGTERM) }
        lock.unlock()
        if alreadyDone { return }
        if waitForExit(timeout: 3.0) != nil { return }
        kill9()
    }

    /// SIGKILL to the child's process group and the child, then reap it.
    public func kill9() {
        lock.lock(); defer { lock.unlock() }
        if reapIfExitedLocked() { return }
        _ = kill(-pid, SIGKILL)
        _ = kill(pid, SIGKILL)
        reapBlockingLocked()
    }

    /// If the child has exited: sweeps its process group, unregisters it,
    /// reaps it and records the status. Returns true when it is gone.
    /// The check uses WNOWAIT so the pid cannot be reused between the
    /// unregister and the reap (the crash handler must never kill a stranger).
    private func reapIfExitedLocked() -> Bool {
        if exitStatus != nil { return true }
        var info = siginfo_t()
        let r = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        if r != 0 {
            if errno == ECHILD {   // someone else reaped it; treat as gone
                ChildRegistry.unregister(pid)
                exitStatus = -1
                return true
            }
            return false
        }
        if info._sifields._sigchld.si_pid == 0 { return false }
        reapBlockingLocked()
        return true
    }

    private func reapBlockingLocked() {
        // Grandchildren left in the group die with it (the group id cannot be
        // reused while the zombie leader exists).
        _ = kill(-pid, SIGKILL)
        ChildRegistry.unregister(pid)
        var status: Int32 = 0
        var r: pid_t
        repeat { r = waitpid(pid, &status, 0) } while r < 0 && errno == EINTR
        if r == pid {
            exitStatus = decodeWaitStatus(status)
        } else {
            exitStatus = -1
        }
    }

    // MARK: convenience

    /// Runs a command to completion with stdout captured (stderr to `logPath`),
    /// e.g. `busctl`. Returns its exit status (nil if it did not finish within
    /// `timeout` seconds; it is then killed) and its stdout.
    public static func run(_ executable: String, _ arguments: [String], timeout: Double = 10,
                           logPath: String = "/dev/null",
                           environment: [String: String] = [:]) throws -> (status: Int32?, output: String) {
        let p = try ChildProcess(executable: executable, arguments: arguments, logPath: logPath,
                                 captureStdout: true, environment: environment)
        let start = monotonicNow()
        let out = p.readAllStdout(timeout: timeout)
        let status = p.waitForExit(timeout: max(0.05, timeout - (monotonicNow() - start)))
        if status == nil { p.kill9() }
        return (status, out)
    }
}

/// Exit code, or 128+signal for a signal death (the shell's convention).
func decodeWaitStatus(_ status: Int32) -> Int32 {
    let low = status & 0x7f
    if low == 0 { return (status >> 8) & 0xff }           // WIFEXITED
    if low != 0x7f { return 128 + low }                    // WIFSIGNALED
    return -1                                              // stopped: not expected
}

/// Monotonic clock in seconds.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func sleepSeconds(_ s: Double) {
    guard s > 0 else { return }
    var req = timespec(tv_sec: Int(s), tv_nsec: Int((s - Double(Int(s))) * 1e9))
    var rem = timespec()
    while nanosleep(&req, &rem) != 0 && errno == EINTR { req = rem }
}

// MARK: - registry of live children

/// Process-wide record of live children, readable from a signal handler.
///
/// The pids live in a fixed C array (no Swift allocation, no locks on the read
/// side) so the crash handler can walk it async-signal-safely; writers take a
/// pthread mutex.
enum ChildRegistry {
    static let capacity = 4096
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<pid_t> = {
        let p = UnsafeMutablePointer<pid_t>.allocate(capacity: capacity)
        p.initialize(repeating: 0, count: capacity)
        return p
    }()
    nonisolated(unsafe) static let mutex: UnsafeMutablePointer<pthread_mutex_t> = {
        let m = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        m.initialize(to: pthread_mutex_t())
        var a = pthread_mutexattr_t()
        pthread_mutexattr_init(&a)
        pthread_mutexattr_settype(&a, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(m, &a)
        pthread_mutexattr_destroy(&a)
        return m
    }()
    /// Signals whose previous action is saved and chained to.
    static let fatalSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT]
    static let terminationSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    nonisolated(unsafe) static let oldActions: UnsafeMutablePointer<sigaction> = {
        let p = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
        p.initialize(repeating: sigaction(), count: 65)
        return p
    }()
    nonisolated(unsafe) static var installed = false

    static func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    static func registerLocked(_ pid: pid_t) {
        for i in 0..<capacity where slots[i] == 0 {
            slots[i] = pid
            return
        }
        // Full: extremely unlikely; the child is still stopped by its owner.
    }

    static func unregister(_ pid: pid_t) {
        withLock {
            for i in 0..<capacity where slots[i] == pid { slots[i] = 0 }
        }
    }

    /// posix_spawn_file_actions_addclosefrom_np is in glibc >= 2.34 but not
    /// visible through Swift's Glibc module; look it up at run time.
    static func addCloseFrom(_ fa: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) {
        typealias Fn = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let sym = closeFromSymbol else { return }
        _ = unsafeBitCast(sym, to: Fn.self)(fa, from)
    }
    nonisolated(unsafe) static let closeFromSymbol: UnsafeMutableRawPointer? =
        dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")

    /// pipe2(O_CLOEXEC) (a GNU extension Swift's Glibc module hides): the
    /// descriptors must never leak into a child another thread spawns between
    /// pipe() and fcntl(). Falls back to pipe()+fcntl under the registry lock,
    /// which at least serializes against our own spawns.
    static func cloexecPipe(_ fds: UnsafeMutablePointer<Int32>) -> Int32 {
        typealias Fn = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
        if let sym = pipe2Symbol {
            return unsafeBitCast(sym, to: Fn.self)(fds, O_CLOEXEC)
        }
        return withLock {
            guard pipe(fds) == 0 else { return -1 }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            return 0
        }
    }
    nonisolated(unsafe) static let pipe2Symbol: UnsafeMutableRawPointer? = dlsym(nil, "pipe2")

    /// Installs the atexit handler and the signal handlers, once.
    static func installHandlersOnce() {
        withLock {
            if installed { return }
            installed = true
            _ = slots; _ = oldActions   // initialize before any handler can run
            atexit { ChildRegistry.killAndReapAll() }
            for sig in fatalSignals {
                var sa = sigaction()
                sa.__sigaction_handler.sa_handler = childRegistrySignalHandler
                sigemptyset(&sa.sa_mask)
                sa.sa_flags = 0
                sigaction(sig, &sa, oldActions + Int(sig))
            }
            // Termination signals only where nobody installed a handler yet
            // (e.g. the daemon under test running in-process owns its own).
            for sig in terminationSignals {
                var cur = sigaction()
                sigaction(sig, nil, &cur)
                if unsafeBitCast(cur.__sigaction_handler.sa_handler, to: Int.self) == 0 /* SIG_DFL */ {
                    var sa = sigaction()
                    sa.__sigaction_handler.sa_handler = childRegistrySignalHandler
                    sigemptyset(&sa.sa_mask)
                    sa.sa_flags = 0
                    sigaction(sig, &sa, oldActions + Int(sig))
                }
            }
        }
    }

    /// atexit: kill every live child (and its group) and reap it.
    static func killAndReapAll() {
        var pids: [pid_t] = []
        withLock {
            for i in 0..<capacity where slots[i] != 0 {
                pids.append(slots[i])
                slots[i] = 0
            }
        }
        for p in pids {
            _ = kill(-p, SIGKILL)
            _ = kill(p, SIGKILL)
        }
        for p in pids {
            var st: Int32 = 0
            while waitpid(p, &st, 0) < 0 && errno == EINTR {}
        }
    }

    /// Async-signal-safe part: SIGKILL every registered child and its group.
    static func killAllFromSignalHandler() {
        for i in 0..<capacity {
            let p = slots[i]
            if p > 0 {
                _ = kill(-p, SIGKILL)
                _ = kill(p, SIGKILL)
            }
        }
    }
}

/// The signal handler: kill the children, put back the previous action and
/// let it run. Synchronous faults re-fault on return; others are re-raised
/// (blocked until this handler returns, then delivered to the old action).
private func childRegistrySignalHandler(_ sig: Int32) {
    ChildRegistry.killAllFromSignalHandler()
    sigaction(sig, ChildRegistry.oldActions + Int(sig), nil)
    switch sig {
    case SIGSEGV, SIGBUS, SIGILL, SIGFPE:
        return
    default:
        raise(sig)
    }
}
