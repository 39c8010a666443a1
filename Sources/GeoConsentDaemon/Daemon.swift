import Glibc
import CMalloc
import GeoCore
import GeoDBus
import GeoSystem
import GeoConsentAPI

/// geoconsentd: owns the bus name, feeds bus events to the consent core and
/// carries out the effects the core returns (replies, signals, agent calls,
/// state writes, fixes).
public final class Daemon {
    let loop = EventLoop()
    let options: DaemonOptions
    var config: Config
    let store: StateStore
    let connection: Connection
    let server: ObjectServer
    let core: ConsentCore
    let callers: CallerResolver
    let location: LocationService
    /// The protocols served besides our own (FrontEnd.swift): GeoClue's API,
    /// when served (`--geoclue`, `[geoclue] serve`).
    let frontEnds = FrontEnds()
    /// The process of each connection's first session call, watched for its exit.
    let processes: SessionProcessWatch
    /// The callers' login sessions, when logind is on the bus.
    let logind: LogindWatch
    /// Every call the daemon sends to a peer, within its budget by purpose and uid.
    let outgoing: OutgoingCalls
    /// Attacks seen, said once per connection.
    let attackLog = AttackLog()
    /// The desktop entries a prompt names apps by (`[daemon] desktop-entries`),
    /// scanned at the first prompt and again when a directory changed.
    private lazy var desktopIndex = DesktopEntryIndex(entries: DesktopEntries(directories: config.desktopEntries))
    private var signals: SignalPipe?

    /// The consent core's door for the parts made before the daemon itself
    /// (logind's word, a tapping process's exit): given to them at init.
    private let inbox = CoreInbox()
    /// What the front ends may use of the daemon (DaemonHost.swift).
    private lazy var host = DaemonHost(self)
    /// Calls the core has not answered yet, and requests with no call (HeldCalls.swift).
    let calls = HeldCalls()
    /// `Confirm` and `Cancel` to our agents (ConsentAgentCalls.swift).
    private lazy var agentCalls = ConsentAgentCalls(connection: connection, outgoing: outgoing, attackLog: attackLog,
                                                    loop: loop, feed: { [unowned self] in self.feed($0) })
    /// Decisions and `Enabled` written to the state directory (ConsentPersistence.swift).
    private(set) lazy var persistence = ConsentPersistence(store: store, loop: loop, records: { [unowned self] in self.core.records })
    /// The core's one wake-up (`CoreEffect.wakeUp`), while armed.
    private var wakeUpTimer: EventLoop.Token?
    private var exitStatus: Int32 = 0
    /// Idle exit (IdleExit.swift, the loop's `exitWhenIdle`): the name given up, and the drain after it.
    var releasedName = false
    /// Exit anyway should the bus never say `NameLost` after `ReleaseName`.
    var releaseDeadline: EventLoop.Token?
    /// The most sessions seen since the heap was last trimmed (see `sessionLeft`).
    private var sessionPeak = 0
    /// 256 or more sessions at some point since the session table was last empty.
    private var crowdSinceEmpty = false

