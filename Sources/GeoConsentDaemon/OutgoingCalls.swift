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
/// every user.
///
/// So, checked before a call is sent (docs/dbus-api.md, "Limits"):
/// - a uid's calls of a purpose, waiting or given up on, stay within its
///   share (`perUID`), and all its calls within `perUIDAll`: a uid whose
///   callees do not answer spends only its own slots;
/// - the calls of a purpose still waiting for their answer stay within the
///   purpose's `total`, except that a uid with fewer than `guaranteed` calls
///   of it may always make one more: no number of other uids takes a uid's
///   guaranteed prompts away. A call the daemon gave up on (its timeout, or
///   the prompt withdrawn) no longer counts against the total: it is the
///   holder's, in its own share, until the callee answers late or leaves;
/// - all calls, waiting or given up on, stay below `hardLimit`, under the bus's
///   128. Only `hardLimit / perUIDAll` uids together can reach it.
/// A refusal says whose slots stopped the call: the uid's own callee's, or
/// the uids that hold the purpose's total or the hard limit.
final class OutgoingCalls {
    typealias Purpose = CallBudgets.Purpose
    typealias Refusal = CallBudgets.Refusal

    private struct Slot {
        var purpose: Purpose
        var uid: UInt32
        var callee: String
    }

    private let connection: Connection
    private var budgets = CallBudgets()
    /// Calls the daemon gave up on whose slot the bus still counts, by serial.
    private var stale: [UInt32: Slot] = [:]
    /// The purpose of each call still waiting for its answer, by a number of ours.
    private var waitingCalls: [Int: Purpose] = [:]
    private var nextID = 0
    /// Tagged calls (`giveUp`) still waiting for their answer.
    private var tags: [String: Int] = [:]
    /// Calls sent and not yet completed (the daemon is not idle while any is).
    private(set) var inFlight = 0

    init(connection: Connection) {
        self.connection = connection
    }

    /// Calls may be made for `purpose` from now on (a front end's, at start);
    /// false when the purposes' totals would pass the hard limit.
    func register(_ purpose: Purpose) -> Bool { budgets.register(purpose) }

    /// Sends `message` to `callee` (a unique name, or logind's well-known name)
    /// for `purpose` on behalf of `uid`, if its budget allows: then `done` runs
    /// later with the reply or error, and nil is returned. Otherwise nothing is
    /// sent, `done` is never called, and the refusal is returned. `tag` names
    /// the call for `giveUp` (a prompt's request id).
    func call(_ message: Message, purpose: Purpose, uid: UInt32, callee: String, timeout: Double, tag: String? = nil,
              _ done: @escaping (Result<Message, DBusError>) -> Void) -> Refusal? {
        if let why = budgets.refusal(purpose, uid: uid) { return why }
        let slot = Slot(purpose: purpose, uid: uid, callee: callee)
        budgets.sent(purpose, uid: uid)
        inFlight += 1
        let id = nextID
        nextID &+= 1
        waitingCalls[id] = purpose
        if let tag { tags[tag] = id }
        connection.call(message, timeout: timeout) { [weak self] result in
            guard let self else { return done(result) }
            self.inFlight -= 1
            self.stopWaiting(id)
            if let tag, self.tags[tag] == id { self.tags[tag] = nil }
            // libdbus's own timeout: the bus still waits for the callee's answer.
            if case .failure(let e) = result, e.isLocalTimeout {
                self.stale[message.serialNumber] = slot
            } else {
                self.give(slot)
            }
            done(result)
        }
        return nil
    }

    /// The answer to the call tagged `tag` matters no more (its prompt was
    /// withdrawn): it stops counting against its purpose's total now. Its
    /// slot stays its uid's until the callee answers or leaves, as the bus's.
    func giveUp(tag: String) {
        guard let id = tags.removeValue(forKey: tag) else { return }
        stopWaiting(id)
    }

    private func stopWaiting(_ id: Int) {
        guard let purpose = waitingCalls.removeValue(forKey: id) else { return }
        budgets.stoppedWaiting(purpose)
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

    private func give(_ s: Slot) {
        budgets.freed(s.purpose, uid: s.uid)
    }
}

extension CallBudgets.Refusal {
    /// Logs the refusal of a `what` call to `callee` for `uid`: as its
    /// callee's not answering (`noteAttack`: the attack log's, once per
    /// connection) when the uid's own share is spent; else as the holders'
    /// doing, never the callee's.
    func log(_ what: String, callee: String, uid: UInt32, noteAttack: (String, UInt32, String) -> Void) {
        if byOthers {
            Log.byCaller(uid: uid, .warning, "\(what) to \(callee) (uid \(uid)) not sent: \(description)")
        } else {
            noteAttack(callee, uid, "does not answer \(what): \(description)")
        }
    }
}
