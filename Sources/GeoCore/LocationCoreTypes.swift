/// Inputs and outputs of the location core (`LocationCore`): events in, effects out.
/// No D-Bus or libgps types, and no source named but by its kind
/// (`PositionSource`): the daemon's location service turns these into replies,
/// signals, timers and the work of its sources.

/// An event the location service feeds the core.
public enum LocationEvent: Equatable, Sendable {
    /// `RequestLocation` passed the consent gate.
    case locate(CallID, session: SessionID, LocationOptions)
    /// `StartUpdates` passed the consent gate: replaces the session's options.
    case startUpdates(CallID, session: SessionID, UpdateOptions)
    /// New filter options for a session whose updates are on, which keep counting
    /// from the fix it was last sent (a client object's thresholds changed while
    /// it is started). Nothing happens for a session without updates.
    case setUpdateOptions(session: SessionID, UpdateOptions)
    /// `StopUpdates` (nil: no call to answer).
    case stopUpdates(CallID?, session: SessionID)
    /// The session's grant ended, or it left the bus.
    case drop(session: SessionID)
    /// The session's login session is paused: its updates are kept but get no
    /// fix, and do not keep gpsd open; its waiting requests fail.
    case pause(session: SessionID, PauseReason)
    /// The session's pause ended: its updates get fixes again.
    case resume(session: SessionID)
    /// A source reported a fix (`fix.source` says which). A static position
    /// stands until the source withdraws it (`lost`) or reports another.
    case fix(Fix)
    /// The receiver (`open(.gps)`) is connected.
    case opened(PositionSource)
    /// Opening the receiver failed; `reason` describes the error.
    case openFailed(PositionSource, reason: String)
    /// The source has no position any more: the receiver's connection closed,
    /// the static file went away or became unreadable. `reason` says why.
    case lost(PositionSource, reason: String)
    /// Root switched Wi-Fi positioning on or off (`WiFiEnabled`).
    case wifiSwitched(Bool)
    /// Whether any session holds a grant now (the consent core's journal
    /// counts them): while one does, a source may be readied (`warm`).
    case grantsHeld(Bool)
    /// A timer the core scheduled went off.
    case timerFired(LocationTimer)
}

/// The timers the core asks for, by what they are for.
public enum LocationTimer: Hashable, Sendable {
    /// The `timeout` of a waiting `RequestLocation`.
    case timeout(CallID)
    /// Keeps gpsd open a little after the last session stops needing fixes.
    case linger
    /// The next connection attempt after gpsd went away.
    case reconnect
    /// How long a position waits for the receiver's first fix before another
    /// source may answer (`SourceChoice.gpsWait`).
    case gpsWait
    /// The next Wi-Fi lookup while updates run, or after a failed one.
    case wifiLookup
}

/// Why a location call or subscription failed; the daemon maps these to the
/// D-Bus error names of docs/dbus-api.md.
public enum LocationFailure: Equatable, Sendable {
    /// The session's grant ended while it waited.
    case notAuthorized
    /// gpsd is connected but no fix came in time.
    case timeout
    /// gpsd cannot be reached (or GPS is off) and no other source has a
    /// position; the message says why.
    case gpsUnavailable(String)
    /// The session already has this many requests waiting (its limit).
    case tooManyRequests(Int)
    /// The session's login session is paused (locked, or another in the foreground).
    case sessionPaused(PauseReason)
    /// No source has a position: the receiver and Wi-Fi positioning both
    /// failed (the message says how), and there is no static one.
    case positionUnavailable(String)

    public var message: String {
        switch self {
        case .notAuthorized: return "The grant of this session ended"
        case .timeout: return "No fix arrived in time"
        case .gpsUnavailable(let m): return m
        case .tooManyRequests(let n):
            return "This session has \(n) RequestLocation calls waiting, its limit (location-requests-per-session)"
        case .sessionPaused(let r): return r.message
        case .positionUnavailable(let m): return m
        }
    }

    /// The failure as a late subscriber hears it: the sources are still retried.
    var retrying: LocationFailure {
        switch self {
        case .positionUnavailable(let m): return .positionUnavailable(m.hasSuffix("; retrying") ? m : m + "; retrying")
        default: return self
        }
    }
}

/// A successful answer to a location call.
public enum LocationReply: Equatable, Sendable {
    /// `StartUpdates`, `StopUpdates`.
    case empty
    /// `RequestLocation`: the fix as the session's accuracy shows it.
    case location(Fix, Accuracy)
}

/// How loud a log line is.
public enum LocationLogLevel: Equatable, Sendable {
    case warning, notice, info
}

/// What the location service must do, in order.
public enum LocationEffect: Equatable, Sendable {
    case reply(CallID, LocationReply)
    case fail(CallID, LocationFailure)
    /// `LocationUpdated` to each of `sessions`: the same body for all of them
    /// (`fix` is already reduced for `.reduced`).
    case locationUpdated(sessions: [SessionID], Accuracy, Fix)
    /// `LocationError` to one session.
    case locationError(session: SessionID, LocationFailure)
    /// `PropertiesChanged` for `GpsdConnected`: the receiver came or went.
    case receiverConnectedChanged(Bool)
    /// `PropertiesChanged` for `InUse`.
    case inUseChanged(Bool)
    /// Start one attempt to open the source (the receiver: connect to gpsd);
    /// its outcome comes back as `opened` or `openFailed`.
    case open(PositionSource)
    /// Make the source ready without asking it for a position (Wi-Fi: start
    /// the network helper, which touches no network until asked), so that
    /// the first lookup of a grant does not wait for it.
    case warm(PositionSource)
    /// Close the source.
    case close(PositionSource)
    /// `PropertiesChanged` for `Sources`: the sources that can answer now.
    case sourcesChanged([PositionSource])
    /// `session` got its first fix from `source`: a line for the grant journal.
    case served(session: SessionID, PositionSource)
    /// Run `timerFired(timer)` after `seconds`.
    case scheduleTimer(LocationTimer, after: Double)
    case cancelTimer(LocationTimer)
    case log(LocationLogLevel, String)
}
