/// The options of the location calls, as the daemon decoded them from the bus
/// (`OptionDictionary` in GeoConsentAPI) and as the core and location service use them.

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
