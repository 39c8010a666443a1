import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The location half through the real parts: NMEA over UDP into a real gpsd,
/// the real geoconsentd, clients on a private dbus-daemon. Every test has its
/// own stack, a consent agent answering allow-once, and clients that tap first.
final class LocationBusTests: XCTestCase {
    var stack: Stack!
    var agentPeer: BusPeer!
    var agent: TestAgent!

    static let errorPrefix = "org.geoconsent.GeoConsent1.Error."

    override func setUpWithError() throws {
        try makeStack()
    }

    func makeStack(config: String = "") throws {
        stack?.stop()
        stack = try Stack(config: config)
        agentPeer = try stack.peer()
        agent = TestAgent(peer: agentPeer, behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        if let s = stack, let t = testRun, t.failureCount > 0 {
            print("---- geoconsentd log ----\n\(s.daemon.log().suffix(6000))\n---- gpsd log ----\n\(s.gpsd.log().suffix(2000))")
        }
        agent = nil
        agentPeer = nil
        stack?.stop()
        stack = nil
    }

    // MARK: helpers

    /// A new client that tapped (`RequestOneTimeAuthorization`) and holds a grant.
    func tappedClient(accuracy: Accuracy = .full, file: StaticString = #filePath, line: UInt = #line) throws -> BusPeer {
        let p = try stack.peer()
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: accuracy)).get(), 4, file: file, line: line)
        return p
    }

    func ticker(_ feed: LocationFeed, interval: Double = 0.05) -> LoopTicker {
        LoopTicker(loop: stack.peers.loop, interval: interval) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
    }

    /// Waits (pumping) until `call` is answered.
    @discardableResult
    func wait(_ call: BusPeer.PendingCall, timeout: Double = 20) -> Result<[DBusValue], DBusError> {
        stack.peers.pump(timeout: timeout) { call.isDone }
        return call.result ?? .failure(DBusError(DBusError.noReplyName, "test gave up waiting"))
    }

    /// `RequestLocation` while `feed` is sent every 50 ms; the location.
    func locate(_ p: BusPeer, _ feed: LocationFeed, maxAge: Double = 0, timeout: Double = 10,
                file: StaticString = #filePath, line: UInt = #line) -> Location? {
        let t = ticker(feed)
        let call = p.requestLocation(maxAge: maxAge, timeout: timeout)
        t.start()
        let r = wait(call, timeout: timeout + 5)
        t.stop()
        switch r {
        case .success(let v):
            guard let d = LocationBody.decode(v) else {
                XCTFail("RequestLocation returned \(v)", file: file, line: line)
                return nil
            }
            return d
        case .failure(let e):
            XCTFail("RequestLocation failed: \(e)", file: file, line: line)
            return nil
        }
    }

    /// Pumps until `done()` while `feed` is sent every `interval`.
    @discardableResult
    func feedUntil(_ feed: LocationFeed, interval: Double = 0.05, timeout: Double = 10, _ done: () -> Bool) -> Bool {
        let t = ticker(feed, interval: interval)
        t.start()
        defer { t.stop() }
        return stack.peers.pump(timeout: timeout, until: done)
    }

    func propertyBool(_ p: BusPeer, _ name: String) -> Bool? { p.property(name)?.boolValue }

    /// Polls a boolean property (every 20 ms) until it equals `value`; the seconds it took, nil on timeout.
    func pollProperty(_ p: BusPeer, _ name: String, equals value: Bool, timeout: Double = 5) -> Double? {
        let start = secondsNow()
        while secondsNow() - start < timeout {
            if propertyBool(p, name) == value { return secondsNow() - start }
            stack.peers.settle(0.02)
        }
        return nil
    }

    func assertNoNaN(_ d: Location, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(d.numbers.allSatisfy(\.isFinite), "\(d.fix)", file: file, line: line)
    }

    /// Checks a full-accuracy location against the epoch of `feed` it carries the timestamp of.
    func assertMatchesFeed(_ d: Location, _ feed: LocationFeed,
                           file: StaticString = #filePath, line: UInt = #line) {
        assertNoNaN(d, file: file, line: line)
        guard let ts = d.timestamp, let sent = feed.sent.first(where: { $0.timestamp == ts }) else {
            return XCTFail("timestamp \(String(describing: d.timestamp)) is none of the sent times", file: file, line: line)
        }
        XCTAssertEqual(d.latitude, sent.latitude, accuracy: 1e-6, file: file, line: line)
        XCTAssertEqual(d.longitude, sent.longitude, accuracy: 1e-6, file: file, line: line)
        XCTAssertEqual(d.fix.mode, .threeD, file: file, line: line)
        XCTAssertEqual(d.accuracy, .full, file: file, line: line)
    }

    // MARK: 1. Values

    /// A client with a grant and a feed of known values, after a first request
    /// has connected the daemon to gpsd.
    private func clientWithKnownFeed() throws -> (BusPeer, LocationFeed) {
        let p = try tappedClient()
        // 12:35:10.25, 12:35:11.25, ...: fractional seconds, one epoch per UTC second.
        let feed = LocationFeed(latitude: 48.1173, longitude: -11.516667, start: (12, 35, 10.25), step: 100)
        feed.altitude = 123.4
        feed.geoidSeparation = 47.0
        feed.speedKnots = 12.34
        feed.course = 56.7

        // Warm up: gpsd binds its UDP port and learns the end of the cycle; the
        // daemon connects on the first request. (gpsd's very first reports of a
        // new source can be partial: a GGA alone, no time yet.)
        let warm = locate(p, feed, maxAge: 0)
        print("LocationBusTests: first RequestLocation after the daemon connected -> \(warm.map { "\($0.fix)" } ?? "none")")
        return (p, feed)
    }

    func testValuesEqualTheNMEAInput() throws {
        let (p, feed) = try clientWithKnownFeed()
        // Now a fresh fix, after the request.
        guard let d = locate(p, feed, maxAge: 0) else { return }
        print("LocationBusTests: RequestLocation -> \(d.fix)")
        assertMatchesFeed(d, feed)
        XCTAssertNil(d.fix.speedAccuracy, "NMEA GGA+GSA+RMC carries no speed accuracy")
        XCTAssertNil(d.fix.courseAccuracy, "NMEA GGA+GSA+RMC carries no course accuracy")
        XCTAssertEqual(d.fix.speed ?? .nan, 12.34 * 0.514444, accuracy: 1e-3)
        XCTAssertEqual(d.fix.course ?? .nan, 56.7, accuracy: 1e-3)
        XCTAssertEqual(d.fix.altitude ?? .nan, 123.4, accuracy: 1e-3)
        XCTAssertEqual(d.fix.ellipsoidalAltitude ?? .nan, 123.4 + 47.0, accuracy: 1e-3)
        XCTAssertGreaterThan(d.fix.horizontalAccuracy ?? -1, 0)
        XCTAssertGreaterThan(d.fix.verticalAccuracy ?? -1, 0)
        // The timestamp is the receiver's UTC time to the microsecond: xx.25 s exactly.
        let ts = try XCTUnwrap(d.timestamp, "the receiver's time")
        XCTAssertEqual(ts % 1_000_000, 250_000, "fraction of the second")
        XCTAssertTrue(feed.sentTimestamps.contains(ts))
        XCTAssertEqual(ts / 86_400_000_000, UInt64(LocationFeed.day), "RMC date 150324")

    }

    func testUnreportedAltitudeAndCourseAreAbsentNotNaN() throws {
        let (p, feed) = try clientWithKnownFeed()
        // A receiver that reports no altitude and no course: those keys are absent, never NaN.
        feed.altitude = nil
        feed.course = nil
        let mark = feed.sent.count
        var bare: Location?
        for _ in 0..<5 {   // the first answer may still be an epoch sent before the change
            guard let r = locate(p, feed, maxAge: 0) else { break }
            if let ts = r.timestamp, feed.sent.dropFirst(mark).contains(where: { $0.timestamp == ts }) {
                bare = r
                break
            }
        }
        if let bare {
            assertNoNaN(bare)
            let f = bare.fix
            let unreported = [f.altitude, f.ellipsoidalAltitude, f.course, f.courseAccuracy, f.speedAccuracy]
            XCTAssertEqual(unreported.compactMap { $0 }, [], "altitude and course were not reported: \(f)")
            XCTAssertNotNil(bare.timestamp)
        } else {
            XCTFail("no fix without altitude arrived")
        }
    }

    func testLatencyFromTheNMEADatagramToLocationUpdated() throws {
        let (p, feed) = try clientWithKnownFeed()
        // Latency: NMEA datagram that completes an epoch (RMC) sent -> LocationUpdated received.
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        stack.peers.settle(0.3)   // a cached fix younger than 5 s comes at once: let it pass
        var latencies: [Double] = []
        for i in 0..<50 {
            feed.latitude = 48.1173 + Double(i) * 1e-4
            let e = feed.next()
            let from = p.signals.count
            stack.gpsd.send(Array(e.sentences.dropLast()))
            let t0 = EventLoop.monotonicNanos()
            stack.gpsd.send([e.sentences.last!])
            // The arrival time is taken by BusPeer as libdbus dispatches the signal.
            var got: Location?
            var t1: UInt64 = 0
            stack.peers.pump(timeout: 5) {
                guard let idx = p.signals.indices.dropFirst(from).first(where: { p.signals[$0].location?.timestamp == e.timestamp })
                else { return false }
                got = p.signals[idx].location
                t1 = p.signalTimes[idx]
                return true
            }
            guard let got else {
                XCTFail("fix \(i) (timestamp \(e.timestamp)) never arrived as LocationUpdated")
                break
            }
            latencies.append(Double(t1 - t0) / 1e6)
            assertMatchesFeed(got, feed)
            XCTAssertEqual(got.latitude, feed.latitude, accuracy: 1e-6)
        }
        let line = String(format: "LATENCY NMEA(RMC datagram) -> LocationUpdated over %d fixes: p50 %.3f ms, p99 %.3f ms, min %.3f ms, max %.3f ms",
                          latencies.count, percentile(latencies, 50), percentile(latencies, 99),
                          latencies.min() ?? .nan, latencies.max() ?? .nan)
        print(line)
        XCTAssertEqual(latencies.count, 50)
        XCTAssertNoThrow(try p.geo("StopUpdates").get())
    }

    // MARK: 2. RequestLocation errors, max-age, timeout

    func testRequestLocationNotAuthorizedMaxAgeTimeoutAndGpsUnavailable() throws {
        // Without a tap.
        let stranger = try stack.peer()
        XCTAssertDBusError(stranger.geo("RequestLocation", [.vardict([:])]), GeoConsentAPI.ErrorName.notAuthorized)
        XCTAssertDBusError(stranger.geo("StartUpdates", [.vardict([:])]), GeoConsentAPI.ErrorName.notAuthorized)
        XCTAssertEqual(propertyBool(stranger, "GpsdConnected"), false, "no granted session needed gpsd")

        let p = try tappedClient()
        let feed = LocationFeed()
        XCTAssertNotNil(locate(p, feed, maxAge: 0))
        // Let every epoch in flight arrive, then stop feeding gpsd altogether.
        stack.peers.settle(0.3)
        let last = feed.lastTimestamp

        // A cached fix younger than max-age comes back at once, gpsd not fed.
        for _ in 0..<2 {
            let t0 = secondsNow()
            let r = p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 30, timeout: 5))], timeout: 10)
            let dt = secondsNow() - t0
            XCTAssertEqual(LocationBody.decode(try r.get())?.timestamp, last, "the newest cached fix")
            XCTAssertLessThan(dt, 1.0, "served from the cache (gpsd is silent: anything else would be a Timeout)")
            stack.peers.settle(0.5)
        }
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), true)

        // Older than max-age and gpsd up but silent: Timeout after `timeout`.
        for maxAge in [0.0, 0.5] {
            let t0 = secondsNow()
            let r = p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: maxAge, timeout: 0.5))], timeout: 10)
            let dt = secondsNow() - t0
            XCTAssertDBusError(r, GeoConsentAPI.ErrorName.timeout)
            XCTAssertGreaterThan(dt, 0.45, "waited for the timeout")
            XCTAssertLessThan(dt, 2.0)
        }

        // InUse while a RequestLocation is pending, and not after it failed.
        let watcher = try stack.peer()
        let pendingCall = p.requestLocation(maxAge: 0, timeout: 0.5)
        stack.peers.settle(0.1)
        XCTAssertEqual(propertyBool(watcher, "InUse"), true, "a RequestLocation is pending")
        XCTAssertDBusError(wait(pendingCall), GeoConsentAPI.ErrorName.timeout)
        XCTAssertEqual(propertyBool(watcher, "InUse"), false)

        // gpsd gone, nothing cached qualifies: GpsUnavailable as soon as the connection fails.
        stack.gpsd.kill()
        let t0 = secondsNow()
        let r = p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 0, timeout: 10))], timeout: 20)
        let dt = secondsNow() - t0
        XCTAssertDBusError(r, GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertLessThan(dt, 1.0, "well under the 10 s timeout")
        print(String(format: "LocationBusTests: GpsUnavailable after %.1f ms", dt * 1000))
        // Again, now that the daemon knows gpsd is down.
        let t1 = secondsNow()
        XCTAssertDBusError(p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 0, timeout: 10))], timeout: 20),
                           GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertLessThan(secondsNow() - t1, 1.0)
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), false)
        // A cached fix that qualifies is still served without gpsd.
        let cached = try p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 3600))], timeout: 10).get()
        XCTAssertEqual(LocationBody.decode(cached)?.timestamp, last)
        XCTAssertEqual(propertyBool(p, "InUse"), false, "nothing pending")
    }

    // MARK: 3. gpsd lost and back during updates

    func testGpsdKilledDuringUpdatesSignalsErrorAndUpdatesResumeByThemselves() throws {
        let p = try tappedClient()
        let feed = LocationFeed(step: 10)
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        let t = ticker(feed, interval: 0.05)
        t.start()
        defer { t.stop() }
        XCTAssertNotNil(p.waitForSignal("LocationUpdated", timeout: 10))
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), true)

        let beforeKill = p.signals.count
        stack.gpsd.kill()
        guard let err = p.waitForSignal(LocationErrorSignal.member, from: beforeKill, timeout: 5) else {
            return XCTFail("no LocationError after gpsd was killed")
        }
        let e = LocationErrorSignal.decode(err.arguments())
        XCTAssertEqual(e?.name, GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertFalse(e?.message.isEmpty ?? true, "a message")
        XCTAssertEqual(err.destination, p.uniqueName, "unicast")
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), false)
        // Stays down for a while: no fixes, the session keeps its updates.
        stack.peers.settle(1.0)
        let errIndex = p.indexOfSignal("LocationError", from: beforeKill)!
        XCTAssertTrue(p.locations(from: errIndex).isEmpty, "no fix while gpsd is down")
        // Meanwhile: a one-shot request fails at once, and a new session's
        // StartUpdates is answered by a LocationError rather than silence.
        let t0 = secondsNow()
        XCTAssertDBusError(p.geo("RequestLocation", [OptionDictionary.encode(LocationOptions(maxAge: 0))]),
                           GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertLessThan(secondsNow() - t0, 1.0)
        let q = try tappedClient()
        XCTAssertNoThrow(try q.geo("StartUpdates", [.vardict([:])]).get())
        // (It may first get the cached fix, which is younger than 5 s.)
        let qErr = q.waitForSignal(LocationErrorSignal.member, timeout: 3)
        XCTAssertEqual(qErr.flatMap { LocationErrorSignal.decode($0.arguments()) }?.name, GeoConsentAPI.ErrorName.gpsUnavailable,
                       "StartUpdates while gpsd is down")
        XCTAssertLessThanOrEqual(q.locations().count, 1, "at most the cached fix")
        let qMark = q.signals.count

        try stack.gpsd.restart()
        let back = p.signals.count
        guard let upd = p.waitForSignal("LocationUpdated", from: back, timeout: 15) else {
            return XCTFail("updates did not resume after gpsd came back")
        }
        XCTAssertNotNil(upd.location?.timestamp)
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), true)
        let errors = p.signals(named: "LocationError").count
        print("LocationBusTests: \(errors) LocationError signal(s) during the outage")
        XCTAssertGreaterThanOrEqual(errors, 1)
        // And they keep coming, to both sessions.
        let more = p.signals.count
        XCTAssertTrue(stack.peers.pump(timeout: 5) { p.locations(from: more).count >= 3 && q.locations(from: qMark).count >= 3 })
    }

    // MARK: 4. Filters per session, no eavesdropping, InUse

    func testTwoSessionsWithDifferentFiltersAndNoEavesdropper() throws {
        let eve = try stack.peer()
        try eve.addMatch("type='signal'")
        var eavesdropAccepted = true
        do { try eve.addMatch("type='signal',eavesdrop='true'") } catch { eavesdropAccepted = false }
        do { try eve.addMatch("eavesdrop='true'") } catch { eavesdropAccepted = false }
        print("LocationBusTests: AddMatch eavesdrop='true' accepted by the bus: \(eavesdropAccepted)")

        let a = try tappedClient()
        let b = try tappedClient()
        XCTAssertEqual(agent.confirms.count, 1, "the second tap is covered by one-time-approved")
        XCTAssertEqual(propertyBool(a, "InUse"), false)
        XCTAssertNoThrow(try a.geo("StartUpdates", [OptionDictionary.encode(UpdateOptions(minInterval: 0))]).get())
        XCTAssertNoThrow(try b.geo("StartUpdates", [OptionDictionary.encode(UpdateOptions(distanceFilter: 1000))]).get())
        XCTAssertEqual(propertyBool(a, "InUse"), true)

        // p0, until both sessions have their first fix.
        let p0 = (lat: 52.5200, lon: 13.4050)
        let feed = LocationFeed(latitude: p0.lat, longitude: p0.lon, step: 10)
        XCTAssertTrue(feedUntil(feed) { !a.locations().isEmpty && !b.locations().isEmpty })
        stack.peers.settle(0.3)
        XCTAssertEqual(b.locations().count, 1, "B: the first fix, then nothing while the position stays")
        let aStart = a.signals.count, bStart = b.signals.count

        // 100 m steps north: 100 ... 900 m from B's last fix, then one 2 km away.
        var expected: [UInt64] = []
        for i in 1...10 {
            let (lat, lon) = i < 10 ? offset(p0.lat, p0.lon, north: Double(i) * 100, east: 0)
                                    : offset(p0.lat, p0.lon, north: 2000, east: 0)
            feed.latitude = lat
            feed.longitude = lon
            let ts = feed.send(to: stack.gpsd)
            expected.append(ts)
            XCTAssertTrue(stack.peers.pump(timeout: 5) { a.locations(from: aStart).contains { $0.timestamp == ts } },
                          "A got fix \(i)")
        }
        stack.peers.settle(0.3)
        // A: every fix, in order. B: only the one 2 km away.
        XCTAssertEqual(a.locations(from: aStart).compactMap(\.timestamp), expected)
        let bGot = b.locations(from: bStart)
        XCTAssertEqual(bGot.count, 1, "B: \(bGot)")
        XCTAssertEqual(bGot.first?.timestamp, expected.last)
        XCTAssertEqual(bGot.first?.latitude ?? .nan, feed.latitude, accuracy: 1e-6)
        // A short step from there: still nothing for B; A sees it.
        feed.latitude += 300 / 111_195.0
        let ts = feed.send(to: stack.gpsd)
        XCTAssertTrue(stack.peers.pump(timeout: 5) { a.locations(from: aStart).contains { $0.timestamp == ts } })
        stack.peers.settle(0.2)
        XCTAssertEqual(b.locations(from: bStart).count, 1)

        // Signals are unicast: the eavesdropper saw none of them.
        XCTAssertTrue(eve.signals(named: "LocationUpdated").isEmpty, "eavesdropper got \(eve.signals(named: "LocationUpdated").count) fixes")
        XCTAssertTrue(eve.signals(named: "AuthorizationChanged").isEmpty)
        for m in a.signals(named: "LocationUpdated") + b.signals(named: "LocationUpdated") {
            XCTAssertNotNil(m.destination, "sent with a destination")
        }

        // InUse while any updates run.
        XCTAssertNoThrow(try a.geo("StopUpdates").get())
        XCTAssertEqual(propertyBool(a, "InUse"), true, "B still has updates")
        let aStopped = a.signals.count
        XCTAssertNoThrow(try b.geo("StopUpdates").get())
        XCTAssertEqual(propertyBool(a, "InUse"), false)
        let bStopped = b.signals.count
        feedUntil(feed, timeout: 0.5) { false }
        XCTAssertTrue(a.locations(from: aStopped).isEmpty, "no fixes after StopUpdates")
        XCTAssertTrue(b.locations(from: bStopped).isEmpty, "no fixes after StopUpdates")
        XCTAssertTrue(eve.signals(named: "LocationUpdated").isEmpty)
    }

    /// A fan-out past the first signals sent one by one and over several batches
    /// (LocationService: 8, then batches of 16), of both accuracies: every fix
    /// reaches every session once, at its own accuracy, unicast.
    func testFanOutToFortyFiveSessionsOfBothAccuraciesReachesEachOnce() throws {
        let eve = try stack.peer()
        try eve.addMatch("type='signal'")
        let full = try (0..<30).map { _ in try tappedClient(accuracy: .full) }
        let reduced = try (0..<15).map { _ in try tappedClient(accuracy: .reduced) }
        let all = full + reduced
        for p in all { XCTAssertNoThrow(try p.geo("StartUpdates", [OptionDictionary.encode(UpdateOptions())]).get()) }
        let feed = LocationFeed(latitude: 52.52, longitude: 13.405, step: 10)
        XCTAssertTrue(feedUntil(feed) { all.allSatisfy { !$0.locations().isEmpty } }, "every session has a first fix")
        stack.peers.settle(0.3)
        let starts = all.map(\.signals.count)

        var expected: [UInt64] = []
        for _ in 0..<3 {
            let ts = feed.send(to: stack.gpsd)
            expected.append(ts)
            XCTAssertTrue(stack.peers.pump(timeout: 10) {
                zip(all, starts).allSatisfy { p, s in p.locations(from: s).contains { $0.timestamp == ts } }
            }, "fix \(ts) reached every session")
            stack.peers.settle(0.1)
        }
        stack.peers.settle(0.3)
        for (i, (p, s)) in zip(all, starts).enumerated() {
            let got = p.locations(from: s)
            XCTAssertEqual(got.compactMap(\.timestamp), expected, "session \(i): each fix once, in order")
            XCTAssertEqual(Set(got.map(\.accuracy)), [i < full.count ? .full : .reduced], "session \(i)")
            for m in p.signals(named: "LocationUpdated") { XCTAssertEqual(m.destination, p.uniqueName) }
        }
        XCTAssertTrue(eve.signals(named: "LocationUpdated").isEmpty, "unicast: the onlooker got none")
    }

    /// `WatchSessions`: the settings window hears `SessionsChanged`, unicast to
    /// it, when an app of its uid starts a session and starts receiving;
    /// `ListSessionDetails` then says the app receives now.
    func testWatchSessionsTellsTheWatcherWhenAnAppStartsReceiving() throws {
        let settings = try stack.peer()
        XCTAssertNoThrow(try settings.geo("WatchSessions").get())
        let p = try tappedClient()
        stack.peers.pump(timeout: 5) { !settings.signals(named: SessionsChangedSignal.member).isEmpty }
        let afterTap = settings.signals(named: SessionsChangedSignal.member).count
        XCTAssertGreaterThan(afterTap, 0, "the tap made a session with a grant")
        _ = try p.geo("StartUpdates", [OptionDictionary.encode(UpdateOptions())]).get()
        stack.peers.pump(timeout: 5) { settings.signals(named: SessionsChangedSignal.member).count > afterTap }
        XCTAssertGreaterThan(settings.signals(named: SessionsChangedSignal.member).count, afterTap, "it receives now")
        for m in settings.signals(named: SessionsChangedSignal.member) { XCTAssertEqual(m.destination, settings.uniqueName) }
        let details = SessionDetailsReply.decode(try settings.geo("ListSessionDetails").get()) ?? []
        XCTAssertEqual(details.first { $0.name == p.uniqueName }?.receiving, true)
        XCTAssertEqual(details.first { $0.name == p.uniqueName }?.accuracy, .full)
        XCTAssertTrue(p.signals(named: SessionsChangedSignal.member).isEmpty, "an app that did not watch hears nothing")
    }

    // MARK: 5. Reduced accuracy

    /// The user turns Precise off in the prompt (`allow-once-reduced`): the app
    /// asked for full accuracy and gets the grid cell, its grant and record say
    /// reduced, and asking for full again prompts again. The prompt said what
    /// the app id rests on.
    func testPreciseOffGivesReducedFixesAndFullIsAskedAgain() throws {
        agent.behaviour = .answer("allow-once-reduced")
        let p = try tappedClient(accuracy: .full)
        let prompt = try XCTUnwrap(agent.confirms.last)
        XCTAssertEqual(prompt.accuracy, .full)
        XCTAssertEqual(prompt.identity, .executable, "the test process is a plain program")
        XCTAssertEqual(prompt.identityProven, getuid() <= 999, "proven only for a system uid")
        XCTAssertEqual(try p.authorization().accuracy, .reduced)
        let feed = LocationFeed(latitude: 48.1372, longitude: 11.5756, step: 10)
        let d = try XCTUnwrap(locate(p, feed, maxAge: 0))
        XCTAssertEqual(d.accuracy, .reduced)
        XCTAssertNil(d.fix.altitude, "reduced: no altitude")
        XCTAssertGreaterThanOrEqual(d.fix.horizontalAccuracy ?? 0, 3530, "a ~5 km cell")

        agent.behaviour = .answer("allow-once")
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: .full)).get(), 4)
        XCTAssertEqual(agent.confirms.count, 2, "full accuracy was asked again")
        XCTAssertEqual(try p.authorization().accuracy, .full)
        let precise = try XCTUnwrap(locate(p, feed, maxAge: 0))
        XCTAssertEqual(precise.accuracy, .full)
        XCTAssertNotNil(precise.fix.altitude)
    }

    func testReducedAccuracyCannotBeAveragedBack() throws {
        let p = try tappedClient(accuracy: .reduced)
        XCTAssertEqual(agent.confirms.last?.accuracy, .reduced)
        XCTAssertEqual(try p.authorization().accuracy, .reduced)

        // Find the cell of a point, then put the truth well off that cell's centre
        // (1.5 km north and east): a centred truth would trivially average back.
        let feed = LocationFeed(latitude: 48.1372, longitude: 11.5756, step: 10)
        guard let first = locate(p, feed, maxAge: 0),
              case let (cLat, cLon) = (first.latitude, first.longitude) else { return }
        let truth = offset(cLat, cLon, north: 1500, east: 1500)

        // 20 jittered positions within 300 m of the truth, 50 queries each.
        var rng: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random() -> Double {   // xorshift64*, deterministic
            rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27
            return Double((rng &* 2_685_821_657_736_338_717) >> 11) / Double(1 << 53)
        }
        var answers: [Location] = []
        var positionsAnswered = 0
        for _ in 0..<20 {
            let r = random() * 300, a = random() * 2 * Double.pi
            let (lat, lon) = offset(truth.0, truth.1, north: r * cos(a), east: r * sin(a))
            feed.latitude = lat
            feed.longitude = lon
            let firstOfThis = feed.sent.count
            // A fresh fix of this position first (max-age 0)...
            var live: Location?
            for _ in 0..<5 {
                guard let d = locate(p, feed, maxAge: 0) else { break }
                answers.append(d)
                if let ts = d.timestamp, feed.sent.dropFirst(firstOfThis).contains(where: { $0.timestamp == ts }) {
                    live = d
                    break
                }
            }
            guard live != nil else { return XCTFail("position \(positionsAnswered) was never answered") }
            positionsAnswered += 1
            stack.peers.settle(0.1)
            // ...then from the cache (gpsd not fed).
            var calls: [BusPeer.PendingCall] = []
            while answers.count + calls.count < positionsAnswered * 50 {
                calls.append(p.requestLocation(maxAge: 3600, timeout: 5))
            }
            stack.peers.pump(timeout: 20) { calls.allSatisfy(\.isDone) }
            for c in calls {
                guard case .success(let v)? = c.result, let d = LocationBody.decode(v) else {
                    return XCTFail("cached RequestLocation failed: \(String(describing: c.result))")
                }
                XCTAssertTrue(feed.sent.dropFirst(firstOfThis).contains { $0.timestamp == d.timestamp },
                              "the cache holds this position's fix")
                answers.append(d)
            }
        }
        XCTAssertEqual(positionsAnswered, 20)
        XCTAssertGreaterThanOrEqual(answers.count, 1000)

        var cells = Set<String>()
        var sumLat = 0.0, sumLon = 0.0
        for d in answers {
            assertNoNaN(d)
            XCTAssertEqual(d.accuracy, .reduced)
            let f = d.fix
            let withheld = [f.altitude, f.ellipsoidalAltitude, f.verticalAccuracy, f.speed, f.speedAccuracy, f.course,
                            f.courseAccuracy]
            XCTAssertEqual(withheld.compactMap { $0 }, [], "only the cell and its accuracy with reduced accuracy: \(f)")
            // The half-diagonal of the daemon's ~5 km cell: 4998.8 m bands and columns at most
            // 5000 m wide give 3534.9 m, a hair under 5000·√2/2 = 3535.5 m.
            let acc = d.fix.horizontalAccuracy ?? 0
            XCTAssertGreaterThanOrEqual(acc, 3530, "at least the half-diagonal of a ~5 km cell")
            let lat = d.latitude, lon = d.longitude
            // The circle it describes holds the true position (the jitter included).
            XCTAssertLessThanOrEqual(metresBetween(lat, lon, truth.0, truth.1) + 300, acc, "the truth lies inside the accuracy circle")
            cells.insert("\(lat),\(lon)")
            sumLat += lat
            sumLon += lon
        }
        XCTAssertLessThanOrEqual(cells.count, 4, "jitter of 300 m crosses at most a few cells: \(cells)")
        XCTAssertTrue(cells.contains("\(cLat),\(cLon)"), "the same cell centre as before")
        let meanLat = sumLat / Double(answers.count), meanLon = sumLon / Double(answers.count)
        let miss = metresBetween(meanLat, meanLon, truth.0, truth.1)
        print(String(format: "LocationBusTests: %d reduced answers, %d cell(s); mean is %.0f m from the truth", answers.count, cells.count, miss))
        XCTAssertGreaterThan(miss, 5000 / 4, "the truth must not be recoverable by averaging")
    }

    func testAskingForMoreAccuracyThanConfirmedPromptsAgainAndGivesFullFixes() throws {
        let p = try tappedClient(accuracy: .reduced)
        XCTAssertEqual(try p.authorization().accuracy, .reduced)
        let feed = LocationFeed(latitude: 48.1372, longitude: 11.5756, step: 10)
        let truth = offset(48.1372, 11.5756, north: 1500, east: 1500)
        // More accuracy than confirmed: the same session taps for full, the agent is asked again.
        let prompts = agent.confirms.count
        XCTAssertEqual(try p.tap(AuthOptions(accuracy: .full)).get(), 4)
        XCTAssertEqual(agent.confirms.count, prompts + 1, "asking for more than confirmed prompts again")
        XCTAssertEqual(agent.confirms.last?.accuracy, .full)
        feed.latitude = truth.0
        feed.longitude = truth.1
        let mark = feed.sent.count
        var full: Location?
        for _ in 0..<5 {
            guard let d = locate(p, feed, maxAge: 0) else { break }
            if let ts = d.timestamp, feed.sent.dropFirst(mark).contains(where: { $0.timestamp == ts }) { full = d; break }
        }
        guard let full else { return XCTFail("no full-accuracy fix after the second tap") }
        XCTAssertEqual(full.accuracy, .full)
        XCTAssertEqual(full.latitude, truth.0, accuracy: 1e-6)
        XCTAssertEqual(full.longitude, truth.1, accuracy: 1e-6)
        XCTAssertNotNil(full.fix.altitude)
        XCTAssertNotNil(full.fix.speed)
        // And updates are full too.
        let from = p.signals.count
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        XCTAssertTrue(feedUntil(feed) { p.locations(from: from).contains { $0.timestamp.map { ts in feed.sent.dropFirst(mark).contains { $0.timestamp == ts } } ?? false } })
        for d in p.locations(from: from) {
            XCTAssertEqual(d.accuracy, .full)
        }
    }

    // MARK: 7. Linger

    func testGpsdLingerThenDisconnectAndReconnectOnStartUpdates() throws {
        try makeStack(config: "[daemon]\ngpsd-linger = 0.3\n")
        let p = try tappedClient()
        let feed = LocationFeed(step: 10)
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        XCTAssertTrue(feedUntil(feed) { !p.locations().isEmpty })
        XCTAssertEqual(propertyBool(p, "GpsdConnected"), true)

        XCTAssertNoThrow(try p.geo("StopUpdates").get())
        guard let off = pollProperty(p, "GpsdConnected", equals: false, timeout: 3) else {
            return XCTFail("gpsd still connected 3 s after StopUpdates with gpsd-linger = 0.3")
        }
        print(String(format: "LocationBusTests: GpsdConnected false %.0f ms after StopUpdates (linger 0.3 s)", off * 1000))
        XCTAssertLessThan(off, 2.0)
        XCTAssertGreaterThan(off, 0.2, "it lingered")

        let from = p.signals.count
        XCTAssertNoThrow(try p.geo("StartUpdates", [.vardict([:])]).get())
        guard let on = pollProperty(p, "GpsdConnected", equals: true, timeout: 3) else {
            return XCTFail("StartUpdates did not reconnect to gpsd")
        }
        print(String(format: "LocationBusTests: GpsdConnected true %.0f ms after StartUpdates", on * 1000))
        XCTAssertTrue(feedUntil(feed) { !p.locations(from: from).isEmpty }, "fixes again")
    }
}