    /// Sets everything up: config, state, bus connection, name. Callers are
    /// identified through `identity`: the identity helper's client when the
    /// daemon left CAP_SYS_PTRACE to one (GeoSystem's IdentitySeparation.swift),
    /// else `/proc` read in this process. Throws a one-line `StartupError` when
    /// the daemon cannot run.
    /// `frontEnds`: front ends of other programs to serve besides those the
    /// options and config name (each made with the daemon's host; the test lab's).
    public init(options: DaemonOptions, identity: IdentitySource = AppIdentityResolver(),
                frontEnds extra: [(FrontEndHost) -> FrontEnd] = []) throws {
        self.options = options
        // The front ends' sections are theirs to read (GeoClueSettings).
        let geoclue: GeoClueSettings
        do {
            config = try ConfigLoader.load(explicitFile: options.configFile, frontEndSections: [GeoClueSettings.section])
            geoclue = try GeoClueSettings(config.frontEndEntries[GeoClueSettings.section] ?? [])
        } catch {
            throw StartupError("\(error)")
        }
        if let dir = options.stateDir { config.stateDir = dir }
        store = StateStore(directory: config.stateDir)
        let consents = store.loadConsents()
        if let p = consents.problem { Log.error(p) }
        let enabled = store.loadEnabled()
        if let p = enabled.problem { Log.error(p) }
        let usersOff = store.loadUsersOff()
        if let p = usersOff.problem { Log.error(p) }
        core = ConsentCore(config: config, records: consents.records, enabled: enabled.enabled, usersOff: usersOff.users)

        let bus = BusAddress(argument: options.bus)
        do {
            connection = try Connection(bus: bus)
        } catch {
            throw StartupError("cannot connect to the \(bus): \(error)")
        }
        server = ObjectServer(connection: connection)
        outgoing = OutgoingCalls(connection: connection)
        do {
            logind = try LogindWatch(connection: connection, outgoing: outgoing, loop: loop, feed: { [inbox] in inbox.feed($0) })
        } catch {
            throw StartupError("cannot follow logind on the \(bus): \(error)")
        }
        callers = CallerResolver(connection: connection, identity: identity, placement: logind)
        let wifi = store.loadWiFiEnabled()
        if let p = wifi.problem { Log.error(p) }
        location = LocationService(loop: loop, consent: core, frontEnds: frontEnds, outgoing: outgoing,
                                   host: options.gpsdHost, port: options.gpsdPort,
                                   linger: config.gpsdLinger, gridSize: config.reducedGrid, wifiOn: wifi.enabled)
        processes = SessionProcessWatch(loop: loop, connection: connection,
                                        onProcessExited: { [inbox] in inbox.feed(.processExited($0)) })
        connection.attach(to: loop)
        server.onOtherMessage = { [weak self] m in self?.otherMessage(m) ?? false }
        // Our own API first: a front end like the others, whose sessions are connections' own.
        frontEnds.add(OwnAPI(host: host))
        if options.serveGeoClue || geoclue.serve { frontEnds.add(GeoClueFacade(host: host, settings: geoclue)) }
        for make in extra { frontEnds.add(make(host)) }
        for frontEnd in frontEnds.all { frontEnd.serve() }
        do {
            // Only departures (new owner empty) matter: that is when a session ends.
            try connection.addMatches([BusDriver.matchRule("NameOwnerChanged", "arg2=''")] +
                                      frontEnds.all.flatMap(\.matchRules))
            switch try connection.requestName(GeoConsentAPI.busName) {
            case .primaryOwner, .alreadyOwner: break
            case .taken: throw StartupError("the name \(GeoConsentAPI.busName) is already owned on the \(bus)")
            }
            for frontEnd in frontEnds.all {
                for name in frontEnd.busNames {
                    switch try connection.requestName(name) {
                    case .primaryOwner, .alreadyOwner: break
                    case .taken:
                        throw StartupError("the name \(name) is already owned on the \(bus) (\(frontEnd.nameTakenHint))")
                    }
                }
            }
        } catch let e as StartupError {
            throw e
        } catch {
            throw StartupError("cannot own \(GeoConsentAPI.busName) on the \(bus): \(error)")
        }
        inbox.daemon = self
        // Stored decisions that lapsed unused while the daemon was not running
        // lapse now, and the core's wake-up is armed for the next one. (With
        // nothing stored there is nothing to lapse: the first event looks.)
        if config.unusedLapseDays > 0 && !core.records.isEmpty { feed(.wokeUp) }
        if let helper = identity as? IdentityHelperClient { watch(helper) }
        connection.onDisconnect = { [weak self] in
            Log.error("lost the connection to the \(bus)")
            self?.exitStatus = 1
            self?.loop.stop()
        }
    }

    /// A lost identity helper leaves every caller unidentifiable (each is refused
    /// with the reason): the daemon exits with status 1, so that systemd starts
    /// it again with a new helper (`Restart=on-failure`). The helper answers
    /// only while a call waits for it, so its socket becoming readable in
    /// between means it has exited (or broke the protocol).
    private func watch(_ helper: IdentityHelperClient) {
        helper.onLost = { [weak self] why in
            Log.error("the identity helper is gone (\(why)): every caller is refused; exiting so that the service restarts")
            self?.exitStatus = 1
            self?.loop.stop()
        }
        _ = loop.watch(fd: helper.fd, events: .readable) { [weak helper] _ in
            helper?.lost("it has exited")
        }
    }

