import CBenchFloor
import Foundation
import GeoConsentAPI
import GeoTestSupport

// How cost grows: fix latency to the first and the last
// subscriber and the daemon's CPU time per fix, at 1 to 1,000 subscribers, with
// fixes at 1 Hz and at 10 Hz. The plot is Plot.swift's; RSS per session over
// many uids is SessionsOverUids.swift's.
//
// What "10 Hz" is here: the rate at which gpsd gets NMEA epochs, as from a GNSS
// receiver that reports ten fixes a second ("receivers run at 10 Hz" in the
// issue reads so). The subscribers read each signal as soon as their socket is
// readable, as an app's main loop wakes on it: a subscriber that drained its
// socket only every 100 ms would add its own 0–100 ms wait to every figure and
// hide the daemon's. Nor would it change what the daemon and the bus do: ten
// ~500-byte signals a second queue in the subscriber's socket without filling it.
// Each epoch's NMEA time is one second after the last whatever the rate
// (`epoch` of main.swift), so every fix has its own timestamp to be matched by.

/// A source of NMEA epochs, each with its location's timestamp (µs) and ISO time.
typealias EpochSource = () -> (sentences: [String], micros: UInt64, iso: String)

/// One number of subscribers at one fix rate.
struct ScalingPoint {
    let subscribers: Int
    let hertz: Double
    /// First and last arrival per fix, from the NMEA datagram sent.
    var latency = FanoutTimes()
    /// The daemon's on-CPU time over the run ÷ fixes sent (µs).
    var cpuPerFix = Double.nan
    /// Fixes that did not reach every subscriber within 5 s.
    var lost = 0
}

/// The scaling measurements of one bench run.
struct ScalingResult {
    var points: [ScalingPoint] = []
    /// Per number of subscribers: first and last of that many prebuilt C signals.
    var floors: [Int: FanoutTimes] = [:]
    /// NMEA sent -> a direct gpsd JSON client has the TPV.
    var gpsd = Sample()
}

/// Runs the scaling rounds: for each number in `subscribers`, that many C receivers
/// subscribe (the bench's app is approved already: their taps are silent), then
/// `fixes` epochs go to gpsd at each rate in `rates`, one every 1/hertz seconds
/// whether or not the last has arrived everywhere. In the gaps of the slowest
/// rate, a C thread sends the same receivers one prebuilt signal each: the floor,
/// read by the same recorder thread as the daemon's signals.
/// `gpsdFixes`: epochs timed for the direct gpsd client's floor.
func measureScaling(busAddress: String, daemonPID: pid_t, gpsd: GpsdInstance, subscribers: [Int],
                    rates: [(hertz: Double, fixes: Int)], gpsdFixes: Int, epoch: EpochSource) throws -> ScalingResult {
    var result = ScalingResult()
    guard let direct = gpsdClientLatency(gpsd: gpsd, fixes: gpsdFixes, epoch: epoch), direct.count > 0 else {
        throw BenchFloorError(description: "the direct gpsd client saw no TPV")
    }
    result.gpsd = direct
    for n in subscribers {
        print("bench: scaling, \(n) subscriber\(n == 1 ? "" : "s") at \(rates.map { fmt($0.hertz) + " Hz" }.joined(separator: " and "))")
        let (points, floor) = try scalingRounds(busAddress: busAddress, daemonPID: daemonPID, gpsd: gpsd, n: n,
                                                rates: rates, epoch: epoch)
        result.points += points
        result.floors[n] = floor
    }
    return result
}

