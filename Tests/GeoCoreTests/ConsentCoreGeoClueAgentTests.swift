import XCTest
@testable import GeoCore

/// GeoClue agents (GNOME Shell, Phosh): who may register one, when one is asked
/// (`authorizeApp`) instead of our own agent, what its answers store, and how
/// its `MaxAccuracyLevel` caps its uid's client objects.
final class ConsentCoreGeoClueAgentTests: XCTestCase {
    typealias W = Who

    static let shell = Caller(session: ":1.7", uid: 1000, pid: 207, appID: "/usr/bin/gnome-shell",
                              executable: "/usr/bin/gnome-shell")
    static let client1 = W.maps1.clientSession(1)
    static let flatClient = W.flatpak.clientSession(4)
    static let filters = UpdateOptions(distanceFilter: 0, minInterval: 0)

    private func authorizes(_ effects: [CoreEffect]) -> [ExternalPromptRequest] {
        effects.compactMap { if case .askExternalAgent(let r) = $0 { return r } else { return nil } }
    }

    /// A client object's `Start` whose `DesktopId` is `desktopID`, with the name
    /// the facade proved for it: a sandbox's own id, or with `proven` (a system
    /// desktop entry of that id names the caller's executable) the `DesktopId`.
    @discardableResult
    private func start(_ rig: Rig, _ c: Caller, _ a: Accuracy = .full, desktopID: String = "maps",
                       proven: Bool = true) -> Step {
        let name: ExternalName = c.sandboxed ? .proven(c.appID) : proven ? .proven(desktopID) : .unproven(why: "no entry")
        return rig.call(c, .start(AuthOptions(accuracy: a, appName: desktopID, externalName: name,
                                              promptTimeout: Rig.clientPromptTimeout), Self.filters))
    }

    /// A rig with no agent of ours and GNOME Shell's agent at `cap`.
    private func shellRig(_ cap: Accuracy? = .full, config: Config = Config(),
                          records: [AppKey: ConsentRecord] = [:]) -> Rig {
        let rig = Rig(config: config, records: records, agents: [])
        let s = rig.manage(Self.shell, .addExternalAgent(maxAccuracy: cap, label: "GeoClue agent"))
        XCTAssertEqual(s.reply, .empty, "\(s.effects)")
        return rig
    }

    func testWhoMayRegister() {
        struct Case {
            var label: String
            var caller: Caller
            var config = Config()
            var before: [Caller] = []
            /// nil: registered.
            var refused: String?
        }
        let other = Caller(session: ":1.8", uid: 1000, pid: 208, appID: "/usr/bin/phosh")
        let cases: [Case] = [
            Case(label: "any unsandboxed program without an allow list", caller: Self.shell),
            Case(label: "never a sandbox", caller: W.flatpak, refused: "Sandboxed"),
            Case(label: "not in [agents] allow", caller: Self.shell, config: config(agentAllow: ["/usr/bin/phosh"]),
                 refused: "not allowed"),
            Case(label: "listed, but a user's executable path is the caller's word", caller: Self.shell,
                 config: config(agentAllow: ["/usr/bin/gnome-shell"]), refused: "system uids"),
            Case(label: "listed, in a system uid", caller: Self.shell,
                 config: config(agentAllow: ["/usr/bin/gnome-shell"], systemUIDMax: 1000)),
            Case(label: "the same connection again", caller: Self.shell, before: [Self.shell]),
            Case(label: "another connection of the uid", caller: other, before: [Self.shell], refused: "already registered"),
            Case(label: "our own agent of the uid does not stop it", caller: Self.shell, before: []),
        ]
        for c in cases {
            let rig = Rig(config: c.config, agents: c.label.hasPrefix("our own") ? [W.agent] : [])
            for b in c.before { rig.manage(b, .addExternalAgent(maxAccuracy: .full, label: "GeoClue agent")) }
            // Known before the daemon reads the agent's level: a refused caller makes it call no one.
            let early = rig.core.externalAgentRefusal(c.caller)
            let s = rig.manage(c.caller, .addExternalAgent(maxAccuracy: .reduced, label: "GeoClue agent"))
            XCTAssertEqual(early, s.error, "\(c.label): the early refusal is the registration's")
            XCTAssertEqual(rig.core.isExternalAgent(c.caller.connection, uid: c.caller.uid), c.refused == nil, c.label)
            if let why = c.refused {
                XCTAssertTrue(s.error.map { $0.message.contains(why) } ?? false, "\(c.label): \(s.effects)")
                XCTAssertNotEqual(rig.core.externalAgent(forUID: c.caller.uid)?.name == c.caller.connection
                                  && rig.core.externalAgent(forUID: c.caller.uid)?.maxAccuracy == .reduced, true, c.label)
            } else {
                XCTAssertEqual(s.effects, [.reply(s.call, .empty)], c.label)
                XCTAssertEqual(rig.core.externalAgent(forUID: c.caller.uid),
                               ExternalAgent(name: c.caller.connection, uid: c.caller.uid, maxAccuracy: .reduced, label: "GeoClue agent"), c.label)
            }
        }
    }

