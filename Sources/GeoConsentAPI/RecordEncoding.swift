import GeoDBus
import GeoCore

/// Consent records and sessions as the management methods return them.
public enum RecordEncoding {
    /// A consent record as `a{sv}`; every key always present.
    public static func encode(_ r: ConsentRecord) -> DBusValue {
        .vardict([
            "decision": .string(r.decision?.rawValue ?? ""),
            "decision-accuracy": .string(r.decisionAccuracy?.rawValue ?? ""),
            "one-time-approved": .bool(r.oneTimeApproved),
            "one-time-accuracy": .string(r.oneTimeAccuracy?.rawValue ?? ""),
            "decided-at": .uint64(r.decidedAt),
            "last-used": .uint64(r.lastUsed),
        ])
    }

    /// Reads what `encode` writes (clients); missing or unknown values read as
    /// "none", false and 0.
    public static func decode(_ d: [String: DBusValue]) -> ConsentRecord {
        ConsentRecord(
            decision: StoredDecision(rawValue: d["decision"]?.stringValue ?? ""),
            decisionAccuracy: Accuracy(rawValue: d["decision-accuracy"]?.stringValue ?? ""),
            oneTimeApproved: d["one-time-approved"]?.boolValue ?? false,
            oneTimeAccuracy: Accuracy(rawValue: d["one-time-accuracy"]?.stringValue ?? ""),
            decidedAt: d["decided-at"]?.uint64Value ?? 0, lastUsed: d["last-used"]?.uint64Value ?? 0)
    }
}
