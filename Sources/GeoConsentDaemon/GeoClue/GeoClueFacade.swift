import GeoCore
import GeoDBus
import GeoSystem
import GeoConsentAPI
import Glibc

/// GeoClue2's API (`org.freedesktop.GeoClue2`, docs/geoclue.md) on top of the
/// same consent and location cores as our own: the Manager, its client objects
/// and their location objects.
///
/// Each client object is a session of its own in the consent core
/// (`Caller.clientSession`), so each is its own grant, and its `Start` is the
/// standard prompt (`AppRequest.start`); its fixes come from the location
/// core like any session's, and arrive here (`deliver`) instead of as our
/// `LocationUpdated`. Client and location objects serve their owner alone, and
/// every signal about them is unicast to it: no coordinate is ever broadcast.
final class GeoClueFacade: FrontEnd {
    /// Seconds an earlier location object stays after the next one arrived
    /// (clients read the `old` path of `LocationUpdated`).
    static let retiredLifetime: Double = 5
    /// Earlier location objects kept per client at most, however fast fixes come.
    static let retiredPerClient = 16
    /// Seconds a prompt opened for a client object's `Start` may stay open:
    /// GeoClue clients call `Start` with GDBus's default timeout of 25 s, and an
    /// answer after that reaches nobody (`AuthOptions.promptTimeout`).
    static let promptTimeout: Double = 20
    /// Seconds after which a `Start` the core has not answered is given up: just
    /// after the longest prompt it opens, for one that joined a longer prompt of
    /// the same app.
    static let startDeadline = promptTimeout + 1
    /// What its client objects' sessions are called (`:1.42/geoclue/7`).
    static let objectKind = ObjectKind(word: "geoclue")
    /// What the consent core calls a GeoClue agent in messages.
    static let agentLabel = "GeoClue agent"
    /// Its calls out, each within a budget of its own (docs/dbus-api.md, "Limits"):
    /// the `MaxAccuracyLevel` read of `AddAgent` (the caller's uid) and
    /// `AuthorizeApp` (the agent's uid).
    static let agentRead = CallBudgets.Purpose("GeoClue agent read", .init(perUID: 2, total: 16, guaranteed: 1))
    static let agentPrompt = CallBudgets.Purpose("GeoClue agent", .init(perUID: 8, total: 16, guaranteed: 4))

    unowned let host: FrontEndHost
    private var loop: EventLoop { host.loop }
    var server: ObjectServer { host.server }
    private lazy var clientInterface = GeoClueClientObject.interface(self)

    private var clients: [UInt32: GeoClueClientObject] = [:]
    private var bySession: [SessionID: GeoClueClientObject] = [:]
    /// Each connection's clients, and the one `GetClient` returns.
    private var clientsOf: [String: Set<UInt32>] = [:]
    private var defaultClient: [String: UInt32] = [:]
    /// Client objects per uid (the per-user limit), and each client's uid.
    private var countOf: [UInt32: Int] = [:]
    private var uidOf: [UInt32: UInt32] = [:]
    /// Replaced location objects, removed `retiredLifetime` later.
    private lazy var retiredLocations = RetiredLocations(loop: loop, lifetime: GeoClueFacade.retiredLifetime) {
        [unowned self] number, path in
        // A client's objects retire in order, so one still served is its oldest.
        guard let c = self.clients[number], c.retired.first == path else { return }
        c.retired.removeFirst()
        self.server.unexport(path)
    }
    /// Clients whose `Location` changed and whose `PropertiesChanged` for it
    /// is still to go (`sendNotices`), in the order of their fixes.
    private var locationNotices: [GeoClueClientObject] = []
    /// A batch of `locationNotices` is on its way (`scheduleNotices`).
    private var noticesScheduled = false
    /// `PropertiesChanged` sent per turn of the event loop, between `GetAll` replies.
    static let noticeBatch = 16
    /// `Start` calls the consent core is deciding on, by its call id.
    private var starting: [CallID: GeoClueClientObject] = [:]
    /// Connections that read `AvailableAccuracyLevel`: their uid and the value
    /// they were last given (GeoClueAvailableLevel.swift).
    var levelReaders: [String: (uid: UInt32, sent: UInt32)] = [:]
    /// The `MaxAccuracyLevel` of each connection that called `AddAgent`, as it gave it.
    var agentLevels: [String: UInt32] = [:]
    /// Connections whose `AddAgent` read of the level is under way (one each).
    var agentReads: Set<String> = []
    /// Which desktop entries name which programs: a host app's `DesktopId` reaches a GeoClue agent only through them.
    private let desktopEntries: DesktopEntries

