import Foundation
import GeoTestSupport

// The scaling curves as a PNG (docs/performance-scaling.png is one), drawn by
// gnuplot from this run's own figures: the data and the script are written
// here, so the picture can only show what the bench measured.

/// RSS per session at one number of sessions (SessionsOverUids.swift).
struct RSSPoint {
    let sessions: Int, uids: Int, bytes: Double
}

/// Draws latency (first and last subscriber, and the floor) and the daemon's CPU
/// per fix against subscribers, both axes logarithmic, into `png`. Returns a line
/// for the report: where it was written, or why it was not (no gnuplot is no
/// failure: `make test` needs none).
func plotScaling(_ s: ScalingResult, rss: [RSSPoint], to png: String) -> String {
    guard let gnuplot = TestPaths.findExecutable("gnuplot", candidates: ["/usr/bin/gnuplot"]) else {
        return "bench: plot skipped: no gnuplot (scripts/deps.sh --bench installs gnuplot-nox)"
    }
    guard let dir = try? TempDir() else { return "bench: plot skipped: no temporary directory" }
    defer { dir.remove() }
    let rates = Set(s.points.map(\.hertz)).sorted()
    let sizes = Set(s.points.map(\.subscribers)).sorted()
    // One line per number of subscribers: N, then per rate first, last and CPU,
    // then the floors (the direct gpsd client plus the first and the last C signal).
    var data = ""
    for n in sizes {
        var cols = [String(n)]
        for hz in rates {
            let p = s.points.first { $0.subscribers == n && $0.hertz == hz }
            cols += [p?.latency.first.p50, p?.latency.last.p50, p?.cpuPerFix].map { gp($0) }
        }
        let f = s.floors[n]
        cols += [f.map { s.gpsd.p50 + $0.first.p50 }, f.map { s.gpsd.p50 + $0.last.p50 }].map { gp($0) }
        data += cols.joined(separator: " ") + "\n"
    }
    let dataPath = dir.file("scaling.dat")
    let floorLast = 2 + 3 * rates.count
    var latency: [String] = [], cpu: [String] = []
    for (i, hz) in rates.enumerated() {
        let c = 2 + 3 * i, rate = fmt(hz) + " Hz", colour = i == 0 ? "#1f77b4" : "#d62728"
        latency.append("'\(dataPath)' using 1:\(c + 1) with linespoints lw 2 pt 7 lc rgb '\(colour)' title 'last subscriber, \(rate)'")
        latency.append("'\(dataPath)' using 1:\(c) with linespoints lw 2 pt 6 dt 2 lc rgb '\(colour)' title 'first subscriber, \(rate)'")
        cpu.append("'\(dataPath)' using 1:\(c + 2) with linespoints lw 2 pt 7 lc rgb '\(colour)' title '\(rate)'")
    }
    latency.append("'\(dataPath)' using 1:\(floorLast + 1) with linespoints lw 2 pt 4 lc rgb '#444444' "
                   + "title 'floor: gpsd client + last of N prebuilt C signals'")
    latency.append("'\(dataPath)' using 1:(1.3*$\(floorLast + 1)) with lines lw 1 dt 3 lc rgb '#444444' title '1.3 × floor (the target at 1,000)'")
    // Linear from the second-largest number: a point of the largest above it is more than linear.
    if sizes.count >= 2, let p = s.points.first(where: { $0.subscribers == sizes[sizes.count - 2] && $0.hertz == rates[0] }) {
        cpu.append("\(gp(p.cpuPerFix / Double(p.subscribers))) * x with lines lw 1 dt 3 lc rgb '#444444' "
                   + "title 'linear through \(p.subscribers) at \(fmt(p.hertz)) Hz'")
    }
    let memory = rss.map { "\($0.sessions) sessions over \($0.uids) uids: \(fmt($0.bytes)) B" }.joined(separator: "; ")
    let date = ISO8601DateFormatter().string(from: Date())
    let script = """
        set terminal pngcairo size 1400,640 font 'DejaVu Sans,11' noenhanced
        set encoding utf8
        set output '\(png)'
        set datafile missing 'nan'
        set multiplot layout 1,2 title "geoconsentd: how cost grows with subscribers (geoconsent-bench, \(date))\\nRSS per session: \(memory.isEmpty ? "not measured" : memory)"
        set logscale xy
        set xrange [0.7:\(Double(sizes.last ?? 1) * 1.4)]
        set xtics (\(sizes.map(String.init).joined(separator: ", ")))
        set grid
        set xlabel 'subscribers'
        set key top left box opaque samplen 2
        set title 'Fix latency, NMEA datagram sent -> subscriber has the fix (p50)'
        set ylabel 'µs'
        plot \(latency.joined(separator: ", \\\n    "))
        set key bottom right box opaque samplen 2
        set title 'Daemon CPU time per fix'
        set ylabel 'µs of CPU per fix'
        plot \(cpu.joined(separator: ", \\\n    "))
        unset multiplot

        """
    let scriptPath = dir.file("scaling.gp")
    guard FileManager.default.createFile(atPath: dataPath, contents: Data(data.utf8)),
          FileManager.default.createFile(atPath: scriptPath, contents: Data(script.utf8)) else {
        return "bench: plot skipped: cannot write its data"
    }
    guard let run = try? ChildProcess.run(gnuplot, [scriptPath], timeout: 30, logPath: dir.file("gnuplot.log")),
          run.status == 0 else {
        let log = (try? String(contentsOfFile: dir.file("gnuplot.log"), encoding: .utf8)) ?? ""
        return "bench: plot failed: gnuplot: \(log)"
    }
    return "bench: wrote the plot \(png)"
}

/// A number as gnuplot reads it ("nan" for none: a gap in the curve).
private func gp(_ x: Double?) -> String {
    guard let x, x.isFinite else { return "nan" }
    return String(format: "%.3f", x)
}