    /// Every way a client object's `Start` ends when its uid has GNOME Shell's agent.
    func testStartOutcomes() {
        enum Outcome: Equatable {
            case updates(Accuracy)
            case refused(String)
        }
        struct Case {
            var label: String
            var cap: Accuracy? = .full
            var client = ConsentCoreGeoClueAgentTests.client1
            var accuracy = Accuracy.full
            var records: [AppKey: ConsentRecord] = [:]
            var ownAgent = false
            /// The GeoClue agent's answer; nil: it is not asked.
            var answer: AgentAnswer?
            var desktopID = "maps"
            var outcome: Outcome
            var stored: StoredDecision?
            /// The accuracy of the stored decision, where it is `whenInUse` (nil: the one asked for).
            var storedAccuracy: Accuracy?
        }
        let cases: [Case] = [
            Case(label: "true: Allow While Using", answer: .decision(.allowWhileUsing), outcome: .updates(.full),
                 stored: .whenInUse),
            Case(label: "false: Don't Allow", answer: .decision(.deny), outcome: .refused("denied"), stored: .denied),
            Case(label: "no answer", answer: .noAnswer("timeout"), outcome: .refused("not answered")),
            Case(label: "reduced asked", accuracy: .reduced, answer: .decision(.allowWhileUsing),
                 outcome: .updates(.reduced), stored: .whenInUse),
            Case(label: "cap reduced: full asked, reduced fixes", cap: .reduced, answer: .decision(.allowWhileUsing),
                 outcome: .updates(.reduced), stored: .whenInUse),
            Case(label: "allowed level reduced: full asked, reduced grant stored", answer: .capped(.allowWhileUsing, .reduced),
                 outcome: .updates(.reduced), stored: .whenInUse, storedAccuracy: .reduced),
            Case(label: "allowed level reduced, reduced asked", accuracy: .reduced, answer: .capped(.allowWhileUsing, .reduced),
                 outcome: .updates(.reduced), stored: .whenInUse, storedAccuracy: .reduced),
            Case(label: "allowed level full never raises: reduced asked", accuracy: .reduced,
                 answer: .capped(.allowWhileUsing, .full), outcome: .updates(.reduced), stored: .whenInUse,
                 storedAccuracy: .reduced),
            Case(label: "cap reduced over a stored full grant", cap: .reduced, records: stored((W.maps1, .whenInUseFull)),
                 outcome: .updates(.reduced), stored: .whenInUse),
            Case(label: "cap 0: off, nobody asked", cap: nil, outcome: .refused("switched off for uid 1000")),
            Case(label: "cap 0 over a stored grant", cap: nil, records: stored((W.maps1, .whenInUseFull)),
                 outcome: .refused("switched off"), stored: .whenInUse),
            Case(label: "a stored decision answers silently", records: stored((W.maps1, .denied)),
                 outcome: .refused("denied"), stored: .denied),
            Case(label: "our own agent is asked first", ownAgent: true, outcome: .updates(.full), stored: .whenInUse),
            Case(label: "a verified Flatpak is asked under its id", client: Self.flatClient,
                 answer: .decision(.allowWhileUsing), desktopID: "org.example.Flat", outcome: .updates(.full), stored: .whenInUse),
        ]
        for c in cases {
            let rig = shellRig(c.cap, records: c.records)
            if c.ownAgent { rig.manage(W.agent, .registerAgent(path: W.agentPath)) }
            let s = start(rig, c.client, c.accuracy)
            var out = s.effects
            if c.ownAgent {
                XCTAssertEqual(authorizes(out), [], c.label)
                out = rig.answer(s.promptID, "allow-while-using")
            } else if let answer = c.answer {
                guard let r = authorizes(s.effects).first else { XCTFail("\(c.label): not asked: \(s.effects)"); continue }
                XCTAssertEqual(s.effects.confirms, [], c.label)
                XCTAssertEqual(r.agentName, Self.shell.connection, c.label)
                XCTAssertEqual(r.appName, c.desktopID, c.label)
                XCTAssertEqual(r.session, c.client.session, c.label)
                XCTAssertEqual(r.accuracy, c.accuracy, c.label)
                XCTAssertEqual(r.timeout, Rig.clientPromptTimeout, c.label)
                out = rig.send(.agentAnswered(requestID: r.requestID, answer))
            } else {
                XCTAssertEqual(authorizes(s.effects), [], "\(c.label): nobody asked")
                XCTAssertEqual(s.effects.confirms, [], c.label)
            }
            switch c.outcome {
            case .updates(let acc):
                XCTAssertTrue(out.contains(.startUpdates(s.call, session: c.client.session, Self.filters)), "\(c.label): \(out)")
                XCTAssertEqual(rig.core.grantedAccuracy(for: c.client.session), acc, c.label)
            case .refused(let why):
                guard case .accessDenied(let m)? = out.failure(of: s.call) else {
                    XCTFail("\(c.label): not refused: \(out)")
                    continue
                }
                XCTAssertTrue(m.contains(why), "\(c.label): \(m)")
            }
            XCTAssertEqual(rig.core.records[c.client.app]?.decision, c.stored, c.label)
            if c.stored == .whenInUse, c.records.isEmpty {
                XCTAssertEqual(rig.core.records[c.client.app]?.decisionAccuracy, c.storedAccuracy ?? c.accuracy, c.label)
            }
        }
    }

