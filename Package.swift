// swift-tools-version:6.0
// geoconsent: a consent-gated location daemon for Linux, on libdbus-1 and libgps.
// No outside packages: only the toolchain's modules and C libraries from Debian.
import PackageDescription

let package = Package(
    name: "geoconsent",
    products: [
        .executable(name: "geoconsentd", targets: ["geoconsentd"]),
        .executable(name: "geoconsentctl", targets: ["geoconsentctl"]),
        .executable(name: "geoconsent-wifi-helper", targets: ["geoconsent-wifi-helper"]),
        /// Typed async Swift calls for apps: the client half of the geoconsent D-Bus API.
        .library(name: "GeoConsentClient", targets: ["GeoConsentClient"]),
    ],
    targets: [
        // C libraries, each behind a thin system-library target.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        // libgps is linked statically: its module map links ":libgps.a" (the archive by
        // name), and there is no pkg-config here, whose "-lgps" would link libgps.so too.
        // Why: the client part of libgps is small, its soname changes with every gpsd
        // API major (the JSON protocol does not), and without libgps.so the daemon
        // does not load libstdc++.so either (docs/performance.md, idle RSS).
        .systemLibrary(name: "CGPS", providers: [.apt(["libgps-dev"])]),
        // glibc's <malloc.h> (malloc_trim), not in Swift's Glibc module.
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(name: "CIntl"),
        // libcurl, for the Wi-Fi network helper alone (the daemon never links it).
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // OpenSSL, libcurl's TLS library: the helper readies it before its first lookup.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
        // Linux system calls glibc has no wrapper for (openat2, capset) or only a
        // variadic one (prctl), as inline C.
        .systemLibrary(name: "CLinuxSyscalls"),

        // Pure core: consent/session state machine, config parsing. No I/O.
        .target(name: "GeoCore"),
        // The network helper's side of Wi-Fi positioning: the ichnaea geolocate API
        // (JSON, request and reply) and its rules around the server (cache, backoff).
        .target(name: "GeoGeolocate", dependencies: ["GeoCore"]),
        // Typed D-Bus layer and the poll() event loop (the only code that calls libdbus).
        .target(name: "GeoDBus", dependencies: ["CDBus"]),
        // The geoconsent D-Bus API declared once: names, interface tables, option decoding.
        .target(name: "GeoConsentAPI", dependencies: ["GeoDBus", "GeoCore"]),
        // gpsd client over libgps (the only code that calls libgps).
        .target(name: "GeoGPS", dependencies: ["CGPS", "GeoCore"]),
        // Small Foundation-free system helpers: files, atomic writes, /proc, state store.
        .target(name: "GeoSystem", dependencies: ["GeoCore", "CLinuxSyscalls"]),
        // The daemon: wires core, bus, gpsd and state together.
        .target(name: "GeoConsentDaemon", dependencies: ["GeoCore", "GeoDBus", "GeoConsentAPI", "GeoGPS", "GeoSystem", "CMalloc"]),
        .executableTarget(name: "geoconsentd", dependencies: ["GeoConsentDaemon", "GeoConsentAPI", "GeoCore", "GeoSystem"]),
        // The client library apps import: calls, signals and a consent agent; an app
        // needs no other module. geoconsentctl talks to the daemon through it alone.
        .target(name: "GeoConsentClient", dependencies: ["GeoDBus", "GeoCore", "GeoConsentAPI"]),
        .executableTarget(name: "geoconsentctl", dependencies: ["GeoConsentAPI", "GeoConsentClient", "GeoCore", "CIntl"]),
        // The one process that reaches the network: Wi-Fi lookups over HTTPS, socket-activated.
        .executableTarget(name: "geoconsent-wifi-helper", dependencies: ["GeoCore", "GeoGeolocate", "GeoSystem", "CCurl", "COpenSSL"]),

        // Instruments, apart from the product (Instruments/): what tests and the bench
        // run beside it. None is installed or packaged.
        // Starts real dbus-daemon, gpsd and geoconsentd processes for tests and benchmarks.
        .target(name: "GeoTestSupport", dependencies: ["GeoDBus"], path: "Instruments/GeoTestSupport"),
        .executableTarget(name: "nmea-replay", dependencies: ["GeoTestSupport"], path: "Instruments/nmea-replay"),
        // The bench's floors in plain C on libdbus: receivers, a sender of prebuilt
        // signals, an echo service, a churn loop, and GeoClue2 clients with a sender
        // of the GeoClue2 protocol (the daemon is measured with the same).
        .target(name: "CBenchFloor", dependencies: ["CDBus"], path: "Instruments/CBenchFloor"),
        // make bench: the real stack against floors measured in the same run.
        .executableTarget(name: "geoconsent-bench", dependencies: ["GeoTestSupport", "GeoDBus", "GeoCore", "GeoConsentAPI", "GeoGeolocate", "GeoSystem", "CBenchFloor", "CCurl"],
                          path: "Instruments/geoconsent-bench"),
        // One unprivileged local user for the integration tests: the victim, its
        // agent, and the attacks (run as other uids with setpriv).
        .executableTarget(name: "geoconsent-localuser", dependencies: ["GeoDBus", "GeoConsentAPI", "CLinuxSyscalls"],
                          path: "Instruments/geoconsent-localuser"),
        // The daemon with front ends made only for the tests (proof of the front-end seam):
        // adding one touches this folder and its tests, nothing of the cores or the daemon.
        .executableTarget(name: "geoconsent-frontend-lab", dependencies: ["GeoConsentDaemon", "GeoCore", "GeoDBus", "GeoSystem"],
                          path: "Instruments/geoconsent-frontend-lab"),

        .testTarget(name: "GeoCoreTests", dependencies: ["GeoCore"]),
        .testTarget(name: "GeoGeolocateTests", dependencies: ["GeoGeolocate", "GeoCore"]),
        .testTarget(name: "GeoSystemTests", dependencies: ["GeoSystem", "GeoCore"]),
        .testTarget(name: "GeoDBusTests", dependencies: ["GeoDBus", "GeoTestSupport"]),
        .testTarget(name: "GeoGPSTests", dependencies: ["GeoGPS", "GeoTestSupport"]),
        // Every wire shape and error name against the contract: pure, no process started.
        .testTarget(name: "GeoConsentAPITests", dependencies: ["GeoConsentAPI", "GeoCore", "GeoDBus"]),
        // The daemon's own pieces without a bus (log bounds).
        .testTarget(name: "GeoConsentDaemonTests", dependencies: ["GeoConsentDaemon", "GeoTestSupport"]),
        // The process harness's own tests (bus, gpsd, child processes, NMEA, DaemonInstance).
        .testTarget(name: "HarnessTests", dependencies: ["GeoTestSupport"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["GeoDBus", "GeoConsentAPI", "GeoConsentClient", "GeoTestSupport", "GeoConsentDaemon", "GeoSystem",
                                   "geoconsentd", "geoconsentctl", "geoconsent-localuser", "geoconsent-frontend-lab"]),
    ],
    swiftLanguageModes: [.v5]
)
