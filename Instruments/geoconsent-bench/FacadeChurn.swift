import CBenchFloor
import Foundation
import GeoConsentAPI
import GeoDBus
import GeoTestSupport

// The facade's churn: client after client connects, becomes a
// GeoClue client (GetClient, DesktopId, RequestedAccuracyLevel), starts, waits
// for its first LocationUpdated and leaves, against the daemon's GeoClue2
// facade and against GeoClue 2.6 itself, in the same C loop
// (Instruments/CBenchFloor/fix_churn.c), with our own API's cycle
// (RequestOneTimeAuthorization, StartUpdates, LocationUpdated) alongside.
// Each round is taken in slices of a tenth, the services in turns slice by
// slice, so the machine's load hits all alike.
// A fix is always flowing (a feeder thread sends an NMEA epoch every
// `feedInterval`) to one GeoClue client that each service has started for the
// whole run, as on a desktop where some app follows the location: so each
// first fix is the one the service holds. Without it GeoClue 2.6 stops its
// source when its last client leaves, and each of its clients waited for the
// next epoch (100 ms apart in a first version), which says nothing about its churn.

/// One round of churn (or a slice of one): its rate and each client's cycle.
struct ChurnRound {
    /// Clients, and the nanoseconds they took in all.
    var clients = 0, nanos: UInt64 = 0
    /// Each cycle, connect to closed, in µs.
    var cycles = Sample()
    /// The server's on-CPU nanoseconds over the round (nil when not measured).
    var cpuNanos: Double?

    var rate: Double { Double(clients) / (Double(nanos) / 1e9) }
    /// The server's on-CPU time per client over the round, in µs (nan when not measured).
    var cpuPerClient: Double { cpuNanos.map { $0 / Double(clients) / 1000 } ?? .nan }

    /// A round made of slices taken in turns with the other services'.
    mutating func add(_ slice: ChurnRound) {
        clients += slice.clients
        nanos += slice.nanos
        slice.cycles.values.forEach { cycles.add($0) }
        if let c = slice.cpuNanos { cpuNanos = (cpuNanos ?? 0) + c }
    }
}

/// Seconds between two NMEA epochs of the feeder: a receiver's usual 1 Hz,
/// well within the 5 s in which the daemon hands a new client the fix it holds.
private let feedInterval = 1.0

/// Sends an NMEA epoch every `interval` seconds from a thread of its own, each
/// dated a second after the last (services drop a fix with the time of the last).
final class NMEAFeeder {
    private let lock = NSLock()
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init(interval: Double, firstDate: Date, send: @escaping ([String]) -> Void) {
        let thread = Thread { [self] in
            var date = firstDate
            while !isStopped {
                send(NMEA.epoch(at: date, lat: 52.52, lon: 13.405, altitude: 40, speedKnots: 10, course: 90))
                date += 1
                Thread.sleep(forTimeInterval: interval)
            }
            done.signal()
        }
        thread.start()
    }

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    /// Stops the thread and waits for it: nothing is sent after this returns.
    func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        if first { done.wait() }
    }

    deinit { stop() }
}

/// A service the C churn loop runs against (bf_churn_service).
struct ChurnService {
    var name: String
    var service: Int32
    var dest: String
    var path = "", iface = ""
    var desktopID = "geoconsent-bench"
    var level = GeoClueAccuracyLevel.exact
    /// The process whose CPU time is counted (and its children), if any.
    var pid: pid_t?

    /// What a cycle does, for the rows.
    var cycle: String {
        service == Int32(BF_CHURN_OWN) ? "connect+tap+StartUpdates+first fix+leave"
                                       : "connect+GetClient+Start+first fix+leave"
    }

    static func geoClue(_ name: String, pid: pid_t?) -> ChurnService {
        ChurnService(name: name, service: Int32(BF_CHURN_GEOCLUE), dest: GeoClueAPI.busName, pid: pid)
    }

    static func own(pid: pid_t) -> ChurnService {
        ChurnService(name: "own API", service: Int32(BF_CHURN_OWN), dest: GeoConsentAPI.busName,
                     path: GeoConsentAPI.objectPath, iface: GeoConsentAPI.interfaceName, pid: pid)
    }

