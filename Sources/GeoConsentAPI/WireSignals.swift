import GeoDBus
import GeoCore

// The signals' arguments and the properties (docs/dbus-api.md "Signals",
// "Properties"), each declared once. `LocationUpdated` carries a
// `LocationBody` (LocationDictionary.swift).

/// `AuthorizationChanged(u status)`, unicast to the session whose status changed.
public enum AuthorizationChangedSignal {
    /// The signal's name.
    public static let member = "AuthorizationChanged"

    /// The daemon's signal.
    public static func encode(_ status: AuthorizationStatus) -> [DBusValue] { [.uint32(status.rawValue)] }

    /// Nil unless the first value is a known status.
    public static func decode(_ values: [DBusValue]) -> AuthorizationStatus? {
        values.first?.uint32Value.flatMap(AuthorizationStatus.init)
    }
}

/// `LocationError(s error_name, s message)`, unicast to a session with updates on.
public enum LocationErrorSignal {
    /// The signal's name.
    public static let member = "LocationError"

    /// The daemon's signal: the error name of docs/dbus-api.md and a message.
    public static func encode(name: String, message: String) -> [DBusValue] { [.string(name), .string(message)] }

    /// Nil unless both values are strings.
    public static func decode(_ values: [DBusValue]) -> (name: String, message: String)? {
        guard values.count == 2, let name = values[0].stringValue, let message = values[1].stringValue else { return nil }
        return (name, message)
    }
}

/// `LocationUpdated(a{sv} location)`: its body is a `LocationBody`.
public enum LocationUpdatedSignal {
    /// The signal's name.
    public static let member = "LocationUpdated"
}

/// The daemon's global properties, as `GetAll` returns them.
public struct DaemonStatus: Equatable, Sendable {
    /// The daemon's version (`Version`).
    public var version: String
    /// Location is switched on for everyone (`Enabled`).
    public var enabled: Bool
    /// The daemon holds a connection to gpsd (`GpsdConnected`).
    public var gpsdConnected: Bool
    /// Some session has a location request or updates running (`InUse`).
    public var inUse: Bool
    /// The sources that can answer now, best first (`Sources`).
    public var sources: [PositionSource] = []
    /// Wi-Fi positioning is configured and switched on (`WiFiEnabled`).
    public var wifiEnabled = false

    /// The first four properties' values (the others as set after).
    public init(version: String, enabled: Bool, gpsdConnected: Bool, inUse: Bool) {
        self.version = version
        self.enabled = enabled
        self.gpsdConnected = gpsdConnected
        self.inUse = inUse
    }
}

/// The properties of `org.geoconsent.GeoConsent1`: their names, `GetAll`'s
/// dictionary and what `PropertiesChanged` carries for them.
public enum DaemonProperties {
    /// `s`, constant.
    public static let version = "Version"
    /// `b`, read-write (root), emits changes.
    public static let enabled = "Enabled"
    /// `b`, emits changes.
    public static let gpsdConnected = "GpsdConnected"
    /// `b`, emits changes.
    public static let inUse = "InUse"
    /// `as`, emits changes.
    public static let sources = "Sources"
    /// `b`, read-write (root), emits changes.
    public static let wifiEnabled = "WiFiEnabled"

    /// `Sources`' value.
    public static func encode(sources: [PositionSource]) -> DBusValue { .strings(sources.map(\.rawValue)) }

    /// `GetAll`'s dictionary (the object server builds it from the getters; this is what they return).
    public static func encode(_ s: DaemonStatus) -> [String: DBusValue] {
        [version: .string(s.version), enabled: .bool(s.enabled), gpsdConnected: .bool(s.gpsdConnected),
         inUse: .bool(s.inUse), sources: encode(sources: s.sources), wifiEnabled: .bool(s.wifiEnabled)]
    }

    /// Reads `GetAll`'s dictionary; missing values read as "" and false.
    public static func decode(_ all: [String: DBusValue]) -> DaemonStatus {
        var s = DaemonStatus(version: all[version]?.stringValue ?? "", enabled: all[enabled]?.boolValue ?? false,
                             gpsdConnected: all[gpsdConnected]?.boolValue ?? false, inUse: all[inUse]?.boolValue ?? false)
        s.sources = all[sources]?.arrayValue?.compactMap { $0.stringValue.flatMap(PositionSource.init(rawValue:)) } ?? []
        s.wifiEnabled = all[wifiEnabled]?.boolValue ?? false
        return s
    }

    /// The changed-properties dictionary of `PropertiesChanged` for one boolean property.
    public static func changed(_ name: String, _ value: Bool) -> [String: DBusValue] { [name: .bool(value)] }

    /// The changed properties of a `PropertiesChanged(s, a{sv}, as)` about this
    /// interface; nil for another interface or shape.
    public static func decodeChanged(_ values: [DBusValue]) -> [String: DBusValue]? {
        guard values.count == 3, values[0].stringValue == GeoConsentAPI.interfaceName else { return nil }
        return values[1].vardictValue
    }
}

/// `SessionsChanged()`: a session of the watcher's uid started, ended, or
/// changed what `ListSessionDetails` shows of it (`WatchSessions`). No
/// arguments: the watcher reads the list, which shows it its own uid's.
public enum SessionsChangedSignal {
    public static let member = "SessionsChanged"
}
