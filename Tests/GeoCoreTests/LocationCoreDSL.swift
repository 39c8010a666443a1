import XCTest
@testable import GeoCore

// A small DSL for LocationCore tests: a rig that feeds events at an injected
// monotonic time with a table of grants, keeps the timers and the connection
// attempt the core asked for (and checks it never asks twice), and lookups
// over effect lists.

// MARK: - Fixes

enum Spot {
    /// A point in Munich; fixes are placed relative to it.
    static let latitude = 48.137
    static let longitude = 11.575

    /// A fix `metres` north of the point (distances along a meridian are exact
    /// on the sphere the core measures on).
    static func north(_ metres: Double, timestamp: UInt64? = nil) -> Fix {
        Fix(latitude: latitude + metres / GeoMath.metresPerDegree, longitude: longitude, mode: .threeD,
            altitude: 520, horizontalAccuracy: 4, speed: 1.5, course: 90, timestamp: timestamp)
    }

    static let here = north(0)

    /// A position of another source than GPS, `metresNorth` of the point: no
    /// speed or course (no receiver measured them), the source's own radius.
    static func from(_ source: PositionSource, accuracy: Double, metresNorth: Double) -> Fix {
        var f = north(metresNorth)
        f.source = source
        f.speed = nil
        f.course = nil
        f.horizontalAccuracy = accuracy
        if source == .wifi {
            f.mode = .twoD
            f.altitude = nil
        }
        return f
    }
}

// MARK: - Effect lookups

extension Array where Element == LocationEffect {
    func reply(to call: CallID) -> LocationReply? {
        for e in self { if case .reply(call, let r) = e { return r } }
        return nil
    }

    func failure(of call: CallID) -> LocationFailure? {
        for e in self { if case .fail(call, let f) = e { return f } }
        return nil
    }

    /// The fix each session got in a `LocationUpdated`.
    var updates: [SessionID: Fix] {
        var out: [SessionID: Fix] = [:]
        for case .locationUpdated(let sessions, _, let fix) in self { for s in sessions { out[s] = fix } }
        return out
    }

    /// The sessions of each `LocationUpdated` group.
    var groups: [Accuracy: Set<SessionID>] {
        var out: [Accuracy: Set<SessionID>] = [:]
        for case .locationUpdated(let sessions, let acc, _) in self { out[acc, default: []].formUnion(sessions) }
        return out
    }

    var locationErrors: [SessionID] {
        compactMap { if case .locationError(let s, _) = $0 { return s } else { return nil } }
    }

    var scheduled: [LocationTimer: Double] {
        var out: [LocationTimer: Double] = [:]
        for case .scheduleTimer(let t, let after) in self { out[t] = after }
        return out
    }

    var cancelled: Set<LocationTimer> {
        Set(compactMap { if case .cancelTimer(let t) = $0 { return t } else { return nil } })
    }

    var connects: Int { filter { $0 == .open(.gps) }.count }
    var disconnects: Int { filter { $0 == .close(.gps) }.count }

    var inUse: [Bool] { compactMap { if case .inUseChanged(let v) = $0 { return v } else { return nil } } }

    var gpsdConnected: [Bool] {
        compactMap { if case .receiverConnectedChanged(let v) = $0 { return v } else { return nil } }
    }

    var logs: [LocationLogLevel] { compactMap { if case .log(let l, _) = $0 { return l } else { return nil } } }
}

// MARK: - The rig

/// The outcome of one location call.
struct LocationStep {
    let call: CallID
    let effects: [LocationEffect]

    var reply: LocationReply? { effects.reply(to: call) }
    var failure: LocationFailure? { effects.failure(of: call) }
}

/// Feeds a `LocationCore` one event at a time at `now` (monotonic ns) and
/// carries out its timer and connection effects the way the daemon does.
final class LocationRig {
    static let gpsdLabel = "127.0.0.1:2947"
    static let unreachable = LocationFailure.gpsUnavailable("gpsd at \(gpsdLabel) cannot be reached")
    static let refused = LocationFailure.gpsUnavailable("cannot connect to gpsd at \(gpsdLabel): refused")
    static let closed = LocationFailure.gpsUnavailable("gpsd at \(gpsdLabel) closed the connection")

    let core: LocationCore
    var now: UInt64 = 1_000_000_000_000
    /// What the consent core would answer for each session (absent: no grant).
    var grants: [SessionID: Accuracy] = [:]
    /// Deadlines of the timers the core has scheduled and not cancelled.
    private(set) var timers: [LocationTimer: UInt64] = [:]
    /// A connection attempt is under way.
    private(set) var connecting = false
    /// A Wi-Fi lookup runs, and how many were opened.
    private(set) var lookingUp = false
    private(set) var wifiLookups = 0
    /// How many times the core asked `grants`.
    private(set) var grantQueries = 0
    private var nextCall: CallID = 0

    init(linger: Double = 10, grid: Double = 5000, gpsEnabled: Bool = true, wifiEnabled: Bool = false,
         grants: [SessionID: Accuracy] = [:]) {
        core = LocationCore(linger: linger, gridSize: grid, receiverName: "gpsd at \(Self.gpsdLabel)",
                            gpsEnabled: gpsEnabled, wifiEnabled: wifiEnabled, wifiInterval: 30)
        self.grants = grants
    }

    @discardableResult
    func send(_ event: LocationEvent, file: StaticString = #filePath, line: UInt = #line) -> [LocationEffect] {
        let out = core.handle(event, now: now, grants: { self.grantQueries += 1; return self.grants[$0] })
        track(out, file: file, line: line)
        return out
    }

