import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

// make bench: the real stack (private bus, gpsd fed over UDP, the release
// daemon) measured against floors taken in the same run. See docs/performance.md.

setvbuf(stdout, nil, _IOLBF, 0)
if let i = CommandLine.arguments.firstIndex(of: "--relay") {
    runRelay(CommandLine.arguments[(i + 1)...])
}
if let i = CommandLine.arguments.firstIndex(of: "--relay-c") {
    runCRelay(CommandLine.arguments[(i + 1)...])
}
if let i = CommandLine.arguments.firstIndex(of: "--logind") {
    runLogindStandIn(CommandLine.arguments[(i + 1)...])
}
if let i = CommandLine.arguments.firstIndex(of: "--sessions-child") {
    runSessionsChild(CommandLine.arguments[(i + 1)...])
}
let quick = CommandLine.arguments.contains("--quick")
let jsonPath: String = {
    if let i = CommandLine.arguments.firstIndex(of: "--json"), i + 1 < CommandLine.arguments.count {
        return CommandLine.arguments[i + 1]
    }
    return "bench.json"
}()
// The scaling plot: --plot FILE, else beside the JSON (bench-scaling.png for bench.json).
let plotPath: String = {
    if let i = CommandLine.arguments.firstIndex(of: "--plot"), i + 1 < CommandLine.arguments.count {
        return CommandLine.arguments[i + 1]
    }
    return (jsonPath.hasSuffix(".json") ? String(jsonPath.dropLast(5)) : jsonPath) + "-scaling.png"
}()
if CommandLine.arguments.contains("--help") {
    print("""
        usage: geoconsent-bench [--quick] [--json FILE] [--plot FILE]
          --quick  tiny counts (make test runs this so the benchmark cannot rot)
          --plot   where the scaling rows' PNG goes (default: beside the JSON, NAME-scaling.png)
        """)
    exit(0)
}

/// Writes the run's rows to `jsonPath` (every run, a `BENCH_ONLY` one too, so
/// that alternating runs can be compared from their files).
func save(_ rows: [Row]) {
    let data = json(rows, extra: ["date": ISO8601DateFormatter().string(from: Date()), "quick": quick,
                                  "only": ProcessInfo.processInfo.environment["BENCH_ONLY"] ?? "",
                                  "counts": ["fixes": counts.fixes, "fanout": counts.fanout, "calls": counts.calls,
                                             "pipelined": counts.pipelined, "churn": counts.churn, "sessions": counts.sessions,
                                             "facade_churn": counts.facadeChurn, "facade_churn_rounds": counts.facadeChurnRounds]])
    if !FileManager.default.createFile(atPath: jsonPath, contents: data) { print("bench: cannot write \(jsonPath)") }
    print("\nbench: wrote \(jsonPath)")
}

/// A `BENCH_ONLY` section is done: the stack stopped, its rows printed and saved.
func finishSection(_ rows: [Row]) -> Never {
    daemon.stop(); gpsd.stop(); bus.stop()
    printTable(rows)
    save(rows)
    exit(0)
}

struct Counts {
    var fixes = 200, fanout = [1, 100, 1000], fanoutRounds = 20, calls = 2000, pipelined = 5000
    var churn = 10_000, sessions = 10_000, idleSeconds = 10.0, activations = 20
    /// GeoClue2 facade clients, compared with the fan-out row of the same size.
    var geoclue = [1, 100]
    /// First calls and churn cycles per way of running the logind rows (LogindRows.swift), over `logindRounds` turns.
    var logindFirstCalls = 900, logindChurn = 1500, logindRounds = 3
    /// The scaling rows (Scaling.swift): subscribers, fixes sent at each rate, and
    /// sessions held over many uids (SessionsOverUids.swift).
    var scaling = [1, 10, 100, 1000], scalingRates: [(hertz: Double, fixes: Int)] = [(1, 20), (10, 100)]
    var scalingSessions = [1000, 10_000]
    /// The facade's churn (FacadeChurn.swift): clients a round, rounds.
    var facadeChurn = 1000, facadeChurnRounds = 4
    static let quick = Counts(fixes: 10, fanout: [1, 10], fanoutRounds: 3, calls: 50, pipelined: 100,
                              churn: 50, sessions: 100, idleSeconds: 1, activations: 3, geoclue: [1, 10],
                              logindFirstCalls: 10, logindChurn: 10, logindRounds: 1,
                              scaling: [1, 10], scalingRates: [(1, 2), (10, 5)], scalingSessions: [100],
                              facadeChurn: 20, facadeChurnRounds: 2)
}
var counts = quick ? Counts.quick : Counts()
// BENCH_FANOUT=1,100 picks the fan-out sizes, BENCH_FANOUT_ROUNDS their rounds (profiling one phase).
if let f = ProcessInfo.processInfo.environment["BENCH_FANOUT"] {
    counts.fanout = f.split(separator: ",").compactMap { Int($0) }
}
// BENCH_GEOCLUE=1 picks the facade's client counts (profiling one of them).
if let g = ProcessInfo.processInfo.environment["BENCH_GEOCLUE"] {
    counts.geoclue = g.split(separator: ",").compactMap { Int($0) }
}
if let r = ProcessInfo.processInfo.environment["BENCH_FANOUT_ROUNDS"].flatMap({ Int($0) }) {
    counts.fanoutRounds = r
}
// BENCH_CALLS=N,M sets the calls rows' round trips and pipelined calls (profiling the pipelined taps).
if let f = ProcessInfo.processInfo.environment["BENCH_CALLS"]?.split(separator: ",").compactMap({ Int($0) }), f.count == 2 {
    (counts.calls, counts.pipelined) = (f[0], f[1])
}
// BENCH_SCALING=1,10 picks the scaling rows' subscriber counts, BENCH_SCALING_SESSIONS their session counts
// (BENCH_SESSIONS_PER_UID and BENCH_HOLD_SECONDS: SessionsOverUids.swift).
if let f = ProcessInfo.processInfo.environment["BENCH_SCALING"] {
    counts.scaling = f.split(separator: ",").compactMap { Int($0) }
}
if let f = ProcessInfo.processInfo.environment["BENCH_SCALING_SESSIONS"] {
    counts.scalingSessions = f.split(separator: ",").compactMap { Int($0) }
}

