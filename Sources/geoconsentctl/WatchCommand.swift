import Glibc
import GeoDBus
import GeoCore
import GeoConsentAPI

// MARK: watch

/// Taps, starts updates and prints each fix until Ctrl-C.
func watchCommand(_ ctx: inout Context) async throws {
    let accuracy = try ctx.option("--accuracy") ?? "full"
    guard Accuracy(rawValue: accuracy) != nil else { throw UsageError("--accuracy wants full or reduced") }
    let distance = try ctx.option("--distance").map { s -> Double in
        guard let d = Double(s), d.isFinite, d >= 0 else { throw UsageError("--distance wants metres >= 0") }
        return d
    } ?? 0
    let interval = try ctx.option("--interval").map { s -> Double in
        guard let d = Double(s), d.isFinite, d >= 0 else { throw UsageError("--interval wants seconds >= 0") }
        return d
    } ?? 0
    try ctx.noMoreArguments()
    let json = ctx.json
    let client = try connect(ctx)
    defer { client.close() }
    // Ctrl-C ends the watch cleanly (exit 0), like the end of the event stream.
    exitOnInterrupt()
    _ = try await authorize(client, accuracy: accuracy, reason: "geoconsentctl watch")
    try await client.startUpdates(distanceFilter: distance, minInterval: interval)
    if !json { eprint("Watching; press Ctrl-C to stop.") }
    for await event in client.events {
        switch event {
        case .locationUpdated(let loc):
            print(json ? JSON(loc.raw).text : oneLine(loc.raw))
            fflush(stdout)
        case .locationError(let name, let message):
            eprint("geoconsentctl: \(name): \(message)")
        case .authorizationChanged(let s):
            if s != .whenInUse && s != .always { throw Failure("authorization ended: \(s.name)") }
        case .disconnected:
            throw Failure("lost the bus connection")
        }
    }
}

/// SIGINT/SIGTERM while awaiting events end the process at once with status 0:
/// the bus sees the connection leave, and the grant ends with it.
func exitOnInterrupt() {
    for sig in [SIGINT, SIGTERM] {
        signal(sig) { _ in
            // Async-signal-safe: nothing to flush that matters; the bus sees us leave.
            _exit(0)
        }
    }
}

func oneLine(_ v: DBusValue) -> String {
    let d = v.vardictValue ?? [:]
    var parts: [String] = []
    parts.append(d["timestamp"]?.uint64Value.map(formatTime) ?? "-")
    if let lat = d["latitude"]?.doubleValue, let lon = d["longitude"]?.doubleValue {
        parts.append(format(lat, 7) + ", " + format(lon, 7))
    }
    if let h = d["horizontal-accuracy"]?.doubleValue { parts.append("±" + format(h, 1) + " m") }
    if let a = d["altitude"]?.doubleValue { parts.append("alt " + format(a, 1) + " m") }
    if let s = d["speed"]?.doubleValue { parts.append(format(s, 2) + " m/s") }
    if let c = d["course"]?.doubleValue { parts.append(format(c, 1) + "°") }
    parts.append(d["fix"]?.stringValue ?? "")
    return parts.joined(separator: "  ")
}
