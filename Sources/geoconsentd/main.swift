import Glibc
import GeoConsentDaemon
import GeoConsentAPI
import GeoCore
import GeoSystem

// geoconsentd: see DaemonOptions.usage and geoconsentd(8).
setvbuf(stdout, nil, _IOLBF, 0)
var arguments = Array(CommandLine.arguments.dropFirst())
// The identity helper this daemon starts for itself (GeoSystem/IdentitySeparation.swift).
if arguments.first == IdentitySeparation.helperFlag {
    guard arguments.count == 2, let fd = Int32(arguments[1]), fd > 2 else {
        Log.error("geoconsentd: \(IdentitySeparation.helperFlag) wants one descriptor")
        exit(2)
    }
    IdentityHelper.run(fd: fd)
}
let inheritedHelperSocket = IdentitySeparation.takeInheritedSocket(&arguments)
let options: DaemonOptions
do {
    options = try DaemonOptions.parse(arguments)
} catch {
    Log.error("geoconsentd: \(error)")
    exit(2)
}
switch options.action {
case .help:
    print(DaemonOptions.usage)
    exit(0)
case .version:
    print("geoconsentd \(geoconsentVersion)")
    exit(0)
case .introspect:
    print(options.serveGeoClue ? GeoClueAPI.introspectionXML : GeoConsentAPI.introspectionXML, terminator: "")
    exit(0)
case .run:
    break
}
do {
    // Before the config, the state or the bus: from here on this process holds no capability.
    let identity = try IdentitySeparation.prepare(argv: CommandLine.arguments, inherited: inheritedHelperSocket)
    Log.debug(identity.note)
    let daemon = try Daemon(options: options, identity: identity.source)
    exit(daemon.run())
} catch {
    Log.error("geoconsentd: \(error)")
    exit(1)
}