    init(host: FrontEndHost, settings: GeoClueSettings) {
        self.host = host
        desktopEntries = DesktopEntries(directories: settings.desktopEntries)
        for purpose in [Self.agentRead, Self.agentPrompt] {
            precondition(host.register(purpose), "the budgets of all purposes would pass the bus's share")
        }
    }

    var busNames: [String] { [GeoClueAPI.busName] }
    var nameTakenHint: String { "GeoClue runs: only one of them can serve it" }
    var objectKind: ObjectKind? { Self.objectKind }

    /// GeoClue agents' `MaxAccuracyLevel` changes, from any connection's agent
    /// object (the core heeds only registered agents').
    var matchRules: [String] {
        ["type='signal',path='\(GeoClueAPI.agentPath)',interface='\(ObjectServer.properties)'," +
         "member='PropertiesChanged',arg0='\(GeoClueAPI.agentInterfaceName)'"]
    }

    func handle(_ m: Message) -> Bool { agentSignal(m) }

    /// Exports the Manager. The daemon owns the name.
    func serve() {
        server.export(self, at: GeoClueAPI.managerPath, interfaces: [GeoClueFacade.managerInterface])
    }

    /// No client object is left.
    var isIdle: Bool { clients.isEmpty }

    // MARK: Manager

    static let managerInterface = Interface<GeoClueFacade>(
        GeoClueAPI.manager,
        methods: [
            "GetClient": { f, call in f.makeClient(call, reuse: true) },
            "CreateClient": { f, call in f.makeClient(call, reuse: false) },
            "DeleteClient": { f, call in f.deleteClient(call) },
            "AddAgent": { f, call in f.addAgent(call) },
        ],
        getters: [
            ManagerProperty.inUse: { .bool($0.host.locationInUse) },
            ManagerProperty.availableAccuracyLevel: { .uint32($0.availableLevel(uid: nil)) },
        ],
        callerGetters: [
            ManagerProperty.availableAccuracyLevel: { f, sender, done in f.availableLevel(for: sender, done) },
        ])

    /// `GetClient` (`reuse`: the connection's client, made at its first call) and
    /// `CreateClient` (always a new one). Answered at once: no prompt is involved.
    private func makeClient(_ call: MethodCall, reuse: Bool) {
        host.resolveCaller(call) { [weak self] caller in
            guard let self else { return }
            let owner = call.sender
            if reuse, let n = self.defaultClient[owner], let c = self.clients[n] {
                return call.reply([.objectPath(c.path)])
            }
            let limit = self.host.limits.sessionsPerUser
            if !caller.isRoot && self.countOf[caller.uid, default: 0] >= limit {
                return call.fail(DBusError(DBusError.limitsExceededName,
                    "uid \(caller.uid) has \(limit) GeoClue client objects, its limit (sessions-per-user)"))
            }
            let c = GeoClueClientObject(number: self.newClientNumber(), owner: owner)
            self.clients[c.number] = c
            self.bySession[c.session] = c
            self.clientsOf[owner, default: []].insert(c.number)
            if reuse { self.defaultClient[owner] = c.number }
            self.countOf[caller.uid, default: 0] += 1
            self.uidOf[c.number] = caller.uid
            self.server.export(c, at: c.path, interfaces: [self.clientInterface], owner: owner)
            // Its Start comes next: what its grant rests on is kept now, with what
            // this call proved of its process, rather than checked again then.
            self.host.retain(caller)
            Log.debug("GeoClue client \(c.path) for \(owner): app \(Log.field(caller.appID))")
            call.reply([.objectPath(c.path)])
        }
    }

