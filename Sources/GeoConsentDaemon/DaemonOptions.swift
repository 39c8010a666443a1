/// geoconsentd's command line (docs/dbus-api.md "Command lines").
public struct DaemonOptions: Equatable {
    public var bus: String = "system"
    public var gpsdHost: String = "localhost"
    public var gpsdPort: UInt16 = 2947
    /// nil: /etc/geoconsent/geoconsent.conf plus conf.d.
    public var configFile: String?
    /// nil: from the config (default /var/lib/geoconsent).
    public var stateDir: String?
    /// Also serve GeoClue's API (`--geoclue`), whatever the config says.
    public var serveGeoClue = false
    public var action: Action = .run

    public enum Action: Equatable { case run, help, version, introspect }

    public static let usage = """
    Usage: geoconsentd [OPTIONS]

    The geoconsent location daemon: one-time, consent-gated GPS fixes over D-Bus.

    Options:
      --bus system|session|ADDRESS  bus to serve on (default: system)
      --gpsd HOST:PORT              gpsd to read fixes from (default: localhost:2947)
      --config FILE                 read only FILE (default: /etc/geoconsent/geoconsent.conf
                                    and /etc/geoconsent/conf.d/*.conf)
      --state-dir DIR               where consents are kept (default: /var/lib/geoconsent)
      --geoclue                     also own org.freedesktop.GeoClue2 and serve GeoClue's
                                    API (default: [geoclue] serve in the config)
      --introspect                  print the D-Bus introspection XML and exit
                                    (with --geoclue: GeoClue's)
      --version                     print the version and exit
      --help                        print this help and exit

    See geoconsentd(8) and geoconsent.conf(5).
    """

    public init() {}

    /// Parses arguments (without the program name). Errors are one-line messages.
    public static func parse(_ args: [String]) throws -> DaemonOptions {
        var o = DaemonOptions()
        var i = 0
        func value(_ flag: String, inline: String?) throws -> String {
            if let inline { return inline }
            i += 1
            guard i < args.count else { throw UsageError("\(flag) needs a value") }
            return args[i]
        }
        while i < args.count {
            var a = args[i]
            var inline: String?
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                inline = String(a[a.index(after: eq)...])
                a = String(a[..<eq])
            }
            switch a {
            case "--bus":
                o.bus = try value(a, inline: inline)
                if o.bus.isEmpty { throw UsageError("--bus needs system, session or an address") }
            case "--gpsd":
                let v = try value(a, inline: inline)
                guard let (h, p) = parseHostPort(v) else { throw UsageError("--gpsd wants HOST:PORT, got '\(v)'") }
                o.gpsdHost = h
                o.gpsdPort = p
            case "--config": o.configFile = try value(a, inline: inline)
            case "--state-dir":
                let d = try value(a, inline: inline)
                guard d.hasPrefix("/") else { throw UsageError("--state-dir wants an absolute path") }
                o.stateDir = d
            case "--geoclue":
                guard inline == nil else { throw UsageError("--geoclue takes no value") }
                o.serveGeoClue = true
            case "--introspect": o.action = .introspect
            case "--version": o.action = .version
            case "--help", "-h": o.action = .help
            default: throw UsageError("unknown option '\(args[i])' (see --help)")
            }
            i += 1
        }
        return o
    }

    /// `HOST:PORT`, `[V6]:PORT`.
    static func parseHostPort(_ s: String) -> (String, UInt16)? {
        guard let colon = s.lastIndex(of: ":") else { return nil }
        var host = String(s[..<colon])
        guard let port = UInt16(s[s.index(after: colon)...]), port > 0 else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        return (host, port)
    }
}

/// A command-line mistake: exit status 2.
public struct UsageError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
