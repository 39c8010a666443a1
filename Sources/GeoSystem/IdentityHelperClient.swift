/// The daemon's side of the identity helper (IdentityHelper.swift): one
/// request at a time, answered within `replyTimeout`. A helper that is gone,
/// silent or garbled is lost for good: every caller is refused from then on
/// (fail closed), and `onLost` tells the daemon to exit, so that systemd
/// starts it again with a new helper (`Restart=on-failure`).
import Glibc

public final class IdentityHelperClient: IdentitySource {
    /// How long an answer may take. The helper's reads are non-blocking and
    /// bounded (a resolution takes well under a millisecond), so a helper that
    /// has not answered by then is stuck, not busy.
    public static let defaultReplyTimeout: Int32 = 5_000   // milliseconds
    /// Milliseconds; tests make it short.
    public let replyTimeout: Int32
    /// The daemon's end of the socketpair.
    public let fd: Int32
    /// Why the helper is lost, once it is.
    public private(set) var lostReason: String?
    /// Called once, when the helper is lost.
    public var onLost: ((String) -> Void)?
    private var sequence: UInt32 = 0
    private var buffer = [UInt8](repeating: 0, count: IdentityWire.maxReplyBytes + 1)

    /// Takes over `fd`, a connected SOCK_SEQPACKET socket whose other end an
    /// identity helper serves.
    public init(fd: Int32, replyTimeout: Int32 = IdentityHelperClient.defaultReplyTimeout) {
        self.fd = fd
        self.replyTimeout = replyTimeout
    }

    public func resolve(pid: UInt32, uid: UInt32, firstStart: UInt64?, securityLabel: [UInt8]?) -> Result<ResolvedApp, IdentityError> {
        let label = securityLabel.map { Array($0.prefix(IdentityWire.labelBytes)) }
        switch ask(IdentityRequest(sequence: 0, operation: .resolve, pid: pid, uid: uid, startTime: firstStart,
                                   securityLabel: label)) {
        case .success(.resolved(let app, let procUID)) where procUID == uid: return .success(app)
        case .success(.failed(let e)): return .failure(e)
        case .success: return .failure(lost("it answered a resolution with something else"))
        case .failure(let e): return .failure(e)
        }
    }

    public func verify(pid: UInt32, uid: UInt32, startTime: UInt64) -> Result<Void, IdentityError> {
        switch ask(IdentityRequest(sequence: 0, operation: .verify, pid: pid, uid: uid, startTime: startTime)) {
        case .success(.verified): return .success(())
        case .success(.failed(let e)): return .failure(e)
        case .success: return .failure(lost("it answered a check with something else"))
        case .failure(let e): return .failure(e)
        }
    }

    /// Marks the helper lost (if it was not already) and returns the error
    /// every caller gets from now on.
    @discardableResult
    public func lost(_ why: String) -> IdentityError {
        if lostReason == nil {
            lostReason = why
            onLost?(why)
        }
        return .unreadable("the identity helper is gone (\(lostReason ?? why))")
    }

    private func ask(_ request: IdentityRequest) -> Result<IdentityReply, IdentityError> {
        if lostReason != nil { return .failure(lost("")) }
        sequence &+= 1
        var r = request
        r.sequence = sequence
        let bytes = IdentityWire.encode(r)
        var sent: Int
        repeat {
            sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        } while sent < 0 && errno == EINTR
        if sent != bytes.count {
            return .failure(lost(sent < 0 ? "it has exited (\(String(cString: strerror(errno))))" : "a short write"))
        }
        let deadline = monotonicMillis() + Int64(replyTimeout)
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let wait = Int32(max(0, deadline - monotonicMillis()))
            let ready = poll(&p, 1, wait)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 {
                return .failure(lost("it did not answer within \(Double(replyTimeout) / 1000) s"))
            }
            if ready < 0 { return .failure(lost("poll: \(String(cString: strerror(errno)))")) }
            break
        }
        var n: Int
        repeat {
            n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        } while n < 0 && errno == EINTR
        if n <= 0 { return .failure(lost(n == 0 ? "it has exited" : "recv: \(String(cString: strerror(errno)))")) }
        guard let (seq, reply) = IdentityWire.decodeReply(Array(buffer[0..<n])), seq == sequence else {
            return .failure(lost("it sent a malformed reply (\(n) bytes)"))
        }
        return .success(reply)
    }

    private func monotonicMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
