import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Shared pieces of the hostile-world suite: counts that scale with
/// `GEOCONSENT_STRESS=1` (`make stress`), a seeded RNG, the daemon's RSS and
/// descriptors from /proc, a scriptable consent agent and a fake gpsd.
///
/// Every case prints one or more `hostile: <case>: tried ..., saw ...` lines.
enum Hostile {
    /// `GEOCONSENT_STRESS=1`: full counts (make stress); otherwise small ones (make test).
    static let stress: Bool = {
        let v = ProcessInfo.processInfo.environment["GEOCONSENT_STRESS"] ?? ""
        return !v.isEmpty && v != "0"
    }()

    /// `small` inside `make test`, `full` inside `make stress`.
    static func count(small: Int, full: Int) -> Int { stress ? full : small }

    static var mode: String { stress ? "stress" : "quick" }

    /// One result line, flushed at once (swift test buffers otherwise).
    static func report(_ name: String, _ text: String) {
        print("hostile: \(name): \(text)")
        fflush(stdout)
    }

    /// A seed from `GEOCONSENT_SEED`, else from the clock; printed by the callers.
    static func seed() -> UInt64 {
        if let s = ProcessInfo.processInfo.environment["GEOCONSENT_SEED"], let v = UInt64(s) { return v }
        return UInt64(EventLoop.monotonicNanos() ^ UInt64(UInt32(bitPattern: getpid())) << 32)
    }

    /// A `/proc/PID/status` field in kB (e.g. `VmRSS`), nil when unreadable.
    static func statusKB(_ pid: pid_t, _ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return Int(digits)
        }
        return nil
    }

    static func rssKB(_ pid: pid_t) -> Int { statusKB(pid, "VmRSS") ?? -1 }

    /// CPU seconds (user + system) `pid` has used so far, from /proc/PID/stat.
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return .nan }
        // Fields after "(comm)": state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return .nan }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Open descriptors of `pid`.
    static func fdCount(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Error names that mean "the daemon did not answer": never acceptable for a call it received.
    static let silentErrors: Set<String> = [DBusError.noReplyName, DBusError.timeoutName, DBusError.disconnectedName]

    /// `InvalidArgs` for `org.freedesktop.DBus.Error.InvalidArgs`, `NoAgent` for ours.
    static func shortError(_ name: String) -> String {
        for prefix in ["org.freedesktop.DBus.Error.", GeoConsentAPI.errorPrefix] where name.hasPrefix(prefix) {
            return String(name.dropFirst(prefix.count))
        }
        return name
    }

    static func ms(_ seconds: Double) -> String { String(format: "%.2f ms", seconds * 1000) }
}

/// SplitMix64: small, fast, and the same sequence for the same seed on every machine.
struct SeededRNG: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    mutating func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &self) }
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
}

// MARK: - Bus helpers

extension BusPeer {
    /// Org.freedesktop.DBus.Peer.Ping on the daemon: true when it answered.
    func pingDaemon(timeout: Double = 10) -> Bool {
        (try? geo("Ping", interface: ObjectServer.peer, timeout: timeout).get()) != nil
    }
}

/// Pumps `loop` until every call has its result (or `timeout`); returns how many are done.
@discardableResult
func waitAll(_ calls: [BusPeer.PendingCall], on loop: PeerLoop, timeout: Double) -> Int {
    loop.pump(timeout: timeout) { calls.allSatisfy(\.isDone) }
    return calls.filter(\.isDone).count
}

// MARK: - A scriptable consent agent

/// A consent agent whose answer is chosen per prompt by `decide`. Unlike
/// `TestAgent` it can hold a prompt and answer it later, answer with the wrong
/// type, fail, or answer a held prompt when the daemon cancels it (as a real
/// agent closing its dialog would).
final class HostileAgent {
    enum Action {
        case answer(String)
        case hold
        /// A reply with these values, whatever the declared out-signature (`s`).
        case raw([DBusValue])
        case error
    }
    static let path = "/org/geoconsent/hostile/Agent"
    let peer: BusPeer
    var decide: (AgentPrompt) -> Action
    /// What to reply to a held prompt when its `Cancel` arrives (nil: keep holding).
    var replyOnCancel: String?
    private(set) var confirms: [AgentPrompt] = []
    private(set) var cancels: [String] = []
    private(set) var held: [String: MethodCall] = [:]

    init(peer: BusPeer, decide: @escaping (AgentPrompt) -> Action) {
        self.peer = peer
        self.decide = decide
        peer.server.export(self, at: HostileAgent.path, interfaces: [HostileAgent.interface])
    }

    convenience init(peer: BusPeer, _ action: Action) {
        self.init(peer: peer) { _ in action }
    }

