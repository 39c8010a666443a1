import GeoDBus

/// Bus connections for tests, all driven by one event loop, so that a client
/// waiting for a reply and an agent answering a prompt can live in one test
/// without threads: waiting pumps the shared loop.
public final class PeerLoop {
    public let loop = EventLoop()
    public init() {}

    /// Runs the loop until `done()` or `timeout` seconds; returns `done()`.
    @discardableResult
    public func pump(timeout: Double, until done: () -> Bool) -> Bool {
        let deadline = EventLoop.monotonicNanos() + UInt64(timeout * 1e9)
        while !done() {
            let now = EventLoop.monotonicNanos()
            if now >= deadline { return false }
            loop.runOnce(timeoutMillis: Int32(min(100, max(1, (deadline - now) / 1_000_000))))
        }
        return true
    }

    /// Runs the loop for `seconds` (to see that something does NOT happen).
    public func settle(_ seconds: Double) {
        pump(timeout: seconds) { false }
    }

    public func connect(_ address: String) throws -> BusPeer {
        try BusPeer(address: address, peers: self)
    }
}

/// One client connection of a test: calls, received signals, exported objects.
public final class BusPeer {
    public let connection: Connection
    public let server: ObjectServer
    let peers: PeerLoop
    /// Every signal received, in order.
    public private(set) var signals: [Message] = []
    /// Monotonic arrival time (ns) of each signal in `signals`, taken as libdbus dispatches it.
    public private(set) var signalTimes: [UInt64] = []

    init(address: String, peers: PeerLoop) throws {
        self.peers = peers
        connection = try Connection(bus: .address(address))
        connection.attach(to: peers.loop)
        server = ObjectServer(connection: connection)
        server.onOtherMessage = { [weak self] m in
            if m.type == .signal {
                self?.signals.append(m)
                self?.signalTimes.append(EventLoop.monotonicNanos())
            }
            return m.type == .signal
        }
    }

    deinit { connection.close() }

    public var uniqueName: String { connection.uniqueName }

    /// An asynchronous call; `result` is set when the reply comes.
    public final class PendingCall {
        public internal(set) var result: Result<[DBusValue], DBusError>?
        /// Monotonic time (ns) the reply was dispatched; 0 until then.
        public internal(set) var completedAt: UInt64 = 0
        public var isDone: Bool { result != nil }
    }

    public func callAsync(_ destination: String, _ path: String, _ interface: String?, _ member: String,
                          _ args: [DBusValue] = [], timeout: Double = 30) -> PendingCall {
        let p = PendingCall()
        do {
            let m = try Message.methodCall(destination: destination, path: path, interface: interface, member: member)
            try m.append(args)
            connection.call(m, timeout: timeout) { r in
                p.completedAt = EventLoop.monotonicNanos()
                p.result = r.map { $0.arguments() }
            }
        } catch let e as DBusError {
            p.result = .failure(e)
        } catch {
            p.result = .failure(.failed("\(error)"))
        }
        return p
    }

    /// A call that waits (pumping the shared loop) for its reply.
    public func call(_ destination: String, _ path: String, _ interface: String?, _ member: String,
                     _ args: [DBusValue] = [], timeout: Double = 30) -> Result<[DBusValue], DBusError> {
        let p = callAsync(destination, path, interface, member, args, timeout: timeout)
        peers.pump(timeout: timeout + 5) { p.isDone }
        return p.result ?? .failure(DBusError(DBusError.noReplyName, "test gave up waiting"))
    }

    /// Waits for the first signal named `member` received after index `from`.
    public func waitForSignal(_ member: String, from: Int = 0, timeout: Double = 10) -> Message? {
        var found: Message?
        peers.pump(timeout: timeout) {
            found = signals.dropFirst(from).first { $0.member == member }
            return found != nil
        }
        return found
    }

    public func signals(named member: String) -> [Message] { signals.filter { $0.member == member } }

    public func addMatch(_ rule: String) throws { try connection.addMatch(rule) }

    public func requestName(_ name: String) throws -> RequestNameResult { try connection.requestName(name) }
}
