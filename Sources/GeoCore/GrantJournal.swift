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
        /// It got its first fix from this source.
        case served(PositionSource)
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

    /// `grant began: uid U, KIND, session S, one-time, full: app "APP"` or
    /// `grant ended: uid U, KIND, session S, WHY: app "APP"` or `grant served:
    /// uid U, KIND, session S, from SOURCE: app "APP"`. What the daemon
    /// proved comes first; the app id, which a caller can choose (an
    /// executable path is any name its owner gives a file), comes last,
    /// quoted and cut (`DisplayText.quotedField`), so that no app id can make a line read
    /// as a grant to another uid.
    public var description: String {
        let who = "uid \(uid), \(identity.rawValue), session \(session)"
        let app = "app " + DisplayText.quotedField(appID)
        switch change {
        case .began(let a, let temporary):
            return "grant began: \(who), \(temporary ? "one-time" : "lasting"), \(a.rawValue): \(app)"
        case .ended(let why):
            return "grant ended: \(who), \(why): \(app)"
        case .served(let source):
            return "grant served: \(who), from \(source.rawValue): \(app)"
        }
    }
}

extension CoreEvent {
    /// Why a grant that ends while this event is handled ends, unless the
    /// session's own pause says more (`ConsentCore.announceChanges`).
    var grantEndCause: String {
        switch self {
        case .request(_, _, .revoke): return "the app revoked it"
        case .management(_, _, .resetConsent): return "its consent was reset"
        case .management(_, _, .setConsent): return "the user changed its decision"
        case .management(_, _, .endGrants): return "the user stopped it"
        case .management(_, _, .setEnabled(false, _)): return "location was switched off"
        case .management(_, _, .setUserLocation(false, _)): return "its user switched location off"
        case .nameLeft: return "the app left the bus"
        case .sessionEnded: return "its client object stopped"
        case .processExited: return "the process that asked exited"
        case .externalAgentLevel: return "its uid's other agent switched location off"
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
