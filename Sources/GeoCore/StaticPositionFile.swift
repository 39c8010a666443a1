/// The static position of a machine that does not move, in the format of
/// GeoClue 2.7's `/etc/geolocation`, so that one file serves both services.
///
/// The format: after `#` comments are cut and blanks trimmed, the first four
/// non-empty lines are latitude, longitude, altitude and accuracy, one decimal
/// number each ("." as the decimal point, whatever the locale):
///
///     # the office
///     52.5163    # latitude, degrees north
///     13.3777    # longitude, degrees east
///     34         # altitude, metres above sea level
///     50         # accuracy radius, metres
///
/// GeoClue ignores whatever follows the fourth value; here anything but
/// comments and blank lines after it is refused, because a file with more
/// numbers was written for some other format and its first four may not mean
/// what they seem. Pure: the caller reads the file and hands the bytes here.
public struct StaticPosition: Equatable, Sendable {
    /// Degrees north, WGS84, in [-90, 90].
    public var latitude: Double
    /// Degrees east, WGS84, in [-180, 180].
    public var longitude: Double
    /// Metres above mean sea level.
    public var altitude: Double
    /// Radius in metres that the admin vouches for; never zero, because no
    /// file knows a position exactly.
    public var accuracy: Double

    public init(latitude: Double, longitude: Double, altitude: Double, accuracy: Double) {
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.accuracy = accuracy
    }
}

public enum StaticPositionFile {
    /// Largest file read. Four numbers and their comments fit many times over;
    /// the bound keeps a file that is being written, or a device named in its
    /// place, from costing more than a page of memory a read.
    public static let maxBytes = 64 * 1024
    /// The largest accuracy radius taken, in metres (a continent): a larger one
    /// says nothing a caller could use.
    public static let accuracyRange: ClosedRange<Double> = 0.001...5_000_000

    private static let fields = ["latitude", "longitude", "altitude", "accuracy"]

    /// Reads a position from `bytes` (the contents of `file`, named only for
    /// errors). Throws `ConfigError` as `FILE:LINE: reason`.
    public static func parse(bytes: [UInt8], file: String) throws -> StaticPosition {
        guard bytes.count <= maxBytes else {
            throw ConfigError(file: file, line: 0, reason: "larger than \(maxBytes) bytes; not a position file")
        }
        var values: [Double] = []
        for (index, line) in try ConfigParser.lines(of: bytes, file: file).enumerated() {
            let lineNumber = index + 1
            let text = content(of: line)
            if text.isEmpty { continue }
            guard values.count < fields.count else {
                throw ConfigError(file: file, line: lineNumber,
                                  reason: "unexpected text after the accuracy; the file holds four numbers")
            }
            let field = fields[values.count]
            guard let value = number(text) else {
                throw ConfigError(file: file, line: lineNumber,
                                  reason: "the \(field) must be a decimal number, with '.' as the decimal point")
            }
            if let problem = rangeProblem(field, value) {
                throw ConfigError(file: file, line: lineNumber, reason: problem)
            }
            values.append(value)
        }
        guard values.count == fields.count else {
            throw ConfigError(file: file, line: 0,
                              reason: "ends before its \(fields[values.count]); it needs latitude, longitude, altitude and accuracy, one a line")
        }
        return StaticPosition(latitude: values[0], longitude: values[1], altitude: values[2], accuracy: values[3])
    }

    /// The line without its comment and surrounding blanks.
    private static func content(of line: String) -> String {
        let beforeComment = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return String(ConfigParser.trim(beforeComment))
    }

    /// A finite decimal number: digits, one optional sign, point and exponent.
    /// Swift's `Double(_:)` alone would also take "nan", "inf" and hex floats.
    private static func number(_ text: String) -> Double? {
        let allowed = Set("0123456789+-.eE")
        guard text.allSatisfy(allowed.contains), let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// Why a value is out of range. A problem names no value of the file:
    /// a mistyped coordinate is close to the true one, and the log is read
    /// by more people than the file (docs/dbus-api.md, "Sources").
    private static func rangeProblem(_ field: String, _ value: Double) -> String? {
        switch field {
        case "latitude" where !(-90...90).contains(value):
            return "the latitude is outside -90...90 degrees"
        case "longitude" where !(-180...180).contains(value):
            return "the longitude is outside -180...180 degrees"
        case "altitude" where !(-12_000...100_000).contains(value):
            return "the altitude is not on or near the Earth (-12000...100000 m)"
        case "accuracy" where !accuracyRange.contains(value):
            return "accuracy \(value) m must be more than 0 and at most \(Int(accuracyRange.upperBound)) m"
        default:
            return nil
        }
    }
}