    /// A fix the way the daemon feeds it (`handleFix`): `sent` are the replies and
    /// signals handed over while the core ran, `rest` the effects it returned.
    /// `trace` (if given) sees each grant query as "grant S" and each signal as "send S".
    func streamFix(_ f: Fix = Spot.here, trace: ((String) -> Void)? = nil,
                   file: StaticString = #filePath, line: UInt = #line) -> (sent: [LocationEffect], rest: [LocationEffect]) {
        var sent: [LocationEffect] = []
        let rest = core.handleFix(f, now: now, grants: {
            self.grantQueries += 1
            trace?("grant \($0)")
            return self.grants[$0]
        }, send: { e in
            if case .locationUpdated(let sessions, _, _) = e { for s in sessions { trace?("send \(s)") } }
            sent.append(e)
        })
        track(rest, file: file, line: line)
        return (sent, rest)
    }

    /// Carries out the timer and connection effects the way the daemon does.
    private func track(_ out: [LocationEffect], file: StaticString, line: UInt) {
        for e in out {
            switch e {
            case .scheduleTimer(let t, let after):
                XCTAssertNil(timers[t], "\(t) scheduled twice", file: file, line: line)
                timers[t] = now + UInt64((after * 1e9).rounded())
            case .cancelTimer(let t):
                XCTAssertNotNil(timers.removeValue(forKey: t), "\(t) cancelled but not scheduled", file: file, line: line)
            case .open(.gps):
                XCTAssertFalse(connecting, "a second connection attempt while one is under way", file: file, line: line)
                connecting = true
            case .open(.wifi):
                XCTAssertFalse(lookingUp, "a second Wi-Fi lookup while one runs", file: file, line: line)
                lookingUp = true
                wifiLookups += 1
            default:
                break
            }
        }
    }

    private func newCall() -> CallID {
        nextCall += 1
        return nextCall
    }

    @discardableResult
    func locate(_ session: SessionID, maxAge: Double = 5, timeout: Double = 30) -> LocationStep {
        let id = newCall()
        return LocationStep(call: id, effects: send(.locate(id, session: session,
                                                            LocationOptions(maxAge: maxAge, timeout: timeout))))
    }

    @discardableResult
    func start(_ session: SessionID, distance: Double = 0, interval: Double = 0) -> LocationStep {
        let id = newCall()
        return LocationStep(call: id, effects: send(.startUpdates(id, session: session,
                                                                  UpdateOptions(distanceFilter: distance, minInterval: interval))))
    }

    @discardableResult
    func stop(_ session: SessionID) -> LocationStep {
        let id = newCall()
        return LocationStep(call: id, effects: send(.stopUpdates(id, session: session)))
    }

    @discardableResult
    func drop(_ session: SessionID) -> [LocationEffect] { send(.drop(session: session)) }

    @discardableResult
    func fix(_ f: Fix = Spot.here) -> [LocationEffect] { send(.fix(f)) }

    /// The connection attempt the core asked for succeeds.
    @discardableResult
    func connected(file: StaticString = #filePath, line: UInt = #line) -> [LocationEffect] {
        XCTAssertTrue(connecting, "no connection attempt to succeed", file: file, line: line)
        connecting = false
        return send(.opened(.gps), file: file, line: line)
    }

    /// The connection attempt the core asked for fails.
    @discardableResult
    func connectFailed(file: StaticString = #filePath, line: UInt = #line) -> [LocationEffect] {
        XCTAssertTrue(connecting, "no connection attempt to fail", file: file, line: line)
        connecting = false
        return send(.openFailed(.gps, reason: "refused"), file: file, line: line)
    }

    /// The running Wi-Fi lookup finds `fix`.
    @discardableResult
    func wifiFound(_ fix: Fix, file: StaticString = #filePath, line: UInt = #line) -> [LocationEffect] {
        XCTAssertTrue(lookingUp, "no Wi-Fi lookup runs", file: file, line: line)
        lookingUp = false
        return send(.fix(fix), file: file, line: line)
    }

    /// The running Wi-Fi lookup fails.
    @discardableResult
    func wifiFailed(_ reason: String = "the server answered 503", file: StaticString = #filePath,
                    line: UInt = #line) -> [LocationEffect] {
        XCTAssertTrue(lookingUp, "no Wi-Fi lookup runs", file: file, line: line)
        lookingUp = false
        return send(.openFailed(.wifi, reason: reason), file: file, line: line)
    }

    @discardableResult
    func closed() -> [LocationEffect] { send(.lost(.gps, reason: "closed")) }

    /// Moves the clock on by `seconds`, firing the timers that fall due in
    /// deadline order; returns the effects of all of them.
    @discardableResult
    func advance(_ seconds: Double) -> [LocationEffect] {
        let end = now + UInt64((seconds * 1e9).rounded())
        var out: [LocationEffect] = []
        while let (timer, deadline) = timers.filter({ $0.value <= end }).min(by: { $0.value < $1.value }) {
            now = deadline
            timers[timer] = nil
            out += send(.timerFired(timer))
        }
        now = end
        return out
    }

    /// `sessions` subscribed (default options) with gpsd connected.
    static func streaming(_ sessions: [SessionID: Accuracy], linger: Double = 10) -> LocationRig {
        let rig = LocationRig(linger: linger, grants: sessions)
        for s in sessions.keys.sorted() { rig.start(s) }
        rig.connected()
        return rig
    }
}
