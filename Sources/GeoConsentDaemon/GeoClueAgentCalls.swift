import GeoCore
import GeoDBus
import GeoConsentAPI

/// GeoClue agents (GNOME Shell, Phosh): `Manager.AddAgent`, their
/// `MaxAccuracyLevel` and its changes, and `AuthorizeApp`. The consent core
/// decides who may register, when an agent is asked and what its cap does;
/// this is the bus side of it.
extension GeoClueFacade {
    /// Seconds an agent has to answer the read of its `MaxAccuracyLevel`.
    static let agentReadTimeout: Double = 5

    /// `AddAgent(s id)`: reads the caller's `MaxAccuracyLevel` (as GeoClue does
    /// before it answers), then the core registers it for the caller's uid.
    /// The id is the agent's name for itself, and decides nothing.
    func addAgent(_ call: MethodCall) {
        daemon.withCaller(call) { [weak self] caller in
            guard let self else { return }
            self.readMaxAccuracy(of: call.sender) { result in
                switch result {
                case .success(let level):
                    let cap = GeoClueAccuracyLevel.accuracy(forLevel: level)
                    Log.info("GeoClue agent \(call.sender) (\(caller.appID)) for uid \(caller.uid), " +
                             "accuracy at most \(cap?.rawValue ?? "none")")
                    self.agentLevels[call.sender] = level
                    self.daemon.feed(.management(self.daemon.hold(call), caller, .addGeoClueAgent(maxAccuracy: cap)))
                    self.availableLevelsChanged()
                case .failure(let e):
                    call.fail(.failed("Cannot read \(MaxAccuracyLevelProperty.name) of the agent at " +
                                      "\(GeoClueAPI.agentPath): \(e.message)"))
                }
            }
        }
    }

    /// The agent's `MaxAccuracyLevel`.
    private func readMaxAccuracy(of name: String, _ done: @escaping (Result<UInt32, DBusError>) -> Void) {
        do {
            let m = try Message.methodCall(destination: name, path: GeoClueAPI.agentPath,
                                           interface: ObjectServer.properties, member: "Get")
            try m.append([.string(GeoClueAPI.agentInterfaceName), .string(MaxAccuracyLevelProperty.name)])
            daemon.connection.call(m, timeout: GeoClueFacade.agentReadTimeout) { result in
                switch result {
                case .success(let reply):
                    guard let level = reply.arguments().first?.unwrapped.uint32Value else {
                        return done(.failure(.failed("not a u")))
                    }
                    done(.success(level))
                case .failure(let e):
                    done(.failure(e))
                }
            }
        } catch {
            done(.failure(.failed("\(error)")))
        }
    }

    /// A `PropertiesChanged` of some connection's `/org/freedesktop/GeoClue2/Agent`
    /// (the daemon matches them all): a new cap, if it is a registered agent's.
    func agentSignal(_ m: Message) -> Bool {
        guard m.type == .signal, m.path == GeoClueAPI.agentPath, m.interface == ObjectServer.properties,
              m.member == "PropertiesChanged", let sender = m.sender else { return false }
        // Only a registered agent's own change counts: any peer may send this
        // signal, and each change walks every reader of the level.
        guard let level = MaxAccuracyLevelProperty.changedLevel(signature: m.signature, m.arguments()),
              let known = agentLevels[sender], known != level else { return true }
        agentLevels[sender] = level
        daemon.feed(.geoclueAgentLevel(name: sender, maxAccuracy: GeoClueAccuracyLevel.accuracy(forLevel: level)))
        availableLevelsChanged()
        return true
    }

    /// Asks a GeoClue agent about a client object's app; its answer goes back to
    /// the core as a decision (`AuthorizeAppCall.decode`).
    func authorize(_ r: AuthorizeAppRequest) {
        let level = requestedLevel(session: r.session)
            ?? (r.accuracy == .full ? GeoClueAccuracyLevel.exact : GeoClueAccuracyLevel.city)
        do {
            let m = try Message.methodCall(destination: r.agentName, path: GeoClueAPI.agentPath,
                                           interface: GeoClueAPI.agentInterfaceName, member: AuthorizeAppCall.member)
            try m.append(AuthorizeAppCall.encode(desktopID: r.desktopID, level: level))
            Log.info("asking GeoClue agent \(r.agentName) about \(r.desktopID) (level \(level), request \(r.requestID))")
            daemon.connection.call(m, timeout: r.timeout) { [weak self] result in
                let answer: AgentAnswer
                switch result {
                case .success(let reply): answer = AuthorizeAppCall.decode(signature: reply.signature, reply.arguments())
                case .failure(let e): answer = .noAnswer(e.description)
                }
                Log.info("request \(r.requestID) for \(r.desktopID): \(String(describing: answer).prefix(300))")
                self?.daemon.feed(.agentAnswered(requestID: r.requestID, answer))
            }
        } catch {
            daemon.feed(.agentAnswered(requestID: r.requestID, .noAnswer("\(error)")))
        }
    }
}
