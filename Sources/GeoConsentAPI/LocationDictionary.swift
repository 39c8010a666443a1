import GeoDBus
import GeoCore

/// The location dictionary of docs/dbus-api.md.
public enum LocationDictionary {
    /// Encodes a fix; values the receiver did not report are left out.
    public static func encode(_ f: Fix, accuracy: Accuracy) -> DBusValue {
        // Built straight into a sorted entry list (the order `.vardict` gives):
        // this runs for every fix, and a Dictionary plus a sort cost more than
        // the rest of preparing the signal.
        var entries: [DBusValue.DictEntry] = []
        entries.reserveCapacity(13)
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
        put("speed", f.speed)
        put("speed-accuracy", f.speedAccuracy)
        if let t = f.timestamp { put("timestamp", .uint64(t)) }
        put("vertical-accuracy", f.verticalAccuracy)
        return .dict(key: "s", value: "v", entries)
    }
}

extension LocationDictionary {
    /// Decodes a location dictionary (clients); nil without latitude and longitude.
    public static func decode(_ value: DBusValue) -> (fix: Fix, accuracy: Accuracy)? {
        guard let d = value.vardictValue, let lat = d["latitude"]?.doubleValue,
              let lon = d["longitude"]?.doubleValue else { return nil }
        let fix = Fix(latitude: lat, longitude: lon, mode: FixMode(rawValue: d["fix"]?.stringValue ?? "") ?? .twoD,
                      altitude: d["altitude"]?.doubleValue,
                      ellipsoidalAltitude: d["ellipsoidal-altitude"]?.doubleValue,
                      horizontalAccuracy: d["horizontal-accuracy"]?.doubleValue,
                      verticalAccuracy: d["vertical-accuracy"]?.doubleValue,
                      speed: d["speed"]?.doubleValue, speedAccuracy: d["speed-accuracy"]?.doubleValue,
                      course: d["course"]?.doubleValue, courseAccuracy: d["course-accuracy"]?.doubleValue,
                      timestamp: d["timestamp"]?.uint64Value)
        return (fix, Accuracy(rawValue: d["accuracy-authorization"]?.stringValue ?? "") ?? .reduced)
    }
}
