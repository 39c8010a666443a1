import Glibc
import GeoConsentDaemon
import GeoSystem

// geoconsent-frontend-lab: geoconsentd with the front ends of this folder
// served besides its own (LabFrontEnd.swift), for the tests. Callers are
// identified in this process (no identity helper), as root runs it.
setvbuf(stdout, nil, _IOLBF, 0)
do {
    let options = try DaemonOptions.parse(Array(CommandLine.arguments.dropFirst()))
    let daemon = try Daemon(options: options, identity: AppIdentityResolver(), frontEnds: [{ LabFrontEnd(host: $0) }])
    exit(daemon.run())
} catch {
    Log.error("geoconsent-frontend-lab: \(error)")
    exit(1)
}