    /// `clients` C clients one after another on the bus at `address`, in a thread
    /// of their own while this one runs `peers` (an agent of this process may
    /// be asked: the daemon's consent agent).
    func churn(address: String, clients: Int, peers: PeerLoop) throws -> ChurnRound {
        let run = CChurnRun(address: address, self, clients: clients)
        let counted = pid.map { [$0] + childPIDs(of: $0) } ?? []
        func cpu() -> Double { counted.reduce(0) { $0 + onCPUNanos($1) } }
        let cpu0 = cpu()
        Thread { run.run() }.start()
        peers.pump(timeout: 3600) { run.finished }
        let cpuUsed = cpu() - cpu0
        if let failure = run.failure { throw BenchFloorError(description: "churn against \(name): \(failure)") }
        var round = ChurnRound(clients: clients, nanos: run.nanos)
        for c in run.cycles { round.cycles.add(micros(c)) }
        if pid != nil { round.cpuNanos = cpuUsed }
        return round
    }
}

/// One call of the C loop (bf_fix_churn) on another thread: its arguments,
/// kept alive until it is over, and what it gave, read once `finished`.
private final class CChurnRun: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private let strings: [UnsafeMutablePointer<CChar>]
    private var service: bf_churn_service
    private(set) var cycles: [UInt64]
    private(set) var nanos: UInt64 = 0
    private(set) var failure: String?

    init(address: String, _ s: ChurnService, clients: Int) {
        strings = [address, s.dest, s.path, s.iface, s.desktopID].map { (text: String) in strdup(text)! }
        service = bf_churn_service(protocol: s.service, dest: strings[1], path: strings[2], iface: strings[3],
                                   desktop_id: strings[4], level: s.level)
        cycles = [UInt64](repeating: 0, count: clients)
    }

    deinit { strings.forEach { free($0) } }

    var finished: Bool { lock.lock(); defer { lock.unlock() }; return done }

    func run() {
        var error = [CChar](repeating: 0, count: 256)
        let t0 = nowNanos()
        let r = bf_fix_churn(strings[0], &service, Int32(cycles.count), &cycles, 10_000, &error, Int32(error.count))
        nanos = nowNanos() - t0
        if r != 0 { failure = String(cString: error) }
        lock.lock()
        done = true
        lock.unlock()
    }
}

/// GeoClue 2.6 on a bus of its own, with the GNOME Shell stand-in as its agent;
/// nil (the reason printed) where it cannot run.
private final class RealGeoClue {
    let bus: TestBus, geoclue: GeoClueInstance, agent: ShellAgentStandIn

    static func start(peers: PeerLoop) throws -> RealGeoClue? {
        let bus = try TestBus()
        do {
            let geoclue = try GeoClueInstance(busAddress: bus.address, debug: false)
            let agent = try ShellAgentStandIn(busAddress: bus.address)
            let g = RealGeoClue(bus: bus, geoclue: geoclue, agent: agent)
            guard peers.pump(timeout: 10, until: { agent.output.contains("registered") }) else {
                g.stop()
                throw HarnessError("facade churn: GeoClue's agent did not register\n\(agent.output)")
            }
            return g
        } catch let e as GeoClueInstance.Unavailable {
            bus.stop()
            print("bench: facade churn: GeoClue 2.6 not measured: \(e.description)")
            return nil
        } catch {
            bus.stop()
            throw error
        }
    }

    private init(bus: TestBus, geoclue: GeoClueInstance, agent: ShellAgentStandIn) {
        (self.bus, self.geoclue, self.agent) = (bus, geoclue, agent)
    }

    func stop() {
        agent.stop()
        geoclue.stop()
        bus.stop()
    }
}