    /// A client number nobody can guess: random, never 0, not in use. Paths
    /// that counted up told every caller when another made a client (and its
    /// location objects, when it got fixes), whatever the objects answer.
    private func newClientNumber() -> UInt32 {
        var g = SystemRandomNumberGenerator()
        while true {
            let n = UInt32.random(in: 1...UInt32.max, using: &g)
            if clients[n] == nil { return n }
        }
    }

    private func deleteClient(_ call: MethodCall) {
        let path = call.arguments.first?.stringValue ?? ""
        // Another's client is answered as a missing one: no caller learns that it exists.
        guard let n = GeoClueAPI.clientNumber(of: path), let c = clients[n], c.owner == call.sender else {
            return call.fail(.invalidArgs("No client object at \(path)"))
        }
        end(c, why: "the client object was deleted")
        remove(c)
        call.reply()
    }

    // MARK: Client

    /// `Start`: the consent core decides (stored decision, or the standard
    /// prompt); granted, the location core starts the updates and answers.
    func start(_ c: GeoClueClientObject, _ call: MethodCall) {
        switch c.start.startCalled(call) {
        case .reply: return call.reply()
        case .joined: return
        case .ask: break
        }
        guard let accuracy = GeoClueAccuracyLevel.accuracy(forLevel: c.requestedLevel) else {
            return call.fail(.accessDenied("RequestedAccuracyLevel is 0 (none): no location was asked for"))
        }
        host.resolveCaller(call) { [weak self, weak c] caller in
            guard let self, let c, self.clients[c.number] === c else {
                return call.fail(.accessDenied("The client object was deleted"))
            }
            // Another Start may have begun while this caller was resolved.
            switch c.start.startCalled(call) {
            case .reply: return call.reply()
            case .joined: return
            case .ask: break
            }
            c.startedBy = caller.clientSession(c.number, kind: Self.objectKind)
            self.ask(c, self.host.hold(call), accuracy)
        }
    }

    /// Hands the consent core the client's `Start` under id `id`.
    private func ask(_ c: GeoClueClientObject, _ id: CallID, _ accuracy: Accuracy) {
        guard let caller = c.startedBy else { return }
        starting[id] = c
        let deadline = loop.schedule(after: GeoClueFacade.startDeadline) { [weak self, weak c] in
            guard let self, let c else { return }
            self.giveUp(c, .accessDenied("The location prompt was not answered in time"))
        }
        c.start.asked(id: id, deadline: deadline)
        let options = AuthOptions(accuracy: accuracy, appName: c.desktopID,
                                  externalName: agentName(c.desktopID, of: caller), promptTimeout: Self.promptTimeout)
        host.feed(.request(id, caller, .start(options, c.updateOptions)))
    }

    /// The name a GeoClue agent may be told for the app, never one it chose
    /// alone (a GeoClue agent such as GNOME Shell's answers from the permission
    /// it stored for the name): a sandbox (verified or not) by what its sandbox
    /// says (the `.flatpak-info` name, the snap name); a host program (an
    /// executable, or a systemd app unit, whose name any program of the uid can
    /// give its scope) by a desktop entry of the system that names its
    /// executable as its program: its unit's id if that entry does, else its
    /// `DesktopId` if that one does (DesktopEntries.swift). The entries are
    /// read only when the uid's GeoClue agent would be asked (no agent of
    /// ours), so that other `Start`s read no file.
    private func agentName(_ desktopID: String, of caller: Caller) -> ExternalName {
        if caller.identity.isSandboxed { return .proven(caller.appID) }
        guard host.consent.agentName(forUID: caller.uid) == nil, host.consent.externalAgent(forUID: caller.uid) != nil else {
            return .unproven(why: "")
        }
        let candidates = (caller.identity == .systemdUnit ? [caller.appID] : []) + [desktopID]
        if let id = candidates.first(where: { !$0.isEmpty && desktopEntries.entry($0, names: caller.executable) }) {
            return .proven(id)
        }
        return .unproven(why: "no desktop entry installed for the system names it as its program " +
                         "(a DesktopId an app sets is its own word)")
    }