// BENCH_ONLY=latency stops after the fix-latency phase, BENCH_ONLY=fanout after the
// fan-out phases, BENCH_ONLY=fixes after the
// fan-out and GeoClue2 facade phases that follow it, BENCH_ONLY=calls runs only
// the calls phase, BENCH_ONLY=churn only the churn phase (after a token calls
// phase), BENCH_ONLY=startup only starts and stops the daemon (profiling one
// path, e.g. with BENCH_DAEMON running callgrind), BENCH_ONLY=marshal only the
// marshallers' rows, BENCH_ONLY=logind only the logind rows (LogindRows.swift),
// BENCH_ONLY=scaling only the scaling rows and their plot, BENCH_ONLY=wifi only the
// Wi-Fi rows (WiFiRows.swift), BENCH_ONLY=facadechurn
// only the facade's churn against GeoClue 2.6's and our own API's (BENCH_CHURN=N
// clients a round, BENCH_CHURN_TRACE=DIR writes each cycle's time there).
let only = ProcessInfo.processInfo.environment["BENCH_ONLY"]
if only == "churn" { (counts.calls, counts.pipelined) = (1, 10) }

// Many connections: raise the descriptor limit to the hard maximum.
var limit = rlimit()
getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)

let bus = try TestBus()
let gpsd = try GpsdInstance()
try gpsd.waitUntilListening(timeout: 5)
// BENCH_DAEMON=PATH runs another daemon binary or a wrapper script (e.g. one
// that execs valgrind --tool=callgrind on the release daemon, for profiling).
// The per-session bound of waiting RequestLocation calls is lifted, so that
// one session can arm the timers row's timers (ArmedTimers.swift).
let daemonConfig = "[daemon]\ngpsd-linger = 0.5\n[limits]\nlocation-requests-per-session = 20000\n"
let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: gpsd.port, configText: daemonConfig,
                                executable: ProcessInfo.processInfo.environment["BENCH_DAEMON"])
let peers = PeerLoop()
var rows: [Row] = []
// Idle RSS of a fresh daemon, before any client has used it.
Thread.sleep(forTimeInterval: 1)
let rssFresh = rssKiB(daemon.pid), anonFresh = anonKiB(daemon.pid), pssFresh = pssKiB(daemon.pid)
if only == "startup" {
    // Start-up and shutdown alone (scripts/gen-link-order.sh profiles this run).
    print("bench: daemon RSS idle (fresh) \(fmt(rssFresh / 1024)) MiB")
    daemon.stop(); gpsd.stop(); bus.stop()
    exit(0)
}
if let n = ProcessInfo.processInfo.environment["BENCH_CHURN"].flatMap({ Int($0) }) { counts.facadeChurn = n }
/// The facade's churn (FacadeChurn.swift); GeoClue 2.6 is left out of --quick:
/// starting it and its agent costs seconds.
func facadeChurn() throws -> [Row] {
    print("bench: facade churn (\(counts.facadeChurnRounds) rounds of \(counts.facadeChurn) clients)")
    return try facadeChurnRows(clients: counts.facadeChurn, rounds: counts.facadeChurnRounds, withGeoClue: !quick)
}
if only == "facadechurn" {
    daemon.stop(); gpsd.stop(); bus.stop()
    let churn = try facadeChurn()
    printTable(churn)
    save(churn)
    exit(0)
}
if only == "wifi" {
    // Wi-Fi positioning alone, on a bus of its own (WiFiRows.swift).
    daemon.stop(); gpsd.stop(); bus.stop()
    let wifi = try wifiRows(samples: quick ? 2 : 15, idleSeconds: counts.idleSeconds)
    printTable(wifi)
    save(wifi)
    exit(0)
}
if only == "activation" {
    // Cold starts alone: ours and GeoClue 2.6's (Activation.swift).
    daemon.stop(); gpsd.stop(); bus.stop()
    printTable(try activationRows(rounds: counts.activations, quick: quick))
    exit(0)
}
let dest = GeoConsentAPI.busName, path = GeoConsentAPI.objectPath, iface = GeoConsentAPI.interfaceName

// The two marshallers of GeoDBus against each other (Marshal.swift): no process involved.
if only == nil || only == "marshal" {
    print("bench: marshallers")
    rows += marshalRows(builds: quick ? 200 : 20_000)
    if only == "marshal" {
        finishSection(rows)
    }
}

func fail(_ why: String) -> Never {
    print("bench: \(why)")
    print("---- daemon log ----\n\(daemon.log())")
    daemon.stop(); gpsd.stop(); bus.stop()
    exit(1)
}

@discardableResult
func must(_ r: Result<[DBusValue], DBusError>, _ what: String) -> [DBusValue] {
    switch r {
    case .success(let v): return v
    case .failure(let e): fail("\(what): \(e)")
    }
}

// An agent that allows once, so the first tap is approved and later taps are silent.
final class AllowAgent {
    static let interface = Interface<AllowAgent>(GeoConsentAPI.agent, methods: [
        ConfirmCall.member: { _, call in call.reply(ConfirmReply.encode(.allowOnce)) },
        CancelCall.member: { _, call in call.reply() },
        // Registered with RegisterAgent (no features): never sent these.
        NoticeCall.member: { _, call in call.reply() },
        CheckFocusCall.member: { _, call in call.reply(CheckFocusReply.encode(focused: .unknown, press: .unknown, via: "none")) },
    ])
}
let agentPeer = try peers.connect(bus.address)
let agent = AllowAgent()
agentPeer.server.export(agent, at: "/bench/Agent", interfaces: [AllowAgent.interface])
must(agentPeer.call(dest, path, iface, "RegisterAgent", [.objectPath("/bench/Agent")]), "RegisterAgent")

