import GeoCore
import GeoDBus
import GeoConsentAPI

/// Our own agent protocol (`org.geoconsent.GeoConsent1.Agent`, docs/dbus-api.md
/// "Agent interface"), as the daemon speaks it: `Confirm` for a prompt the core
/// opened, its answer fed back as a decision, and `Cancel` for one it withdrew.
/// (The facade's GeoClueAgentCalls.swift is the same for GeoClue agents.)
final class ConsentAgentCalls {
    private let connection: Connection
    private let outgoing: OutgoingCalls
    private let attackLog: AttackLog
    private let loop: EventLoop
    /// Hands the consent core an agent's answer.
    private let feed: (CoreEvent) -> Void
    /// Prompts already withdrawn with `Agent.Cancel` whose `Confirm` call is still
    /// pending, so its timeout does not send a second `Cancel`.
    private var withdrawn: Set<String> = []
    /// Prompts whose `Confirm` went out and is not answered yet: only these are
    /// withdrawn on the agent's side.
    private var confirming: Set<String> = []

    init(connection: Connection, outgoing: OutgoingCalls, attackLog: AttackLog, loop: EventLoop,
         feed: @escaping (CoreEvent) -> Void) {
        self.connection = connection
        self.outgoing = outgoing
        self.attackLog = attackLog
        self.loop = loop
        self.feed = feed
    }

    func confirm(_ r: ConfirmRequest) {
        // app_id and executable were made display-safe when the caller was
        // resolved; app-name is the client's own claim, escaped the same way.
        // reason and parent-window go as they are (docs/dbus-api.md, Agent interface).
        var r = r
        r.appName = DisplayText.escaped(r.appName)
        do {
            let m = try Message.methodCall(destination: r.agentName, path: r.agentPath,
                                           interface: GeoConsentAPI.agentInterfaceName, member: ConfirmCall.member)
            try m.append(ConfirmCall.encode(r))
            let refused = outgoing.call(m, purpose: .consentAgent, uid: r.uid, callee: r.agentName,
                                        timeout: r.timeout, tag: r.requestID) { [weak self] result in
                guard let self else { return }
                self.confirming.remove(r.requestID)
                let alreadyWithdrawn = self.withdrawn.remove(r.requestID) != nil
                let answer: AgentAnswer
                switch result {
                case .success(let reply):
                    answer = ConfirmReply.decode(signature: reply.signature, reply.arguments())
                case .failure(let e):
                    answer = .noAnswer(e.description)
                    if e.name == DBusError.noReplyName && !alreadyWithdrawn {
                        // Timed out: withdraw the prompt on the agent's side too.
                        self.sendCancel(r.agentName, r.agentPath, r.requestID)
                    }
                }
                // Cut short: the answer (or error message) comes from the agent, which could send megabytes.
                Log.byCaller(uid: r.uid, .info, "request \(r.requestID) of uid \(r.uid) answered: " +
                             "\(Log.field(String(describing: answer))), app \(Log.field(r.appID))")
                self.feed(.agentAnswered(requestID: r.requestID, answer))
            }
            if let refused {
                // Not asked (its agent leaves earlier calls unanswered, or the budget is spent): this prompt ends unanswered at once.
                refused.log("Confirm", callee: r.agentName, uid: r.uid, noteAttack: { attackLog.note($0, uid: $1, $2) })
                return loop.later { [weak self] in
                    self?.feed(.agentAnswered(requestID: r.requestID, .noAnswer(refused.description)))
                }
            }
            confirming.insert(r.requestID)
            Log.byCaller(uid: r.uid, .info, "asking agent \(r.agentName) of uid \(r.uid) (\(r.kind.rawValue), " +
                         "request \(r.requestID)) about app \(Log.field(r.appID))")
        } catch {
            loop.later { [weak self] in self?.feed(.agentAnswered(requestID: r.requestID, .noAnswer("\(error)"))) }
        }
    }

    /// How long a silent tap waits for the agent's `CheckFocus`: the agent
    /// answers from what it already knows of the display, so a second is ample,
    /// and an app's button waits no longer than that without a prompt.
    static let focusTimeout = 1.0

    /// Asks the agent whether the tapping process is the app in front; the
    /// answer (or why there is none) goes back to the core.
    func checkFocus(_ r: FocusCheckRequest) {
        let answer: (FocusAnswer) -> Void = { [weak self] in self?.feed(.focusAnswered(requestID: r.requestID, $0)) }
        do {
            let m = try Message.methodCall(destination: r.agentName, path: r.agentPath,
                                           interface: GeoConsentAPI.agentInterfaceName, member: CheckFocusCall.member)
            try m.append(CheckFocusCall.encode(r))
            let refused = outgoing.call(m, purpose: .focusCheck, uid: r.uid, callee: r.agentName,
                                        timeout: Self.focusTimeout, tag: r.requestID) { result in
                switch result {
                case .success(let reply): answer(CheckFocusReply.decode(signature: reply.signature, reply.arguments()))
                case .failure(let e): answer(.noAnswer(e.description))
                }
            }
            if let refused {
                // Most often a second tap of the uid while its first is checked (one
                // check at a time per uid): no sign of a broken agent, so not in the attack log.
                Log.byCaller(uid: r.uid, .info, "CheckFocus to \(r.agentName) (uid \(r.uid)) not sent: \(refused.description); " +
                             "the tap is asked as a first tap")
                loop.later { answer(.noAnswer(refused.description)) }
            }
        } catch {
            loop.later { answer(.noAnswer("\(error)")) }
        }
    }

    /// Tells the agent of a silent tap's grant. No reply is awaited, so it
    /// holds no slot of the bus's or the budgets' (the core sends one per app a minute at most).
    func notice(_ n: NoticeRequest) {
        // app-name is the client's own claim: escaped as Confirm's is.
        var n = n
        n.about.appName = DisplayText.escaped(n.about.appName)
        guard let m = try? Message.methodCall(destination: n.about.agentName, path: n.about.agentPath,
                                              interface: GeoConsentAPI.agentInterfaceName, member: NoticeCall.member),
              (try? m.append(NoticeCall.encode(n))) != nil else { return }
        m.noReplyExpected = true
        connection.send(m)
    }

    /// The core withdrew a prompt (its clients left, location was switched off).
    func cancel(_ agentName: String, _ agentPath: String, _ requestID: String) {
        // A Confirm never sent (refused by its budget) has nothing to withdraw.
        guard confirming.contains(requestID) else { return }
        withdrawn.insert(requestID)
        // Its answer matters no more: it stops counting against the prompts of all users.
        outgoing.giveUp(tag: requestID)
        sendCancel(agentName, agentPath, requestID)
    }

    private func sendCancel(_ agentName: String, _ agentPath: String, _ requestID: String) {
        guard let m = try? Message.methodCall(destination: agentName, path: agentPath,
                                              interface: GeoConsentAPI.agentInterfaceName, member: CancelCall.member),
              (try? m.append(CancelCall.encode(requestID: requestID))) != nil else { return }
        m.noReplyExpected = true
        connection.send(m)
    }
}