    static let interface = Interface<HostileAgent>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { a, call in a.confirm(call) },
        CancelCall.member: { a, call in
            let id = CancelCall.decode(call.arguments) ?? ""
            a.cancels.append(id)
            call.reply()
            if let d = a.replyOnCancel { a.answer(id, d) }
        },
        NoticeCall.member: { a, call in
            a.notices.append(NoticeCall.decode(call.arguments)?.appID ?? "?")
            call.reply()
        },
        CheckFocusCall.member: { a, call in
            a.focusChecks += 1
            switch a.focus {
            case .answer(let focused, let press): call.reply(CheckFocusReply.encode(focused: focused, press: press, via: "test"))
            case .hold: a.heldFocus.append(call)
            }
        },
    ])

    /// How it answers `CheckFocus` (when it registered with the `focus` feature).
    enum FocusAction {
        case answer(FocusFact, FocusFact)
        case hold
    }
    var focus = FocusAction.answer(.yes, .yes)
    private(set) var focusChecks = 0
    private(set) var heldFocus: [MethodCall] = []
    private(set) var notices: [String] = []

    func registerWith(features: [String]) -> Result<[DBusValue], DBusError> {
        peer.geo("RegisterAgentWithOptions", [.objectPath(HostileAgent.path), OptionDictionary.encodeAgentOptions(features: features)])
    }

    private func confirm(_ call: MethodCall) {
        guard let c = ConfirmCall.decode(call.arguments) else { return call.fail(.invalidArgs("not a Confirm")) }
        confirms.append(c)
        switch decide(c) {
        case .answer(let d): call.reply(ConfirmReply.encode(word: d))
        case .hold: held[c.requestID] = call
        case .raw(let values):
            if let r = Message.methodReturn(to: call.replyAddress) {
                try? r.append(values)
                peer.connection.send(r)
            }
        case .error: call.fail(.failed("the agent broke"))
        }
    }

    /// Answers a held prompt now (late answers included).
    func answer(_ requestID: String, _ decision: String) {
        held.removeValue(forKey: requestID)?.reply(ConfirmReply.encode(word: decision))
    }

    func register(timeout: Double = 10) -> Result<[DBusValue], DBusError> {
        peer.geo("RegisterAgent", [.objectPath(HostileAgent.path)], timeout: timeout)
    }
}

// MARK: - A fake gpsd

/// A TCP listener on a gpsd port that misbehaves: speaks junk, stalls in the
/// middle of a line, floods, or hangs up at once. Runs on its own thread; the
/// test keeps its event loop to itself.
final class FakeGpsd: @unchecked Sendable {
    enum Behaviour: String {
        /// Invalid JSON, out-of-range reports, NMEA, binary bytes: a line burst every 20 ms.
        case junk
        /// A VERSION banner, then half a TPV line, then nothing (the connection stays open).
        case stall
        /// Megabytes as fast as the peer reads: over-long lines and junk lines.
        case flood
        /// Accepts and closes at once.
        case hangUp
    }

    let port: UInt16
    let behaviour: Behaviour
    private let listenFD: Int32
    private let lock = NSLock()
    private var stopping = false
    private var finished = false
    private var _accepted = 0
    private var _bytesSent = 0
    private var rng: SeededRNG

    var accepted: Int { lock.lock(); defer { lock.unlock() }; return _accepted }
    var bytesSent: Int { lock.lock(); defer { lock.unlock() }; return _bytesSent }

    init(port: UInt16, behaviour: Behaviour, seed: UInt64) throws {
        self.port = port
        self.behaviour = behaviour
        rng = SeededRNG(seed: seed)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("FakeGpsd: socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        // gpsd may still be letting go of the port: retry the bind a little.
        var bound = false
        for _ in 0..<200 {
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if rc == 0 { bound = true; break }
            usleep(10_000)
        }
        guard bound, listen(fd, 16) == 0 else {
            let e = String(cString: strerror(errno))
            close(fd)
            throw HarnessError("FakeGpsd: bind/listen 127.0.0.1:\(port): \(e)")
        }
        listenFD = fd
        let t = Thread { [self] in self.serve() }
        t.start()
    }

    /// Closes the listener and every connection; returns when the thread is done.
    func stop() {
        lock.lock()
        stopping = true
        lock.unlock()
        while true {
            lock.lock()
            let done = finished
            lock.unlock()
            if done { break }
            usleep(5_000)
        }
    }

    deinit { stop() }

    private var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    private struct Conn {
        var fd: Int32
        var sentBanner = false
        var nextBurst: Double = 0
    }

    private func serve() {
        var conns: [Conn] = []
        var scratch = [UInt8](repeating: 0, count: 65536)
        while !isStopping {
            var pfds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            for c in conns {
                var ev = Int16(POLLIN)
                if behaviour == .flood || behaviour == .junk { ev |= Int16(POLLOUT) }
                pfds.append(pollfd(fd: c.fd, events: ev, revents: 0))
            }
            let n = poll(&pfds, nfds_t(pfds.count), 20)
            if n < 0 && errno != EINTR { break }
            var fresh: [Conn] = []
            if pfds[0].revents & Int16(POLLIN) != 0 {
                let c = accept(listenFD, nil, nil)
                if c >= 0 {
                    _ = fcntl(c, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
                    lock.lock(); _accepted += 1; lock.unlock()
                    if behaviour == .hangUp { close(c) } else { fresh.append(Conn(fd: c)) }
                }
            }
            var keep: [Conn] = []
            for (i, var c) in conns.enumerated() {
                let re = pfds[i + 1].revents
                var alive = true
                if re & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    // Drain what the daemon sent (its ?WATCH); EOF means it hung up.
                    let r = scratch.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) { alive = false }
                }
                if alive { alive = talk(&c) }
                if alive { keep.append(c) } else { close(c.fd) }
            }
            conns = keep + fresh
        }
        for c in conns { close(c.fd) }
        close(listenFD)
        lock.lock(); finished = true; lock.unlock()
    }

