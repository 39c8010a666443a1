import Glibc
import GeoConsentClient
import GeoCore

// geoconsentctl: the command line of geoconsent, in the style of timedatectl.
setvbuf(stdout, nil, _IOLBF, 0)
Localization.start()

let usage = tr("""
Usage: geoconsentctl [--bus system|session|ADDRESS] [--json] COMMAND [ARGS]

Commands:
  status                        show whether location is on and gpsd connected
  locate [--accuracy full|reduced] [--reason TEXT] [--timeout S]
                                act as an app pressing "Current Location": ask for
                                a one-time grant, then print one fix
  watch [--accuracy A] [--distance M] [--interval S]
                                the same, then print fixes until Ctrl-C
  agent [--auto allow-once|allow-while-using|deny|allow-once-reduced|allow-while-using-reduced]
                                be the consent agent of your user (answers prompts
                                on the terminal, or automatically for scripts)
  consents                      list stored consents (root: of every user)
  sessions                      list live sessions (root: of every user)
  reset APP_ID [--uid UID]      forget the consent of an app
  decide APP_ID [never|ask|while-using] [--precise on|off] [--uid UID]
                                decide for an app as the settings window does; more
                                than is stored is confirmed in your consent agent
  user-location [on|off] [--uid UID]
                                location for your apps; on is confirmed in your
                                consent agent (root: at once)
  enable | disable              switch location on or off for everyone (root)
  wifi on | off                 switch Wi-Fi positioning on or off for everyone (root)

Options:
  --bus system|session|ADDRESS  bus to use (default: system)
  --json                        print JSON instead of text
  --help                        show this help

Exit status: 0 success, 1 failure (explained on stderr), 2 usage error.
See geoconsentctl(1).
""")

var rest = Array(CommandLine.arguments.dropFirst())
var bus = BusAddress.system
var json = false
var command: String?
var i = 0
while i < rest.count {
    let a = rest[i]
    if command == nil {
        if a == "--help" || a == "-h" { print(usage); exit(0) }
        if a == "--version" { print("geoconsentctl \(geoconsentVersion)"); exit(0) }
        if a == "--json" { json = true; rest.remove(at: i); continue }
        if a == "--bus" || a.hasPrefix("--bus=") {
            let v: String
            if a == "--bus" {
                guard i + 1 < rest.count else { eprint("geoconsentctl: " + tr("--bus needs a value")); exit(2) }
                v = rest[i + 1]
                rest.removeSubrange(i...(i + 1))
            } else {
                v = String(a.dropFirst(6))
                rest.remove(at: i)
            }
            bus = BusAddress(argument: v)
            continue
        }
        if a.hasPrefix("-") { eprint("geoconsentctl: " + tr("unknown option '{option}' (see --help)", ["option": a])); exit(2) }
        command = a
        rest.remove(at: i)
        continue
    }
    // Options after the command: --json may come anywhere.
    if a == "--json" { json = true; rest.remove(at: i); continue }
    if a == "--help" { print(usage); exit(0) }
    i += 1
}

// With no command, the state of things (as timedatectl does).
let commandName = command ?? "status"
var ctx = Context(bus: bus, json: json, args: rest)
do {
    switch commandName {
    case "status": try await statusCommand(&ctx)
    case "locate": try await locateCommand(&ctx)
    case "watch": try await watchCommand(&ctx)
    case "agent": try await agentCommand(&ctx)
    case "consents": try await consentsCommand(&ctx)
    case "sessions": try await sessionsCommand(&ctx)
    case "reset": try await resetCommand(&ctx)
    case "decide": try await decideCommand(&ctx)
    case "user-location": try await userLocationCommand(&ctx)
    case "enable": try await setEnabledCommand(&ctx, true)
    case "disable": try await setEnabledCommand(&ctx, false)
    case "wifi": try await setWiFiCommand(&ctx)
    default: throw UsageError(tr("unknown command '{command}' (see --help)", ["command": commandName]))
    }
    exit(0)
} catch let e as UsageError {
    eprint("geoconsentctl: \(e.message)")
    exit(2)
} catch let e as Failure {
    eprint("geoconsentctl: \(e.message)")
    exit(1)
} catch let e as DBusError {
    eprint("geoconsentctl: \(explain(e))")
    exit(1)
} catch {
    eprint("geoconsentctl: \(error)")
    exit(1)
}
