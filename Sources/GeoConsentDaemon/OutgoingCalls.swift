import GeoDBus

/// Every method call the daemon sends to another peer on the bus (consent
/// agents, GeoClue agents, logind) goes through here, within a budget by
/// purpose and, inside each purpose, by uid.
///
/// Why: the bus counts each call the daemon waits on against the daemon's
/// connection (`max_replies_per_connection`, 128 on a system bus) until the
/// callee answers or leaves the bus. The daemon's own timeout does not give the
/// bus's slot back (a system bus has no `reply_timeout`), so a callee that
/// never answers (a silent agent, a GeoClue agent that pipelines `AddAgent`
/// and never reads its socket) keeps its slots for as long as it stays. With
/// all 128 held, every call of the daemon fails with `LimitsExceeded`, for
/// every user. Here each purpose has a share of them, and each uid a share of
/// its purpose, checked before a call is sent: one uid can spend only its own
/// share, one purpose never another's. A uid with no call of a purpose
/// waiting may still make one when the purpose's share is spent by others (so
/// that a few uids cannot shut the rest out), as long as all calls together
/// stay below `hardLimit`, under the bus's 128. A slot comes back when the
/// callee answers; a call the daemon gave up on (its timeout) keeps its slot
/// until the callee answers late or leaves the bus, as the bus's count does.
final class OutgoingCalls {
    enum Purpose: String {
        /// `Agent.Confirm` to a uid's consent agent; the uid is the agent's.
        case consentAgent = "consent agent"
        /// The `MaxAccuracyLevel` read of `Manager.AddAgent`; the uid is the caller's.
        case geoclueAgentRead = "GeoClue agent read"
        /// `AuthorizeApp` to a uid's GeoClue agent; the uid is the agent's.
        case geoclueAgent = "GeoClue agent"
        /// Placing a caller in its login session and reading that session; the uid is the caller's.
        case logind = "logind"
    }

    struct Budget {
        /// Calls of one uid waiting at once.
        var perUID: Int
        /// Calls of all uids waiting at once.
        var total: Int
    }

    /// The budgets (docs/dbus-api.md, "Limits"). Prompts are at most 64 open
    /// at once (`Limits.openPrompts`), our agents' and GeoClue agents'
    /// together, and 4 per uid by default (`prompts-per-user`): 8 per uid
    /// leaves room for prompts whose agent is slow to answer. One placement in
    /// a login session asks logind one question at a time.
    static let budgets: [Purpose: Budget] = [
        .consentAgent: Budget(perUID: 8, total: 48),
        .geoclueAgentRead: Budget(perUID: 2, total: 16),
        .geoclueAgent: Budget(perUID: 8, total: 16),
        .logind: Budget(perUID: 4, total: 24),
    ]

    /// Calls waiting at once whatever their purpose and uid: the shares plus
    /// the first calls of uids beyond them, below the system bus's 128.
    static let hardLimit = 120

    private struct Slot {
        var purpose: Purpose
        var uid: UInt32
        var callee: String
    }

    private let connection: Connection
    private var total: [Purpose: Int] = [:]
    private var perUID: [Purpose: [UInt32: Int]] = [:]
    /// Calls the daemon gave up on whose slot the bus still counts, by serial.
    private var stale: [UInt32: Slot] = [:]
    /// Calls sent and not yet completed (the daemon is not idle while any is).
    private(set) var inFlight = 0
    /// Calls the bus counts now, every purpose and uid.
    private var all = 0
    /// The last call in flight completed (the daemon may be idle now).
    var onSettled: () -> Void = {}

    init(connection: Connection) {
        self.connection = connection
    }

    /// Calls of `purpose` of `uid` the bus counts now (in flight or given up on).
    func held(_ purpose: Purpose, uid: UInt32? = nil) -> Int {
        guard let uid else { return total[purpose] ?? 0 }
        return perUID[purpose]?[uid] ?? 0
    }

    /// Why a call of `purpose` for `uid` would be refused now; nil when it may go.
    func refusal(_ purpose: Purpose, uid: UInt32) -> String? {
        let b = Self.budgets[purpose]!
        if held(purpose, uid: uid) >= b.perUID {
            return "uid \(uid) already has \(b.perUID) calls to its \(purpose.rawValue) unanswered, its limit"
        }
        if all >= Self.hardLimit {
            return "\(Self.hardLimit) calls of the daemon are unanswered, the most the bus leaves room for"
        }
        if held(purpose) >= b.total && held(purpose, uid: uid) > 0 {
            return "\(b.total) calls to \(purpose.rawValue)s are unanswered, the limit for all users"
        }
        return nil
    }

    /// Sends `message` to `callee` (a unique name, or logind's well-known name)
    /// for `purpose` on behalf of `uid`, if its budget allows: then `done` runs
    /// later with the reply or error, and nil is returned. Otherwise nothing is
    /// sent, `done` is never called, and the refusal is returned.
    func call(_ message: Message, purpose: Purpose, uid: UInt32, callee: String, timeout: Double,
              _ done: @escaping (Result<Message, DBusError>) -> Void) -> String? {
        if let why = refusal(purpose, uid: uid) { return why }
        let slot = Slot(purpose: purpose, uid: uid, callee: callee)
        take(slot)
        inFlight += 1
        connection.call(message, timeout: timeout) { [weak self] result in
            guard let self else { return done(result) }
            self.inFlight -= 1
            // libdbus's own timeout: the bus still waits for the callee's answer.
            if case .failure(let e) = result, e.isLocalTimeout {
                self.stale[message.serialNumber] = slot
            } else {
                self.give(slot)
            }
            done(result)
            if self.inFlight == 0 { self.onSettled() }
        }
        return nil
    }

    /// A reply to a call the daemon gave up on: the bus has freed its slot.
    func lateReply(_ m: Message) -> Bool {
        guard m.type == .methodReturn || m.type == .error, let slot = stale.removeValue(forKey: m.replySerial) else {
            return false
        }
        give(slot)
        return true
    }

    /// `callee` left the bus (or logind's name lost its owner): the bus has
    /// freed every slot it held.
    func calleeLeft(_ callee: String) {
        guard !stale.isEmpty else { return }
        for (serial, slot) in stale where slot.callee == callee {
            stale[serial] = nil
            give(slot)
        }
    }

    private func take(_ s: Slot) {
        all += 1
        total[s.purpose, default: 0] += 1
        perUID[s.purpose, default: [:]][s.uid, default: 0] += 1
    }

    private func give(_ s: Slot) {
        all -= 1
        total[s.purpose, default: 1] -= 1
        let n = (perUID[s.purpose]?[s.uid] ?? 1) - 1
        perUID[s.purpose]?[s.uid] = n > 0 ? n : nil
    }
}
