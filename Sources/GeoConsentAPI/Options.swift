import GeoDBus
import GeoCore

/// `RequestLocation` options.
public struct LocationOptions: Equatable, Sendable {
    /// Seconds: a cached fix younger than this is returned at once.
    public var maxAge: Double = 5
    /// Seconds to wait for a fix.
    public var timeout: Double = 30
    public init(maxAge: Double = 5, timeout: Double = 30) {
        self.maxAge = maxAge
        self.timeout = timeout
    }
}

/// `StartUpdates` options.
public struct UpdateOptions: Equatable, Sendable {
    /// Metres the position must move before the next signal.
    public var distanceFilter: Double = 0
    /// Seconds between signals at least.
    public var minInterval: Double = 0
    public init(distanceFilter: Double = 0, minInterval: Double = 0) {
        self.distanceFilter = distanceFilter
        self.minInterval = minInterval
    }
}

/// Decodes the `a{sv}` options of API.md: unknown keys are ignored, a known key
/// of the wrong type (or a value out of range) is `InvalidArgs`.
public enum OptionDecoding {
    private static func dict(_ v: DBusValue) throws -> [String: DBusValue] {
        guard let d = v.vardictValue else { throw DBusError.invalidArgs("options must be a{sv}") }
        return d
    }

    private static func string(_ d: [String: DBusValue], _ key: String) throws -> String? {
        guard let v = d[key] else { return nil }
        guard case .string(let s) = v else { throw DBusError.invalidArgs("option '\(key)' must be of type s, got \(v.signature)") }
        return s
    }

    private static func seconds(_ d: [String: DBusValue], _ key: String, allowZero: Bool) throws -> Double? {
        guard let v = d[key] else { return nil }
        guard case .double(let x) = v else { throw DBusError.invalidArgs("option '\(key)' must be of type d, got \(v.signature)") }
        guard x.isFinite, allowZero ? x >= 0 : x > 0 else {
            throw DBusError.invalidArgs("option '\(key)' must be a finite number \(allowZero ? ">= 0" : "> 0")")
        }
        return x
    }

    /// `Request*Authorization` options.
    public static func auth(_ v: DBusValue) throws -> AuthOptions {
        let d = try dict(v)
        var o = AuthOptions()
        if let r = try string(d, "reason") { o.reason = r }
        if let a = try string(d, "accuracy") {
            guard let acc = Accuracy(rawValue: a) else {
                throw DBusError.invalidArgs("option 'accuracy' must be 'full' or 'reduced'")
            }
            o.accuracy = acc
        }
        if let n = try string(d, "app-name") { o.appName = n }
        if let w = try string(d, "parent-window") { o.parentWindow = w }
        return o
    }

    public static func location(_ v: DBusValue) throws -> LocationOptions {
        let d = try dict(v)
        var o = LocationOptions()
        if let x = try seconds(d, "max-age", allowZero: true) { o.maxAge = x }
        if let x = try seconds(d, "timeout", allowZero: false) { o.timeout = min(x, 86_400) }
        return o
    }

    public static func updates(_ v: DBusValue) throws -> UpdateOptions {
        let d = try dict(v)
        var o = UpdateOptions()
        if let x = try seconds(d, "distance-filter", allowZero: true) { o.distanceFilter = x }
        if let x = try seconds(d, "min-interval", allowZero: true) { o.minInterval = x }
        return o
    }

    /// `ResetConsent` options: the optional `uid`.
    public static func reset(_ v: DBusValue) throws -> UInt32? {
        let d = try dict(v)
        guard let u = d["uid"] else { return nil }
        guard case .uint32(let uid) = u else { throw DBusError.invalidArgs("option 'uid' must be of type u, got \(u.signature)") }
        return uid
    }
}

/// The location dictionary of API.md.
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

/// Consent records and sessions as the management methods return them.
public enum RecordEncoding {
    /// A consent record as `a{sv}`; every key always present.
    public static func encode(_ r: ConsentRecord) -> DBusValue {
        .vardict([
            "decision": .string(r.decision?.rawValue ?? ""),
            "decision-accuracy": .string(r.decisionAccuracy?.rawValue ?? ""),
            "one-time-approved": .bool(r.oneTimeApproved),
            "one-time-accuracy": .string(r.oneTimeAccuracy?.rawValue ?? ""),
            "decided-at": .uint64(r.decidedAt),
            "last-used": .uint64(r.lastUsed),
        ])
    }

    /// Reads what `encode` writes (clients); missing or unknown values read as
    /// "none", false and 0.
    public static func decode(_ d: [String: DBusValue]) -> ConsentRecord {
        ConsentRecord(
            decision: StoredDecision(rawValue: d["decision"]?.stringValue ?? ""),
            decisionAccuracy: Accuracy(rawValue: d["decision-accuracy"]?.stringValue ?? ""),
            oneTimeApproved: d["one-time-approved"]?.boolValue ?? false,
            oneTimeAccuracy: Accuracy(rawValue: d["one-time-accuracy"]?.stringValue ?? ""),
            decidedAt: d["decided-at"]?.uint64Value ?? 0, lastUsed: d["last-used"]?.uint64Value ?? 0)
    }
}