    /// `Stop`: the updates and the grant end (an Allow Once with them).
    func stop(_ c: GeoClueClientObject, _ call: MethodCall) {
        end(c, why: "the client was stopped")
        call.reply()
    }

    func setThresholds(_ c: GeoClueClientObject, _ call: MethodCall, distance: UInt32, time: UInt32) {
        var changed: [String: DBusValue] = [:]
        if distance != c.distanceThreshold { changed[ClientProperty.distanceThreshold] = .uint32(distance) }
        if time != c.timeThreshold { changed[ClientProperty.timeThreshold] = .uint32(time) }
        c.distanceThreshold = distance
        c.timeThreshold = time
        call.reply()
        if c.active && !changed.isEmpty { host.setUpdateOptions(session: c.session, c.updateOptions) }
        clientChanged(c, changed)
    }

    func setDesktopID(_ c: GeoClueClientObject, _ call: MethodCall, _ id: String) {
        // The app's own name for itself, shown in prompts (escaped there): bounded like `app-name`.
        guard id.utf8.count <= OptionDictionary.MaxBytes.appName else {
            return call.fail(.invalidArgs("DesktopId is longer than \(OptionDictionary.MaxBytes.appName) bytes"))
        }
        let changed = id != c.desktopID
        c.desktopID = id
        call.reply()
        if changed { clientChanged(c, [ClientProperty.desktopID: .string(id)]) }
    }

    /// Applies at the next `Start` (as `Stop`, set, `Start` does in Firefox).
    func setRequestedLevel(_ c: GeoClueClientObject, _ call: MethodCall, _ level: UInt32) {
        let changed = level != c.requestedLevel
        c.requestedLevel = level
        call.reply()
        if changed { clientChanged(c, [ClientProperty.requestedAccuracyLevel: .uint32(level)]) }
    }

    /// `PropertiesChanged` of a client object, to its owner only.
    private func clientChanged(_ c: GeoClueClientObject, _ changed: [String: DBusValue]) {
        server.propertiesChanged(path: c.path, interface: GeoClueAPI.clientInterfaceName, changed: changed,
                                 destination: c.owner)
    }

    /// Ends the client's session (if any), the updates and a pending `Start`.
    private func end(_ c: GeoClueClientObject, why: String) {
        if c.start.isStarting { return giveUp(c, .accessDenied("Start did not complete: \(why)")) }
        let wasActive = c.start.stop()
        host.feed(.sessionEnded(c.session))
        if wasActive { clientChanged(c, [ClientProperty.active: .bool(false)]) }
    }

    /// The pending `Start` fails with `error`; its session ends.
    private func giveUp(_ c: GeoClueClientObject, _ error: DBusError) {
        guard let ended = c.start.ended() else { return }
        forget(ended.id, timer: ended.deadline)
        host.abandon(ended.id, error)
        for call in ended.joined { call.fail(error) }
        host.feed(.sessionEnded(c.session))
    }

    /// A pending `Start` is over: no longer looked up by its id, and its timer is off.
    private func forget(_ id: CallID, timer: EventLoop.Token) {
        starting[id] = nil
        loop.cancelTimer(timer)
    }

    // MARK: From the cores (through the daemon)

    /// The consent core granted a `Start` (`startUpdates`): the location core answers it next.
    func updatesStarted(_ id: CallID) {
        guard let c = starting[id], let granted = c.start.granted(id) else { return }
        forget(id, timer: granted.deadline)
        for call in granted.joined { call.reply() }
        clientChanged(c, [ClientProperty.active: .bool(true)])
    }

    /// The consent core refused a `Start` (its call fails with `error`).
    func callFailed(_ id: CallID, _ error: DBusError) {
        guard let c = starting[id], let ended = c.start.ended(id) else { return }
        forget(id, timer: ended.deadline)
        for call in ended.joined { call.fail(error) }
    }