/// One number of subscribers: its points at every rate, and its floor.
private func scalingRounds(busAddress: String, daemonPID: pid_t, gpsd: GpsdInstance, n: Int,
                           rates: [(hertz: Double, fixes: Int)], epoch: EpochSource) throws -> ([ScalingPoint], FanoutTimes) {
    let member = LocationUpdatedSignal.member
    let receivers = try CReceivers.subscribed(address: busAddress, count: n)
    // Every awaited stamp is known before the recorder starts: warm-up epochs,
    // each rate's epochs, then the floor's rounds (small numbers no fix has).
    let warm = (0..<5).map { _ in epoch() }
    let runs = rates.map { rate in (rate, (0..<rate.fixes).map { _ in epoch() }) }
    let floorRounds = rates.map(\.fixes).min() ?? 0
    let floorStamps = (0..<floorRounds).map { UInt64(1_000_000 + $0) }
    let stamps = warm.map(\.micros) + runs.flatMap { $0.1.map(\.micros) } + floorStamps
    let floorBase = stamps.count - floorRounds

    let sender = try receivers.floorSender(busAddress: busAddress)
    defer { bf_sender_stop(sender) }
    var error = [CChar](repeating: 0, count: 256)
    guard let recorder = bf_recorder_start(receivers.raw, member, stamps, Int32(stamps.count), &error, Int32(error.count)) else {
        throw BenchFloorError(description: "C recorder: " + String(cString: error))
    }
    var arrivals = [UInt64](repeating: 0, count: stamps.count * n)
    var recording = true
    defer { if recording { bf_recorder_stop(recorder, &arrivals) } }

    var reached = 0
    for (k, e) in warm.enumerated() {
        gpsd.send(e.sentences)
        if bf_recorder_wait(recorder, Int32(k), 1000) == 0 { reached += 1 }
    }
    if reached == 0 { throw BenchFloorError(description: "no warm-up fix reached all \(n) subscribers") }

    var sentAt: [[UInt64]] = [], cpu: [Double] = [], floorStart: [UInt64] = []
    var index = warm.count
    let slowest = rates.map(\.hertz).min()
    for (rate, epochs) in runs {
        let period = UInt64(1e9 / rate.hertz), first = index
        var sent: [UInt64] = []
        let cpu0 = processCPUNanos(daemonPID)
        let start = nowNanos()
        for (j, e) in epochs.enumerated() {
            sleepUntil(start + UInt64(j) * period)
            sent.append(nowNanos())
            gpsd.send(e.sentences)
            // The floor in this rate's gaps, once this fix is everywhere (not
            // after the last fix: the daemon's CPU window closes with it).
            if rate.hertz == slowest, floorStart.count < floorRounds, j < epochs.count - 1,
               bf_recorder_wait(recorder, Int32(first + j), Int32(period / 2_000_000)) == 0 {
                bf_sender_fire(sender, floorStamps[floorStart.count])
                _ = bf_recorder_wait(recorder, Int32(floorBase + floorStart.count), 5000)
                floorStart.append(bf_sender_finish(sender))
            }
        }
        for k in first..<(first + epochs.count) { _ = bf_recorder_wait(recorder, Int32(k), 5000) }
        cpu.append((processCPUNanos(daemonPID) - cpu0) / Double(epochs.count) / 1000)
        sentAt.append(sent)
        index += epochs.count
    }
    bf_recorder_stop(recorder, &arrivals)
    recording = false
    _ = receivers.callAll(GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName, "StopUpdates")

    /// Receivers' arrivals of stamp `k`, or nil when one never had it.
    func row(_ k: Int) -> [UInt64]? {
        let r = Array(arrivals[(k * n)..<((k + 1) * n)])
        return r.contains(0) ? nil : r
    }
    var points: [ScalingPoint] = []
    index = warm.count
    for (i, (rate, epochs)) in runs.enumerated() {
        var p = ScalingPoint(subscribers: n, hertz: rate.hertz)
        p.cpuPerFix = cpu[i]
        for j in epochs.indices {
            if let r = row(index + j) { p.latency.add(r, since: sentAt[i][j]) } else { p.lost += 1 }
        }
        index += epochs.count
        points.append(p)
    }
    var floor = FanoutTimes()
    for (j, start) in floorStart.enumerated() {
        if let r = row(floorBase + j) { floor.add(r, since: start) }
    }
    return (points, floor)
}

/// Sleeps until the monotonic time `t` (ns); returns at once if it is past.
private func sleepUntil(_ t: UInt64) {
    let now = nowNanos()
    if t > now { usleep(UInt32((t - now) / 1000)) }
}

/// The report's rows of a scaling run. Targets: the last of 1,000 subscribers
/// within 1.3× the direct gpsd client plus the last of 1,000 prebuilt C signals
/// (as the fan-out rows); and CPU per fix growing at most linearly.
func scalingRows(_ s: ScalingResult) -> [Row] {
    var rows: [Row] = []
    let gpsd = s.gpsd.p50
    for p in s.points {
        let n = p.subscribers, section = "scaling, \(fmt(p.hertz)) Hz"
        let floor = s.floors[n]
        rows.append(Row(section: section, name: "\(n) subscribers: first has the fix p50", value: p.latency.first.p50, unit: "µs",
                        floorName: "gpsd client + first of \(n) C signals", floor: floor.map { gpsd + $0.first.p50 }))
        rows.append(Row(section: section, name: "\(n) subscribers: last has the fix p50", value: p.latency.last.p50, unit: "µs",
                        floorName: "gpsd client + last of \(n) C signals", floor: floor.map { gpsd + $0.last.p50 },
                        target: n >= 1000 ? .ratioAtMost(1.3) : nil))
        rows.append(Row(section: section, name: "\(n) subscribers: daemon CPU per fix", value: p.cpuPerFix, unit: "µs"))
        if p.lost > 0 {
            rows.append(Row(section: section, name: "\(n) subscribers: fixes not everywhere within 5 s", value: Double(p.lost),
                            unit: "", target: .atMost(0)))
        }
    }
    // Linear growth: CPU per fix per subscriber at the largest number against the
    // next smaller. Linear cost a + b·N gives a ratio below 1 (the fixed part a,
    // reading gpsd and building the fix once, is shared by more); above 1 is more
    // than linear, e.g. a search over the subscribers per subscriber, or writes
    // that no longer fit the bus socket and come back as extra wake-ups. 1.1, not
    // 1.0: CPU time on these shared cores moves by some per cent from run to run.
    let sizes = Set(s.points.map(\.subscribers)).sorted()
    if sizes.count >= 2 {
        let big = sizes[sizes.count - 1], small = sizes[sizes.count - 2]
        for hz in Set(s.points.map(\.hertz)).sorted() {
            guard let b = s.points.first(where: { $0.subscribers == big && $0.hertz == hz }),
                  let a = s.points.first(where: { $0.subscribers == small && $0.hertz == hz }) else { continue }
            rows.append(Row(section: "scaling, \(fmt(hz)) Hz", name: "daemon CPU per fix per subscriber, \(big)",
                            value: b.cpuPerFix / Double(big), unit: "µs",
                            floorName: "the same at \(small)", floor: a.cpuPerFix / Double(small),
                            target: small >= 100 ? .ratioAtMost(1.1) : nil))
        }
    }
    for n in sizes {
        guard let f = s.floors[n] else { continue }
        rows.append(Row(section: "scaling, floors", name: "first of \(n) C signals p50", value: f.first.p50, unit: "µs"))
        rows.append(Row(section: "scaling, floors", name: "last of \(n) C signals p50", value: f.last.p50, unit: "µs"))
    }
    rows.append(Row(section: "scaling, floors", name: "NMEA -> direct gpsd client p50", value: gpsd, unit: "µs"))
    return rows
}
