// geoconsent-localuser: one unprivileged local user of the machine, for the
// integration tests (Tests/IntegrationTests/LocalUserRig.swift). Each command
// plays the victim, its consent agent or an attacker on the bus given with
// --bus; the tests start it as another uid with setpriv. It writes one line
// per event on stdout, flushed at once, for the tests to read.
import Glibc
import GeoDBus

let usage = """
usage: geoconsent-localuser --bus ADDRESS COMMAND [OPTIONS]
       geoconsent-localuser deny-capset PROGRAM [ARGS...]
      runs PROGRAM with capset(2) failing (EPERM), as a SystemCallFilter= denying it does
  victim [--max-seconds S] [--keep-consent yes]
      round after round on a fresh connection: forget the app's one-time
      confirmation, tap (this uid's agent answers), fetch a fix; prints each
      round and, on SIGTERM, a summary with the tap latencies
  agent [--answer DECISION|never] [--features focus,notices] [--focus yes|no|hold]
      a consent agent for this uid that prints what each Confirm carries (UTF-8
      as hex) and answers DECISION (default allow-once), or never answers
  tap [--app-name NAME]
      GetAuthorization, then a tap; prints the app-id (hex), both replies and
      the tap's latency
  taps --calls N [--fds K] [--string KEY --bytes B] [--wait S]
      N taps at once, one per connection, each with K file descriptors and a
      B-byte string under KEY; prints each answer as it comes, until all are
      answered, SIGTERM, or S seconds (default 30)
  tap-copies --dir DIR --copies N [--one-by-one] [--quiet S]
      N paths of this program in DIR (apps of their own), each running `tap`,
      all at once (those still waiting after S quiet seconds are killed) or
      one by one; prints each copy's output
  flood-sessions --connections N [--close K]
      GetAuthorization on N connections; then closes K served ones and calls
      again on K refused ones
  flood-locate --requests N
      a tap, one RequestLocation, then N RequestLocation at once on one
      connection, none answerable from a cached fix
  sandbox-marker --dir DIR --kind fifo|devzero|huge [--calls N]
      makes DIR/.flatpak-info hostile, connects, enters a user namespace of
      its own, chroots into DIR and calls GetAuthorization and taps N times
  spoof-exe --dir DIR
      copies this program to DIR/<name with U+202E and a newline> and runs
      its `tap` command from there
  forge --how exec|bind-mount --target EXE
  forge --how wait --go-file FILE
  forge --how flatpak-root --dir DIR --app-id ID [--bind-root] [--geoclue-desktop-id X]
      shows another identity (EXE's path, by exec after connecting or by a
      bind mount in a mount namespace of its own; a cgroup the tests move it
      into before FILE appears; a chroot with DIR/.flatpak-info naming ID,
      DIR bind-mounted on itself first with --bind-root),
      then calls GetAuthorization, taps, asks for a fix and registers an agent
      (with --geoclue-desktop-id: a GeoClue client's Start with DesktopId X instead)
  geoclue-start --desktop-id X
      a GeoClue client: GetClient, DesktopId X, accuracy level 8, Start; prints Start's answer
  geoclue-shell-agent --allow ID
      a GeoClue agent (AddAgent) that, like GNOME Shell's, answers AuthorizeApp
      true from a permission stored for desktop id ID and false for any other;
      prints each call (`authorize ID_HEX LEVEL yes|no`)
  hand-over [--wait S] [--linger S]
      taps (this uid's agent answers), starts updates, hands the connection to
      a child and exits; the child prints each AuthorizationChanged after the
      exit with its delay, then asks for a fix and the authorization, and
      keeps the connection S seconds more
  geoclue-agent-burst --connections K --calls N [--hold S]
      N GeoClue AddAgent calls pipelined on each of K connections, whose
      sockets are never read again (the daemon's reads of the agent's level
      stay unanswered); holds until SIGTERM or S seconds (default 300)
  geoclue-agent-loop --seconds S [--fresh]
      AddAgent again and again for S seconds, serving MaxAccuracyLevel, on one
      connection (each on a new one with --fresh); prints a summary
  geoclue-client-churn --connections N [--delete] [--hold S]
      CreateClient and Start (and DeleteClient) on each of N connections kept
      open; holds until SIGTERM or S seconds (default 300)
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
if argv.count >= 2, argv[1] == "deny-capset" { denyCapsetAndExec(Array(argv.dropFirst(2))) }
guard argv.count >= 4, argv[1] == "--bus" else { fail(usage) }
let bus = argv[2]
let options = Options(argv[4...])
setvbuf(stdout, nil, _IOLBF, 0)

switch argv[3] {
case "victim":
    exit(runVictim(bus: bus, maxSeconds: Double(options.values["--max-seconds"] ?? "") ?? 300,
                   keepConsent: options.values["--keep-consent"] == "yes"))
case "agent":
    exit(runAgent(bus: bus, answer: options.values["--answer"] ?? "allow-once",
                  features: (options.values["--features"] ?? "").split(separator: ",").map(String.init),
                  focus: options.values["--focus"] ?? "yes"))
case "tap":
    exit(runTap(bus: bus, appName: options.values["--app-name"] ?? "geoconsent-localuser"))
case "taps":
    exit(runTaps(bus: bus, calls: Int(options.required("--calls")) ?? 1, fds: Int(options.values["--fds"] ?? "") ?? 0,
                 stringKey: options.values["--string"], stringBytes: Int(options.values["--bytes"] ?? "") ?? 0,
                 waitSeconds: Double(options.values["--wait"] ?? "") ?? 30))
case "tap-copies":
    exit(runTapCopies(bus: bus, dir: options.required("--dir"), copies: Int(options.required("--copies")) ?? 1,
                      oneByOne: options.flags.contains("--one-by-one"),
                      quietSeconds: Double(options.values["--quiet"] ?? "") ?? 3))
case "flood-sessions":
    exit(runFloodSessions(bus: bus, connections: Int(options.required("--connections")) ?? 1,
                          close: Int(options.values["--close"] ?? "") ?? 0))
case "flood-locate":
    exit(runFloodLocate(bus: bus, requests: Int(options.required("--requests")) ?? 1))
case "sandbox-marker":
    exit(runSandboxMarker(bus: bus, dir: options.required("--dir"), kind: options.required("--kind"),
                          calls: Int(options.values["--calls"] ?? "") ?? 10))
case "spoof-exe":
    exit(runSpoofExe(bus: bus, dir: options.required("--dir")))
case "forge":
    exit(runForge(bus: bus, how: options.required("--how"), options: options))
case "hand-over":
    exit(runHandOver(bus: bus, waitSeconds: Double(options.values["--wait"] ?? "") ?? 5,
                     lingerSeconds: Double(options.values["--linger"] ?? "") ?? 0))
case "borrow-pid":
    exit(runBorrowPID(bus: bus, goFile: options.required("--go-file"), resolveFirst: options.flags.contains("--resolve-first")))
case "geoclue-agent-burst":
    exit(runGeoClueAgentBurst(bus: bus, connections: Int(options.required("--connections")) ?? 1,
                              calls: Int(options.required("--calls")) ?? 1,
                              holdSeconds: Double(options.values["--hold"] ?? "") ?? 300))
case "geoclue-agent-loop":
    exit(runGeoClueAgentLoop(bus: bus, seconds: Double(options.required("--seconds")) ?? 5,
                             fresh: options.flags.contains("--fresh")))
case "geoclue-start":
    geoclueStart(connect(bus), desktopID: options.required("--desktop-id"))
    exit(0)
case "geoclue-shell-agent":
    exit(runGeoClueShellAgent(bus: bus, allowed: options.required("--allow")))
case "geoclue-client-churn":
    exit(runGeoClueClientChurn(bus: bus, connections: Int(options.required("--connections")) ?? 1,
                               delete: options.flags.contains("--delete"),
                               holdSeconds: Double(options.values["--hold"] ?? "") ?? 300))
default:
    fail(usage)
}
