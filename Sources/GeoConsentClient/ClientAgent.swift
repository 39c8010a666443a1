import GeoDBus
import GeoCore
import GeoConsentAPI

// A consent agent served on the client's own connection: for apps that show
// the user's prompts (and for `geoconsentctl agent`). The daemon calls the
// agent object's `Confirm` and `Cancel`; they arrive as `AgentRequest`s.

/// What the daemon asks of a consent agent.
public enum AgentRequest: Sendable {
    /// Show `prompt`, and answer it through `responder` (once; any thread, any time).
    case confirm(AgentPrompt, AgentResponder)
    /// The prompt `requestID` was withdrawn (its app left, or it timed out): close it.
    case cancel(requestID: String)
    /// With `registerAgent(at:retrying: true)`: the daemon took this agent (at
    /// first, once the slot was free, or after geoconsentd came back).
    case registered
    /// With `registerAgent(at:retrying: true)`: not the uid's agent for now
    /// (another agent of this uid holds the slot, or geoconsentd is not on the
    /// bus); the library keeps trying. The text says why.
    case unregistered(reason: String)
}

/// The answer to one `Confirm`. Only the first answer counts; an answer after
/// the daemon gave up waiting (its prompt timeout) is ignored by the daemon.
public final class AgentResponder: @unchecked Sendable {
    private let requestID: String
    private weak var endpoint: AgentEndpoint?
    private let loop: EventLoop

    init(requestID: String, endpoint: AgentEndpoint, loop: EventLoop) {
        self.requestID = requestID
        self.endpoint = endpoint
        self.loop = loop
    }

    /// Answers the prompt with `decision` (nothing, once it was withdrawn).
    public func reply(_ decision: AgentDecision) {
        reply(decision, accuracy: .full)
    }

    /// Answers the prompt with `decision` allowing at most `accuracy`: the
    /// user's Precise switch (`.reduced`: off; the app then gets a grid cell
    /// of a few kilometres, and asks again when it needs more).
    public func reply(_ decision: AgentDecision, accuracy: Accuracy) {
        loop.post { [requestID, weak endpoint] in
            endpoint?.pending.removeValue(forKey: requestID)?.reply(ConfirmReply.encode(decision, accuracy: accuracy))
        }
    }
}

extension GeoConsentClient {
    /// Serves the agent interface at `path` on this connection, registers it as
    /// the consent agent of the caller's uid (`RegisterAgent`), and returns the
    /// requests it gets. The stream ends when the connection does, or on
    /// `unregisterAgent(at:)`. Throws the daemon's error (`AgentExists`,
    /// `AccessDenied`, …) when the registration is refused.
    ///
    /// With `retrying`, what a shipped agent does: while another agent of this
    /// uid holds the slot, or geoconsentd is not on the bus, the library tries
    /// again every `AgentEndpoint.retrySeconds` and when geoconsentd's name gets
    /// an owner, and registers again whenever geoconsentd comes back (a restart
    /// forgets its agents). The stream then says `.registered` and
    /// `.unregistered(reason:)` as that happens; only other refusals throw.
    public func registerAgent(at path: String, retrying: Bool = false) async throws -> AsyncStream<AgentRequest> {
        var cont: AsyncStream<AgentRequest>.Continuation!
        let requests = AsyncStream<AgentRequest>(bufferingPolicy: .unbounded) { cont = $0 }
        let endpoint = AgentEndpoint(requests: cont, loop: loop, retrying: retrying)
        // Posted before the call, so the object is there when the daemon first calls it.
        loop.post { [self] in
            agents[path]?.finish()
            agents[path] = endpoint
            serveObjects().export(endpoint, at: path, interfaces: [AgentEndpoint.interface])
            if retrying { watchDaemonName() }
        }
        do {
            _ = try await call("RegisterAgent", [.objectPath(path)])
        } catch let e as DBusError where retrying && AgentEndpoint.isWorthRetrying(e) {
            loop.post { [self] in notRegistered(path, endpoint, e) }
            return requests
        } catch {
            loop.post { [self] in withdraw(path, only: endpoint) }
            throw error
        }
        if retrying { cont.yield(.registered) }
        return requests
    }

    /// Follows who owns geoconsentd's name, for agents that register again. Loop thread.
    private func watchDaemonName() {
        guard !watchingDaemon else { return }
        watchingDaemon = true
        // A blocking AddMatch on the loop, once: a client can wait that long.
        try? connection.addMatch(BusDriver.matchRule("NameOwnerChanged", "arg0='\(GeoConsentAPI.busName)'"))
    }

    /// geoconsentd's name changed hands (`owner` empty: it left). Loop thread.
    func daemonOwnerChanged(to owner: String) {
        for (path, endpoint) in agents where endpoint.retrying {
            if owner.isEmpty {
                endpoint.say(.unregistered(reason: "geoconsentd left the bus"))
            } else {
                register(path, endpoint)
            }
        }
    }

