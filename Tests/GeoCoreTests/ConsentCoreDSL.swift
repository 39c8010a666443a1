import XCTest
@testable import GeoCore

// A small DSL for ConsentCore tests: named callers, a rig that feeds events at
// an injected time and hands back the effects, and lookups over effect lists.

// MARK: - Callers

/// The people and programs of the tests. Unique names are fixed so that
/// effect lists can be written out literally.
enum Who {
    static let mapsID = "org.example.Maps"
    static let weatherID = "org.example.Weather"

    /// Two connections of the same app (uid 1000, Maps).
    static let maps1 = Caller(session: ":1.10", uid: 1000, pid: 410, appID: mapsID, executable: "/usr/bin/maps")
    static let maps2 = Caller(session: ":1.11", uid: 1000, pid: 411, appID: mapsID, executable: "/usr/bin/maps")
    static let maps3 = Caller(session: ":1.12", uid: 1000, pid: 412, appID: mapsID, executable: "/usr/bin/maps")
    /// Another app of the same user.
    static let weather = Caller(session: ":1.20", uid: 1000, pid: 420, appID: weatherID, executable: "/usr/bin/weather")
    /// The same app-id run by another user (uid 1001): a different app.
    static let bobMaps = Caller(session: ":1.30", uid: 1001, pid: 430, appID: mapsID, executable: "/usr/bin/maps")
    /// A Flatpak app of uid 1000 (a verified one).
    static let flatpak = Caller(session: ":1.40", uid: 1000, pid: 440, appID: "org.example.Flat", identity: .flatpak,
                                executable: "/app/bin/flat")
    /// Consent agents.
    static let agent = Caller(session: ":1.2", uid: 1000, pid: 200, appID: "/usr/bin/geoconsentctl",
                              executable: "/usr/bin/geoconsentctl")
    static let agent2 = Caller(session: ":1.3", uid: 1000, pid: 201, appID: "/usr/bin/other-agent")
    static let bobAgent = Caller(session: ":1.4", uid: 1001, pid: 202, appID: "/usr/bin/geoconsentctl")
    static let agentPath = "/org/example/Agent"
    /// Administrators and management tools.
    static let root = Caller(session: ":1.1", uid: 0, pid: 1, appID: "/usr/bin/busctl")
    static let aliceCtl = Caller(session: ":1.5", uid: 1000, pid: 205, appID: "/usr/bin/geoconsentctl")
    static let bobCtl = Caller(session: ":1.6", uid: 1001, pid: 206, appID: "/usr/bin/geoconsentctl")
}

extension Caller {
    /// A caller of another connection of the same app.
    func connection(_ name: String) -> Caller {
        var c = self
        c.session = .connection(name)
        return c
    }
}

// MARK: - Effect lookups

extension Array where Element == CoreEffect {
    /// Every `Agent.Confirm` asked for.
    var confirms: [ConfirmRequest] {
        compactMap { if case .confirm(let r) = $0 { return r } else { return nil } }
    }

    var cancels: [String] {
        compactMap { if case .cancel(_, _, let id) = $0 { return id } else { return nil } }
    }

    /// `AuthorizationChanged` signals as (session, status).
    var signals: [SessionID: AuthorizationStatus] {
        var out: [SessionID: AuthorizationStatus] = [:]
        for e in self { if case .authorizationChanged(let s, let st) = e { out[s] = st } }
        return out
    }

    var signalCount: Int {
        filter { if case .authorizationChanged = $0 { return true } else { return false } }.count
    }

    var grantsEnded: Set<SessionID> {
        Set(compactMap { if case .grantEnded(let s, _) = $0 { return s } else { return nil } })
    }

    /// The effects but the saves of `last-used` (a use noted by the way).
    var withoutLazySaves: [CoreEffect] {
        filter { $0 != .saveConsents(urgent: false) }
    }

    var saves: [Bool] {
        compactMap { if case .saveConsents(let u) = $0 { return u } else { return nil } }
    }

    /// The successful reply to `call`, if any.
    func reply(to call: CallID) -> CoreReply? {
        for e in self { if case .reply(call, let r) = e { return r } }
        return nil
    }

    func status(of call: CallID) -> AuthorizationStatus? {
        if case .status(let s)? = reply(to: call) { return s }
        return nil
    }

    func failure(of call: CallID) -> CoreError? {
        for e in self { if case .fail(call, let err) = e { return err } }
        return nil
    }

    /// True when `call` got any answer, success or error.
    func answers(_ call: CallID) -> Bool { reply(to: call) != nil || failure(of: call) != nil }

    func index(ofReplyTo call: CallID) -> Int? {
        firstIndex { if case .reply(call, _) = $0 { return true } else { return false } }
    }

    var indexOfUrgentSave: Int? { firstIndex(of: .saveConsents(urgent: true)) }
}

// MARK: - The rig

/// The outcome of one client or management call.
struct Step {
    let call: CallID
    let effects: [CoreEffect]

