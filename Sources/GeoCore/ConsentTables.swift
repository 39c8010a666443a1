/// The consent core's two tables, sessions and consent records. Every write goes
/// through them and notes what it touched, so the core finds each session whose
/// status may have changed (for `AuthorizationChanged`) without any rule having
/// to report it, and without walking sessions nothing touched.

extension ConsentCore {
    /// The live sessions by id, indexed by app.
    struct SessionTable {
        private var byName: [SessionID: Session] = [:]
        private var byApp: [AppKey: Set<SessionID>] = [:]
        /// The client objects' sessions of each connection (`Caller.connection`).
        private var clientsOf: [String: Set<SessionID>] = [:]
        /// Sessions of each uid, and those of them waiting on a prompt: the
        /// per-user limits, kept as the table is written.
        private var sessionsOf: [UInt32: Int] = [:]
        private var waitingOf: [UInt32: Int] = [:]
        /// Sessions written since `forgetChanges()`.
        private(set) var changed: Set<SessionID> = []

        var count: Int { byName.count }
        func sessionCount(uid: UInt32) -> Int { sessionsOf[uid] ?? 0 }
        func waitingCount(uid: UInt32) -> Int { waitingOf[uid] ?? 0 }
        var names: Dictionary<SessionID, Session>.Keys { byName.keys }
        var all: Dictionary<SessionID, Session>.Values { byName.values }
        func names(of app: AppKey) -> Set<SessionID> { byApp[app] ?? [] }
        /// The sessions of `connection`'s client objects (not its own).
        func clientSessions(of connection: String) -> Set<SessionID> { clientsOf[connection] ?? [] }

        /// Writing a session notes it as changed. Sessions come and go through
        /// `add` and `remove` only, which keep the index by app.
        subscript(name: SessionID) -> Session? {
            get { byName[name] }
            set {
                guard let newValue else {
                    // `sessions[name]?.x = y` on a missing session writes nil back: nothing to do.
                    precondition(byName[name] == nil, "sessions leave through remove(_:)")
                    return
                }
                let old = byName.updateValue(newValue, forKey: name)
                precondition(old != nil, "sessions arrive through add(_:)")
                if (old?.waiting != nil) != (newValue.waiting != nil) {
                    Self.count(&waitingOf, newValue.caller.uid, newValue.waiting != nil ? 1 : -1)
                }
                changed.insert(name)
            }
        }

        mutating func add(_ s: Session) {
            precondition(byName[s.caller.session] == nil && s.waiting == nil, "a session is added once, not waiting")
            byName[s.caller.session] = s
            byApp[s.caller.app, default: []].insert(s.caller.session)
            if s.caller.session.busName == nil { clientsOf[s.caller.connection, default: []].insert(s.caller.session) }
            Self.count(&sessionsOf, s.caller.uid, 1)
        }

        private static func count(_ table: inout [UInt32: Int], _ uid: UInt32, _ delta: Int) {
            let n = (table[uid] ?? 0) + delta
            table[uid] = n > 0 ? n : nil
        }

        mutating func remove(_ name: SessionID) -> Session? {
            guard let s = byName.removeValue(forKey: name) else { return nil }
            let app = s.caller.app
            byApp[app]?.remove(name)
            if byApp[app]?.isEmpty == true { byApp[app] = nil }
            let connection = s.caller.connection
            if name.busName == nil {
                clientsOf[connection]?.remove(name)
                if clientsOf[connection]?.isEmpty == true { clientsOf[connection] = nil }
            }
            Self.count(&sessionsOf, app.uid, -1)
            if s.waiting != nil { Self.count(&waitingOf, app.uid, -1) }
            if byName.isEmpty {
                // A dictionary keeps its largest capacity; after a crowd has left, let
                // the storage go too (the daemon then trims the heap).
                byName = [:]
                byApp = [:]
                clientsOf = [:]
                sessionsOf = [:]
                waitingOf = [:]
            }
            return s
        }

        mutating func forgetChanges() { changed = [] }
    }

    /// The consent records by app.
    struct RecordTable {
        private(set) var all: [AppKey: ConsentRecord]
        /// Records of each uid (the per-user limit).
        private var recordsOf: [UInt32: Int] = [:]
        /// Apps whose record changed in more than `last-used` since `forgetChanges()`.
        private(set) var changed: Set<AppKey> = []

        init(_ records: [AppKey: ConsentRecord]) {
            all = records
            for app in records.keys { recordsOf[app.uid, default: 0] += 1 }
        }

        func count(uid: UInt32) -> Int { recordsOf[uid] ?? 0 }

        subscript(app: AppKey) -> ConsentRecord? {
            get { all[app] }
            set {
                var newValue = newValue
                // A decision stored again ends what a lapse said (the lapse itself
                // is the one change that sets a new `lapsedAt`).
                if let old = all[app], let n = newValue, !old.lapsed.isEmpty, n.lapsedAt == old.lapsedAt,
                   n.decision != old.decision || n.oneTimeApproved != old.oneTimeApproved {
                    newValue?.lapsed = ""
                    newValue?.lapsedAt = 0
                }
                let old: ConsentRecord?
                if let newValue { old = all.updateValue(newValue, forKey: app) } else { old = all.removeValue(forKey: app) }
                if (old == nil) != (newValue == nil) {
                    let n = (recordsOf[app.uid] ?? 0) + (newValue == nil ? -1 : 1)
                    recordsOf[app.uid] = n > 0 ? n : nil
                }
                if Self.mayChangeStatus(from: old, to: newValue) { changed.insert(app) }
            }
        }

        mutating func removeValue(forKey app: AppKey) -> ConsentRecord? {
            let old = all[app]
            self[app] = nil
            return old
        }

        mutating func forgetChanges() { changed = [] }

        /// Any change but `last-used` may change the status of the app's sessions.
        /// `last-used` never does, and every silent tap writes it: noting the app
        /// then would make one app's storm of taps over hundreds of sessions cost
        /// O(sessions) per tap.
        private static func mayChangeStatus(from old: ConsentRecord?, to new: ConsentRecord?) -> Bool {
            var old = old
            if let new { old?.lastUsed = new.lastUsed }
            return old != new
        }
    }
}