func tap(_ p: BusPeer) {
    let r = must(p.call(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]), "tap")
    guard StatusReply.decode(r) == .whenInUse else { fail("tap returned \(r)") }
}

/// The logind rows (LogindRows.swift): with the app approved already, as in the churn rows.
func measureLogind() -> [Row] {
    // The app of the fresh app scopes (FreshCgroups.swift) approved once, from one of them.
    if let fresh = FreshCgroups() {
        do { try fresh.enterNew() } catch { fail("\(error)") }
        let approving = try! peers.connect(bus.address)
        tap(approving)
        approving.connection.close()
        fresh.leave()
    }
    print("bench: first calls and churn with a logind on the bus (placed, unplaced) and without")
    do {
        return try logindRows(bus: bus, firstCalls: counts.logindFirstCalls, churnCycles: counts.logindChurn,
                              rounds: counts.logindRounds, executable: ownExecutable())
    } catch {
        fail("\(error)")
    }
}
// ---- timers: a call with many timers armed, against none (ArmedTimers.swift) ----
func measureArmedTimers() -> [Row] {
    let c = quick ? ArmedTimerCounts.quick : ArmedTimerCounts()
    print("bench: taps with \(c.timers) timers armed and without")
    do {
        return try armedTimerRows(peers: peers, busAddress: bus.address, daemonPID: daemon.pid, counts: c,
                                  approve: { tap($0) })
    } catch {
        fail("\(error)")
    }
}
if only == "timers" {
    rows += measureArmedTimers()
    finishSection(rows)
}
if only == "logind" {
    let approving = try peers.connect(bus.address)
    tap(approving)
    approving.connection.close()
    rows += measureLogind()
    finishSection(rows)
}

// NMEA epochs with unique receiver times, one second apart.
var epochIndex = 0
let baseDate = Date(timeIntervalSince1970: 1_800_000_000)
func nextEpoch() -> (sentences: [String], micros: UInt64, iso: String) {
    epochIndex += 1
    let date = baseDate.addingTimeInterval(Double(epochIndex))
    let lat = 52.52 + Double(epochIndex % 500) * 1e-4
    let s = NMEA.epoch(at: date, lat: lat, lon: 13.405, altitude: 40, speedKnots: 10, course: 90)
    let iso = ISO8601DateFormatter().string(from: date).replacingOccurrences(of: "Z", with: "")
    return (s, UInt64(date.timeIntervalSince1970) * 1_000_000, iso)
}

func timestamp(of m: Message) -> UInt64? {
    m.member == LocationUpdatedSignal.member ? LocationBody.decode(m.arguments())?.timestamp : nil
}

/// This benchmark's own executable, for the relays it starts as child processes.
func ownExecutable() -> String {
    var exe = [CChar](repeating: 0, count: Int(PATH_MAX))
    let len = readlink("/proc/self/exe", &exe, exe.count - 1)
    guard len > 0 else { fail("cannot find my own executable for the relay") }
    return String(cString: exe)
}

/// The scaling rows and their plot (Scaling.swift, SessionsOverUids.swift, Plot.swift):
/// run last in a full run, as they leave 10,000 sessions' worth of work behind.
func scalingPhase() -> [Row] {
    // The bench's app approved (the C receivers' taps must be silent: nothing
    // pumps this process's agent while C waits for their replies).
    let approver = try! peers.connect(bus.address)
    tap(approver)
    approver.connection.close()
    var rows: [Row] = []
    let result: ScalingResult
    var rss: [RSSPoint] = []
    do {
        result = try measureScaling(busAddress: bus.address, daemonPID: daemon.pid, gpsd: gpsd, subscribers: counts.scaling,
                                    rates: counts.scalingRates, gpsdFixes: counts.fixes, epoch: nextEpoch)
        rows += scalingRows(result)
        // Each count on a fresh daemon of the same build and config, on a bus of its own.
        for sessions in counts.scalingSessions {
            print("bench: RSS per session, \(sessions) sessions over uids of \(sessionsPerUid) sessions each")
            guard let r = try rssPerSessionOverUids(sessions: sessions, executable: ownExecutable(), daemon: {
                try DaemonInstance(busAddress: $0, gpsdPort: gpsd.port, configText: daemonConfig,
                                   executable: ProcessInfo.processInfo.environment["BENCH_DAEMON"])
            }) else { break }
            rss.append(RSSPoint(sessions: sessions, uids: r.uids, bytes: r.bytes))
            rows.append(Row(section: "scaling, memory", name: "RSS per session (\(sessions) sessions, \(r.uids) uids of \(sessionsPerUid))",
                            value: r.bytes, unit: "B", target: .atMost(1024)))
            rows.append(Row(section: "scaling, memory", name: "  of it anonymous (heap; not the binary's pages)",
                            value: r.anonBytes, unit: "B"))
        }
    } catch {
        fail("\(error)")
    }
    print(plotScaling(result, rss: rss, to: plotPath))
    return rows
}
if only == "scaling" {
    rows += scalingPhase()
    finishSection(rows)
}

