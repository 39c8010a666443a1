import GeoConsentAPI
import GeoConsentClient

/// A failure the command explains: exit status 1.
struct Failure: Error {
    var message: String
    init(_ m: String) { message = m }
}

/// Every D-Bus error a user can meet, as one line: what it means for them and
/// what to do, in their language. No error name reaches the user: a name this
/// table does not know shows its message alone.
func explain(_ e: DBusError) -> String {
    let message = e.message
    switch e.name {
    case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
         "org.freedesktop.DBus.Error.Spawn.ServiceNotFound":
        return tr("geoconsentd is not running on this bus ({message}): is the geoconsent package installed? 'systemctl status geoconsentd' says why it does not start", ["message": message])
    case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.TimedOut":
        return tr("geoconsentd did not answer in time: 'journalctl -u geoconsentd' shows what it is doing")
    case "org.freedesktop.DBus.Error.Disconnected":
        return tr("the connection to the bus was lost: try again")
    case "org.freedesktop.DBus.Error.AccessDenied":
        return message.hasPrefix("Only root may")
            ? tr("not allowed: {message} (run it as root, for example with sudo)", ["message": message])
            : tr("not allowed: {message}", ["message": message])
    case "org.freedesktop.DBus.Error.InvalidArgs":
        return tr("geoconsentd refused the arguments: {message}", ["message": message])
    case "org.freedesktop.DBus.Error.LimitsExceeded":
        return tr("too many requests of your user at once: {message}; try again when some have ended", ["message": message])
    case "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownProperty",
         "org.freedesktop.DBus.Error.UnknownInterface":
        return tr("geoconsentd does not know this ({message}): is it older than geoconsentctl? 'geoconsentctl status' shows its version", ["message": message])
    case GeoConsentAPI.ErrorName.noAgent:
        return tr("no consent agent is registered for your user: start one with 'geoconsentctl agent'")
    case GeoConsentAPI.ErrorName.agentExists:
        return tr("another consent agent is registered for your user (the desktop's, most likely): it answers your prompts; stop it to use this one")
    case GeoConsentAPI.ErrorName.promptPending:
        return tr("a prompt for this is open already: answer it first")
    case GeoConsentAPI.ErrorName.notAuthorized:
        return tr("not authorized: {message}", ["message": message])
    case GeoConsentAPI.ErrorName.gpsUnavailable:
        return tr("no GPS: {message}. Is a receiver attached? 'systemctl status gpsd' shows gpsd; without a receiver, Wi-Fi positioning or a fixed position can answer (geoconsent.conf(5), [sources])", ["message": message])
    case GeoConsentAPI.ErrorName.positionUnavailable:
        return tr("no position from any source: {message}. 'geoconsentctl status' lists the sources", ["message": message])
    case GeoConsentAPI.ErrorName.timeout:
        return tr("no fix in time: {message}. A receiver needs a view of the sky; --timeout waits longer",
                  ["message": message])
    case GeoConsentAPI.ErrorName.sessionInactive:
        return tr("your login session is locked or in the background: location resumes when you are back in it")
    default:
        return message.isEmpty ? e.name : message
    }
}

/// A tap that granted nothing, said for the user: why, and what to do.
/// `enabled` is the daemon's `Enabled`, when it could be read; `appID` is
/// this program's id as the daemon knows it.
func notAuthorized(_ status: AuthorizationStatus, enabled: Bool?, appID: String) -> String {
    switch status {
    case .restricted where enabled == false:
        return tr("location is switched off for everyone: 'geoconsentctl enable' as root switches it on")
    case .restricted:
        return tr("location is restricted for this app: by the administrator (geoconsent.conf(5), [app]), while your login session is locked or in the background, or while your desktop's location switch is off")
    case .denied:
        return tr("location was denied to this app: 'geoconsentctl reset {app}' forgets that answer", ["app": appID])
    case .notDetermined:
        return tr("location was not allowed this time: Don't Allow was chosen, or the prompt was closed or timed out")
    default:
        return tr("location not authorized: {status} ({number})", ["status": status.name, "number": "\(status.rawValue)"])
    }
}