    var status: AuthorizationStatus? { effects.status(of: call) }
    var error: CoreError? { effects.failure(of: call) }
    var reply: CoreReply? { effects.reply(to: call) }
    var confirm: ConfirmRequest? { effects.confirms.first }
    /// The request id of the prompt this call opened.
    var promptID: String? { confirm?.requestID }
    /// No answer yet: the call waits on a prompt.
    var pending: Bool { !effects.answers(call) }
    /// The call failed with `AccessDenied`.
    var accessDenied: Bool {
        if case .accessDenied? = error { return true } else { return false }
    }
}

/// Feeds a `ConsentCore` one event at a time at `now` (microseconds).
final class Rig {
    let core: ConsentCore
    var now: UInt64 = 1_700_000_000_000_000
    private var nextCall: CallID = 100
    /// Sees every event and its effects (a `Ledger` checks them).
    var observer: ((CoreEvent, [CoreEffect]) -> Void)?

    /// A core with `agents` registered (by default uid 1000's agent). Stored
    /// decisions lapse only where a test asks (`lapse`): the fixtures' records
    /// carry times from any year.
    init(config: Config = Config(), records: [AppKey: ConsentRecord] = [:], enabled: Bool = true,
         agents: [Caller] = [Who.agent], lapse: Bool = false) {
        var config = config
        if !lapse { config.unusedLapseDays = 0 }
        core = ConsentCore(config: config, records: records, enabled: enabled)
        for a in agents {
            let s = manage(a, .registerAgent(path: Who.agentPath))
            precondition(s.effects == [.reply(s.call, .empty)], "agent \(a.session) did not register: \(s.effects)")
        }
    }

    @discardableResult
    func send(_ event: CoreEvent) -> [CoreEffect] {
        let effects = core.handle(event, now: now)
        observer?(event, effects)
        return effects
    }

    private func newCall() -> CallID {
        nextCall += 1
        return nextCall
    }

    @discardableResult
    func call(_ c: Caller, _ r: AppRequest) -> Step {
        let id = newCall()
        return Step(call: id, effects: send(.request(id, c, r)))
    }

    @discardableResult
    func manage(_ c: Caller, _ r: ManagementRequest) -> Step {
        let id = newCall()
        return Step(call: id, effects: send(.management(id, c, r)))
    }

    /// The button: `RequestOneTimeAuthorization`.
    @discardableResult
    func tap(_ c: Caller, _ a: Accuracy = .full, reason: String = "", appName: String = "", window: String = "") -> Step {
        call(c, .requestOneTime(AuthOptions(reason: reason, accuracy: a, appName: appName, parentWindow: window)))
    }

    /// The standard prompt: `RequestWhenInUseAuthorization`.
    @discardableResult
    func ask(_ c: Caller, _ a: Accuracy = .full, reason: String = "", appName: String = "", window: String = "") -> Step {
        call(c, .requestWhenInUse(AuthOptions(reason: reason, accuracy: a, appName: appName, parentWindow: window)))
    }

    /// The agent answers prompt `id` with the string `decision`, read as the daemon reads it.
    @discardableResult
    func answer(_ id: String?, _ decision: String) -> [CoreEffect] {
        send(.agentAnswered(requestID: id ?? "<no prompt>", AgentAnswer(reply: decision)))
    }

    /// The agent's `Confirm` timed out, failed, or the agent went away.
    @discardableResult
    func noAnswer(_ id: String?, _ why: String = "timeout") -> [CoreEffect] {
        send(.agentAnswered(requestID: id ?? "<no prompt>", .noAnswer(why)))
    }

    /// A unique name leaves the bus.
    @discardableResult
    func leave(_ c: Caller) -> [CoreEffect] { send(.nameLeft(c.connection)) }

    /// `GetAuthorization` (starts a session if there is none).
    func auth(_ c: Caller, file: StaticString = #filePath, line: UInt = #line) -> AuthorizationInfo? {
        let s = call(c, .getAuthorization)
        guard case .authorization(let info)? = s.reply else {
            XCTFail("GetAuthorization did not reply: \(s.effects)", file: file, line: line)
            return nil
        }
        return info
    }

    func record(_ c: Caller) -> ConsentRecord? { core.records[c.app] }

    /// Taps the button in `c` and lets the agent answer `allow-once`; asserts the grant.
    @discardableResult
    func approveTap(_ c: Caller, _ a: Accuracy = .full, file: StaticString = #filePath, line: UInt = #line) -> [CoreEffect] {
        let s = tap(c, a)
        XCTAssertEqual(s.confirm?.kind, .oneTime, "tap should prompt: \(s.effects)", file: file, line: line)
        let out = answer(s.promptID, "allow-once")
        XCTAssertEqual(out.status(of: s.call), .whenInUse, "allow-once should grant: \(out)", file: file, line: line)
        return out
    }