/// The facade's churn against GeoClue 2.6's (`withGeoClue`, where it can run)
/// and our own API's: `rounds` rounds of `clients` clients each, after a few
/// warm-up clients of each (the consent agent's first answer, the services'
/// first fix). The facade is measured twice: with the decision stored (Allow
/// While Using, once), as GeoClue asks nobody for a host app, and with a
/// prompt per client (a second daemon on a bus of its own, whose agent
/// answers Allow Once: each client's `Start` asks it). Targets per round:
/// each facade's rate at least twice GeoClue's median over the rounds, and
/// its p99 at most 3× its own p50.
func facadeChurnRows(clients: Int, rounds: Int, withGeoClue: Bool) throws -> [Row] {
    let peers = PeerLoop()
    let bus = try TestBus()
    defer { bus.stop() }
    let gpsd = try GpsdInstance()
    defer { gpsd.stop() }
    try gpsd.waitUntilListening(timeout: 5)
    /// A daemon serving the facade on `bus`, and its consent agent (this
    /// process's `agent`) registered.
    func facadeDaemon<Agent: AnyObject>(on bus: TestBus, agent: Agent, _ interface: Interface<Agent>) throws
        -> (daemon: DaemonInstance, agentPeer: BusPeer) {
        let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port,
                                        configText: "[daemon]\ngpsd-linger = 0.5\n[geoclue]\nserve = true\n",
                                        executable: ProcessInfo.processInfo.environment["BENCH_DAEMON"])
        let agentPeer = try peers.connect(bus.address)
        agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [interface])
        if case .failure(let e) = agentPeer.call(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                                 "RegisterAgent", [.objectPath("/bench/Agent")]) {
            throw HarnessError("facade churn: RegisterAgent: \(e)")   // the daemon stops with its instance
        }
        return (daemon, agentPeer)
    }
    // Allow While Using: the first Start asks it, every later client of the app is answered from the store.
    let agent = AllowWhileUsingAgent()
    let (daemon, agentPeer) = try facadeDaemon(on: bus, agent: agent, AllowWhileUsingAgent.interface)
    defer { daemon.stop(); withExtendedLifetime((agent, agentPeer)) {} }
    // The facade with a prompt per client: Allow Once stores nothing, so every Start asks the agent.
    let promptBus = try TestBus()
    defer { promptBus.stop() }
    let onceAgent = AllowAgent()
    let (promptDaemon, onceAgentPeer) = try facadeDaemon(on: promptBus, agent: onceAgent, AllowAgent.interface)
    defer { promptDaemon.stop(); withExtendedLifetime((onceAgent, onceAgentPeer)) {} }
    let geoclue = withGeoClue ? try RealGeoClue.start(peers: peers) : nil
    defer { geoclue?.stop() }
    let feeder = NMEAFeeder(interval: feedInterval, firstDate: Date(timeIntervalSince1970: 1_800_100_000)) { nmea in
        gpsd.send(nmea)
        geoclue?.geoclue.nmea.send(nmea)
    }
    defer { feeder.stop() }
    // The started client of each service, served every fix throughout.
    let anchors = try ([bus.address, promptBus.address] + (geoclue.map { [$0.bus.address] } ?? [])).map { address in
        let anchor = try CReceivers(address: address, count: 1)
        try anchor.becomeGeoClueClients(desktopID: "geoconsent-bench-anchor", level: GeoClueAccuracyLevel.exact,
                                        pump: { peers.settle(0.005) })
        return anchor
    }

    var servers: [(service: ChurnService, address: String)] = [
        (.geoClue("GeoClue2 facade", pid: daemon.pid), bus.address),
        (.own(pid: daemon.pid), bus.address),
        (.geoClue(promptPerClient, pid: promptDaemon.pid), promptBus.address),
    ]
    if let geoclue { servers.insert((.geoClue("GeoClue 2.6", pid: geoclue.geoclue.process.pid), geoclue.bus.address), at: 1) }
    do {
        for (s, address) in servers { _ = try s.churn(address: address, clients: 5, peers: peers) }
        var results = servers.map { _ in [ChurnRound]() }
        // Each round in slices taken in turns: the machine's slow spells (seconds
        // long here: one service's identical clients cost half as much processor
        // again in one round as in the next) then fall on every service alike
        // instead of on whichever ran whole rounds through them.
        let slices = clients >= 100 ? 10 : 1
        for round in 1...rounds {
            let began = Date()
            var rounds = servers.map { _ in ChurnRound() }
            for slice in 0..<slices {
                let size = clients / slices + (slice < clients % slices ? 1 : 0)
                for (i, (s, address)) in servers.enumerated() {
                    rounds[i].add(try s.churn(address: address, clients: size, peers: peers))
                    anchors.forEach { $0.drain() }
                }
            }
            for (i, (s, _)) in servers.enumerated() {
                let r = rounds[i]
                print("bench: facade churn, round \(round), \(s.name): \(fmt(r.rate)) clients/s, "
                      + "p50 \(fmt(r.cycles.p50)) µs, p99 \(fmt(r.cycles.p99)) µs, CPU \(fmt(r.cpuPerClient)) µs a client")
                try trace(r, of: s.name, round: round, began: began)
                results[i].append(r)
            }
        }
        // What each daemon found worth more than an info line during the rounds (a collapse's first witness).
        for (d, name) in [(daemon, "GeoClue2 facade"), (promptDaemon, promptPerClient)] {
            let notable = d.log().split(separator: "\n").filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") || $0.hasPrefix("<5>") }
            if !notable.isEmpty { print("bench: facade churn, \(name): the daemon's notices and warnings:\n" + notable.suffix(20).joined(separator: "\n")) }
        }
        return churnRows(servers.map(\.service), results, clients: clients)
    } catch {
        throw HarnessError("\(error)\n---- daemon log ----\n\(daemon.log().suffix(3000))"
                           + "\n---- the daemon with a prompt per client ----\n\(promptDaemon.log().suffix(3000))")
    }
}

