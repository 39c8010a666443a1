/// The grant journal: one line each time a session's grant begins or ends
/// (docs/dbus-api.md, "Journal"), for the administrator: the app, its uid and
/// what its id rests on, the session, and why a grant ended. Never a
/// coordinate: the journal says who could see the location, not where it was.
public struct GrantNote: Equatable, Sendable, CustomStringConvertible {
    public enum Change: Equatable, Sendable {
        /// The session may receive fixes now, at this accuracy; `temporary`:
        /// only for this session (a one-time grant), else a stored decision or
        /// the config's.
        case began(Accuracy, temporary: Bool)
        /// It may not any more, for this reason.
        case ended(String)
    }

    public var session: SessionID
    public var appID: String
    public var uid: UInt32
    public var identity: IdentityKind
    public var change: Change

    public init(_ caller: Caller, _ change: Change) {
        session = caller.session
        appID = caller.appID
        uid = caller.uid
        identity = caller.identity
        self.change = change
    }

    /// `grant began: APP (uid U, KIND), session S, one-time, full` or
    /// `grant ended: APP (uid U, KIND), session S: WHY`. The app id is
    /// display-safe already (the resolver escapes it).
    public var description: String {
        let who = "\(appID) (uid \(uid), \(identity.rawValue)), session \(session)"
        switch change {
        case .began(let a, let temporary):
            return "grant began: \(who), \(temporary ? "one-time" : "lasting"), \(a.rawValue)"
        case .ended(let why):
            return "grant ended: \(who): \(why)"
        }
    }
}

extension CoreEvent {
    /// Why a grant that ends while this event is handled ends, unless the
    /// session's own pause says more (`ConsentCore.announceChanges`).
    var grantEndCause: String {
        switch self {
        case .client(_, _, .revoke): return "the app revoked it"
        case .management(_, _, .resetConsent): return "its consent was reset"
        case .management(_, _, .setEnabled(false)): return "location was switched off"
        case .nameLeft: return "the app left the bus"
        case .sessionEnded: return "its client object stopped"
        case .processExited: return "the process that asked exited"
        case .geoclueAgentLevel: return "the GeoClue agent switched location off"
        default: return "no grant applies any more"
        }
    }
}

extension PauseReason {
    /// Why a pause ended a grant, for the journal.
    var grantEndCause: String {
        switch self {
        case .locked: return "the user's session was locked"
        case .inactive: return "the user's session went to the background"
        }
    }
}