    /// Runs until SIGTERM/SIGINT (0) or the bus goes away or the identity helper is lost (1).
    public func run() -> Int32 {
        signals = SignalPipe(loop: loop) { [weak self] sig in
            guard let self else { return }
            if self.releasedName {
                // The name is gone already: what the bus routed to us before that is
                // still answered (drainThenStop), then the daemon exits as planned.
                Log.info("received signal \(sig) while giving up the name; exiting once drained")
                return
            }
            Log.info("received signal \(sig), exiting")
            self.loop.stop()
        }
        Log.info("geoconsentd \(geoconsentVersion) serving \(GeoConsentAPI.busName)" +
                 frontEnds.all.flatMap(\.busNames).map { " and " + $0 }.joined() + " as \(connection.uniqueName); " +
                 "gpsd \(options.gpsdHost):\(options.gpsdPort), state in \(config.stateDir)" +
                 (callers.usesHelper ? "; callers identified by the identity helper, which alone holds CAP_SYS_PTRACE" : "") +
                 (logind.isPresent ? "; grants pause while their user's login session is locked or in the background"
                                   : "; logind is not on the bus: grants do not pause with login sessions") +
                 (core.enabled ? "" : "; location is switched off"))
        if let lockout = Daemon.agentLockout(config) { Log.warning(lockout) }
        watchForIdle()
        loop.run()
        persistence.flush()
        location.shutdown()
        connection.flush()
        connection.close()
        return exitStatus
    }

    // MARK: Bus events

    private func otherMessage(_ m: Message) -> Bool {
        if outgoing.lateReply(m) { return true }
        if nameLost(m) { return true }
        if logind.handle(m) { return true }
        if frontEnds.all.contains(where: { $0.handle(m) }) { return true }
        guard BusDriver.isSignal(m, "NameOwnerChanged") else { return false }
        let args = m.arguments()
        guard args.count == 3, case .string(let name) = args[0], case .string(let newOwner) = args[2],
              newOwner.isEmpty, name.hasPrefix(":") else { return false }
        callers.forget(name)
        logind.forget(name)
        outgoing.calleeLeft(name)
        attackLog.forget(name)
        for frontEnd in frontEnds.all { frontEnd.connectionLeft(name) }
        processes.forget(name)
        feed(.nameLeft(name))
        location.drop(session: .connection(name))
        calls.forget(sender: name)
        sessionLeft()
        return false
    }

    /// Registers a call the core will answer and returns its id.
    func hold(_ call: MethodCall) -> CallID { calls.hold(call) }

    func holdWithoutCall() -> CallID { calls.holdWithoutCall() }

    /// Fails a call the core holds but will not answer any more (its session ended).
    func abandon(_ id: CallID, _ error: DBusError) {
        calls.take(id).call?.fail(error)
    }

    /// Resolves the caller and, at its connection's first call, its login
    /// session, then hands the event the closure builds to the core.
    func withCaller(_ call: MethodCall, _ body: @escaping (Caller) -> Void) {
        callers.resolve(call.sender) { [weak self] result in
            switch result {
            case .success(let c):
                guard let self else { return }
                self.logind.place(c) { [weak self] in
                    body(c)
                    // Handled: a descriptor the call's session did not take is closed.
                    self?.callers.dropExitDescriptor(call.sender)
                }
            case .failure(let e): call.fail(e)
            }
        }
    }

    /// After a client call: a connection whose first session has just started
    /// gets its process watched (the one its first call was resolved to): with
    /// the pidfd the resolver proved during this first call, else with one
    /// opened now and checked by start time. Client objects' sessions share their
    /// connection's.
    private func watchProcess(of caller: Caller) {
        guard core.hasSession(caller.session) else { return }
        processes.watch(connection: caller.connection, uid: caller.uid, pid: caller.pid,
                        provenDescriptor: { callers.takeExitDescriptor(caller.connection) },
                        isFirstProcess: { [callers] in callers.isFirstProcess(caller.connection) })
    }

    /// A front end's object that outlives the call that made it (a GeoClue
    /// client object, made by `GetClient` and started later): the caller's
    /// process is watched from now on, with the pidfd its first call proved,
    /// so that its first session has it at hand (no second check of the
    /// process through the identity helper at `Start`). Nothing when no such
    /// descriptor is held (not the connection's first call): the session's
    /// call checks as before.
    func watchProcessNow(of caller: Caller) {
        // Taken only if the watch takes it (not when the connection is watched
        // already): else the call's end closes it (`dropExitDescriptor`).
        guard callers.holdsExitDescriptor(caller.connection) else { return }
        processes.watch(connection: caller.connection, uid: caller.uid, pid: caller.pid,
                        provenDescriptor: { callers.takeExitDescriptor(caller.connection) },
                        isFirstProcess: { [callers] in callers.isFirstProcess(caller.connection) })
    }