    /// A grant stored at the reduced level an agent allowed does not cover a
    /// later full request of the app: the agent is asked again.
    func testAReducedAllowedLevelIsAskedAgainForFull() {
        let rig = shellRig(.full)
        let first = start(rig, Self.client1)
        guard let r = authorizes(first.effects).first else { return XCTFail("not asked: \(first.effects)") }
        _ = rig.send(.agentAnswered(requestID: r.requestID, .capped(.allowWhileUsing, .reduced)))
        XCTAssertEqual(rig.core.grantedAccuracy(for: Self.client1.session), .reduced)
        let second = W.maps1.clientSession(2)
        let s = start(rig, second, .reduced)
        XCTAssertEqual(authorizes(s.effects), [], "reduced is covered: no prompt")
        XCTAssertEqual(rig.core.grantedAccuracy(for: second.session), .reduced)
        let third = W.maps1.clientSession(3)
        XCTAssertEqual(authorizes(start(rig, third).effects).map(\.session), [third.session], "full is not: asked again")
    }

    func testOurOwnAPIIsNotAskedThroughAGeoClueAgentNorCapped() {
        let rig = shellRig(.full)
        XCTAssertEqual(rig.ask(W.maps1).error, .noAgent, "a GeoClue agent answers GeoClue clients only")
        let records = stored((W.maps1, .whenInUseFull))
        let capped = shellRig(.reduced, records: records)
        XCTAssertEqual(capped.ask(W.maps2).status, .whenInUse)
        XCTAssertEqual(capped.core.grantedAccuracy(for: W.maps2.session), .full, "its reduced cap is for GeoClue clients")
    }

