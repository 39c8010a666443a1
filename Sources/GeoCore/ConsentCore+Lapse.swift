/// Decisions that lapse when unused (docs/dbus-api.md "Decisions that
/// lapse"), as Android's auto-reset: what an app's stored decisions give
/// (`when-in-use`, the button's confirmation) goes back to not determined
/// after `[daemon] unused-lapse` days without a grant; a denial stays. The
/// record stays, saying what lapsed, so a settings window can list it.
extension ConsentCore {
    static let microsecondsPerDay: UInt64 = 86_400_000_000

    /// Lapses what is due at `now`; cheap when nothing can be (one compare):
    /// `nextLapseCheck` is the earliest time a record can lapse, and a record
    /// only ever moves its own time later (a use or a decision is `now`).
    func lapseUnused() {
        let days = config.unusedLapseDays
        guard days > 0, now >= nextLapseCheck else { return }
        let span = UInt64(days) * Self.microsecondsPerDay
        var next = UInt64.max
        var due: [(AppKey, ConsentRecord, UInt64)] = []
        for (app, r) in consents.all {
            guard let (since, dueAt) = lapseTime(r, span: span) else { continue }
            if dueAt > now {
                next = Swift.min(next, dueAt)
            } else if sessions.names(of: app).contains(where: { sessions[$0]?.lastGranted == true }) {
                // In use now (a session of the app holds a grant): that is a use, from today.
                noteUse(app)
                next = Swift.min(next, now &+ span)
            } else {
                due.append((app, r, since))
            }
        }
        // In the order of the apps, so that the journal reads the same each time.
        for (app, r, since) in due.sorted(by: { $0.0 < $1.0 }) { lapse(app, r, since: since) }
        if next != nextLapseCheck { wakeUpMayMove = true }   // the one wake-up may move
        nextLapseCheck = next
    }

    /// Records that changed in this event may lapse before the earliest time
    /// known: a new decision's time is `now` plus the span.
    func followLapseTimes() {
        let days = config.unusedLapseDays
        guard days > 0, !consents.changed.isEmpty else { return }
        let span = UInt64(days) * Self.microsecondsPerDay
        for app in consents.changed {
            guard let r = consents[app], let (_, due) = lapseTime(r, span: span) else { continue }
            if due < nextLapseCheck {
                nextLapseCheck = due
                wakeUpMayMove = true   // the one wake-up may move
            }
        }
    }

    /// When `r` was last used (or decided, if later) and when it lapses;
    /// nil when nothing in it lapses, or neither time is known (a record
    /// written by hand, with 0s: nothing to count from).
    private func lapseTime(_ r: ConsentRecord, span: UInt64) -> (since: UInt64, due: UInt64)? {
        guard r.mayLapse else { return nil }
        let since = Swift.max(r.lastUsed, r.decidedAt)
        return since > 0 ? (since, since &+ span) : nil
    }

    private func lapse(_ app: AppKey, _ r: ConsentRecord, since: UInt64) {
        var what: [String] = []
        if r.decision == .whenInUse { what.append(StoredDecision.whenInUse.rawValue) }
        if r.oneTimeApproved { what.append("one-time-approved") }
        // A denial stays as it was (never lapses).
        var lapsed = ConsentRecord(decidedAt: now, lastUsed: r.lastUsed)
        if r.decision == .denied { lapsed.decision = .denied }
        lapsed.lapsed = what.joined(separator: ";")
        lapsed.lapsedAt = now
        consents[app] = lapsed
        lapseNotes.append(LapseNote(app: app, lapsed: lapsed.lapsed, since: since, now: now))
        effects.append(.saveConsents(urgent: true))
    }
}

/// The journal line of a lapse: `decisions lapsed: uid U, unused since
/// DATE (N days), WHAT: app "APP"`, the app id last as in every line a caller
/// can cause (GrantJournal.swift).
public struct LapseNote: Equatable, Sendable, CustomStringConvertible {
    public var app: AppKey
    public var lapsed: String
    public var since: UInt64
    public var now: UInt64

    public var description: String {
        let days = (now &- since) / ConsentCore.microsecondsPerDay
        return "decisions lapsed: uid \(app.uid), unused since \(Self.day(since)) (\(days) days), \(lapsed): " +
            "app \(DisplayText.quotedField(app.appID))"
    }

    /// `YYYY-MM-DD` (UTC) of microseconds since the epoch, without a clock or
    /// a calendar library (Howard Hinnant's civil_from_days).
    static func day(_ microseconds: UInt64) -> String {
        let z = Int64(microseconds / ConsentCore.microsecondsPerDay) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(y)-\(two(m))-\(two(d))"
    }
}