    /// A session lost its grant (location switched off, its consent reset): a
    /// client object's updates have stopped, and its owner is told.
    ///
    /// A grant that ended because the user locked the screen or switched away
    /// (a one-time grant, as on iOS when the app leaves the foreground) leaves
    /// a client that its app still holds started: GeoClue clients such as
    /// Firefox never call `Start` again by themselves, so the user is asked
    /// again when back (`sessionResumed`; docs/geoclue.md, "A grant that ends").
    /// Only a grant the pause itself ended: one that a consent reset, location
    /// switched off or a GeoClue agent ended while the user was away stays
    /// ended at the return, as it would have had the user been there.
    func grantEnded(session: SessionID, byPause: Bool) {
        guard let c = bySession[session], c.start.grantEnded(byPause: byPause) else { return }
        clientChanged(c, [ClientProperty.active: .bool(false)])
    }

    /// GeoClue has no status signal: a lost grant ends the updates (`grantEnded`),
    /// and `Active` says so.
    func authorizationChanged(_ session: SessionID, _ status: AuthorizationStatus) {}

    /// The user is back: a client whose one-time grant ended at the pause is
    /// started again, through the consent core as its `Start` was (a fresh
    /// prompt: the grant was for that time only). Its owner sees `Active`
    /// true and fixes again once the user allows.
    func sessionResumed(_ session: SessionID) {
        guard let c = bySession[session], c.start.waitsForTheUser else { return }
        // After the daemon has carried out the effects that said so: not inside them.
        loop.later { [weak self, weak c] in
            guard let self, let c, self.clients[c.number] === c, c.start.waitsForTheUser,
                  let accuracy = GeoClueAccuracyLevel.accuracy(forLevel: c.requestedLevel) else { return }
            self.ask(c, self.host.holdWithoutCall(), accuracy)
        }
    }

    /// A fix for client sessions, as their grant shows it: a new location object
    /// for each, and `LocationUpdated(old, new)` to its owner.
    ///
    /// What the clients wait for goes first: every client's `LocationUpdated`
    /// (the first `signalsBeforeYield` one by one, then the processor is given
    /// up once, as for our own API's fan-out, LocationService), then the new
    /// objects are exported, before any `GetAll` naming them can be read. The
    /// `PropertiesChanged` of each client's `Location` property goes later, in
    /// batches between the `GetAll` calls the signals bring (`sendNotices`):
    /// clients read the new object when `LocationUpdated` comes, and with many
    /// clients 100 of those signals ahead of every reply doubled the wait for
    /// the properties (docs/performance.md). GeoClue (GDBus) sends them from
    /// an idle callback, later too. `sessions` come in the location core's
    /// order, which starts at another session each fix, so that no client is
    /// always served last.
    func deliver(_ sessions: [SessionID], _ fix: Fix) {
        var delivered: [(client: GeoClueClientObject, old: String)] = []
        delivered.reserveCapacity(sessions.count)
        // In the core's order, which starts one session further along at every
        // fix (LocationCore.fanOutOrder): rotating here again would undo it.
        for session in sessions {
            guard let c = bySession[session], c.active else { continue }
            let old = c.location
            c.location = GeoClueAPI.locationPath(client: c.number, c.nextLocation)
            c.nextLocation &+= 1
            server.emit(path: c.path, interface: GeoClueAPI.clientInterfaceName, member: GeoClueLocationUpdated.member,
                        GeoClueLocationUpdated.encode(old: old, new: c.location), destination: c.owner)
            delivered.append((c, old))
            if delivered.count == LocationService.signalsBeforeYield { sched_yield() }
        }
        guard !delivered.isEmpty else { return }
        // One set of values (and `GetAll` reply) for every client of this fix.
        let values = ConstantValues(LocationProperties.encode(fix, receivedAt: GeoSystem.now()))
        let now = loop.now
        for (c, old) in delivered {
            server.export(constant: values, of: GeoClueLocationObject.interface, at: c.location, owner: c.owner)
            if old != GeoClueAPI.noLocation { retire(c, old, now: now) }
            if !c.locationNoticeDue {
                c.locationNoticeDue = true
                locationNotices.append(c)
            }
        }
        scheduleNotices()
    }

