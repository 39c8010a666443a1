import GeoCore

/// The one path a fix takes to its sessions, from gpsd's stream or from a
/// batch of effects (a cached fix at `StartUpdates`, a resume), through the
/// front end that owns each: a front end that streams (our own API) is
/// handed each session as soon as the location core has decided it, and
/// flushed at the end; the others get their sessions gathered per view of
/// the fix, at the end, so each encodes its properties once per group.
struct FixDelivery {
    let frontEnds: FrontEnds
    private var streamed: [FrontEnd] = []
    private var gathered: [(owner: FrontEnd, fix: Fix, sessions: [SessionID])] = []

    init(frontEnds: FrontEnds) { self.frontEnds = frontEnds }

    mutating func add(_ sessions: [SessionID], _ acc: Accuracy, _ fix: Fix) {
        for session in sessions {
            guard let owner = frontEnds.owner(of: session) else { continue }
            if owner.streamsFixes {
                owner.sendFix(to: session, fix, acc)
                if !streamed.contains(where: { $0 === owner }) { streamed.append(owner) }
                continue
            }
            // One group per front end and view of the fix (full, reduced), whatever the order.
            if let i = gathered.firstIndex(where: { $0.owner === owner && $0.fix == fix }) {
                gathered[i].sessions.append(session)
            } else {
                gathered.append((owner, fix, [session]))
            }
        }
    }

    /// Sends what is decided: before any other effect, and at the end.
    mutating func flush() {
        for owner in streamed { owner.flushFixes() }
        streamed.removeAll(keepingCapacity: true)
        guard !gathered.isEmpty else { return }
        for group in gathered { group.owner.deliver(group.sessions, group.fix) }
        gathered.removeAll()
    }
}