    private static let banner = Array(#"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#.utf8) + [10]

    /// Sends what the behaviour calls for; false when the connection is dead.
    private func talk(_ c: inout Conn) -> Bool {
        switch behaviour {
        case .hangUp:
            return false
        case .stall:
            if !c.sentBanner {
                c.sentBanner = true
                return sendAll(c.fd, FakeGpsd.banner + Array(#"{"class":"TPV","device":"/dev/ttyFAKE","mode":3,"lat":52.5"#.utf8))
            }
            return true
        case .junk:
            let now = Double(EventLoop.monotonicNanos()) / 1e9
            guard now >= c.nextBurst else { return true }
            c.nextBurst = now + 0.02
            var out: [UInt8] = c.sentBanner ? [] : FakeGpsd.banner
            c.sentBanner = true
            for _ in 0..<rng.int(1...6) { out += junkLine() }
            return sendAll(c.fd, out)
        case .flood:
            var out: [UInt8] = c.sentBanner ? [] : FakeGpsd.banner
            c.sentBanner = true
            if rng.chance(0.5) {
                // An over-long "line": 64 KB of JSON-ish bytes without a newline.
                out += Array(repeating: UInt8(ascii: "x"), count: 65536)
            } else {
                for _ in 0..<200 { out += junkLine() }
            }
            return sendSome(c.fd, out)
        }
    }

    private func junkLine() -> [UInt8] {
        switch rng.int(0...9) {
        case 0: return Array(#"{"class":"TPV","device":"/dev/ttyFAKE","mode":3,"lat":"north","lon":[1,2]}"#.utf8) + [10]
        case 1: return Array(#"{"class":"TPV","device":"/dev/ttyFAKE","mode":3,"lat":91.5,"lon":200.25,"time":"yesterday"}"#.utf8) + [10]
        case 2: return Array(#"{"class":"TPV","mode":3,"lat":1e999,"lon":-1e999,"alt":NaN}"#.utf8) + [10]
        case 3: return Array(#"{"class":"TPV","mode":1,"lat":52.5,"lon":13.4}"#.utf8) + [10]
        case 4: return Array(#"{"class":"SKY","satellites":[{"PRN":"x"},{"#.utf8) + [10]
        case 5: return Array("$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\r\n".utf8)
        case 6: return Array(#"{"class":"#.utf8) + [10]
        case 7: return [10]
        case 8:
            var b = (0..<rng.int(1...300)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            b.append(10)
            return b
        default:
            return Array(#"{"class":"TPV","device":"/dev/ttyFAKE","mode":3,"lat":-95.0,"lon":13.4,"track":1e308}"#.utf8) + [10]
        }
    }

    /// Blocking-ish send of everything (the connection is non-blocking: wait for room a little).
    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var off = 0
        var spins = 0
        while off < bytes.count {
            let r = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if r > 0 {
                off += r
                lock.lock(); _bytesSent += r; lock.unlock()
            } else if r < 0 && (errno == EAGAIN || errno == EINTR) {
                spins += 1
                if spins > 200 || isStopping { return true }   // the peer is not reading: drop the rest
                usleep(1000)
            } else {
                return false
            }
        }
        return true
    }

    /// As much as fits now.
    private func sendSome(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        let r = bytes.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        if r > 0 { lock.lock(); _bytesSent += r; lock.unlock(); return true }
        return r < 0 && (errno == EAGAIN || errno == EINTR)
    }
}

/// A `StackTestCase` whose user has an agent that answers every prompt "allow-once".
class AllowingAgentTestCase: StackTestCase {
    var agent: HostileAgent!

    override func setUpWithError() throws {
        try super.setUpWithError()
        agent = HostileAgent(peer: try stack.peer(), .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        agent = nil
        super.tearDown()
    }
}
