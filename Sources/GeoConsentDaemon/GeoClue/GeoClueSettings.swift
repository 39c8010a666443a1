import GeoCore
import GeoSystem

/// The facade's section of the configuration, `[geoclue]` (geoconsent.conf(5)):
/// read and checked here, by the front end that owns it, from the entries the
/// config parser kept for it (`Config.frontEndEntries`).
struct GeoClueSettings: Equatable {
    static let section = "geoclue"

    /// Also own `org.freedesktop.GeoClue2` and serve GeoClue's API (`serve`).
    var serve = false
    /// Where the desktop entries that name a host app to a GeoClue agent are
    /// looked for (`desktop-entries`), first found first: XDG's system
    /// applications directories.
    var desktopEntries = DesktopEntries.defaultDirectories

    init() {}

    /// The settings `entries` give, in order (a key given again wins); a bad one
    /// throws `FILE:LINE: reason`.
    init(_ entries: [ConfigEntry]) throws {
        for e in entries {
            switch e.key {
            case "serve":
                guard let v = Bool(e.value) else { throw e.fail("serve must be 'true' or 'false', not '\(e.value)'") }
                serve = v
            case "desktop-entries":
                let dirs = e.listValue
                if let bad = dirs.first(where: { !$0.hasPrefix("/") }) {
                    throw e.fail("desktop-entries wants absolute directories separated by ';', not '\(bad)'")
                }
                desktopEntries = dirs
            default:
                throw e.fail("unknown key '\(e.key)' in [\(Self.section)]")
            }
        }
    }
}