/// With BENCH_CHURN_TRACE=DIR, each cycle's time in order, a file a round and
/// server, headed by when the round began (wall clock, to match with a
/// daemon's strace or log): to see when the slow ones came.
private func trace(_ r: ChurnRound, of name: String, round: Int, began: Date) throws {
    guard let dir = ProcessInfo.processInfo.environment["BENCH_CHURN_TRACE"] else { return }
    let text = "# began \(began.timeIntervalSince1970)\n" + r.cycles.values.map { fmt($0) }.joined(separator: "\n") + "\n"
    try text.write(toFile: "\(dir)/\(name.replacingOccurrences(of: " ", with: "-"))-\(round).txt", atomically: true, encoding: .utf8)
}

/// The name of the facade's rows with a prompt per client.
private let promptPerClient = "GeoClue2 facade, a prompt per client"

/// The rows of each round: every server's rate and p99 (against its p50), and
/// each facade's daemon CPU per client. The facades' rates have GeoClue 2.6's
/// median over the rounds as their floor, when it was measured.
private func churnRows(_ servers: [ChurnService], _ results: [[ChurnRound]], clients: Int) -> [Row] {
    let section = "facade churn (\(clients) clients a round)"
    // The median proper: of an even count, the mean of the middle two.
    let geoClueMedian = servers.firstIndex { $0.name == "GeoClue 2.6" }.map { i -> Double in
        let rates = results[i].map(\.rate).sorted()
        let mid = rates.count / 2
        return rates.count % 2 == 1 ? rates[mid] : (rates[mid - 1] + rates[mid]) / 2
    }
    var rows: [Row] = []
    for round in results[0].indices {
        let tag = "round \(round + 1)"
        for (i, s) in servers.enumerated() {
            let r = results[i][round]
            let isFacade = s.name.hasPrefix("GeoClue2 facade")
            let floor = isFacade ? geoClueMedian : nil
            rows.append(Row(section: section, name: "\(s.name), \(tag): \(s.cycle)",
                            value: r.rate, unit: "clients/s",
                            floorName: floor == nil ? nil : "GeoClue 2.6, median of \(results[0].count) rounds",
                            floor: floor, target: floor == nil ? nil : .ratioAtLeast(2)))
            rows.append(Row(section: section, name: "\(s.name), \(tag): cycle p99", value: r.cycles.p99, unit: "µs",
                            floorName: "its p50", floor: r.cycles.p50, target: isFacade ? .ratioAtMost(3) : nil))
            if isFacade {
                rows.append(Row(section: section, name: "\(s.name), \(tag): daemon CPU per client",
                                value: r.cpuPerClient, unit: "µs"))
            }
        }
    }
    return rows
}