    /// Sessions holding a grant, counted from the grant journal's notes: the
    /// location side readies its sources while one does.
    private var grantsHeld = 0

    private func countGrants(_ notes: [GrantNote]) {
        let before = grantsHeld
        for n in notes {
            switch n.change {
            case .began: grantsHeld += 1
            case .ended: grantsHeld -= 1
            case .served: break
            }
        }
        if (before > 0) != (grantsHeld > 0) { location.grantsHeld(grantsHeld > 0) }
    }

    func releaseProcessWatch(of connection: String) {
        if !core.hasSessions(connection: connection) { processes.forget(connection) }
    }

    func feed(_ event: CoreEvent) {
        // A client object's session ending may be its connection's last: its process is watched no longer.
        var ended: String?
        if case .sessionEnded(let name) = event { ended = core.connection(ofSession: name) }
        let effects = core.handle(event, now: GeoSystem.now())
        let notes = core.grantNotes
        let lapses = core.lapseNotes
        if let ended, !core.hasSessions(connection: ended) { processes.forget(ended) }
        let count = core.sessionCount
        sessionPeak = max(sessionPeak, count)
        if count >= 256 { crowdSinceEmpty = true }
        execute(effects)
        // The grant journal (GrantJournal.swift): after the effects, so a line
        // never tells of a grant the app has not been told of yet.
        for n in notes { Log.byCaller(uid: n.uid, .info, n.description) }
        for n in lapses { Log.byCaller(uid: n.app.uid, .info, n.description) }
        countGrants(notes)
        if case .request(_, let caller, _) = event { watchProcess(of: caller) }
    }

    /// After a crowd of sessions has gone, give the freed heap back to the system.
    /// glibc keeps freed memory in the middle of its arenas, so a daemon that once
    /// served thousands of sessions would otherwise idle at twice its fresh RSS.
    /// Done right here, on the departure that brings the count below a quarter of
    /// its peak (of 256 or more), and on the one that empties the table after such
    /// a crowd (the core then drops its tables' storage too): no timer, so an idle
    /// daemon still never wakes up; `malloc_trim` walks the heap once (~ms).
    private func sessionLeft() {
        let count = core.sessionCount
        guard (count == 0 && crowdSinceEmpty) || (sessionPeak >= 256 && count < sessionPeak / 4) else { return }
        if count == 0 { crowdSinceEmpty = false }
        sessionPeak = count
        _ = malloc_trim(0)
    }

    /// What a non-empty `[agents] allow` means for the desktop, said once at start:
    /// its entries admit only processes of system uids (a user's own agent runs
    /// under the user's uid, and sandboxed callers never register), so every
    /// user's desktop agent is locked out and their first requests fail with
    /// `NoAgent` (docs/dbus-api.md, "What each identity proves").
    static func agentLockout(_ config: Config) -> String? {
        guard !config.agentAllow.isEmpty else { return nil }
        return "[agents] allow names \(config.agentAllow.count) app-id(s): only such programs of system uids " +
            "(up to system-uid-max \(config.systemUIDMax)) may register consent agents, so no user's own agent " +
            "(geoconsent-agent, geoconsentctl agent, a desktop's GeoClue agent) can register, and a user's first " +
            "request fails with NoAgent; leave allow empty to let each user's agent answer for that user"
    }

    // MARK: Effects

    /// The administrator's desktop entry that names the app of a prompt or a notice; "" for none.
    private func desktopEntry(of r: ConfirmRequest) -> String {
        desktopIndex.entry(naming: r.appID, identity: r.identity, executable: r.executable,
                           script: r.script.isEmpty ? nil : r.script) ?? ""
    }

