import Glibc
import GeoDBus

/// Set by SIGTERM: finish the round, print the summary, exit.
nonisolated(unsafe) var victimStop: Int32 = 0

/// The victim: an ordinary user of another uid who keeps using location while
/// an attack runs. Each round is a new connection (a new session): it forgets
/// its app's one-time confirmation, so that the tap goes through this uid's
/// agent every time, taps, and asks for a fix. Prints
/// `round N tap=ok|STATUS|ERROR MS fix=ok|ERROR MS`, and at the end
/// `summary rounds=… taps-ok=… taps-failed=… fixes-ok=… fixes-failed=… tap-p50-ms=… tap-max-ms=…`.
/// With `keepConsent`, it keeps its app's confirmation: every tap after the
/// first is a silent tap (rule 3), checked with its agent's `CheckFocus`
/// when the agent registered with that feature.
func runVictim(bus: String, maxSeconds: Double, keepConsent: Bool = false) -> Int32 {
    signal(SIGTERM) { _ in victimStop = 1 }
    let deadline = monotonic() + maxSeconds
    var appID: String?
    var tapTimes: [Double] = []
    var tapsOK = 0, tapsFailed = 0, fixesOK = 0, fixesFailed = 0
    var round = 0
    while victimStop == 0 && monotonic() < deadline {
        round += 1
        let c = connect(bus)
        if appID == nil, case .success(let v) = call(c, "GetAuthorization") {
            appID = v.dropFirst().first?.vardictValue?["app-id"]?.stringValue
        }
        if let appID, !keepConsent { _ = call(c, "ResetConsent", [.string(appID), .vardict([:])]) }

        let t0 = monotonic()
        let tap = call(c, "RequestOneTimeAuthorization", [.vardict(["reason": .string("victim round \(round)")])], timeout: 10)
        let tapMS = (monotonic() - t0) * 1000
        tapTimes.append(tapMS)
        let tapText: String
        switch tap {
        case .success(let v) where v.first?.uint32Value == 4:
            tapsOK += 1
            tapText = "ok"
        case .success(let v):
            tapsFailed += 1
            tapText = "status-\(v.first?.uint32Value.map(String.init) ?? "?")"
        case .failure(let e):
            tapsFailed += 1
            tapText = "error-\(e.name)"
        }

        let t1 = monotonic()
        let fix = call(c, "RequestLocation", [.vardict(["max-age": .double(5), "timeout": .double(10)])], timeout: 15)
        let fixMS = (monotonic() - t1) * 1000
        let fixText: String
        switch fix {
        case .success(let v) where v.first?.vardictValue?["latitude"] != nil:
            fixesOK += 1
            fixText = "ok"
        case .success:
            fixesFailed += 1
            fixText = "no-latitude"
        case .failure(let e):
            fixesFailed += 1
            fixText = "error-\(e.name)"
        }
        c.close()
        say("round \(round) tap=\(tapText) \(format(tapMS)) fix=\(fixText) \(format(fixMS))")
        usleep(20_000)
    }
    let sorted = tapTimes.sorted()
    let p50 = sorted.isEmpty ? 0 : sorted[(sorted.count - 1) / 2]
    say("summary rounds=\(round) taps-ok=\(tapsOK) taps-failed=\(tapsFailed) fixes-ok=\(fixesOK) " +
        "fixes-failed=\(fixesFailed) tap-p50-ms=\(format(p50)) tap-max-ms=\(format(sorted.last ?? 0))")
    return 0
}

private func format(_ ms: Double) -> String {
    let hundredths = Int((ms * 100).rounded())
    let frac = hundredths % 100
    return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac)"
}
