import GeoConsentAPI
import GeoConsentClient

/// A failure the command explains: exit status 1.
struct Failure: Error {
    var message: String
    init(_ m: String) { message = m }
}

/// A D-Bus error as one line for the user: what it means for them, and what to do.
func explain(_ e: DBusError) -> String {
    switch e.name {
    case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
        return tr("geoconsentd is not running on this bus ({message})", ["message": e.message])
    case GeoConsentAPI.ErrorName.noAgent:
        return tr("no consent agent is registered for your user: start one with 'geoconsentctl agent'")
    case GeoConsentAPI.ErrorName.notAuthorized:
        return tr("not authorized: {message}", ["message": e.message])
    case GeoConsentAPI.ErrorName.gpsUnavailable:
        return tr("no GPS: {message}", ["message": e.message])
    case GeoConsentAPI.ErrorName.positionUnavailable:
        return tr("no position from any source: {message}", ["message": e.message])
    case GeoConsentAPI.ErrorName.timeout:
        return tr("no fix in time: {message}", ["message": e.message])
    default:
        return "\(e.name): \(e.message)"
    }
}