    private func execute(_ effects: [CoreEffect]) {
        var saveFailure: String?
        for effect in effects {
            switch effect {
            case .reply(let id, let reply):
                guard let call = calls.take(id).call else { continue }
                if let saveFailure {
                    // Never report a decision that is not on disk.
                    call.fail(.failed("Could not store the decision: \(saveFailure)"))
                    continue
                }
                // Replies with a body answer our own API's calls (its wire shapes); any other is empty.
                call.reply(frontEnds.connectionOwner?.replyArguments(reply) ?? [])
            case .fail(let id, let error):
                calls.take(id).call?.fail(error.dbusError)
                for frontEnd in frontEnds.all { frontEnd.callFailed(id, error.dbusError) }
            case .authorizationChanged(let session, let status):
                frontEnds.owner(of: session)?.authorizationChanged(session, status)
            case .confirm(var request):
                request.sources = location.sourcesOn.filter { $0 != .wifi || location.wifiEnabled }
                request.desktopEntry = desktopEntry(of: request)
                agentCalls.confirm(request)
            case .askExternalAgent(let request):
                if frontEnds.owner(of: request.session)?.authorize(request) != true {
                    loop.later { [weak self] in self?.feed(.agentAnswered(requestID: request.requestID, .noAnswer("no front end asks such agents"))) }
                }
            case .cancel(let agentName, let agentPath, let requestID):
                agentCalls.cancel(agentName, agentPath, requestID)
            case .checkFocus(let request):
                agentCalls.checkFocus(request)
            case .notice(var notice):
                notice.about.desktopEntry = desktopEntry(of: notice.about)
                agentCalls.notice(notice)
            case .saveConsents(let urgent):
                if urgent {
                    if let e = persistence.saveConsents() { saveFailure = e }
                } else {
                    persistence.saveConsentsSoon()
                }
            case .saveEnabled:
                if let e = persistence.saveEnabled(core.enabled) { saveFailure = e }
            case .saveUsersOff:
                if let e = persistence.saveUsersOff(core.usersOff) { saveFailure = e }
            case .wifiSwitched(let on):
                if let e = persistence.saveWiFiEnabled(on) { saveFailure = e }
                location.wifiSwitched(on)
            case .enabledChanged(let value):
                Log.notice("location switched \(value ? "on" : "off")")
                for frontEnd in frontEnds.all { frontEnd.enabledChanged() }
            case .startUpdates(let id, let session, let options):
                let (held, call) = calls.take(id)
                guard held else { continue }
                if let saveFailure {
                    // A client object's Start right after a decision that is not on disk.
                    let e = DBusError.failed("Could not store the decision: \(saveFailure)")
                    call?.fail(e)
                    for frontEnd in frontEnds.all { frontEnd.callFailed(id, e) }
                    continue
                }
                for frontEnd in frontEnds.all { frontEnd.updatesStarted(id) }
                location.startUpdates(call, id: id, session: session, options: options)
            case .stopUpdates(let id, let session):
                let held = id.flatMap { id in calls.take(id).call.map { (id: id, call: $0) } }
                location.stopUpdates(held, session: session)
            case .locate(let id, let session, let options):
                guard let call = calls.take(id).call else { continue }
                location.locate(call, id: id, session: session, options: options)
            case .grantEnded(let session, let byPause):
                location.drop(session: session)
                frontEnds.owner(of: session)?.grantEnded(session: session, byPause: byPause)
            case .pauseFixes(let session, let reason):
                location.pause(session: session, reason)
            case .resumeFixes(let session):
                location.resume(session: session)
                frontEnds.owner(of: session)?.sessionResumed(session)
            case .sessionsChanged(let watchers):
                frontEnds.connectionOwner?.sessionsChanged(watchers: watchers)
            case .wakeUp(let at):
                // The core has one wake-up at a time: this one replaces the last.
                if let t = wakeUpTimer { loop.cancelTimer(t); wakeUpTimer = nil }
                guard let at else { continue }
                let now = GeoSystem.now()
                wakeUpTimer = loop.schedule(after: at > now ? Double(at - now) / 1e6 : 0) { [weak self] in
                    self?.wakeUpTimer = nil
                    self?.feed(.wokeUp)
                }
            }
        }
    }

}

/// Why the daemon cannot start: printed as one line, exit status 1.
public struct StartupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

extension Daemon {
    /// Resolves `connection` for a read that starts nothing: no pidfd is kept for it.
    func resolveForRead(_ connection: String, _ done: @escaping (Caller?) -> Void) {
        callers.resolve(connection) { [weak self] result in
            self?.callers.dropExitDescriptor(connection)
            if case .success(let caller) = result { done(caller) } else { done(nil) }
        }
    }
}

/// Events for the consent core from the parts the daemon makes before it is
/// itself made (their wire is an init argument): handed on once it is.
final class CoreInbox {
    weak var daemon: Daemon?
    func feed(_ event: CoreEvent) { daemon?.feed(event) }
}
