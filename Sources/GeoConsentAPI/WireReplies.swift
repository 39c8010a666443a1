import GeoDBus
import GeoCore

// The out-values of the client methods (docs/dbus-api.md "Client methods"),
// each declared once: the daemon encodes with these, the client library, ctl,
// the bench and the tests decode with them. Decoders return nil when the
// values do not have the declared types; keys missing from a dictionary read
// as "none", false and 0, so a newer daemon's extra keys never break a client.

/// `RequestOneTimeAuthorization` and `RequestWhenInUseAuthorization` reply: `(u status)`.
public enum StatusReply {
    /// The daemon's reply.
    public static func encode(_ status: AuthorizationStatus) -> [DBusValue] { [.uint32(status.rawValue)] }

    /// Nil unless the first value is a known status.
    public static func decode(_ values: [DBusValue]) -> AuthorizationStatus? {
        values.first?.uint32Value.flatMap(AuthorizationStatus.init)
    }
}

/// `GetAuthorization` reply: `(u status, a{sv} details)`, details `temporary` b,
/// `accuracy` s (`full`, `reduced` or `none`), `app-id` s, `one-time-approved` b.
public enum AuthorizationReply {
    /// The daemon's reply; no grant is `accuracy` `none`.
    public static func encode(_ a: AuthorizationInfo) -> [DBusValue] {
        [.uint32(a.status.rawValue), .vardict([
            "temporary": .bool(a.temporary),
            "accuracy": .string(a.accuracy?.rawValue ?? "none"),
            "app-id": .string(a.appID),
            "one-time-approved": .bool(a.oneTimeApproved),
            "agent-registered": .bool(a.agentRegistered),
            "user-location": .bool(a.userLocation),
        ])]
    }

    /// Nil unless the status is a known one; `accuracy` other than `full`/`reduced` reads as none.
    public static func decode(_ values: [DBusValue]) -> AuthorizationInfo? {
        guard let status = StatusReply.decode(values) else { return nil }
        let d = values.dropFirst().first?.vardictValue ?? [:]
        var info = AuthorizationInfo(status: status, temporary: d["temporary"]?.boolValue ?? false,
                                     accuracy: Accuracy(rawValue: d["accuracy"]?.stringValue ?? ""),
                                     appID: d["app-id"]?.stringValue ?? "",
                                     oneTimeApproved: d["one-time-approved"]?.boolValue ?? false)
        info.agentRegistered = d["agent-registered"]?.boolValue ?? false
        info.userLocation = d["user-location"]?.boolValue ?? true
        return info
    }
}

/// `ListSessions` reply: `a(susub)`, (unique name, uid, app-id, status, updates on).
public enum SessionListReply {
    /// The daemon's reply (typed even when empty).
    public static func encode(_ sessions: [SessionInfo]) -> [DBusValue] {
        [.array(element: "(susub)", sessions.map {
            .structure([.string($0.name), .uint32($0.uid), .string($0.appID), .uint32($0.status.rawValue), .bool($0.updates)])
        })]
    }

    /// Nil unless the reply is an array; entries of another shape are left out.
    public static func decode(_ values: [DBusValue]) -> [SessionInfo]? {
        guard let items = values.first?.arrayValue else { return nil }
        return items.compactMap { e in
            guard let f = e.structFields, f.count == 5, let name = f[0].stringValue, let uid = f[1].uint32Value,
                  let app = f[2].stringValue, let status = f[3].uint32Value.flatMap(AuthorizationStatus.init),
                  let updates = f[4].boolValue else { return nil }
            return SessionInfo(name: name, uid: uid, appID: app, status: status, updates: updates)
        }
    }
}

/// `ListSessionDetails` reply: `a(sa{sv})`, (unique name, details). Details:
/// `uid` u, `app-id` s, `status` u, `updates` b, `paused` s (`locked`,
/// `inactive`, or empty while the session is not paused), `receiving` b
/// (fixes reach it now), `accuracy` s (`full`, `reduced`, or `none` without a
/// grant), `source` s (where its last position came from: `gps`, `wifi`,
/// `static`; absent before its first). Keys may be added; a client ignores
/// those it does not know.
public enum SessionDetailsReply {
    /// The daemon's reply (typed even when empty).
    public static func encode(_ sessions: [SessionInfo]) -> [DBusValue] {
        [.array(element: "(sa{sv})", sessions.map {
            var details: [String: DBusValue] = [
                "uid": .uint32($0.uid), "app-id": .string($0.appID), "status": .uint32($0.status.rawValue),
                "updates": .bool($0.updates), "paused": .string($0.paused?.rawValue ?? ""),
                "receiving": .bool($0.receiving), "accuracy": .string($0.accuracy?.rawValue ?? "none"),
            ]
            if let source = $0.source { details["source"] = .string(source.rawValue) }
            return .structure([.string($0.name), .vardict(details)])
        })]
    }

