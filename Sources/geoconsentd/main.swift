import Glibc
import GeoConsentDaemon
import GeoConsentAPI
import GeoCore

// geoconsentd: see DaemonOptions.usage and geoconsentd(8).
setvbuf(stdout, nil, _IOLBF, 0)
let options: DaemonOptions
do {
    options = try DaemonOptions.parse(Array(CommandLine.arguments.dropFirst()))
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
    let daemon = try Daemon(options: options)
    exit(daemon.run())
} catch {
    Log.error("geoconsentd: \(error)")
    exit(1)
}