// The direct gpsd client's latency: the floor of the fix latency and fan-out rows.
var gpsdLatency = Sample()
if only != "calls" && only != "churn" {

    // MARK: 1. Fix latency

    print("bench: fix latency (\(counts.fixes) fixes)")
    let client = try peers.connect(bus.address)
    tap(client)
    must(client.call(dest, path, iface, "StartUpdates", [.vardict([:])]), "StartUpdates")
    /// Sends NMEA epochs (warm-up ones first, until 5 have arrived) and times each
    /// measured one from the datagram to the first signal on `client` that `matches` it.
    func timeFixes(_ what: String, matches: (Message, _ micros: UInt64, _ iso: String) -> Bool) -> Sample {
        func arrival(since before: Int, _ e: (sentences: [String], micros: UInt64, iso: String)) -> UInt64? {
            (before..<client.signals.count).first { matches(client.signals[$0], e.micros, e.iso) }.map { client.signalTimes[$0] }
        }
        var warm = 0
        for _ in 0..<40 where warm < 5 {
            let e = nextEpoch()
            let before = client.signals.count
            gpsd.send(e.sentences)
            if peers.pump(timeout: 0.3, until: { arrival(since: before, e) != nil }) { warm += 1 }
        }
        if warm < 5 { fail("no fixes reach the client from \(what) during warm-up") }
        var sample = Sample()
        for _ in 0..<counts.fixes {
            let e = nextEpoch()
            let before = client.signals.count
            let t0 = nowNanos()
            gpsd.send(e.sentences)
            var at: UInt64?
            peers.pump(timeout: 2) { at = arrival(since: before, e); return at != nil }
            if let at { sample.add(micros(at - t0)) }
            peers.settle(0.005)
        }
        return sample
    }
    let daemonLatency = timeFixes("the daemon") { m, micros, _ in timestamp(of: m) == micros }
    must(client.call(dest, path, iface, "StopUpdates"), "StopUpdates")

    // Floor: a direct gpsd JSON client on a raw socket, timed the same way (GpsdFloor.swift).
    guard let direct = gpsdClientLatency(gpsd: gpsd, fixes: counts.fixes, epoch: nextEpoch) else {
        fail("cannot connect to gpsd directly")
    }
    gpsdLatency = direct
    if gpsdLatency.count == 0 { fail("the direct gpsd client saw no TPV") }

    // Floor: a bare unicast signal from one connection to another through the same bus.
    func signalFloor(receivers: [BusPeer], rounds: Int) -> (first: Sample, last: Sample) {
        let sender = try! peers.connect(bus.address)
        var first = Sample(), last = Sample()
        let payload = LocationBody.encode(LocationDictionary.encode(.init(latitude: 52.52, longitude: 13.405, mode: .threeD,
                                                                          altitude: 40, horizontalAccuracy: 5, speed: 5,
                                                                          course: 90, timestamp: 1), accuracy: .full))
        for _ in 0..<rounds {
            let before = receivers.map { $0.signals.count }
            let t0 = nowNanos()
            for r in receivers {
                sender.server.emit(path: "/bench", interface: "org.geoconsent.Bench", member: LocationUpdatedSignal.member, payload,
                                   destination: r.uniqueName)
            }
            let ok = peers.pump(timeout: 10) { zip(receivers, before).allSatisfy { $0.signals.count > $1 } }
            if !ok { fail("bare signals did not all arrive") }
            let times = zip(receivers, before).map { $0.signalTimes[$1] }
            first.add(micros(times.min()! - t0))
            last.add(micros(times.max()! - t0))
            peers.settle(0.005)
        }
        sender.connection.close()
        return (first, last)
    }
    let oneSignal = signalFloor(receivers: [client], rounds: counts.fixes)

    // Reference: the cheapest relay process in the daemon's place (Relay.swift).
    func relayLatency() -> Sample {
        let dir = try! TempDir()
        let relay = try! ChildProcess(executable: ownExecutable(), arguments: ["--relay", bus.address, String(gpsd.port), client.uniqueName],
                                      logPath: dir.file("relay.log"))
        defer { relay.stop() }
        return timeFixes("the relay") { m, _, iso in
            m.member == LocationUpdatedSignal.member && m.arguments().dropFirst().first?.stringValue?.hasPrefix(iso) == true
        }
    }
    let relay = relayLatency()
    client.connection.close()
    rows.append(Row(section: "fix latency", name: "NMEA sent -> LocationUpdated p50", value: daemonLatency.p50, unit: "µs",
                    floorName: "gpsd JSON client + bare signal p50", floor: gpsdLatency.p50 + oneSignal.first.p50,
                    target: .ratioAtMost(1.2)))
    rows.append(Row(section: "fix latency", name: "NMEA sent -> LocationUpdated p99", value: daemonLatency.p99, unit: "µs",
                    floorName: "gpsd JSON client + bare signal p99", floor: gpsdLatency.p99 + oneSignal.first.p99))
    rows.append(Row(section: "fix latency", name: "floor: NMEA -> direct gpsd client p50", value: gpsdLatency.p50, unit: "µs"))
    rows.append(Row(section: "fix latency", name: "floor: bare unicast signal p50", value: oneSignal.first.p50, unit: "µs"))
    rows.append(Row(section: "fix latency", name: "reference: minimal relay process p50", value: relay.p50, unit: "µs",
                    floorName: "gpsd JSON client + bare signal p50", floor: gpsdLatency.p50 + oneSignal.first.p50))
    rows.append(Row(section: "fix latency", name: "daemon vs minimal relay p50", value: daemonLatency.p50, unit: "µs",
                    floorName: "minimal relay p50", floor: relay.p50))
    if only == "latency" {
        finishSection(rows)
    }

    // MARK: 2. Fan-out

    var fanoutLast: [Int: Double] = [:]
    for n in counts.fanout {
        print("bench: fan-out to \(n) sessions")
        var subs: [BusPeer] = []
        for _ in 0..<n { subs.append(try peers.connect(bus.address)) }
        // Taps and StartUpdates pipelined: the app is approved already, so these are silent.
        var calls = subs.map { $0.callAsync(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]) }
        peers.pump(timeout: 60) { calls.allSatisfy(\.isDone) }
        calls = subs.map { $0.callAsync(dest, path, iface, "StartUpdates", [.vardict([:])]) }
        peers.pump(timeout: 60) { calls.allSatisfy(\.isDone) }
        if calls.contains(where: { if case .failure = $0.result { return true } else { return false } }) { fail("StartUpdates failed") }
        var first = Sample(), last = Sample(), sentAt: UInt64 = 0
        for round in 0..<(counts.fanoutRounds + 2) {
            let e = nextEpoch()
            let before = subs.map { $0.signals.count }
            sentAt = nowNanos()
            gpsd.send(e.sentences)
            var arrivals: [UInt64] = []
            let ok = peers.pump(timeout: 10) {
                arrivals = []
                for (p, b) in zip(subs, before) {
                    guard let i = (b..<p.signals.count).first(where: { timestamp(of: p.signals[$0]) == e.micros }) else { return false }
                    arrivals.append(p.signalTimes[i])
                }
                return true
            }
            if !ok { continue }   // a fix gpsd dropped (warm-up): not counted
            if round >= 2 {
                first.add(micros(arrivals.min()! - sentAt))
                last.add(micros(arrivals.max()! - sentAt))
            }
            peers.settle(0.01)
        }
        let floor = signalFloor(receivers: subs, rounds: counts.fanoutRounds)
        rows.append(Row(section: "fan-out \(n)", name: "first arrival p50", value: first.p50, unit: "µs",
                        floorName: "gpsd client + first bare signal", floor: gpsdLatency.p50 + floor.first.p50))
        rows.append(Row(section: "fan-out \(n)", name: "last arrival p50", value: last.p50, unit: "µs",
                        floorName: "gpsd client + last of \(n) bare signals", floor: gpsdLatency.p50 + floor.last.p50,
                        target: n == 100 ? .ratioAtMost(1.3) : nil))
        fanoutLast[n] = last.p50
        for s in subs { s.connection.close() }
        peers.settle(0.2)
    }

    // MARK: 2a. Fan-out against plain C (CFloors.swift): the same C receivers for
    // the daemon's signals and for the floor's prebuilt ones from a C sender.

    for n in counts.fanout where n > 1 && n <= 100 {
        print("bench: fan-out to \(n) C receivers, against \(n) prebuilt signals from C")
        let c: (daemon: FanoutTimes, floor: FanoutTimes, relay: FanoutTimes?, cpuPerFix: Double)
        do {
            // Three times the Swift fan-out's rounds: these are cheap, and a p50 of
            // 20 moved by a third from run to run. The C relay reads its own gpsd,
            // so the daemon does not hear its fixes.
            let relayGpsd = try GpsdInstance()
            defer { relayGpsd.stop() }
            let relayDir = try TempDir()
            func startRelay(_ names: [String]) throws -> ChildProcess {
                try startCRelay(bus: bus.address, gpsd: relayGpsd, destinations: names, log: relayDir.file("relay-c.log"))
            }
            c = try cFanout(busAddress: bus.address, n: n, rounds: counts.fanoutRounds * 3, daemonPID: daemon.pid, gpsd: gpsd,
                            relay: (relayGpsd, startRelay), epoch: nextEpoch)
        } catch {
            fail("\(error)")
        }
        let section = "fan-out \(n), C receivers"
        rows.append(Row(section: section, name: "first has the fix p50", value: c.daemon.first.p50, unit: "µs",
                        floorName: "gpsd client + first of \(n) C signals", floor: gpsdLatency.p50 + c.floor.first.p50,
                        target: .ratioAtMost(1.3)))
        rows.append(Row(section: section, name: "last has the fix p50", value: c.daemon.last.p50, unit: "µs",
                        floorName: "gpsd client + last of \(n) C signals", floor: gpsdLatency.p50 + c.floor.last.p50,
                        target: .ratioAtMost(1.3)))
        rows.append(Row(section: section, name: "floor: first of \(n) C signals p50", value: c.floor.first.p50, unit: "µs"))
        rows.append(Row(section: section, name: "floor: last of \(n) C signals p50", value: c.floor.last.p50, unit: "µs"))
        rows.append(Row(section: section, name: "daemon CPU per fix", value: c.cpuPerFix, unit: "µs"))
        if let r = c.relay {
            // Reference, no target: the third process alone (Instruments/CBenchFloor/relay_floor.c).
            rows.append(Row(section: section, name: "reference: C relay, first has the fix p50", value: r.first.p50, unit: "µs",
                            floorName: "gpsd client + first of \(n) C signals", floor: gpsdLatency.p50 + c.floor.first.p50))
            rows.append(Row(section: section, name: "reference: C relay, last has the fix p50", value: r.last.p50, unit: "µs",
                            floorName: "gpsd client + last of \(n) C signals", floor: gpsdLatency.p50 + c.floor.last.p50))
            // Within 1.1× of the third process alone, in the same run (docs/performance.md).
            rows.append(Row(section: section, name: "first has the fix, daemon vs C relay p50", value: c.daemon.first.p50,
                            unit: "µs", floorName: "C relay: first has the fix p50", floor: r.first.p50,
                            target: n == 100 ? .ratioAtMost(1.1) : nil))
            rows.append(Row(section: section, name: "last has the fix, daemon vs C relay p50", value: c.daemon.last.p50,
                            unit: "µs", floorName: "C relay: last has the fix p50", floor: r.last.p50))
        }
    }

    if only == "fanout" {
        finishSection(rows)
    }

    // MARK: 2b. The GeoClue2 facade (GeoClueLatency.swift)

    let inHand: [Int: InHandTimes]
    do {
        inHand = try geoClueInHandLatency(gpsd: gpsd, clientCounts: counts.geoclue, rounds: counts.fanoutRounds * 2,
                                          epoch: nextEpoch)
    } catch {
        fail("\(error)")
    }
    for n in counts.geoclue {
        guard let t = inHand[n] else { continue }
        let section = "GeoClue2 facade, \(n) client\(n == 1 ? "" : "s")"
        let what = "NMEA sent -> LocationUpdated -> GetAll in hand"
        if n == 1 {
            rows.append(Row(section: section, name: what + " p50", value: t.last.p50, unit: "µs",
                            floorName: "own API: NMEA sent -> LocationUpdated p50", floor: daemonLatency.p50,
                            target: .ratioAtMost(1.3)))
            rows.append(Row(section: section, name: what + " p99", value: t.last.p99, unit: "µs",
                            floorName: "own API: NMEA sent -> LocationUpdated p99", floor: daemonLatency.p99))
            rows.append(Row(section: section, name: what + " p50, vs the floors", value: t.last.p50, unit: "µs",
                            floorName: "gpsd JSON client + bare signal p50", floor: gpsdLatency.p50 + oneSignal.first.p50))
            rows.append(Row(section: section, name: "of it: NMEA sent -> LocationUpdated p50", value: t.signalLast.p50, unit: "µs",
                            floorName: "own API: NMEA sent -> LocationUpdated p50", floor: daemonLatency.p50))
        } else {
            rows.append(Row(section: section, name: "first client: " + what + " p50", value: t.first.p50, unit: "µs",
                            floorName: "gpsd client + first bare signal", floor: gpsdLatency.p50 + oneSignal.first.p50))
            rows.append(Row(section: section, name: "last client: " + what + " p50", value: t.last.p50, unit: "µs",
                            floorName: fanoutLast[n] != nil ? "own API: fan-out \(n) last arrival p50" : nil,
                            floor: fanoutLast[n], target: fanoutLast[n] != nil ? .ratioAtMost(1.3) : nil))
            rows.append(Row(section: section, name: "of it: first LocationUpdated p50", value: t.signalFirst.p50, unit: "µs"))
            rows.append(Row(section: section, name: "of it: last LocationUpdated p50", value: t.signalLast.p50, unit: "µs",
                            floorName: fanoutLast[n] != nil ? "own API: fan-out \(n) last arrival p50" : nil,
                            floor: fanoutLast[n]))
        }
        rows.append(Row(section: section, name: "of it: GetAll round trip (sent -> reply in hand) p50", value: t.getAll.p50,
                        unit: "µs"))
        rows.append(Row(section: section, name: "no fix going on: GetAll of the Location round trip p50", value: t.quietGetAll.p50,
                        unit: "µs", floorName: "Peer.Ping round trip p50", floor: t.quietPing.p50))
        rows.append(Row(section: section, name: "daemon time on CPU per fix (all rounds)",
                        value: t.daemonCPUPerFix, unit: "ms"))
        // C clients against the protocol served from C (CGeoClueFloor.swift): the floor
        // is the direct gpsd client plus the C sender's figure, as for the C fan-out.
        if let c = t.c {
            let floor = "gpsd client + C GeoClue-protocol floor"
            let sides: [(String, KeyPath<FanoutTimes, Sample>)] =
                n == 1 ? [("the client", \.last)] : [("first client", \.first), ("last client", \.last)]
            func tag(_ who: String) -> String { n == 1 ? "" : " (\(who.split(separator: " ")[0]))" }
            for (who, side) in sides {
                rows.append(Row(section: section, name: "C receivers: \(who) has the properties in hand p50",
                                value: c.facade.inHand[keyPath: side].p50, unit: "µs",
                                floorName: floor + tag(who), floor: gpsdLatency.p50 + c.floor.inHand[keyPath: side].p50,
                                target: .ratioAtMost(1.3)))
            }
            for (who, side) in sides {
                rows.append(Row(section: section, name: "C receivers, of it: \(who)'s LocationUpdated p50",
                                value: c.facade.signal[keyPath: side].p50, unit: "µs",
                                floorName: "gpsd client + C floor's LocationUpdated" + tag(who), floor: gpsdLatency.p50 + c.floor.signal[keyPath: side].p50))
            }
            for (who, side) in sides {
                rows.append(Row(section: section, name: "floor: C GeoClue protocol, \(who) has the properties in hand p50",
                                value: c.floor.inHand[keyPath: side].p50, unit: "µs"))
            }
            // Reference, no target: the same protocol served by a C relay from its own
            // gpsd (Instruments/CBenchFloor/relay_floor.c, GeoClue mode): the third process alone.
            if let r = c.relay {
                for (who, side) in sides {
                    rows.append(Row(section: section, name: "reference: C GeoClue relay, \(who) has the properties in hand p50",
                                    value: r.inHand[keyPath: side].p50, unit: "µs",
                                    floorName: floor + tag(who), floor: gpsdLatency.p50 + c.floor.inHand[keyPath: side].p50))
                }
                for (who, side) in sides {
                    // One client and the last of 100 within 1.1× of the relay, which streams as the facade does.
                    rows.append(Row(section: section, name: "C receivers: \(who) has the properties in hand, facade vs C relay p50",
                                    value: c.facade.inHand[keyPath: side].p50, unit: "µs",
                                    floorName: "C GeoClue relay" + tag(who), floor: r.inHand[keyPath: side].p50,
                                    target: side == \.last ? .ratioAtMost(1.1) : nil))
                }
            }
        }
    }
    // The real GeoClue 2.6 alongside, where it can run (RealGeoClueLatency.swift).
    if let one = inHand[1] { rows += realGeoClueRows(facadeP50: one.last.p50, rounds: counts.fanoutRounds * 2, epoch: nextEpoch) }
    if only == "fixes" {
        finishSection(rows)
    }

}