    /// Nil unless the reply is an array; entries without a name, uid, app-id
    /// or known status are left out; a missing `updates` reads as false, an
    /// unknown `paused` as not paused.
    public static func decode(_ values: [DBusValue]) -> [SessionInfo]? {
        guard let items = values.first?.arrayValue else { return nil }
        return items.compactMap { e in
            guard let f = e.structFields, f.count == 2, let name = f[0].stringValue, let d = f[1].vardictValue,
                  let uid = d["uid"]?.uint32Value, let app = d["app-id"]?.stringValue,
                  let status = d["status"]?.uint32Value.flatMap(AuthorizationStatus.init) else { return nil }
            var info = SessionInfo(name: name, uid: uid, appID: app, status: status, updates: d["updates"]?.boolValue ?? false,
                                   paused: PauseReason(rawValue: d["paused"]?.stringValue ?? ""),
                                   receiving: d["receiving"]?.boolValue ?? false,
                                   accuracy: Accuracy(rawValue: d["accuracy"]?.stringValue ?? ""))
            info.source = d["source"]?.stringValue.flatMap(PositionSource.init(rawValue:))
            return info
        }
    }
}

/// One stored consent, as `ListConsents` returns it.
public struct StoredConsent: Equatable, Sendable {
    /// The user the consent belongs to.
    public var uid: UInt32
    /// The app (docs/dbus-api.md "Words": App).
    public var appID: String
    /// What the user decided.
    public var record: ConsentRecord

    /// The consent of `appID` for `uid`.
    public init(uid: UInt32, appID: String, record: ConsentRecord) {
        self.uid = uid
        self.appID = appID
        self.record = record
    }
}

/// `ListConsents` reply: `a(usa{sv})`, (uid, app-id, consent record).
public enum ConsentListReply {
    /// The daemon's reply (typed even when empty).
    public static func encode(_ consents: [(AppKey, ConsentRecord)]) -> [DBusValue] {
        [.array(element: "(usa{sv})", consents.map { key, record in
            .structure([.uint32(key.uid), .string(key.appID), ConsentRecordDictionary.encode(record)])
        })]
    }

    /// Nil unless the reply is an array; entries of another shape are left out.
    public static func decode(_ values: [DBusValue]) -> [StoredConsent]? {
        guard let items = values.first?.arrayValue else { return nil }
        return items.compactMap { e in
            guard let f = e.structFields, f.count == 3, let uid = f[0].uint32Value, let app = f[1].stringValue,
                  let record = ConsentRecordDictionary.decode(f[2]) else { return nil }
            return StoredConsent(uid: uid, appID: app, record: record)
        }
    }
}

/// A consent record as `ListConsents` carries it (`a{sv}`); every key always present.
public enum ConsentRecordDictionary {
    /// Every key always present; "none" is an empty string.
    public static func encode(_ r: ConsentRecord) -> DBusValue {
        .vardict([
            "decision": .string(r.decision?.rawValue ?? ""),
            "decision-accuracy": .string(r.decisionAccuracy?.rawValue ?? ""),
            "one-time-approved": .bool(r.oneTimeApproved),
            "one-time-accuracy": .string(r.oneTimeAccuracy?.rawValue ?? ""),
            "decided-at": .uint64(r.decidedAt),
            "last-used": .uint64(r.lastUsed),
            "lapsed": .string(r.lapsed),
            "lapsed-at": .uint64(r.lapsedAt),
        ])
    }

    /// Nil unless `value` is an `a{sv}`; missing or unknown values read as none, false and 0.
    public static func decode(_ value: DBusValue) -> ConsentRecord? {
        guard let d = value.vardictValue else { return nil }
        var r: ConsentRecord? = ConsentRecord(
            decision: StoredDecision(rawValue: d["decision"]?.stringValue ?? ""),
            decisionAccuracy: Accuracy(rawValue: d["decision-accuracy"]?.stringValue ?? ""),
            oneTimeApproved: d["one-time-approved"]?.boolValue ?? false,
            oneTimeAccuracy: Accuracy(rawValue: d["one-time-accuracy"]?.stringValue ?? ""),
            decidedAt: d["decided-at"]?.uint64Value ?? 0, lastUsed: d["last-used"]?.uint64Value ?? 0)
        r?.lapsed = d["lapsed"]?.stringValue ?? ""
        r?.lapsedAt = d["lapsed-at"]?.uint64Value ?? 0
        return r
    }
}
