import GeoDBus
import GeoCore

// GeoClue's values in our words: accuracy levels to grants, a fix to the
// properties of a Location object (docs/geoclue.md), each encoder beside its
// decoder.

/// GeoClue's `GClueAccuracyLevel`, as `RequestedAccuracyLevel` and
/// `AvailableAccuracyLevel` carry it.
public enum GeoClueAccuracyLevel {
    public static let none: UInt32 = 0
    public static let country: UInt32 = 1
    public static let city: UInt32 = 4
    public static let neighborhood: UInt32 = 5
    public static let street: UInt32 = 6
    public static let exact: UInt32 = 8

    /// A new client's `RequestedAccuracyLevel`, as in GeoClue.
    public static let defaultRequested = city

    /// The grant a level asks for: street and finer (6 and up) full accuracy;
    /// country to neighbourhood (1 to 5) reduced, the fixed grid; none (0)
    /// no location at all (nil: `Start` is refused). Levels GeoClue does not
    /// name count as the next named level below them.
    public static func accuracy(forLevel level: UInt32) -> Accuracy? {
        switch level {
        case 0: return nil
        case 1..<street: return .reduced
        default: return .full
        }
    }
}

/// The properties of a Location object, in GeoClue's order, with GeoClue's
/// values for what is not known (its `gclue-location.h`).
public enum LocationProperties {
    public static let latitude = "Latitude"
    public static let longitude = "Longitude"
    public static let accuracy = "Accuracy"
    public static let altitude = "Altitude"
    public static let speed = "Speed"
    public static let heading = "Heading"
    public static let description = "Description"
    public static let timestamp = "Timestamp"

    /// Every property, in the order GeoClue declares them.
    public static let names = [latitude, longitude, accuracy, altitude, speed, heading, description, timestamp]

    public static func signature(of name: String) -> String {
        switch name {
        case description: return "s"
        case timestamp: return "(tt)"
        default: return "d"
        }
    }

    /// `Altitude` when not known: the most negative double.
    public static let unknownAltitude = -Double.greatestFiniteMagnitude
    /// `Speed` and `Heading` when not known.
    public static let unknownSpeed = -1.0
    public static let unknownHeading = -1.0
    /// `Accuracy` when the receiver gave no estimate.
    public static let unknownAccuracy = -1.0

    /// A fix as a Location object shows it, already reduced for a reduced grant
    /// (`ReducedGrid.reduce`: the cell's centre, `Accuracy` its half-diagonal, no
    /// altitude, speed or heading). `receivedAt` (microseconds since the epoch)
    /// stands in for a fix without the receiver's time. `Description` names
    /// the source (`gps`, `wifi`, `static`), as the location dictionary does.
    public static func encode(_ f: Fix, receivedAt: UInt64) -> [String: DBusValue] {
        func known(_ v: Double?, else unknown: Double) -> DBusValue { .double(v.flatMap { $0.isFinite ? $0 : nil } ?? unknown) }
        let t = f.timestamp ?? receivedAt
        return [
            latitude: .double(f.latitude),
            longitude: .double(f.longitude),
            accuracy: known(f.horizontalAccuracy, else: unknownAccuracy),
            altitude: known(f.altitude, else: unknownAltitude),
            speed: known(f.speed, else: unknownSpeed),
            heading: known(f.course, else: unknownHeading),
            description: .string(f.source.rawValue),
            timestamp: .structure([.uint64(t / 1_000_000), .uint64(t % 1_000_000)]),
        ]
    }

    /// A Location object's `GetAll` as a client reads it; nil without latitude
    /// and longitude. Unknown values come back as nil.
    public static func decode(_ all: [String: DBusValue]) -> GeoClueLocation? {
        guard let lat = all[latitude]?.doubleValue, let lon = all[longitude]?.doubleValue else { return nil }
        func known(_ key: String, _ unknown: Double) -> Double? {
            all[key]?.doubleValue.flatMap { $0 == unknown ? nil : $0 }
        }
        var time: UInt64?
        if case .structure(let f)? = all[timestamp], f.count == 2, case .uint64(let s) = f[0], case .uint64(let us) = f[1] {
            time = s &* 1_000_000 &+ us
        }
        return GeoClueLocation(latitude: lat, longitude: lon, accuracy: known(accuracy, unknownAccuracy),
                               altitude: known(altitude, unknownAltitude), speed: known(speed, unknownSpeed),
                               heading: known(heading, unknownHeading),
                               description: all[description]?.stringValue ?? "", timestamp: time)
    }
}

/// A Location object's values, unknown ones nil.
public struct GeoClueLocation: Equatable, Sendable {
    public var latitude: Double
    public var longitude: Double
    /// Metres.
    public var accuracy: Double?
    /// Metres above mean sea level.
    public var altitude: Double?
    /// m/s.
    public var speed: Double?
    /// Degrees from north, clockwise.
    public var heading: Double?
    public var description: String
    /// Microseconds since the epoch.
    public var timestamp: UInt64?

    public init(latitude: Double, longitude: Double, accuracy: Double?, altitude: Double?, speed: Double?,
                heading: Double?, description: String, timestamp: UInt64?) {
        self.latitude = latitude
        self.longitude = longitude
        self.accuracy = accuracy
        self.altitude = altitude
        self.speed = speed
        self.heading = heading
        self.description = description
        self.timestamp = timestamp
    }
}

/// A client object's `LocationUpdated(o old, o new)`: its location object
/// before this fix (`/` before the first) and the new one.
public enum GeoClueLocationUpdated {
    public static let member = "LocationUpdated"

    public static func encode(old: String, new: String) -> [DBusValue] { [.objectPath(old), .objectPath(new)] }

    /// The two paths, or nil when `m` is not a client object's `LocationUpdated(oo)`.
    public static func decode(signature: String, _ args: [DBusValue]) -> (old: String, new: String)? {
        guard signature == "oo", args.count == 2, let o = args[0].stringValue, let n = args[1].stringValue else { return nil }
        return (o, n)
    }
}