    /// Asks the standard prompt in `c` and lets the agent answer `decision`.
    @discardableResult
    func decide(_ c: Caller, _ decision: String, _ a: Accuracy = .full,
                file: StaticString = #filePath, line: UInt = #line) -> (Step, [CoreEffect]) {
        let s = ask(c, a)
        XCTAssertEqual(s.confirm?.kind, .whenInUse, "standard prompt expected: \(s.effects)", file: file, line: line)
        return (s, answer(s.promptID, decision))
    }
}

// MARK: - Fixtures

/// Records keyed by app.
func stored(_ pairs: (Caller, ConsentRecord)...) -> [AppKey: ConsentRecord] {
    Dictionary(uniqueKeysWithValues: pairs.map { ($0.0.app, $0.1) })
}

extension ConsentRecord {
    static let whenInUseFull = ConsentRecord(decision: .whenInUse, decisionAccuracy: .full, decidedAt: 5, lastUsed: 6)
    static let whenInUseReduced = ConsentRecord(decision: .whenInUse, decisionAccuracy: .reduced, decidedAt: 5, lastUsed: 6)
    static let denied = ConsentRecord(decision: .denied, decidedAt: 5)
    static let approvedFull = ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .full, decidedAt: 5, lastUsed: 6)
    static let approvedReduced = ConsentRecord(oneTimeApproved: true, oneTimeAccuracy: .reduced, decidedAt: 5, lastUsed: 6)
}

/// A config; `systemUIDMax` counts the uids up to it as system uids, whose
/// executables config may name (`Config.grantsByName`).
func config(apps: [String: AppPolicy] = [:], agentAllow: [String] = [], promptTimeout: Double = 60,
            systemUIDMax: UInt32 = 999) -> Config {
    var c = Config()
    c.apps = apps
    c.agentAllow = agentAllow
    c.promptTimeout = promptTimeout
    c.systemUIDMax = systemUIDMax
    return c
}

/// Every way a `Confirm` can end without a usable answer for `kind`.
func nonAnswers(for kind: PromptKind) -> [(String, AgentAnswer)] {
    var list: [(String, AgentAnswer)] = [
        ("timeout", .noAnswer("timeout")),
        ("agent error", .noAnswer("org.freedesktop.DBus.Error.Failed")),
        ("agent gone", .noAnswer("agent left")),
        ("unknown word", AgentAnswer(reply: "maybe")),
        ("empty word", AgentAnswer(reply: "")),
        ("wrong case", AgentAnswer(reply: "Allow-Once")),
    ]
    if kind == .oneTime { list.append(("allow-while-using for one-time", .decision(.allowWhileUsing))) }
    return list
}

// MARK: - The clients' view

/// Plays the watched clients: each starts with its `GetAuthorization` status and
/// then knows only what `AuthorizationChanged` tells it. After every event the
/// rig feeds, the core's status of each live watched session must be what that
/// session was last told (a change nobody announced is a problem), every signal
/// must tell something new, and a session that lost its grant must get `grantEnded`.
final class Ledger {
    private let rig: Rig
    /// What each watched session was last told.
    private var told: [SessionID: AuthorizationStatus] = [:]
    private var granted: [SessionID: Bool] = [:]
    /// `AuthorizationChanged` signals to watched sessions.
    private(set) var signals = 0
    private(set) var problems: [String] = []

    /// Watches `callers` through the rig's observer.
    init(_ rig: Rig, watching callers: [Caller]) {
        self.rig = rig
        for c in callers {
            told[c.session] = rig.auth(c)?.status
            granted[c.session] = rig.core.grantedAccuracy(for: c.session) != nil
        }
        rig.observer = { [unowned self] event, effects in self.check(event, effects) }
    }

    func status(_ c: Caller) -> AuthorizationStatus? { told[c.session] }

    func check(_ event: CoreEvent, _ effects: [CoreEffect]) {
        let context = "after \(event)"
        for case .authorizationChanged(let name, let st) in effects where told[name] != nil {
            if told[name] == st { problems.append("\(context): \(name) was told nothing new (\(st))") }
            told[name] = st
            signals += 1
        }
        for name in told.keys.sorted() {
            guard let now = rig.core.status(for: name) else {
                told[name] = nil   // the session left
                continue
            }
            if now != told[name] { problems.append("\(context): \(name) is \(now) but was told \(String(describing: told[name]))") }
            let grant = rig.core.grantedAccuracy(for: name) != nil
            if granted[name] == true && !grant && !effects.grantsEnded.contains(name) {
                problems.append("\(context): \(name) lost its grant without grantEnded")
            }
            granted[name] = grant
        }
    }
}

extension ObjectKind {
    /// The client objects of the tests' front end (as the GeoClue facade calls its own).
    static let testObjects = ObjectKind(word: "geoclue")
}

extension Caller {
    /// The session of this caller's client object `number`, of the tests' front end.
    func clientSession(_ number: UInt32) -> Caller { clientSession(number, kind: .testObjects) }
}

extension Rig {
    /// The longest a prompt for a client object's `Start` may stay open, as the
    /// GeoClue facade bounds it (`AuthOptions.promptTimeout`).
    static let clientPromptTimeout: Double = 20
}
