/// What the daemon and its identity helper say to each other over their
/// socketpair (SOCK_SEQPACKET: one message is one request or one reply).
/// Both ends are the same binary (`/proc/self/exe`), so there is one version.
///
/// A request has a fixed size and carries only numbers and the bus's
/// AppArmor label; anything else ends the helper. A reply is bounded
/// (`IdentityWire.maxReplyBytes`); anything the daemon cannot decode counts as
/// a lost helper. Integers are in host byte order.
import GeoCore

/// One question for the identity helper.
public struct IdentityRequest: Equatable, Sendable {
    public enum Operation: UInt32, Sendable {
        /// `AppIdentityResolver.resolve`: who is this process?
        case resolve = 1
        /// `AppIdentityResolver.verify`: is it still the process first seen?
        case verify = 2
    }

    /// Numbers the reply, so a reply is never taken for another request's.
    public var sequence: UInt32
    public var operation: Operation
    public var pid: UInt32
    public var uid: UInt32
    /// `resolve`: the start time first seen for the connection, if any;
    /// `verify`: the start time to check (required).
    public var startTime: UInt64?
    /// The connection's `LinuxSecurityLabel`, at most `IdentityWire.labelBytes`.
    public var securityLabel: [UInt8]?

    public init(sequence: UInt32, operation: Operation, pid: UInt32, uid: UInt32, startTime: UInt64? = nil,
                securityLabel: [UInt8]? = nil) {
        self.sequence = sequence
        self.operation = operation
        self.pid = pid
        self.uid = uid
        self.startTime = startTime
        self.securityLabel = securityLabel
    }
}

/// The helper's answer.
public enum IdentityReply: Equatable, Sendable {
    /// For `resolve`: the identity, and the uid that owns `/proc/PID` (the
    /// requested uid, else the helper would have answered `.failed`).
    case resolved(ResolvedApp, procUID: UInt32)
    /// For `verify`: still the same process.
    case verified
    case failed(IdentityError)
}

public enum IdentityWire {
    static let magic: UInt32 = 0x4743_4931   // "GCI1"
    /// The longest security label sent; the bus gives at most this (CallerResolver).
    public static let labelBytes = 4096
    /// The size of every request.
    public static let requestBytes = 40 + labelBytes
    /// The longest error or log text in a reply; longer ones are cut.
    static let textBytes = 2048
    /// The most a reply can take: app-id and executable at their limit, two texts.
    public static let maxReplyBytes = 64 + 3 * IdentityLimits.identityBytes + 2 * textBytes + ResolvedApp.cgroupBytes

    // MARK: requests

    public static func encode(_ r: IdentityRequest) -> [UInt8] {
        var out = Writer()
        out.bytes.reserveCapacity(requestBytes)
        out.u32(magic)
        out.u32(r.sequence)
        out.u32(r.operation.rawValue)
        out.u32(r.pid)
        out.u32(r.uid)
        out.u32(r.startTime == nil ? 0 : 1)
        let label = r.securityLabel.map { Array($0.prefix(labelBytes)) } ?? []
        out.u32(r.securityLabel == nil ? UInt32.max : UInt32(label.count))
        out.u32(0)
        out.u64(r.startTime ?? 0)
        out.bytes.append(contentsOf: label)
        out.bytes.append(contentsOf: [UInt8](repeating: 0, count: labelBytes - label.count))
        return out.bytes
    }

    /// Nil for anything that is not a request exactly as `encode` writes one.
    public static func decodeRequest(_ b: [UInt8]) -> IdentityRequest? {
        guard b.count == requestBytes else { return nil }
        var r = Reader(b)
        guard r.u32() == magic, let seq = r.u32(), let op = r.u32().flatMap(IdentityRequest.Operation.init(rawValue:)),
              let pid = r.u32(), let uid = r.u32(), let flags = r.u32(), flags <= 1, let labelLength = r.u32(),
              r.u32() == 0, let start = r.u64() else { return nil }
        if op == .verify && flags == 0 { return nil }
        var label: [UInt8]? = nil
        if labelLength != UInt32.max {
            guard labelLength <= labelBytes else { return nil }
            label = Array(b[40..<(40 + Int(labelLength))])
        }
        return IdentityRequest(sequence: seq, operation: op, pid: pid, uid: uid,
                               startTime: flags == 1 ? start : nil, securityLabel: label)
    }

    // MARK: replies