// MARK: 3. Calls

print("bench: calls")
let caller = try peers.connect(bus.address)
tap(caller)
// A fix in the cache for RequestLocation: updates on for a moment.
must(caller.call(dest, path, iface, "StartUpdates", [.vardict([:])]), "StartUpdates")
do {
    var got = false
    for _ in 0..<20 where !got {
        let e = nextEpoch()
        gpsd.send(e.sentences)
        got = peers.pump(timeout: 0.3) { caller.signals.contains { timestamp(of: $0) == e.micros } }
    }
    if !got { fail("no fix for the cache") }
}
must(caller.call(dest, path, iface, "StopUpdates"), "StopUpdates")

/// One kind of call and what was measured of it.
final class CallKind {
    let label: String, destination: String, path: String, interface: String, member: String
    let args: [DBusValue]
    var seq = Sample()
    var pipelinedCalls = 0, pipelinedNanos: UInt64 = 0
    var perSecond: Double { Double(pipelinedCalls) / (Double(pipelinedNanos) / 1e9) }

    init(_ label: String, _ destination: String, _ path: String, _ interface: String, _ member: String, _ args: [DBusValue]) {
        (self.label, self.destination, self.path, self.interface, self.member, self.args) =
            (label, destination, path, interface, member, args)
    }

    /// One call, timed until its reply.
    func roundTrip() {
        let t0 = nowNanos()
        let call = caller.callAsync(destination, path, interface, member, args)
        peers.pump(timeout: 10) { call.isDone }
        guard case .success? = call.result else { fail("\(label) failed: \(String(describing: call.result))") }
        seq.add(micros(nowNanos() - t0))
    }

