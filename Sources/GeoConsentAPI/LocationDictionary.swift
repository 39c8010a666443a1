import GeoDBus
import GeoCore

/// The location dictionary of docs/dbus-api.md (`a{sv}`): encoded by the daemon for
/// every fix, decoded by clients.
public enum LocationDictionary {
    /// Encodes a fix at `accuracy`; values the receiver did not report are left out.
    public static func encode(_ f: Fix, accuracy: Accuracy) -> DBusValue {
        // Built straight into a sorted entry list (the order `.vardict` gives):
        // this runs for every fix, and a Dictionary plus a sort cost more than
        // the rest of preparing the signal.
        var entries: [DBusValue.DictEntry] = []
        entries.reserveCapacity(14)
        func put(_ key: String, _ v: DBusValue) { entries.append(.init(.string(key), .variant(v))) }
        func put(_ key: String, _ v: Double?) { if let v, v.isFinite { put(key, .double(v)) } }
        put("accuracy-authorization", .string(accuracy.rawValue))
        put("altitude", f.altitude)
        put("course", f.course)
        put("course-accuracy", f.courseAccuracy)
        put("ellipsoidal-altitude", f.ellipsoidalAltitude)
        put("fix", .string(f.mode.rawValue))
        put("horizontal-accuracy", f.horizontalAccuracy)
        put("latitude", .double(f.latitude))
        put("longitude", .double(f.longitude))
        put("source", .string(f.source.rawValue))
        put("speed", f.speed)
        put("speed-accuracy", f.speedAccuracy)
        if let t = f.timestamp { put("timestamp", .uint64(t)) }
        put("vertical-accuracy", f.verticalAccuracy)
        return .dict(key: "s", value: "v", entries)
    }
}

extension LocationDictionary {
    /// Decodes a location dictionary (clients); nil unless it is an `a{sv}` with
    /// latitude and longitude. A missing `fix` reads as 2D, a missing
    /// `accuracy-authorization` as reduced, a missing `source` as gps (a
    /// daemon older than sources).
    public static func decode(_ value: DBusValue) -> Location? {
        guard let d = value.vardictValue, let lat = d["latitude"]?.doubleValue,
              let lon = d["longitude"]?.doubleValue else { return nil }
        let fix = Fix(latitude: lat, longitude: lon, mode: FixMode(rawValue: d["fix"]?.stringValue ?? "") ?? .twoD,
                      altitude: d["altitude"]?.doubleValue,
                      ellipsoidalAltitude: d["ellipsoidal-altitude"]?.doubleValue,
                      horizontalAccuracy: d["horizontal-accuracy"]?.doubleValue,
                      verticalAccuracy: d["vertical-accuracy"]?.doubleValue,
                      speed: d["speed"]?.doubleValue, speedAccuracy: d["speed-accuracy"]?.doubleValue,
                      course: d["course"]?.doubleValue, courseAccuracy: d["course-accuracy"]?.doubleValue,
                      timestamp: d["timestamp"]?.uint64Value,
                      source: PositionSource(rawValue: d["source"]?.stringValue ?? "") ?? .gps)
        return Location(fix: fix, accuracy: Accuracy(rawValue: d["accuracy-authorization"]?.stringValue ?? "") ?? .reduced,
                        raw: value)
    }
}

/// The body of `RequestLocation`'s reply and of the `LocationUpdated` signal:
/// `(a{sv} location)`, one location dictionary.
public enum LocationBody {
    /// The body around a dictionary `LocationDictionary.encode` made.
    public static func encode(_ dictionary: DBusValue) -> [DBusValue] { [dictionary] }

    /// Nil unless the first value is a location dictionary.
    public static func decode(_ values: [DBusValue]) -> Location? {
        values.first.flatMap(LocationDictionary.decode)
    }
}

/// A fix as the daemon sends it (docs/dbus-api.md "Location dictionary"): the
/// position (values the receiver did not report are nil) and the accuracy it
/// was granted at.
public struct Location: Equatable, Sendable {
    /// The position and what else the receiver reported.
    public var fix: Fix
    /// `full`, or `reduced` (snapped to a grid cell).
    public var accuracy: Accuracy
    /// The dictionary as received, for keys newer than this library.
    public var raw: DBusValue

    /// Degrees north, WGS84.
    public var latitude: Double { fix.latitude }
    /// Degrees east, WGS84.
    public var longitude: Double { fix.longitude }
    /// Receiver time of the fix, microseconds since the Unix epoch.
    public var timestamp: UInt64? { fix.timestamp }

    /// A location of `fix` at `accuracy`; `raw` is what came over the bus.
    public init(fix: Fix, accuracy: Accuracy, raw: DBusValue) {
        self.fix = fix
        self.accuracy = accuracy
        self.raw = raw
    }
}
