import Glibc
import GeoConsentClient

// MARK: watch

/// Taps, starts updates and prints each fix until Ctrl-C.
func watchCommand(_ ctx: inout Context) async throws {
    let accuracy = try ctx.option("--accuracy") ?? "full"
    guard Accuracy(rawValue: accuracy) != nil else { throw UsageError(tr("--accuracy wants full or reduced")) }
    let distance = try ctx.option("--distance").map { s -> Double in
        guard let d = Double(s), d.isFinite, d >= 0 else { throw UsageError(tr("--distance wants metres >= 0")) }
        return d
    } ?? 0
    let interval = try ctx.option("--interval").map { s -> Double in
        guard let d = Double(s), d.isFinite, d >= 0 else { throw UsageError(tr("--interval wants seconds >= 0")) }
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
    if !json { eprint(tr("Watching; press Ctrl-C to stop.")) }
    for await event in client.events {
        switch event {
        case .locationUpdated(let loc):
            print(json ? JSON(loc.raw).text : oneLine(loc))
            fflush(stdout)
        case .locationError(let name, let message):
            eprint("geoconsentctl: \(name): \(message)")
        case .authorizationChanged(let s):
            if s != .whenInUse && s != .always { throw Failure(tr("authorization ended: {status}", ["status": s.name])) }
        case .disconnected:
            throw Failure(tr("lost the bus connection"))
        }
    }
}

/// A fix as one line: time, position, accuracy, altitude, speed, course, fix mode.
func oneLine(_ loc: Location) -> String {
    let f = loc.fix
    var parts: [String] = []
    parts.append(f.timestamp.map(formatTime) ?? "-")
    parts.append(format(f.latitude, 7) + ", " + format(f.longitude, 7))
    if let h = f.horizontalAccuracy { parts.append("±" + format(h, 1) + " m") }
    if let a = f.altitude { parts.append("alt " + format(a, 1) + " m") }
    if let s = f.speed { parts.append(format(s, 2) + " m/s") }
    if let c = f.course { parts.append(format(c, 1) + "°") }
    parts.append(f.mode.rawValue)
    parts.append(f.source.rawValue)
    return parts.joined(separator: "  ")
}
