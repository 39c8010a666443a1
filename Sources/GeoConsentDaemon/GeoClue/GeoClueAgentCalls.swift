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
    ///
    /// The caller can make the daemon call it back, so everything that bounds
    /// that comes first: a caller the core would refuse (sandboxed, not allowed,
    /// another agent of its uid) is refused without a read; the uid's agent
    /// adding itself again is answered from what it said before (its changes
    /// come as `PropertiesChanged`); one read per connection at a time, and the
    /// reads of a uid and of everyone within their budget (OutgoingCalls).
    func addAgent(_ call: MethodCall) {
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            if let refusal = self.host.consent.externalAgentRefusal(caller) { return call.fail(refusal.dbusError) }
            if self.host.consent.isExternalAgent(call.sender, uid: caller.uid), self.agentLevels[call.sender] != nil {
                return call.reply()
            }
            guard !self.agentReads.contains(call.sender) else {
                self.host.noteAttack(call.sender, uid: caller.uid, "pipelines AddAgent while its level is being read")
                return call.fail(DBusError(DBusError.limitsExceededName,
                                           "This connection's AddAgent is being answered already: wait for its reply"))
            }
            self.agentReads.insert(call.sender)
            let refused = self.readMaxAccuracy(of: call.sender, uid: caller.uid) { result in
                self.agentReads.remove(call.sender)
                switch result {
                case .success(let level):
                    let cap = GeoClueAccuracyLevel.accuracy(forLevel: level)
                    let before = self.agentLevels[call.sender]
                    self.agentLevels[call.sender] = level
                    self.host.feed(.management(self.host.hold(call), caller, .addExternalAgent(maxAccuracy: cap, label: GeoClueFacade.agentLabel)))
                    if !self.host.consent.isExternalAgent(call.sender, uid: caller.uid) {
                        self.agentLevels[call.sender] = nil   // refused meanwhile
                    } else if before != level {
                        // Logged when the agent or its level is new.
                        Log.byCaller(uid: caller.uid, .info, "GeoClue agent \(call.sender) for uid \(caller.uid), " +
                                     "accuracy at most \(cap?.rawValue ?? "none"): app \(Log.field(caller.appID))")
                    }
                    self.availableLevelsChanged()
                case .failure(let e):
                    call.fail(.failed("Cannot read \(MaxAccuracyLevelProperty.name) of the agent at " +
                                      "\(GeoClueAPI.agentPath): \(e.message)"))
                }
            }
            if let refused {
                self.agentReads.remove(call.sender)
                refused.log("the MaxAccuracyLevel read", callee: call.sender, uid: caller.uid, noteAttack: { self.host.noteAttack($0, uid: $1, $2) })
                call.fail(DBusError(DBusError.limitsExceededName, "Cannot read the agent's level now: \(refused)"))
            }
        }
    }

    /// The agent's `MaxAccuracyLevel`; nil when the read went out, else why it did not (`done` is then not called).
    private func readMaxAccuracy(of name: String, uid: UInt32,
                                 _ done: @escaping (Result<UInt32, DBusError>) -> Void) -> OutgoingCalls.Refusal? {
        do {
            let m = try Message.methodCall(destination: name, path: GeoClueAPI.agentPath,
                                           interface: ObjectServer.properties, member: "Get")
            try m.append([.string(GeoClueAPI.agentInterfaceName), .string(MaxAccuracyLevelProperty.name)])
            return host.call(m, purpose: GeoClueFacade.agentRead, uid: uid, callee: name,
                                        timeout: GeoClueFacade.agentReadTimeout) { result in
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
            return nil
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
        host.feed(.externalAgentLevel(name: sender, maxAccuracy: GeoClueAccuracyLevel.accuracy(forLevel: level)))
        availableLevelsChanged()
        return true
    }

    /// Asks a GeoClue agent about a client object's app; its answer goes back to
    /// the core as a decision (`AuthorizeAppCall.decode`). Beyond the uid's
    /// budget of calls to its agent (OutgoingCalls), the prompt ends unanswered.
    func authorize(_ r: ExternalPromptRequest) -> Bool {
        let level = requestedLevel(session: r.session)
            ?? (r.accuracy == .full ? GeoClueAccuracyLevel.exact : GeoClueAccuracyLevel.city)
        let refused: String?
        do {
            let m = try Message.methodCall(destination: r.agentName, path: GeoClueAPI.agentPath,
                                           interface: GeoClueAPI.agentInterfaceName, member: AuthorizeAppCall.member)
            try m.append(AuthorizeAppCall.encode(desktopID: r.appName, level: level))
            let refusal = host.call(m, purpose: GeoClueFacade.agentPrompt, uid: r.uid, callee: r.agentName,
                                             timeout: r.timeout) { [weak self] result in
                let answer: AgentAnswer
                switch result {
                case .success(let reply): answer = AuthorizeAppCall.decode(signature: reply.signature, reply.arguments())
                case .failure(let e): answer = .noAnswer(e.description)
                }
                // The answer (or error message) comes from the agent, which could send megabytes: a field.
                Log.byCaller(uid: r.uid, .info, "request \(r.requestID) of uid \(r.uid) answered: " +
                             "\(Log.field(String(describing: answer))), app \(Log.field(r.appName))")
                self?.host.feed(.agentAnswered(requestID: r.requestID, answer))
            }
            refusal?.log("AuthorizeApp", callee: r.agentName, uid: r.uid, noteAttack: { host.noteAttack($0, uid: $1, $2) })
            refused = refusal?.description
        } catch {
            refused = "\(error)"
        }
        if let refused {
            // Not asked: the prompt ends unanswered, after this dispatch.
            host.loop.later { [weak self] in self?.host.feed(.agentAnswered(requestID: r.requestID, .noAnswer(refused))) }
        } else {
            Log.byCaller(uid: r.uid, .info, "asking GeoClue agent \(r.agentName) of uid \(r.uid) (level \(level), " +
                         "request \(r.requestID)) about app \(Log.field(r.appName))")
        }
        return true
    }
}
