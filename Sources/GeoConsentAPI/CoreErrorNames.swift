import GeoDBus
import GeoCore

/// The core decides errors as `CoreError`; their D-Bus names belong to the API,
/// not to the core, so they are given here.
extension CoreError {
    /// The error's name on the bus (docs/dbus-api.md).
    public var dbusName: String {
        switch self {
        case .notAuthorized: return GeoConsentAPI.ErrorName.notAuthorized
        case .noAgent: return GeoConsentAPI.ErrorName.noAgent
        case .agentExists: return GeoConsentAPI.ErrorName.agentExists
        case .promptPending: return GeoConsentAPI.ErrorName.promptPending
        case .accessDenied: return DBusError.accessDeniedName
        case .invalidArgs: return DBusError.invalidArgsName
        case .limitsExceeded: return DBusError.limitsExceededName
        case .sessionPaused: return GeoConsentAPI.ErrorName.sessionInactive
        }
    }

    /// The error reply a caller gets: the name and the core's message.
    public var dbusError: DBusError { DBusError(dbusName, message) }
}

/// The location core's failures, named on the bus: the error reply of a held
/// `RequestLocation`, and the first argument of `LocationError`.
extension LocationFailure {
    /// The error's name on the bus (docs/dbus-api.md "Errors").
    public var dbusName: String {
        switch self {
        case .notAuthorized: return GeoConsentAPI.ErrorName.notAuthorized
        case .timeout: return GeoConsentAPI.ErrorName.timeout
        case .gpsUnavailable: return GeoConsentAPI.ErrorName.gpsUnavailable
        case .positionUnavailable: return GeoConsentAPI.ErrorName.positionUnavailable
        case .tooManyRequests: return DBusError.limitsExceededName
        case .sessionPaused: return GeoConsentAPI.ErrorName.sessionInactive
        }
    }
}
