/// GeoClue agents (GNOME Shell, Phosh, GeoClue's demo agent) as the consent core
/// sees them: registered with the GeoClue Manager's `AddAgent`, one per uid,
/// asked (`AuthorizeApp`) for a uid's client objects only when that uid has no
/// agent of our own, and holding a cap on the accuracy of the uid's client
/// objects (`MaxAccuracyLevel`).

/// One registered GeoClue agent.
public struct GeoClueAgent: Equatable, Sendable {
    /// The unique name of its connection: the agent goes when it leaves.
    public var name: String
    public var uid: UInt32
    /// The most its uid's client objects may get; nil: location is off for them.
    public var maxAccuracy: Accuracy?

    public init(name: String, uid: UInt32, maxAccuracy: Accuracy?) {
        self.name = name
        self.uid = uid
        self.maxAccuracy = maxAccuracy
    }

    /// `granted`, as this agent's cap lets it through: nil when location is off,
    /// reduced when the cap is reduced.
    public func cap(_ granted: Accuracy?) -> Accuracy? {
        guard let granted, let max = maxAccuracy else { return nil }
        return max == .reduced ? .reduced : granted
    }
}

/// What a GeoClue agent is asked (`org.freedesktop.GeoClue2.Agent.AuthorizeApp`).
/// Its `true` counts as Allow While Using, its `false` as Don't Allow: the
/// daemon feeds them back as those decisions.
public struct AuthorizeAppRequest: Equatable, Sendable {
    /// The agent's unique name; the object path is GeoClue's fixed one.
    public var agentName: String
    public var requestID: String
    /// The app as its identity names it, never the client's `DesktopId` alone:
    /// a sandbox's own id, a systemd unit's id, or a system desktop entry that
    /// names the host app's executable (`ConsentCore.agentAppName`).
    public var desktopID: String
    /// The client object's session that opened the prompt (its accuracy level is
    /// what the agent is told).
    public var session: SessionID
    public var accuracy: Accuracy
    /// Seconds the agent has to answer.
    public var timeout: Double
    /// The uid whose agent is asked (the app's): the daemon's calls to agents are budgeted per uid.
    public var uid: UInt32

    public init(agentName: String, requestID: String, desktopID: String, session: SessionID, accuracy: Accuracy,
                timeout: Double, uid: UInt32 = 0) {
        self.agentName = agentName
        self.requestID = requestID
        self.desktopID = desktopID
        self.session = session
        self.accuracy = accuracy
        self.timeout = timeout
        self.uid = uid
    }
}