    /// The desktop's own switch (GNOME's location off: its agent's level 0)
    /// holds for every app of the uid, our own API's too; its grants end, and
    /// switched on again the app asks again (its stored decision applies again).
    func testTheDesktopsLocationSwitchHoldsForOurOwnAPITooAndOnlyForItsUid() {
        let rig = shellRig(.full, records: stored((W.weather, .whenInUseFull), (W.bobMaps, .whenInUseFull)))
        rig.manage(W.agent, .registerAgent(path: W.agentPath))
        rig.approveTap(W.maps1)
        XCTAssertEqual(rig.auth(W.weather)?.status, .whenInUse)
        let off = rig.send(.externalAgentLevel(name: Self.shell.connection, maxAccuracy: nil))
        XCTAssertEqual(off.signals[W.maps1.session], .restricted)
        XCTAssertEqual(off.signals[W.weather.session], .restricted)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        XCTAssertEqual(rig.tap(W.maps2).status, .restricted, "no prompt while the desktop says off")
        XCTAssertEqual(rig.auth(W.bobMaps)?.status, .whenInUse, "another user's desktop switch is their own")
        let on = rig.send(.externalAgentLevel(name: Self.shell.connection, maxAccuracy: .full))
        XCTAssertEqual(on.signals[W.weather.session], .whenInUse, "the stored decision applies again")
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session), "the one-time grant ended with the switch")
        XCTAssertEqual(rig.manage(W.aliceCtl, .setConsent(appID: W.weatherID, uid: nil, decision: nil, accuracy: .full)).status,
                       .whenInUse)
    }

    /// A desktop agent that registers with location already off ends the
    /// one-time grants as a switch turned off does; a settings window is told restricted.
    func testAnAgentRegisteringWithLocationOffEndsTheGrantsToo() {
        let rig = Rig(records: stored((W.weather, .approvedFull)))
        rig.approveTap(W.maps1)
        let s = rig.manage(Self.shell, .addExternalAgent(maxAccuracy: nil, label: "GeoClue agent"))
        XCTAssertEqual(s.effects.signals[W.maps1.session], .restricted)
        XCTAssertNil(rig.core.grantedAccuracy(for: W.maps1.session))
        let more = rig.manage(W.aliceCtl, .setConsent(appID: W.weatherID, uid: nil, decision: .whileUsing, accuracy: nil))
        XCTAssertEqual(more.status, .restricted, "no prompt while the desktop says off")
        XCTAssertNil(more.confirm)
    }

    /// `MaxAccuracyLevel` changes while a client object runs: full, reduced, off, back on.
    func testCapFollowsTheAgentsLevel() {
        let rig = shellRig(.full, records: stored((W.maps1, .whenInUseFull)))
        let s = start(rig, Self.client1)
        XCTAssertTrue(s.effects.contains(.startUpdates(s.call, session: Self.client1.session, Self.filters)))
        let name = Self.client1.session
        let steps: [(Accuracy?, granted: Accuracy?, ended: Bool)] = [
            (.reduced, .reduced, false),
            (.full, .full, false),
            (nil, nil, true),
            (.full, .full, false),
        ]
        for (cap, granted, ended) in steps {
            let out = rig.send(.externalAgentLevel(name: Self.shell.connection, maxAccuracy: cap))
            XCTAssertEqual(rig.core.grantedAccuracy(for: name), granted, "cap \(String(describing: cap))")
            XCTAssertEqual(out.grantsEnded.contains(name), ended, "cap \(String(describing: cap)): \(out)")
        }
        XCTAssertFalse(rig.core.updatesOn(name), "updates stay off after location was off: the client starts again")
        // Another connection's level means nothing.
        rig.send(.externalAgentLevel(name: ":1.99", maxAccuracy: nil))
        XCTAssertEqual(rig.core.grantedAccuracy(for: name), .full)
    }

    func testAgentLeavingCountsAsNoAnswerAndTakesItsCap() {
        let rig = shellRig(.reduced)
        let s = start(rig, Self.client1)
        XCTAssertEqual(authorizes(s.effects).count, 1)
        let out = rig.send(.nameLeft(Self.shell.connection))
        XCTAssertEqual(out.cancels, [], "GeoClue agents have no Cancel")
        guard case .accessDenied(let m)? = out.failure(of: s.call) else { return XCTFail("\(out)") }
        XCTAssertTrue(m.contains("not answered"), m)
        XCTAssertNil(rig.core.externalAgent(forUID: 1000))
        XCTAssertEqual(start(rig, Self.client1).error.map { $0.message.contains("No consent agent") }, true)
    }

    func testAClientEndingWhileTheGeoClueAgentIsAskedSendsNoCancel() {
        let rig = shellRig()
        let r = authorizes(start(rig, Self.client1).effects).first
        XCTAssertEqual(rig.send(.sessionEnded(Self.client1.session)).cancels, [])
        XCTAssertEqual(rig.core.openPromptCount, 0)
        XCTAssertEqual(rig.send(.agentAnswered(requestID: r?.requestID ?? "", .decision(.allowWhileUsing))), [],
                       "a late answer reaches nobody and stores nothing")
        XCTAssertNil(rig.core.records[W.maps1.app])
    }

    // MARK: Nothing the client chose names it to an agent

    /// An agent of another protocol answers from the permission it stored
    /// for the name it is told (GNOME Shell: no dialog for a known desktop
    /// id). It is told the name the front end proved for the app
    /// (`AuthOptions.externalName`: the GeoClue facade proves a sandbox's own
    /// id, or a system desktop entry naming a host app's executable), never
    /// the `DesktopId` the client set; with none proven, it is not asked at
    /// all, the refusal says why, and nothing is stored.
    func testTheAgentIsToldTheProvenNameOrNotAskedAtAll() {
        let borrowed = "org.gnome.Maps"
        let unverified = Caller(session: ":1.50", uid: 1000, pid: 450, appID: "com.evil.Sandbox",
                                identity: .unverifiedFlatpak, executable: "/app/bin/evil").clientSession(1)
        let cases: [(label: String, client: Caller, name: ExternalName, told: String?)] = [
            ("a sandbox: the name its front end proved, its own", unverified, .proven("com.evil.Sandbox"), "com.evil.Sandbox"),
            ("a host app an entry of the system names", Self.client1, .proven("org.example.Maps"), "org.example.Maps"),
            ("nothing proven: nobody is asked", Self.client1, .unproven(why: "no desktop entry names it"), nil),
        ]
        for c in cases {
            let rig = shellRig()
            let s = rig.call(c.client, .start(AuthOptions(appName: borrowed, externalName: c.name,
                                                          promptTimeout: Rig.clientPromptTimeout), Self.filters))
            guard let told = c.told else {
                XCTAssertEqual(authorizes(s.effects), [], c.label)
                guard case .accessDenied(let m)? = s.error else { XCTFail("\(c.label): \(s.effects)"); continue }
                XCTAssertTrue(m.contains("GeoClue agent is told only a name the app's identity proves") &&
                              m.hasSuffix(": no desktop entry names it; a geoconsent agent can ask about it"), "\(c.label): \(m)")
                XCTAssertEqual(rig.core.openPromptCount, 0, c.label)
                XCTAssertNil(rig.core.records[c.client.app], "\(c.label): nothing stored")
                continue
            }
            guard let r = authorizes(s.effects).first else { XCTFail("\(c.label): not asked: \(s.effects)"); continue }
            XCTAssertEqual(r.appName, told, c.label)
            XCTAssertNotEqual(r.appName, borrowed, c.label)
            rig.send(.agentAnswered(requestID: r.requestID, .decision(.allowWhileUsing)))
            XCTAssertEqual(rig.core.records[c.client.app]?.decision, .whenInUse, "\(c.label): stored for the caller's own app")
            XCTAssertEqual(rig.core.records.count, 1, c.label)
        }
    }

    /// With an agent of ours the client's words are shown, marked as its own,
    /// and no GeoClue agent is asked: a `DesktopId` that no entry proves is no
    /// reason to refuse then.
    func testOurOwnAgentStillAsksAboutAnUnprovenHostApp() {
        let rig = shellRig()
        rig.manage(W.agent, .registerAgent(path: W.agentPath))
        let s = start(rig, Self.client1, desktopID: "org.gnome.Maps", proven: false)
        XCTAssertEqual(authorizes(s.effects), [])
        XCTAssertEqual(s.effects.confirms.map(\.appName), ["org.gnome.Maps"], "the app's own word, for the prompt")
        XCTAssertEqual(s.effects.confirms.map(\.appID), [W.mapsID], "keyed by what the identity says")
    }
}