    /// After the next `poll`: the calls read by then are answered first (their
    /// dispatch is deferred work queued before this), then one batch of notices.
    /// The timer is armed from deferred work: a fix is handled in a ready
    /// handler, and a timer armed there would already be due in this same turn,
    /// before any `GetAll` its signals bring could be read.
    private func scheduleNotices() {
        guard !noticesScheduled, !locationNotices.isEmpty else { return }
        noticesScheduled = true
        loop.later { [weak self] in
            guard let self else { return }
            _ = self.loop.schedule(after: 0) { [weak self] in
                self?.loop.later { [weak self] in
                    self?.noticesScheduled = false
                    self?.sendNotices()
                }
            }
        }
    }

    /// `PropertiesChanged` of `Location`, for up to `noticeBatch` clients, with
    /// the path they hold now (a later fix's, if one came meanwhile).
    private func sendNotices() {
        let n = min(GeoClueFacade.noticeBatch, locationNotices.count)
        for c in locationNotices[..<n] {
            c.locationNoticeDue = false
            guard clients[c.number] === c else { continue }   // deleted meanwhile
            clientChanged(c, [ClientProperty.location: .objectPath(c.location)])
        }
        locationNotices.removeFirst(n)
        if locationNotices.isEmpty { locationNotices = [] }   // give back a crowd's storage
        scheduleNotices()
    }

    /// The previous location object stays a while for a client that reads it late.
    private func retire(_ c: GeoClueClientObject, _ path: String, now: UInt64) {
        c.retired.append(path)
        if c.retired.count > GeoClueFacade.retiredPerClient { server.unexport(c.retired.removeFirst()) }
        retiredLocations.add(client: c.number, path: path, now: now)
    }

    /// `InUse` changed: broadcast, it holds no location (panels show an icon).
    func inUseChanged(_ value: Bool) {
        server.propertiesChanged(path: GeoClueAPI.managerPath, interface: GeoClueAPI.managerInterfaceName,
                                 changed: [ManagerProperty.inUse: .bool(value)])
    }

    /// The `RequestedAccuracyLevel` of the client object whose session is `session`.
    func requestedLevel(session: SessionID) -> UInt32? { bySession[session]?.requestedLevel }

    /// Location was switched on or off.
    func enabledChanged() {
        availableLevelsChanged()
    }

    /// A connection left the bus: its client objects go (the consent core ends
    /// their sessions with the connection's, and the daemon drops its calls).
    /// If it had called `AddAgent`, the readers of `AvailableAccuracyLevel` are
    /// told once the core has dropped the agent (after this dispatch).
    func connectionLeft(_ name: String) {
        for n in (clientsOf[name] ?? []).sorted() {
            guard let c = clients[n] else { continue }
            if let ended = c.start.ended() {
                forget(ended.id, timer: ended.deadline)
                // A start of its own (after a pause) holds an id the daemon keeps until abandoned.
                host.abandon(ended.id, .failed("The client's connection left"))
            }
            remove(c)
        }
        levelReaders[name] = nil
        agentReads.remove(name)
        if agentLevels.removeValue(forKey: name) != nil {
            loop.later { [weak self] in self?.availableLevelsChanged() }
        }
    }

    /// Unexports the client and its location objects and forgets it.
    private func remove(_ c: GeoClueClientObject) {
        for path in c.retired { server.unexport(path) }
        c.retired = []
        if c.location != GeoClueAPI.noLocation { server.unexport(c.location) }
        server.unexport(c.path)
        clients[c.number] = nil
        bySession[c.session] = nil
        clientsOf[c.owner]?.remove(c.number)
        if clientsOf[c.owner]?.isEmpty == true {
            clientsOf[c.owner] = nil
            // What GetClient retained goes with its last client object: a
            // deleted client that never started holds no descriptor.
            host.release(connection: c.owner)
        }
        if defaultClient[c.owner] == c.number { defaultClient[c.owner] = nil }
        if let uid = uidOf.removeValue(forKey: c.number) {
            let n = (countOf[uid] ?? 1) - 1
            countOf[uid] = n > 0 ? n : nil
        }
        if clients.isEmpty { retiredLocations.clear() }
    }
}
