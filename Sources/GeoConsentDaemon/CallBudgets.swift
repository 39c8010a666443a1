/// The arithmetic of `OutgoingCalls`' budgets (docs/dbus-api.md, "Limits"),
/// with no bus: which calls the bus counts against the daemon, by purpose and
/// uid, and whether one more may go. See OutgoingCalls.swift for why.
public struct CallBudgets {
    /// What calls of a kind are for, and their budget: the daemon's own
    /// (`consentAgent`, `focusCheck`, `logind`) and those a front end registers
    /// (`FrontEndHost.register`; the GeoClue facade's agent calls). Known by its name.
    public struct Purpose: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public let budget: Budget
        public init(_ name: String, _ budget: Budget) {
            self.name = name
            self.budget = budget
        }
        public var description: String { name }
        public static func == (a: Purpose, b: Purpose) -> Bool { a.name == b.name }
        public func hash(into h: inout Hasher) { h.combine(name) }

        /// `Agent.Confirm` to a uid's consent agent; the uid is the agent's.
        /// (44 in all, so that `focusCheck`'s 4 fit beside it within the bus's share.)
        public static let consentAgent = Purpose("consent agent", Budget(perUID: 8, total: 44, guaranteed: 4))
        /// `Agent.CheckFocus` before a silent tap: one at a time per uid, and
        /// answered within `ConsentAgentCalls.focusTimeout`; beyond it the tap prompts.
        public static let focusCheck = Purpose("focus check", Budget(perUID: 1, total: 4, guaranteed: 1))
        /// Placing a caller in its login session and reading that session; the uid is the caller's.
        public static let logind = Purpose("logind", Budget(perUID: 4, total: 24, guaranteed: 2))
    }

    public struct Budget: Sendable {
        /// Calls of one uid, waiting or given up on, at once.
        public var perUID: Int
        /// Calls of all uids waiting for their answer at once.
        public var total: Int
        /// Calls of one uid that may wait at once whatever other uids hold
        /// (within `hardLimit`).
        public var guaranteed: Int
        public init(perUID: Int, total: Int, guaranteed: Int) {
            self.perUID = perUID
            self.total = total
            self.guaranteed = guaranteed
        }
    }

    /// The purposes calls may be made for (docs/dbus-api.md, "Limits"): the
    /// daemon's own, and those its front ends registered. Prompts are at most
    /// 64 open at once (`Limits.openPrompts`), our agents' and other agents'
    /// together, and 4 per uid by default (`prompts-per-user`): each uid is
    /// guaranteed those 4, and 8 per uid leaves room for prompts whose agent is
    /// slow to answer. One placement in a login session asks logind one
    /// question at a time.
    private(set) var purposes: Set<Purpose> = [.consentAgent, .focusCheck, .logind]

    /// Calls may be made for `purpose` from now on; false (and nothing
    /// changes) when its total would take the purposes' totals past `hardLimit`.
    @discardableResult
    mutating func register(_ purpose: Purpose) -> Bool {
        guard !purposes.contains(purpose) else { return true }
        guard purposes.reduce(0, { $0 + $1.budget.total }) + purpose.budget.total <= Self.hardLimit else { return false }
        purposes.insert(purpose)
        return true
    }

    /// Calls of one uid, every purpose, waiting or given up on.
    public static let perUIDAll = 12

    /// Calls waiting at once whatever their purpose and uid, below the system
    /// bus's 128: it takes `hardLimit / perUIDAll` (10) uids to hold them all.
    public static let hardLimit = 120

    /// Why a call was not sent, and whose slots stopped it.
    public struct Refusal: Error, CustomStringConvertible {
        public var description: String
        /// True when other uids' calls hold the budget (the caller's own callee is not to blame).
        public var byOthers: Bool
    }

    /// Calls of each purpose waiting for their answer (not given up on).
    private var waiting: [Purpose: Int] = [:]
    /// Calls of each purpose and uid the bus counts (waiting or given up on).
    private var perUID: [Purpose: [UInt32: Int]] = [:]
    /// Calls of each uid the bus counts, every purpose.
    private var ofUID: [UInt32: Int] = [:]
    /// Calls the bus counts now, every purpose and uid.
    private(set) var all = 0

    /// Calls of `purpose` of `uid` the bus counts now (waiting or given up on);
    /// without a uid, the purpose's calls still waiting for their answer.
    func held(_ purpose: Purpose, uid: UInt32? = nil) -> Int {
        guard let uid else { return waiting[purpose] ?? 0 }
        return perUID[purpose]?[uid] ?? 0
    }

    /// Calls of `uid` the bus counts now, every purpose.
    func held(uid: UInt32) -> Int { ofUID[uid] ?? 0 }

    /// Why a call of `purpose` for `uid` would be refused now; nil when it may go.
    func refusal(_ purpose: Purpose, uid: UInt32) -> Refusal? {
        guard purposes.contains(purpose) else {
            return Refusal(description: "no budget is registered for \(purpose.name) calls", byOthers: false)
        }
        let b = purpose.budget
        let mine = held(purpose, uid: uid)
        if mine >= b.perUID {
            return Refusal(description: "uid \(uid) already has \(b.perUID) calls to its \(purpose.name) unanswered, its limit",
                           byOthers: false)
        }
        if held(uid: uid) >= Self.perUIDAll {
            return Refusal(description: "uid \(uid) already has \(Self.perUIDAll) calls of the daemon unanswered, its limit",
                           byOthers: false)
        }
        if all >= Self.hardLimit {
            return Refusal(description: "\(Self.hardLimit) calls of the daemon are unanswered, the most the bus leaves room for; " +
                           "held by \(holders(nil))", byOthers: true)
        }
        if held(purpose) >= b.total && mine >= b.guaranteed {
            return Refusal(description: "\(b.total) calls to \(purpose.name)s are waiting for an answer, the limit for all users, " +
                           "and uid \(uid) has its \(b.guaranteed) guaranteed; held by \(holders(purpose))", byOthers: true)
        }
        return nil
    }

    /// The uids holding the most slots (of `purpose`; nil: of all), for a log line.
    private func holders(_ purpose: Purpose?) -> String {
        let counts: [UInt32: Int] = purpose.map { perUID[$0] ?? [:] } ?? ofUID
        let top = counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(4)
        return top.map { "uid \($0.key) (\($0.value))" }.joined(separator: ", ") + (counts.count > 4 ? ", …" : "")
    }

    /// A call of `purpose` for `uid` went out: the bus counts it, and it waits for its answer.
    mutating func sent(_ purpose: Purpose, uid: UInt32) {
        all += 1
        perUID[purpose, default: [:]][uid, default: 0] += 1
        ofUID[uid, default: 0] += 1
        waiting[purpose, default: 0] += 1
    }

    /// Its answer came, or the daemon stopped waiting for it (a timeout, a
    /// withdrawn prompt): it no longer counts against the purpose's total.
    mutating func stoppedWaiting(_ purpose: Purpose) {
        let n = (waiting[purpose] ?? 1) - 1
        waiting[purpose] = n > 0 ? n : nil
    }

    /// The bus freed its slot (the callee answered, or left the bus).
    mutating func freed(_ purpose: Purpose, uid: UInt32) {
        all -= 1
        let n = (perUID[purpose]?[uid] ?? 1) - 1
        perUID[purpose]?[uid] = n > 0 ? n : nil
        let m = (ofUID[uid] ?? 1) - 1
        ofUID[uid] = m > 0 ? m : nil
    }
}