    /// One registration attempt of a retrying agent. Loop thread.
    private func register(_ path: String, _ endpoint: AgentEndpoint) {
        guard agents[path] === endpoint, let m = try? Message.methodCall(
            destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
            interface: GeoConsentAPI.interfaceName, member: "RegisterAgent") else { return }
        try? m.append([.objectPath(path)])
        connection.call(m, timeout: 30) { [weak self] result in
            guard let self, self.agents[path] === endpoint else { return }
            switch result {
            case .success: endpoint.say(.registered)
            case .failure(let e) where AgentEndpoint.isWorthRetrying(e): self.notRegistered(path, endpoint, e)
            case .failure(let e): endpoint.say(.unregistered(reason: "\(e.name): \(e.message)"))
            }
        }
    }

    /// Says why, and tries again in a while. Loop thread.
    private func notRegistered(_ path: String, _ endpoint: AgentEndpoint, _ e: DBusError) {
        endpoint.say(.unregistered(reason: e.message))
        _ = loop.schedule(after: AgentEndpoint.retrySeconds) { [weak self] in
            guard let self, self.agents[path] === endpoint, !endpoint.isRegistered else { return }
            self.register(path, endpoint)
        }
    }

    /// Unregisters the agent at `path` (`UnregisterAgent`) and stops serving it,
    /// also when the daemon answers with an error.
    public func unregisterAgent(at path: String) async throws {
        defer { loop.post { [self] in withdraw(path) } }
        _ = try await call("UnregisterAgent", [.objectPath(path)])
    }

    /// Stops serving the agent at `path` and ends its stream; with `only`, just
    /// that endpoint's stream if another registration has replaced it. Loop thread.
    private func withdraw(_ path: String, only endpoint: AgentEndpoint? = nil) {
        guard let current = agents[path], endpoint == nil || current === endpoint else {
            endpoint?.finish()
            return
        }
        agents[path] = nil
        server?.unexport(path)
        current.finish()
    }

    /// The object server of this connection, made on first use; the daemon's
    /// signals keep coming to `signal`.
    private func serveObjects() -> ObjectServer {
        if let server { return server }
        let made = ObjectServer(connection: connection)
        made.onOtherMessage = { [weak self] m in self?.signal(m) ?? false }
        server = made
        return made
    }
}

/// The agent object on the bus: turns `Confirm` and `Cancel` calls into requests.
final class AgentEndpoint {
    /// Seconds between registration attempts while the slot is taken.
    static let retrySeconds = 2.0

    private let requests: AsyncStream<AgentRequest>.Continuation
    private let loop: EventLoop
    /// `Confirm` calls not answered yet, by request id. A withdrawn one is
    /// answered with an error at its `Cancel`: the daemon counts every call to
    /// an agent it waits on against the uid's budget until it is answered
    /// (docs/dbus-api.md, "Limits").
    fileprivate var pending: [String: MethodCall] = [:]
    /// Registers again by itself (`registerAgent(at:retrying:)`).
    let retrying: Bool
    private(set) var isRegistered = true

    init(requests: AsyncStream<AgentRequest>.Continuation, loop: EventLoop, retrying: Bool) {
        self.requests = requests
        self.loop = loop
        self.retrying = retrying
    }

    /// The endpoint ends (unregistered, or replaced at its path): the prompts it
    /// was asked are answered, so that the daemon does not wait on them.
    func finish() {
        for (id, call) in pending.sorted(by: { $0.key < $1.key }) { call.fail(.failed("The agent at this path ended (prompt \(id))")) }
        pending = [:]
        requests.finish()
    }

    /// Passes on a change of registration, once per change (a retry that finds
    /// the slot still taken says nothing new).
    func say(_ change: AgentRequest) {
        switch change {
        case .registered:
            guard !isRegistered else { return }
            isRegistered = true
        case .unregistered:
            guard isRegistered else { return }
            isRegistered = false
        default:
            break
        }
        requests.yield(change)
    }

    /// The slot is taken, or geoconsentd is not there to take the registration.
    static func isWorthRetrying(_ e: DBusError) -> Bool {
        e.name == GeoConsentAPI.ErrorName.agentExists || e.name == "org.freedesktop.DBus.Error.ServiceUnknown"
            || e.name == "org.freedesktop.DBus.Error.NameHasNoOwner" || e.name == DBusError.noReplyName
    }

    static let interface = Interface<AgentEndpoint>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { endpoint, call in
            guard let prompt = ConfirmCall.decode(call.arguments) else {
                return call.fail(.invalidArgs("Confirm arguments of the wrong shape"))
            }
            // A repeated id (only a broken daemon sends one): the earlier call is answered now.
            endpoint.pending.updateValue(call, forKey: prompt.requestID)?.fail(.failed("Confirm \(prompt.requestID) came again"))
            endpoint.requests.yield(.confirm(prompt, AgentResponder(requestID: prompt.requestID, endpoint: endpoint,
                                                                    loop: endpoint.loop)))
        },
        CancelCall.member: { endpoint, call in
            call.reply()
            guard let id = CancelCall.decode(call.arguments) else { return }
            endpoint.pending.removeValue(forKey: id)?.fail(.failed("The prompt \(id) was withdrawn"))
            endpoint.requests.yield(.cancel(requestID: id))
        },
        // This library's agent registers with no features (`RegisterAgent`), so
        // the daemon sends it neither; a call from elsewhere gets the plain answers.
        NoticeCall.member: { _, call in call.reply() },
        CheckFocusCall.member: { _, call in call.reply(CheckFocusReply.encode(focused: .unknown, press: .unknown, via: "none")) },
    ])
}
