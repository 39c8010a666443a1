/// Agents of another protocol, as the consent core sees them: a front end
/// registers one for a uid (a desktop shell's agent, registered through a
/// protocol the front end serves), one per uid. It is asked (`askExternalAgent`)
/// about that uid's client objects only, and only when the uid has no agent
/// of our own; it has no way to hear a prompt withdrawn; and it holds a cap on
/// the accuracy of the uid's client objects. The core knows it by what it can
/// do, not by its protocol.

/// One registered agent of another protocol.
public struct ExternalAgent: Equatable, Sendable {
    /// The unique name of its connection: the agent goes when it leaves.
    public var name: String
    public var uid: UInt32
    /// The most its uid's client objects may get; nil: location is off for them.
    public var maxAccuracy: Accuracy?
    /// What its front end calls it, for the messages a caller reads.
    public var label: String

    public init(name: String, uid: UInt32, maxAccuracy: Accuracy?, label: String = "agent") {
        self.name = name
        self.uid = uid
        self.maxAccuracy = maxAccuracy
        self.label = label
    }

    /// `granted`, as this agent's cap lets it through: nil when location is off,
    /// reduced when the cap is reduced.
    public func cap(_ granted: Accuracy?) -> Accuracy? {
        guard let granted, let max = maxAccuracy else { return nil }
        return max == .reduced ? .reduced : granted
    }
}

/// What an agent of another protocol is asked. Its front end sends it in its
/// own protocol and feeds the answer back as a decision.
public struct ExternalPromptRequest: Equatable, Sendable {
    /// The agent's unique name.
    public var agentName: String
    public var requestID: String
    /// The app as its front end proved a name for it (`AuthOptions.externalName`),
    /// never a name the app chose alone.
    public var appName: String
    /// The client object's session that opened the prompt (its accuracy level is
    /// what the agent is told).
    public var session: SessionID
    public var accuracy: Accuracy
    /// Seconds the agent has to answer.
    public var timeout: Double
    /// The uid whose agent is asked (the app's): the daemon's calls to agents are budgeted per uid.
    public var uid: UInt32

    public init(agentName: String, requestID: String, appName: String, session: SessionID, accuracy: Accuracy,
                timeout: Double, uid: UInt32 = 0) {
        self.agentName = agentName
        self.requestID = requestID
        self.appName = appName
        self.session = session
        self.accuracy = accuracy
        self.timeout = timeout
        self.uid = uid
    }
}

/// The name an agent of another protocol may be told for an app, as its front
/// end established it (the app's own word never counts).
public enum ExternalName: Equatable, Sendable {
    /// A name the app's identity proves (a sandbox's own id, a desktop entry of
    /// the system naming the app's executable).
    case proven(String)
    /// None is proven, and why (for the caller's error).
    case unproven(why: String)
}
