// geoconsent-localuser: one unprivileged local user of the machine, for the
// integration tests (Tests/IntegrationTests/LocalUserRig.swift). Each command
// plays the victim, its consent agent or an attacker on the bus given with
// --bus; the tests start it as another uid with setpriv. It writes one line
// per event on stdout, flushed at once, for the tests to read.
import Glibc
import GeoDBus

let usage = """
usage: geoconsent-localuser --bus ADDRESS COMMAND [OPTIONS]
  victim [--max-seconds S]
      round after round on a fresh connection: forget the app's one-time
      confirmation, tap (this uid's agent answers), fetch a fix; prints each
      round and, on SIGTERM, a summary with the tap latencies
  agent [--answer DECISION]
      a consent agent for this uid that prints what each Confirm carries (UTF-8
      as hex) and answers DECISION (default allow-once)
  tap [--app-name NAME]
      GetAuthorization, then a tap; prints the app-id (hex) and both replies
  sandbox-marker --dir DIR --kind fifo|devzero|huge [--calls N]
      makes DIR/.flatpak-info hostile, connects, enters a user namespace of
      its own, chroots into DIR and calls GetAuthorization and taps N times
  spoof-exe --dir DIR
      copies this program to DIR/<name with U+202E and a newline> and runs
      its `tap` command from there
  borrow-pid --go-file FILE [--resolve-first]
      connects (optionally calls once), hands the connection to a child in a
      new session and exits; the child waits for FILE, then calls
      GetAuthorization and RequestLocation
"""

/// The command line after `--bus ADDRESS COMMAND`: options with values and flags.
struct Options {
    var values: [String: String] = [:]
    var flags: Set<String> = []

    init(_ args: ArraySlice<String>) {
        var i = args.startIndex
        while i < args.endIndex {
            let a = args[i]
            if i + 1 < args.endIndex, !args[i + 1].hasPrefix("--") {
                values[a] = args[i + 1]
                i += 2
            } else {
                flags.insert(a)
                i += 1
            }
        }
    }

    func required(_ name: String) -> String {
        guard let v = values[name] else { fail("\(name) is required\n\(usage)") }
        return v
    }
}

let argv = CommandLine.arguments
guard argv.count >= 4, argv[1] == "--bus" else { fail(usage) }
let bus = argv[2]
let options = Options(argv[4...])
setvbuf(stdout, nil, _IOLBF, 0)

switch argv[3] {
case "victim":
    exit(runVictim(bus: bus, maxSeconds: Double(options.values["--max-seconds"] ?? "") ?? 300))
case "agent":
    exit(runAgent(bus: bus, answer: options.values["--answer"] ?? "allow-once"))
case "tap":
    exit(runTap(bus: bus, appName: options.values["--app-name"] ?? "geoconsent-localuser"))
case "sandbox-marker":
    exit(runSandboxMarker(bus: bus, dir: options.required("--dir"), kind: options.required("--kind"),
                          calls: Int(options.values["--calls"] ?? "") ?? 10))
case "spoof-exe":
    exit(runSpoofExe(bus: bus, dir: options.required("--dir")))
case "borrow-pid":
    exit(runBorrowPID(bus: bus, goFile: options.required("--go-file"), resolveFirst: options.flags.contains("--resolve-first")))
default:
    fail(usage)
}