    public static func encode(_ reply: IdentityReply, sequence: UInt32) -> [UInt8] {
        var out = Writer()
        out.u32(magic)
        out.u32(sequence)
        switch reply {
        case .resolved(let app, let procUID):
            // Over-long identities are refused before they get here; keep the bound anyway.
            guard app.appID.utf8.count <= IdentityLimits.identityBytes,
                  app.executable.utf8.count <= IdentityLimits.identityBytes,
                  (app.script?.utf8.count ?? 0) <= IdentityLimits.identityBytes else {
                return encode(.failed(.refused("the identity is longer than \(IdentityLimits.identityBytes) bytes")),
                              sequence: sequence)
            }
            out.u8(0)
            out.u8(kindCode(app.identity))
            out.u64(app.startTime)
            out.u32(procUID)
            out.string(app.appID)
            out.string(app.executable)
            out.u8(app.notVerified == nil ? 0 : 1)
            out.string(cut(app.notVerified ?? ""))
            out.u8(app.cgroup == nil ? 0 : 1)
            out.string(app.cgroup ?? "")
            out.u8(app.script == nil ? 0 : 1)
            out.string(app.script ?? "")
            out.u8(app.installed ? 1 : 0)
        case .verified:
            out.u8(1)
        case .failed(let e):
            out.u8(2)
            switch e {
            case .processGone: out.u8(0); out.u32(0); out.u32(0); out.u32(0); out.string("")
            case .pidReused: out.u8(1); out.u32(0); out.u32(0); out.u32(0); out.string("")
            case .otherUser(let pid, let owner, let uid): out.u8(2); out.u32(pid); out.u32(owner); out.u32(uid); out.string("")
            case .unreadable(let why): out.u8(3); out.u32(0); out.u32(0); out.u32(0); out.string(cut(why))
            case .refused(let why): out.u8(4); out.u32(0); out.u32(0); out.u32(0); out.string(cut(why))
            }
        }
        return out.bytes
    }

    /// The reply and the sequence number it answers; nil when malformed.
    public static func decodeReply(_ b: [UInt8]) -> (sequence: UInt32, reply: IdentityReply)? {
        guard b.count <= maxReplyBytes else { return nil }
        var r = Reader(b)
        guard r.u32() == magic, let seq = r.u32(), let outcome = r.u8() else { return nil }
        let reply: IdentityReply
        switch outcome {
        case 0:
            guard let kind = r.u8().flatMap(kindFromCode), let start = r.u64(), let procUID = r.u32(),
                  let appID = r.string(max: IdentityLimits.identityBytes),
                  let exe = r.string(max: IdentityLimits.identityBytes),
                  let hasNote = r.u8(), hasNote <= 1, let note = r.string(max: textBytes),
                  let hasCgroup = r.u8(), hasCgroup <= 1, let cgroup = r.string(max: ResolvedApp.cgroupBytes),
                  let hasScript = r.u8(), hasScript <= 1, let script = r.string(max: IdentityLimits.identityBytes),
                  let installed = r.u8(), installed <= 1 else { return nil }
            reply = .resolved(ResolvedApp(appID: appID, identity: kind, executable: exe,
                                          script: hasScript == 1 ? script : nil, installed: installed == 1,
                                          startTime: start, notVerified: hasNote == 1 ? note : nil,
                                          cgroup: hasCgroup == 1 ? cgroup : nil),
                              procUID: procUID)
        case 1:
            reply = .verified
        case 2:
            guard let code = r.u8(), let pid = r.u32(), let owner = r.u32(), let uid = r.u32(),
                  let text = r.string(max: textBytes) else { return nil }
            switch code {
            case 0: reply = .failed(.processGone)
            case 1: reply = .failed(.pidReused)
            case 2: reply = .failed(.otherUser(pid: pid, owner: owner, connectionUID: uid))
            case 3: reply = .failed(.unreadable(text))
            case 4: reply = .failed(.refused(text))
            default: return nil
            }
        default:
            return nil
        }
        guard r.atEnd else { return nil }
        return (seq, reply)
    }

    private static func kindCode(_ k: IdentityKind) -> UInt8 {
        UInt8(IdentityKind.allCases.firstIndex(of: k)!)
    }

    private static func kindFromCode(_ c: UInt8) -> IdentityKind? {
        Int(c) < IdentityKind.allCases.count ? IdentityKind.allCases[Int(c)] : nil
    }

    /// At most `textBytes` of UTF-8, cut at a character boundary.
    private static func cut(_ s: String) -> String {
        if s.utf8.count <= textBytes { return s }
        var out = ""
        for c in s {
            if out.utf8.count + c.utf8.count > textBytes { break }
            out.append(c)
        }
        return out
    }
}

private struct Writer {
    var bytes: [UInt8] = []
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v) { bytes.append(contentsOf: $0) } }
    mutating func string(_ s: String) {
        u32(UInt32(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }
}

private struct Reader {
    let bytes: [UInt8]
    var at = 0
    init(_ b: [UInt8]) { bytes = b }
    var atEnd: Bool { at == bytes.count }

    mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
        guard n >= 0, bytes.count - at >= n else { return nil }
        defer { at += n }
        return bytes[at..<(at + n)]
    }
    mutating func u8() -> UInt8? { take(1)?.first }
    mutating func u32() -> UInt32? {
        take(4).map { s in s.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } }
    }
    mutating func u64() -> UInt64? {
        take(8).map { s in s.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) } }
    }
    mutating func string(max: Int) -> String? {
        guard let n = u32(), n <= max, let s = take(Int(n)) else { return nil }
        return String(validating: Array(s), as: UTF8.self)
    }
}