    /// `n` calls sent at once, timed until the last reply.
    func pipelined(_ n: Int) {
        let t0 = nowNanos()
        let all = (0..<n).map { _ in caller.callAsync(destination, path, interface, member, args) }
        peers.pump(timeout: 120) { all.allSatisfy(\.isDone) }
        if let bad = all.first(where: { if case .success? = $0.result { false } else { true } }) {
            fail("\(label) (pipelined) failed: \(String(describing: bad.result))")
        }
        pipelinedNanos += nowNanos() - t0
        pipelinedCalls += n
    }
}
let tapCalls = CallKind("tap", dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])])
let locCalls = CallKind("RequestLocation", dest, path, iface, "RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 1e6))])
let ping = CallKind("Ping", dest, path, ObjectServer.peer, "Ping", [])
let getID = CallKind("GetId", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId", [])
// Interleaved, so that a change in the machine's load (other VMs, the other core,
// where the scheduler puts the three processes) hits the calls and their floors
// alike instead of one phase: round trips alternate call by call, pipelined
// batches take turns in ten rounds.
let callKinds = [tapCalls, locCalls, ping, getID]
for _ in 0..<counts.calls {
    for kind in callKinds { kind.roundTrip() }
}
let callRounds = 10
for _ in 0..<callRounds {
    for kind in callKinds { kind.pipelined(max(1, counts.pipelined / callRounds)) }
}
rows.append(Row(section: "calls", name: "pre-approved tap p50", value: tapCalls.seq.p50, unit: "µs",
                floorName: "Peer.Ping p50", floor: ping.seq.p50, target: .ratioAtMost(1.3)))
rows.append(Row(section: "calls", name: "pre-approved tap p99", value: tapCalls.seq.p99, unit: "µs",
                floorName: "Peer.Ping p99", floor: ping.seq.p99))
rows.append(Row(section: "calls", name: "cached RequestLocation p50", value: locCalls.seq.p50, unit: "µs",
                floorName: "Peer.Ping p50", floor: ping.seq.p50))
rows.append(Row(section: "calls", name: "cached RequestLocation p99", value: locCalls.seq.p99, unit: "µs",
                floorName: "Peer.Ping p99", floor: ping.seq.p99))
rows.append(Row(section: "calls", name: "tap pipelined", value: tapCalls.perSecond, unit: "calls/s",
                floorName: "Peer.Ping pipelined", floor: ping.perSecond, target: .ratioAtLeast(0.8)))
rows.append(Row(section: "calls", name: "RequestLocation pipelined", value: locCalls.perSecond, unit: "calls/s",
                floorName: "Peer.Ping pipelined", floor: ping.perSecond))
rows.append(Row(section: "calls", name: "floor: bus GetId p50", value: getID.seq.p50, unit: "µs"))
rows.append(Row(section: "calls", name: "floor: bus GetId pipelined", value: getID.perSecond, unit: "calls/s"))

if only == "calls" {
    finishSection(rows)
}
rows += measureArmedTimers()



// MARK: 4. Churn

print("bench: churn (\(counts.churn) cycles)")
let rssBeforeChurn = rssKiB(daemon.pid)
let churnStart = nowNanos()
for _ in 0..<counts.churn {
    let p = try peers.connect(bus.address)
    tap(p)
    must(p.call(dest, path, iface, "RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 1e6))]), "RequestLocation (churn)")
    p.connection.close()
}
let churnRate = Double(counts.churn) / (Double(nowNanos() - churnStart) / 1e9)
peers.settle(0.5)
let sessionsLeft = (SessionListReply.decode(must(caller.call(dest, path, iface, "ListSessions"), "ListSessions")) ?? [])
    .filter { $0.name != caller.uniqueName }.count
let rssAfterChurn = rssKiB(daemon.pid)
rows.append(Row(section: "churn", name: "connect+tap+RequestLocation+disconnect", value: churnRate, unit: "cycles/s"))
rows.append(Row(section: "churn", name: "sessions left", value: Double(sessionsLeft), unit: "", target: .atMost(0)))
rows.append(Row(section: "churn", name: "daemon RSS growth", value: rssAfterChurn - rssBeforeChurn, unit: "KiB"))
// The same cycle from a C client, against connect + Hello + two round trips in C (CFloors.swift).
print("bench: churn with a C client, against a C echo service")
do {
    let c = try cChurn(busAddress: bus.address, cycles: quick ? 50 : 2000, daemonPID: daemon.pid)
    rows.append(Row(section: "churn", name: "C client: connect+tap+StartUpdates+disconnect", value: c.daemon, unit: "µs",
                    floorName: "C: connect+Hello+2 calls to a C echo thread+disconnect", floor: c.floor,
                    target: .ratioAtMost(1.3)))
    // Reference, no target: a service that knows its callers asks the bus who each
    // new one is (one more round trip) before its first reply; the daemon must.
    rows.append(Row(section: "churn", name: "C client: connect+tap+StartUpdates+disconnect, vs an identifying echo",
                    value: c.daemon, unit: "µs",
                    floorName: "C: the same, the echo asking the bus for each new caller's credentials", floor: c.identifying))
    rows.append(Row(section: "churn", name: "reference: C echo that asks for credentials, per client", value: c.identifying,
                    unit: "µs", floorName: "C: connect+Hello+2 calls to a C echo thread+disconnect", floor: c.floor))
    rows.append(Row(section: "churn", name: "C client: connect+tap+StartUpdates+disconnect, vs an echo with a /proc helper",
                    value: c.daemon, unit: "µs",
                    floorName: "C: the same, the echo asking for credentials, then a helper thread for /proc", floor: c.separated,
                    target: .ratioAtMost(1.1)))
    rows.append(Row(section: "churn", name: "reference: C echo with credentials and a /proc helper, per client",
                    value: c.separated, unit: "µs",
                    floorName: "C: connect+Hello+2 calls to a C echo thread+disconnect", floor: c.floor))
    // Informational, no target: the figure a change to the per-connection work shows
    // even when other load on the machine blurs the wall-clock row above.
    rows.append(Row(section: "churn", name: "daemon + identity helper CPU per churn cycle", value: c.cpuPerCycle,
                    unit: "µs"))
} catch {
    fail("\(error)")
}
rows += measureLogind()
if only == "churn" {
    finishSection(rows)
}

// MARK: 5. Memory and idle

print("bench: memory with \(counts.sessions) sessions, idle")
caller.connection.close()
peers.settle(3)   // lazy last-used write and gpsd linger are over
let rssIdle = rssKiB(daemon.pid)
var many: [BusPeer] = []
var batch: [BusPeer.PendingCall] = []
for i in 0..<counts.sessions {
    let p = try peers.connect(bus.address)
    many.append(p)
    batch.append(p.callAsync(dest, path, iface, "RequestOneTimeAuthorization", [.vardict([:])]))
    if batch.count == 200 || i == counts.sessions - 1 {
        peers.pump(timeout: 60) { batch.allSatisfy(\.isDone) }
        batch.removeAll()
    }
}
let rssMany = rssKiB(daemon.pid)
for p in many { p.connection.close() }
many.removeAll()
peers.settle(1)

// Measured once the 10,000 departures are processed (the daemon trims its heap
// when the crowd is gone), then the idle figures.
waitUntilQuiet(daemon.pid, timeout: 60)
let rssAfterMany = rssKiB(daemon.pid)

// Idle: nothing connected but the agent. First CPU time and wake-ups alone
// (strace itself would cause both), then system calls under strace.
let cpu0 = cpuTicks(daemon.pid), ctx0 = contextSwitches(daemon.pid)
Thread.sleep(forTimeInterval: counts.idleSeconds)
let cpu1 = cpuTicks(daemon.pid), ctx1 = contextSwitches(daemon.pid)
var straceCount: Double = .nan
if let strace = TestPaths.findExecutable("strace", candidates: ["/usr/bin/strace"]) {
    let dir = try TempDir()
    let out = dir.file("strace.txt")
    let r = try ChildProcess.run(strace, ["-c", "-f", "-o", out, "-p", "\(daemon.pid)"], timeout: counts.idleSeconds + 1)
    _ = r
    // strace exits when killed at the timeout; its summary may be written then.
    if let text = try? String(contentsOfFile: out, encoding: .utf8) {
        straceCount = text.split(separator: "\n").last { $0.contains("total") }
            .flatMap { Double($0.split(separator: " ").dropFirst(2).first ?? "") } ?? 0
    } else {
        straceCount = 0
    }
}
let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
rows.append(Row(section: "memory", name: "daemon RSS idle (fresh)", value: rssFresh / 1024, unit: "MiB", target: .atMost(7)))
rows.append(Row(section: "memory", name: "  of it anonymous (heap, stacks; the daemon's alone)", value: anonFresh / 1024, unit: "MiB"))
rows.append(Row(section: "memory", name: "daemon PSS idle (fresh; shared pages divided)", value: pssFresh / 1024, unit: "MiB"))
rows.append(Row(section: "memory", name: "daemon RSS idle after the load phases", value: rssIdle / 1024, unit: "MiB"))
rows.append(Row(section: "memory", name: "RSS per session (\(counts.sessions) sessions)", value: (rssMany - rssIdle) * 1024 / Double(counts.sessions),
                unit: "B", target: .atMost(1024)))
rows.append(Row(section: "memory", name: "RSS after the sessions left", value: rssAfterMany / 1024, unit: "MiB"))
rows.append(Row(section: "idle", name: "CPU time over \(fmt(counts.idleSeconds)) s idle", value: (cpu1 - cpu0) / ticks * 1000, unit: "ms"))
rows.append(Row(section: "idle", name: "wake-ups (context switches) over idle", value: ctx1 - ctx0, unit: "", target: .atMost(0)))
if straceCount.isFinite {
    rows.append(Row(section: "idle", name: "system calls over idle (strace)", value: straceCount, unit: "", target: .atMost(0)))
}

// MARK: 6. How cost grows (Scaling.swift)

rows += scalingPhase()

daemon.stop()
gpsd.stop()
bus.stop()

// MARK: 7. The facade's churn, against GeoClue 2.6's

rows += try facadeChurn()

// MARK: 8. Activation (exit when idle)

rows += try activationRows(rounds: counts.activations, quick: quick)

// MARK: 9. Wi-Fi positioning (WiFiRows.swift)

rows += try wifiRows(samples: quick ? 2 : 15, idleSeconds: counts.idleSeconds)

print("")
printTable(rows)
save(rows)
