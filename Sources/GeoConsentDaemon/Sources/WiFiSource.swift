import Glibc
import GeoCore
import GeoDBus
import GeoSystem

/// Wi-Fi positioning, the daemon's half: the visible access points from
/// NetworkManager (`NetworkManagerReader`), looked up by the network helper
/// over its unix socket (`[sources] wifi-helper`, socket-activated; the
/// helper alone reaches the network, and is told the access points and
/// nothing of who asked). One lookup at a time, when the location core opens
/// the source; the helper's connection stays open while the core needs Wi-Fi
/// (the helper's cache and backoff live as long) and is closed with it.
final class WiFiSource: PositionSourceDriver {
    let kind = PositionSource.wifi
    /// Seconds the helper has to answer: its own request gives up after 10.
    static let answerTimeout = 15.0

    private let loop: EventLoop
    private let reader: NetworkManagerReader
    private let helperPath: String
    private weak var sink: SourceSink?

    private var helper: Int32 = -1
    private var helperWatch: EventLoop.Token?
    private var deadline: EventLoop.Token?
    private var answer: [UInt8] = []
    /// A lookup runs (from NetworkManager's list to the helper's answer).
    private var busy = false
    /// No lookup before this (monotonic seconds), as the helper said (`retry`).
    private var notBefore = 0.0
    private var waitReason = ""
    /// Bumped by `close`, so that a result of a closed lookup is dropped.
    private var generation = 0

    init(loop: EventLoop, outgoing: OutgoingCalls, helperPath: String, sink: SourceSink) {
        self.loop = loop
        self.reader = NetworkManagerReader(outgoing: outgoing)
        self.helperPath = helperPath
        self.sink = sink
    }

    func open() {
        guard !busy else { return }
        // The server said to wait: the same cause as its answer said (the core
        // logs a cause once, so no countdown goes into it).
        if Self.seconds() < notBefore {
            return loop.later { [weak self] in
                guard let self else { return }
                self.report(.failed(self.waitReason))
            }
        }
        busy = true
        // The helper starts (systemd starts it on the connection) while
        // NetworkManager is read: its start-up and libcurl's overlap that.
        // A failure here is said when the request would go (ask).
        if helper < 0 { try? connect() }
        let generation = self.generation
        reader.read { [weak self] result in
            guard let self, self.generation == generation else { return }
            switch result {
            case .success(let aps) where aps.count < 2:
                self.report(.failed("\(aps.count == 0 ? "no" : "only one") Wi-Fi access point visible; a lookup needs two"))
            case .success(let aps):
                self.ask(aps)
            case .failure(let e):
                self.report(.failed("\(e)"))
            }
        }
    }

    /// Starts the helper (systemd starts it on the connection) and finds
    /// NetworkManager's Wi-Fi devices ahead of the first lookup; a failure is
    /// said when that lookup would go (ask, read).
    func warm() {
        if helper < 0 { try? connect() }
        reader.findDevicesAhead()
    }

    func close() {
        generation += 1
        busy = false
        reader.forgetDevices()
        disconnect()
    }

    func shutdown() { close() }

    // MARK: The helper

    private func ask(_ aps: [AccessPoint]) {
        if helper < 0 {
            do {
                try connect()
            } catch {
                return report(.failed("the network helper cannot be reached at \(helperPath): \(error)"))
            }
        }
        let request = WiFiLookupWire.encodeRequest(aps)
        let written = request.withUnsafeBytes { send(helper, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard written == request.count else {
            let why = written < 0 ? String(cString: strerror(errno)) : "a short write"
            disconnect()
            return report(.failed("the network helper's connection failed: \(why)"))
        }
        answer = []
        deadline = loop.schedule(after: Self.answerTimeout) { [weak self] in
            guard let self else { return }
            self.deadline = nil
            self.disconnect()
            self.report(.failed("the network helper did not answer within \(Int(Self.answerTimeout)) s"))
        }
    }

    private func connect() throws(SystemError) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SystemError(operation: "socket", path: helperPath, errno: errno) }
        // A unix socket connects at once, or not at all (EAGAIN: its backlog is full).
        let rc = withUnixSocketAddress(helperPath) { Glibc.connect(fd, $0, $1) }
        guard rc == 0 else {
            let e = rc == nil ? ENAMETOOLONG : errno
            Glibc.close(fd)
            throw SystemError(operation: "connect", path: helperPath, errno: e)
        }
        helper = fd
        helperWatch = loop.watch(fd: fd, events: .readable) { [weak self] _ in self?.readable() }
    }

    private func readable() {
        var buffer = [UInt8](repeating: 0, count: WiFiLookupWire.maxAnswerBytes)
        let n = buffer.withUnsafeMutableBytes { recv(helper, $0.baseAddress, $0.count, 0) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else {
            // Closed (it exited: idle, or crashed) or broken: a lookup waiting fails, the next connects anew.
            let waiting = busy && deadline != nil
            disconnect()
            if waiting { report(.failed("the network helper closed the connection without an answer")) }
            return
        }
        guard busy, deadline != nil else { return disconnect() }   // unasked for: a helper that talks out of turn
        answer += buffer[0..<n]
        if let newline = answer.firstIndex(of: 0x0A) {
            let line = Array(answer[..<newline])
            answer = []
            if let d = deadline { loop.cancelTimer(d); deadline = nil }
            do throws(WiFiLookupError) {
                report(try WiFiLookupWire.decodeAnswer(line))
            } catch {
                disconnect()
                report(.failed("the network helper answered garbage: \(error)"))
            }
        } else if answer.count >= WiFiLookupWire.maxAnswerBytes {
            if let d = deadline { loop.cancelTimer(d); deadline = nil }
            disconnect()
            report(.failed("the network helper's answer is longer than \(WiFiLookupWire.maxAnswerBytes) bytes"))
        }
    }

    private func disconnect() {
        if let d = deadline { loop.cancelTimer(d); deadline = nil }
        if let w = helperWatch { loop.unwatch(w); helperWatch = nil }
        if helper >= 0 { Glibc.close(helper); helper = -1 }
        answer = []
    }

    /// The lookup's outcome, to the core.
    private func report(_ answer: WiFiLookupWire.Answer) {
        busy = false
        switch answer {
        case .position(let la, let lo, let acc):
            sink?.sourceFix(Fix(latitude: la, longitude: lo, mode: .twoD, horizontalAccuracy: acc, source: .wifi))
        case .notFound:
            sink?.sourceEvent(.lost(.wifi, reason: "the server knows none of the visible access points"))
        case .retry(let after, let why):
            notBefore = Self.seconds() + after
            waitReason = why
            sink?.sourceEvent(.openFailed(.wifi, reason: why))
        case .failed(let why):
            sink?.sourceEvent(.openFailed(.wifi, reason: why))
        }
    }

    static func seconds() -> Double { Double(EventLoop.monotonicNanos()) / 1e9 }
}
