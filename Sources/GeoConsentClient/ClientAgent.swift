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
}

/// The answer to one `Confirm`. Only the first answer counts; an answer after
/// the daemon gave up waiting (its prompt timeout) is ignored by the daemon.
public final class AgentResponder: @unchecked Sendable {
    private let call: MethodCall
    private let loop: EventLoop

    init(call: MethodCall, loop: EventLoop) {
        self.call = call
        self.loop = loop
    }

    /// Answers the prompt with `decision`.
    public func reply(_ decision: AgentDecision) {
        loop.post { [call] in call.reply(ConfirmReply.encode(decision)) }
    }
}

extension GeoConsentClient {
    /// Serves the agent interface at `path` on this connection, registers it as
    /// the consent agent of the caller's uid (`RegisterAgent`), and returns the
    /// requests it gets. The stream ends when the connection does, or on
    /// `unregisterAgent(at:)`. Throws the daemon's error (`AgentExists`,
    /// `AccessDenied`, …) when the registration is refused.
    public func registerAgent(at path: String) async throws -> AsyncStream<AgentRequest> {
        var cont: AsyncStream<AgentRequest>.Continuation!
        let requests = AsyncStream<AgentRequest>(bufferingPolicy: .unbounded) { cont = $0 }
        let endpoint = AgentEndpoint(requests: cont, loop: loop)
        // Posted before the call, so the object is there when the daemon first calls it.
        loop.post { [self] in
            agents[path]?.finish()
            agents[path] = endpoint
            serveObjects().export(endpoint, at: path, interfaces: [AgentEndpoint.interface])
        }
        do {
            _ = try await call("RegisterAgent", [.objectPath(path)])
        } catch {
            loop.post { [self] in withdraw(path, only: endpoint) }
            throw error
        }
        return requests
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
    private let requests: AsyncStream<AgentRequest>.Continuation
    private let loop: EventLoop

    init(requests: AsyncStream<AgentRequest>.Continuation, loop: EventLoop) {
        self.requests = requests
        self.loop = loop
    }

    func finish() { requests.finish() }

    static let interface = Interface<AgentEndpoint>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { endpoint, call in
            guard let prompt = ConfirmCall.decode(call.arguments) else {
                return call.fail(.invalidArgs("Confirm arguments of the wrong shape"))
            }
            endpoint.requests.yield(.confirm(prompt, AgentResponder(call: call, loop: endpoint.loop)))
        },
        CancelCall.member: { endpoint, call in
            call.reply()
            if let id = CancelCall.decode(call.arguments) { endpoint.requests.yield(.cancel(requestID: id)) }
        },
    ])
}
