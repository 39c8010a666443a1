import Foundation
import GeoDBus

/// Percentiles of a sample, in the unit it was taken in.
struct Sample {
    private(set) var values: [Double] = []
    mutating func add(_ v: Double) { values.append(v) }
    var count: Int { values.count }

    func percentile(_ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[rank]
    }
    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
}

/// Monotonic nanoseconds: the same clock the daemon's event loop and BusPeer's
/// signal arrival times use.
func nowNanos() -> UInt64 { EventLoop.monotonicNanos() }

func micros(_ ns: UInt64) -> Double { Double(ns) / 1000 }

/// One line of the report: a figure, its floor from the same run, and the target.
struct Row {
    var section: String
    var name: String
    var value: Double
    var unit: String
    var floorName: String?
    var floor: Double?
    /// The target on value/floor (≤ for latency, ≥ for throughput), or an absolute bound.
    var target: Target?

    enum Target {
        case ratioAtMost(Double)
        case ratioAtLeast(Double)
        case atMost(Double)
    }

    var ratio: Double? { floor.map { value / $0 } }

    var verdict: String {
        guard let target else { return "" }
        switch target {
        case .ratioAtMost(let r): return ratio.map { $0 <= r ? "ok (≤ \(r)×)" : "MISSED (target ≤ \(r)×)" } ?? ""
        case .ratioAtLeast(let r): return ratio.map { $0 >= r ? "ok (≥ \(r)×)" : "MISSED (target ≥ \(r)×)" } ?? ""
        case .atMost(let bound): return value <= bound ? "ok (≤ \(fmt(bound)) \(unit))" : "MISSED (target ≤ \(fmt(bound)) \(unit))"
        }
    }
}

func fmt(_ x: Double) -> String {
    if !x.isFinite { return "n/a" }
    if abs(x) >= 100 { return String(format: "%.0f", x) }
    if abs(x) >= 10 { return String(format: "%.1f", x) }
    return String(format: "%.2f", x)
}

func printTable(_ rows: [Row]) {
    var lines: [[String]] = [["section", "figure", "value", "floor", "floor value", "ratio", "target"]]
    for r in rows {
        lines.append([r.section, r.name, fmt(r.value) + " " + r.unit, r.floorName ?? "",
                      r.floor.map { fmt($0) + " " + r.unit } ?? "", r.ratio.map { fmt($0) + "×" } ?? "", r.verdict])
    }
    let widths = (0..<7).map { i in lines.map { $0[i].count }.max() ?? 0 }
    for (n, l) in lines.enumerated() {
        print(l.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  "))
        if n == 0 { print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
    }
}

func json(_ rows: [Row], extra: [String: Any]) -> Data {
    var list: [[String: Any]] = []
    for r in rows {
        var d: [String: Any] = ["section": r.section, "figure": r.name, "value": r.value, "unit": r.unit]
        if let f = r.floor, let n = r.floorName { d["floor"] = f; d["floor_name"] = n; d["ratio"] = r.value / f }
        if r.target != nil { d["verdict"] = r.verdict }
        list.append(d)
    }
    var top = extra
    top["rows"] = list
    return (try? JSONSerialization.data(withJSONObject: top, options: [.prettyPrinted, .sortedKeys])) ?? Data()
}

/// VmRSS of a process in KiB.
func rssKiB(_ pid: pid_t) -> Double { procField(pid, "status", "VmRSS:") }

/// The anonymous part of the RSS (heap, stacks): memory that is the daemon's alone.
func anonKiB(_ pid: pid_t) -> Double { procField(pid, "status", "RssAnon:") }

/// Proportional set size: shared pages (libc, …) divided among the processes mapping them.
func pssKiB(_ pid: pid_t) -> Double { procField(pid, "smaps_rollup", "Pss:") }

/// A "Name:   1234 kB" field of /proc/PID/FILE, in KiB.
private func procField(_ pid: pid_t, _ file: String, _ name: String) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/\(file)", encoding: .utf8) else { return .nan }
    for line in s.split(separator: "\n") where line.hasPrefix(name) {
        return Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? .nan
    }
    return .nan
}

/// utime+stime of a process in clock ticks.
func cpuTicks(_ pid: pid_t) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = s.lastIndex(of: ")") else { return .nan }
    let fields = s[s.index(after: close)...].split(separator: " ")
    // After ")": state is field 3, utime field 14, stime field 15 (1-based in proc(5)).
    guard fields.count > 13, let u = Double(fields[11]), let st = Double(fields[12]) else { return .nan }
    return u + st
}

/// Voluntary + involuntary context switches: every wake-up from poll() is one.
func contextSwitches(_ pid: pid_t) -> Double {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return .nan }
    var total = 0.0
    for line in s.split(separator: "\n") where line.contains("ctxt_switches") {
        total += Double(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
    }
    return total
}

/// Waits until a process has finished the work the last phase left (thousands
/// of departures), i.e. a second passes without it waking up.
func waitUntilQuiet(_ pid: pid_t, timeout: Double) {
    let deadline = Date().addingTimeInterval(timeout)
    var last = contextSwitches(pid)
    while Date() < deadline {
        Thread.sleep(forTimeInterval: 1)
        let now = contextSwitches(pid)
        if now == last { return }
        last = now
    }
}

/// On-CPU time of every thread of a process in ns (/proc/PID/task/*/schedstat):
/// finer than clock ticks, and not only the main thread's as /proc/PID/schedstat is.
func processCPUNanos(_ pid: pid_t) -> Double {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return .nan }
    return tasks.reduce(0) { sum, tid in
        let s = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/schedstat", encoding: .utf8)
        return sum + (s.flatMap { Double($0.split(separator: " ").first ?? "") } ?? 0)
    }
}
