import XCTest
@testable import GeoCore

/// The rules of `LocationCore`, one test per rule, clock and grants injected (see LocationCoreDSL).
final class LocationCoreTests: XCTestCase {
    let a: SessionID = ":1.10", b: SessionID = ":1.11", c: SessionID = ":1.12"

    // MARK: - Update filters

    /// One fix per step: seconds after the previous step, metres north of the start, sent or held back.
    private func checkFilter(_ label: String, distance: Double, interval: Double,
                             _ steps: [(after: Double, north: Double, sent: Bool)],
                             line: UInt = #line) {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a, distance: distance, interval: interval)
        rig.connected()
        for (i, step) in steps.enumerated() {
            rig.advance(step.after)
            let fix = Spot.north(step.north)
            let out = rig.fix(fix)
            XCTAssertEqual(out.updates[a], step.sent ? fix : nil, "\(label), fix \(i)", line: line)
        }
    }

    func testDistanceFilter() {
        let table: [(String, Double, [(Double, Double, Bool)])] = [
            ("no filter: every fix, even in place", 0, [(0, 0, true), (1, 0, true), (1, 1, true)]),
            ("100 m: 50 m held back, 150 m sent", 100, [(0, 0, true), (1, 50, false), (1, 150, true)]),
            ("measured from the last fix sent", 100, [(0, 0, true), (1, 60, false), (1, 120, true), (1, 170, false)]),
            ("the first fix always goes out", 10_000, [(0, 5_000, true)]),
        ]
        for (label, distance, steps) in table {
            checkFilter(label, distance: distance, interval: 0, steps.map { ($0.0, $0.1, $0.2) })
        }
    }

    func testMinInterval() {
        let table: [(String, Double, [(Double, Double, Bool)])] = [
            ("no interval: back to back", 0, [(0, 0, true), (0, 0, true), (0.001, 0, true)]),
            ("2 s: 1 s later held back, 2 s later sent", 2, [(0, 0, true), (1, 0, false), (1, 0, true)]),
            ("measured from the last fix sent", 2, [(0, 0, true), (1.5, 0, false), (1.5, 0, true), (1.5, 0, false)]),
            ("just under the interval", 2, [(0, 0, true), (1.999, 0, false)]),
            ("moving far does not beat the interval", 2, [(0, 0, true), (0.5, 5_000, false), (1.5, 5_000, true)]),
        ]
        for (label, interval, steps) in table {
            checkFilter(label, distance: 0, interval: interval, steps.map { ($0.0, $0.1, $0.2) })
        }
        checkFilter("both filters must pass", distance: 100, interval: 2,
                    [(0, 0, true), (3, 10, false), (0.5, 500, true), (0.5, 1_000, false)])
    }

    /// gpsd may report one receiver epoch twice: one fix per epoch reaches the
    /// sessions (and a waiting request), a new epoch the next; fixes without a
    /// receiver time are never taken for repeats.
    func testOneFixPerReceiverEpoch() {
        let rig = LocationRig(grants: [a: .full, b: .full])
        rig.start(a)
        rig.connected()
        let first = Spot.north(0, timestamp: 1_800_000_000_000_000)
        XCTAssertEqual(rig.fix(first).updates[a], first)
        let again = Spot.north(3, timestamp: 1_800_000_000_000_000)
        rig.locate(b, maxAge: 0)   // waits for the next fix
        let repeated = rig.fix(again)
        XCTAssertNil(repeated.updates[a], "the same epoch again: \(repeated)")
        XCTAssertFalse(repeated.contains { if case .reply = $0 { return true } else { return false } },
                       "a waiting request is not answered by a repeat")
        let next = Spot.north(6, timestamp: 1_800_000_001_000_000)
        let out = rig.fix(next)
        XCTAssertEqual(out.updates[a], next)
        XCTAssertTrue(out.contains { if case .reply = $0 { return true } else { return false } }, "the next epoch answers it")
        let untimed = Spot.north(9)
        XCTAssertEqual(rig.fix(untimed).updates[a], untimed)
        XCTAssertEqual(rig.fix(untimed).updates[a], untimed, "no receiver time: never a repeat")
    }

    func testStartUpdatesRestartsFilters() {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a, distance: 1_000)
        rig.connected()
        XCTAssertNotNil(rig.fix().updates[a])
        XCTAssertNil(rig.fix(Spot.north(10)).updates[a])
        // New options, filters start afresh: the next fix goes out whatever the distance.
        rig.advance(10)
        rig.start(a, distance: 1_000)
        XCTAssertEqual(rig.fix(Spot.north(20)).updates[a], Spot.north(20))
    }

    func testSetUpdateOptionsKeepsCountingFromTheLastFixSent() {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a)
        rig.connected()
        XCTAssertNotNil(rig.fix().updates[a])
        // A distance filter set while started applies to the next fix, measured from the last one sent.
        XCTAssertEqual(rig.send(.setUpdateOptions(session: a, UpdateOptions(distanceFilter: 100))), [])
        rig.advance(1)
        XCTAssertNil(rig.fix(Spot.north(60)).updates[a])
        XCTAssertEqual(rig.fix(Spot.north(120)).updates[a], Spot.north(120))
        // A session without updates gets none from new options.
        XCTAssertEqual(rig.send(.setUpdateOptions(session: "other", UpdateOptions())), [])
        XCTAssertNil(rig.fix(Spot.north(500)).updates["other"])
    }

    // MARK: - Cached fixes

    func testRequestLocationMaxAge() {
        // (label, max-age, age of the last fix, grant, answered from the cache)
        let table: [(String, Double, Double, Accuracy, Bool)] = [
            ("younger than max-age: at once", 5, 4.9, .full, true),
            ("as old as max-age: waits", 5, 5, .full, false),
            ("older than max-age: waits", 5, 7, .full, false),
            ("max-age 0: always waits", 0, 0, .full, false),
            ("long max-age", 60, 30, .full, true),
            ("reduced grant: the reduced view of the cached fix", 5, 1, .reduced, true),
        ]
        for (label, maxAge, age, grant, cached) in table {
            let rig = LocationRig.streaming([b: .full])
            rig.fix()
            rig.advance(age)
            rig.grants[a] = grant
            let step = rig.locate(a, maxAge: maxAge, timeout: 30)
            if cached {
                let shown = grant == .reduced ? rig.core.grid.reduce(Spot.here) : Spot.here
                XCTAssertEqual(step.effects, [.reply(step.call, .location(shown, grant)), .served(session: a, .gps)], label)
            } else {
                XCTAssertEqual(step.effects, [.scheduleTimer(.timeout(step.call), after: 30)], label)
            }
        }
    }

    func testRequestLocationWithoutGrantDoesNotUseTheCache() {
        let rig = LocationRig.streaming([b: .full])
        rig.fix()
        let step = rig.locate(a)
        XCTAssertNil(step.reply, "no grant: no cached fix either")
        XCTAssertEqual(rig.fix().failure(of: step.call), .notAuthorized)
    }

    func testStartUpdatesSendsCachedFixYoungerThan5s() {
        // (age of the last fix, sent at once)
        let table: [(Double, Bool)] = [(0, true), (4.9, true), (5, false), (60, false)]
        for (age, sent) in table {
            let rig = LocationRig.streaming([b: .full])
            rig.fix()
            rig.advance(age)
            rig.grants[a] = .reduced
            let step = rig.start(a)
            let label = "fix \(age) s old"
            XCTAssertEqual(step.effects.first, .reply(step.call, .empty), label)
            XCTAssertEqual(step.effects.updates, sent ? [a: rig.core.grid.reduce(Spot.here)] : [:], label)
        }
    }

    // MARK: - Timeout

    func testRequestLocationTimeout() {
        // (label, gpsd connects, the error at the timeout)
        let table: [(String, Bool, LocationFailure)] = [
            ("gpsd connected but silent", true, .timeout),
            ("the connection attempt hangs", false, LocationRig.unreachable),
        ]
        for (label, connects, expected) in table {
            let rig = LocationRig(grants: [a: .full])
            let step = rig.locate(a, timeout: 3)
            XCTAssertEqual(step.effects.scheduled, [.timeout(step.call): 3], label)
            XCTAssertEqual(step.effects.connects, 1, label)
            if connects { rig.connected() }
            XCTAssertNil(rig.advance(2.9).failure(of: step.call), label)
            let out = rig.advance(0.1)
            XCTAssertEqual(out.failure(of: step.call), expected, label)
            XCTAssertEqual(out.inUse, [false], label)
            XCTAssertEqual(out.scheduled, connects ? [.linger: 10] : [:], label)
            XCTAssertNil(rig.fix().failure(of: step.call), "\(label): answered once")
            XCTAssertNil(rig.fix().reply(to: step.call), "\(label): answered once")
        }
    }

    func testFixAnswersEveryWaitingCallAndCancelsTheirTimeouts() {
        let rig = LocationRig(grants: [a: .full, b: .reduced])
        let first = rig.locate(a), second = rig.locate(a), third = rig.locate(b)
        rig.connected()
        let out = rig.fix()
        XCTAssertEqual(out.reply(to: first.call), .location(Spot.here, .full))
        XCTAssertEqual(out.reply(to: second.call), .location(Spot.here, .full))
        XCTAssertEqual(out.reply(to: third.call), .location(rig.core.grid.reduce(Spot.here), .reduced))
        XCTAssertEqual(out.cancelled, [.timeout(first.call), .timeout(second.call), .timeout(third.call)])
        XCTAssertEqual(out.inUse, [false])
        XCTAssertTrue(rig.timers.keys.allSatisfy { $0 == .linger }, "only the linger is left: \(rig.timers)")
    }

    // MARK: - Linger

    func testLingerThenDisconnect() {
        let rig = LocationRig.streaming([a: .full], linger: 10)
        let stop = rig.stop(a)
        XCTAssertEqual(stop.effects, [.reply(stop.call, .empty), .inUseChanged(false), .scheduleTimer(.linger, after: 10)])
        XCTAssertEqual(rig.advance(9.9), [])
        XCTAssertEqual(rig.advance(0.1), [
            .close(.gps), .receiverConnectedChanged(false),
            .log(.info, "disconnected from gpsd at \(LocationRig.gpsdLabel): no session needs fixes"),
        ])
        XCTAssertFalse(rig.core.receiverConnected)
        // The next demand connects again.
        XCTAssertEqual(rig.start(a).effects.connects, 1)
    }

    func testNewDemandCancelsLinger() {
        let table: [(String, (LocationRig) -> Void)] = [
            ("StartUpdates", { $0.start(":1.10") }),
            ("RequestLocation", { $0.locate(":1.10", timeout: 60) }),
        ]
        for (label, demand) in table {
            let rig = LocationRig.streaming([a: .full], linger: 10)
            rig.stop(a)
            rig.advance(5)
            let before = rig.timers
            demand(rig)
            XCTAssertNotNil(before[.linger], label)
            XCTAssertNil(rig.timers[.linger], "\(label): linger cancelled")
            XCTAssertFalse(rig.connecting, "\(label): still connected, no new attempt")
            XCTAssertEqual(rig.advance(20).disconnects, 0, label)
            XCTAssertTrue(rig.core.receiverConnected, label)
        }
    }

    // MARK: - Backoff and outages

    func testBackoffDoublesTo5sAndResetsOnFix() {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a)
        for delay in [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5] {
            XCTAssertEqual(rig.connectFailed().scheduled, [.reconnect: delay])
            XCTAssertEqual(rig.advance(delay - 0.01).connects, 0, "not before \(delay) s")
            XCTAssertEqual(rig.advance(0.01).connects, 1, "after \(delay) s")
        }
        rig.connected()
        rig.fix()
        XCTAssertEqual(rig.closed().scheduled, [.reconnect: 0.1], "a fix resets the backoff")
    }

    func testOutageEndsWithFirstFixNotFirstConnect() {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a)
        var out = rig.connectFailed()
        XCTAssertEqual(out.locationErrors, [a])
        XCTAssertEqual(out.logs, [.warning])
        rig.advance(0.1)
        out = rig.connected()
        XCTAssertEqual(out.gpsdConnected, [true])
        XCTAssertEqual(out.logs, [], "no 'connected' line during an outage")
        // A port that accepts and hangs up: the same episode, the backoff goes on.
        out = rig.closed()
        XCTAssertEqual(out.scheduled, [.reconnect: 0.2])
        XCTAssertEqual(out.locationErrors, [])
        XCTAssertEqual(out.logs, [])
        rig.advance(0.2)
        rig.connected()
        out = rig.fix()
        XCTAssertEqual(out.filter { if case .log = $0 { return true } else { return false } },
                       [.log(.notice, "gpsd at \(LocationRig.gpsdLabel) is back")])
        // A new episode: signalled again, backoff from the start.
        out = rig.closed()
        XCTAssertEqual(out.locationErrors, [a])
        XCTAssertEqual(out.scheduled, [.reconnect: 0.1])
    }

    func testOutageSignalsEverySubscriberOncePerEpisode() {
        // (label, how gpsd fails for subscribers a and b, the error)
        let table: [(String, (LocationRig) -> [LocationEffect], LocationFailure)] = [
            ("connection refused", { $0.connectFailed() }, LocationRig.refused),
            ("gpsd closed the connection", { rig in rig.connected(); return rig.closed() }, LocationRig.closed),
        ]
        for (label, fail, why) in table {
            let rig = LocationRig(grants: [a: .full, b: .reduced])
            rig.start(b)
            rig.start(a)
            let out = fail(rig)
            XCTAssertEqual(out.filter { if case .locationError = $0 { return true } else { return false } },
                           [.locationError(session: a, why), .locationError(session: b, why)], label)
            XCTAssertEqual(out.filter { if case .log = $0 { return true } else { return false } },
                           [.log(.warning, why.message)], label)
            // Further failures in the same episode stay quiet.
            for _ in 0..<3 {
                rig.advance(5)
                let again = rig.connectFailed()
                XCTAssertEqual(again.locationErrors, [], label)
                XCTAssertEqual(again.logs, [], label)
            }
        }
    }

    func testSubscriberJoiningDuringOutageIsTold() {
        // (label, a fix younger than 5 s is cached)
        for cachedFix in [false, true] {
            let rig = LocationRig.streaming([a: .full])
            if cachedFix { rig.fix() }
            rig.closed()
            rig.grants[c] = .full
            let step = rig.start(c)
            let retrying = LocationFailure.gpsUnavailable("gpsd at \(LocationRig.gpsdLabel) cannot be reached; retrying")
            var expected: [LocationEffect] = [.reply(step.call, .empty)]
            if cachedFix { expected += [.locationUpdated(sessions: [c], .full, Spot.here), .served(session: c, .gps)] }
            expected.append(.locationError(session: c, retrying))
            XCTAssertEqual(step.effects, expected, "cached fix: \(cachedFix)")
            // Once gpsd is back (connected), a new subscriber hears nothing of the outage.
            rig.advance(0.1)
            rig.connected()
            rig.grants[b] = .full
            XCTAssertEqual(rig.start(b).effects.locationErrors, [], "cached fix: \(cachedFix)")
        }
    }

    func testWaitingCallsFailAtOnceWhenGpsdIsUnavailable() {
        // (label, a subscriber stays, how gpsd fails, the error)
        let table: [(String, Bool, (LocationRig) -> [LocationEffect], LocationFailure)] = [
            ("connection refused, nobody else", false, { $0.connectFailed() }, LocationRig.refused),
            ("connection refused, a subscriber stays", true, { $0.connectFailed() }, LocationRig.refused),
            ("gpsd closed", true, { rig in rig.connected(); return rig.closed() }, LocationRig.closed),
        ]
        for (label, subscriber, fail, why) in table {
            let rig = LocationRig(grants: [a: .full, b: .full])
            if subscriber { rig.start(b) }
            let first = rig.locate(a), second = rig.locate(a)
            let out = fail(rig)
            XCTAssertEqual(out.failure(of: first.call), why, label)
            XCTAssertEqual(out.failure(of: second.call), why, label)
            XCTAssertEqual(out.cancelled, [.timeout(first.call), .timeout(second.call)], label)
            XCTAssertEqual(out.inUse, subscriber ? [] : [false], label)
            XCTAssertEqual(out.scheduled[.reconnect] != nil, subscriber, "\(label): retry only while fixes are needed")
        }
    }

    func testRequestLocationConnectsAtOnceDuringBackoff() {
        // (label, the new demand, connects at once)
        let table: [(String, (LocationRig) -> LocationStep, Bool)] = [
            ("RequestLocation: the caller is waiting", { $0.locate(":1.11") }, true),
            ("StartUpdates waits for the backoff", { $0.start(":1.11") }, false),
        ]
        for (label, demand, atOnce) in table {
            let rig = LocationRig(grants: [a: .full, b: .full])
            rig.start(a)
            for _ in 0..<5 { rig.connectFailed(); rig.advance(5) }
            rig.connectFailed()
            XCTAssertEqual(rig.timers[.reconnect].map { $0 - rig.now }, 3_200_000_000, label)
            let out = demand(rig).effects
            XCTAssertEqual(out.connects, atOnce ? 1 : 0, label)
            XCTAssertEqual(out.cancelled, atOnce ? [.reconnect] : [], label)
        }
    }

    func testReconnectCancelledWhenNobodyNeedsFixes() {
        let rig = LocationRig(grants: [a: .full])
        rig.start(a)
        rig.connectFailed()
        XCTAssertEqual(rig.stop(a).effects.cancelled, [.reconnect])
        XCTAssertEqual(rig.advance(60), [])
    }

    // MARK: - Grants at delivery

    func testWaitingCallGetsTheGrantOfDeliveryTime() {
        // (grant when the fix arrives, the reply, the error)
        let table: [(Accuracy?, LocationReply?, LocationFailure?)] = [
            (.full, .location(Spot.here, .full), nil),
            (.reduced, .location(ReducedGrid(cellSize: 5000).reduce(Spot.here), .reduced), nil),
            (nil, nil, .notAuthorized),
        ]
        for (grant, reply, failure) in table {
            let rig = LocationRig(grants: [a: .full])
            let step = rig.locate(a)
            rig.connected()
            rig.grants[a] = grant
            let out = rig.fix()
            XCTAssertEqual(out.reply(to: step.call), reply, "\(String(describing: grant))")
            XCTAssertEqual(out.failure(of: step.call), failure, "\(String(describing: grant))")
        }
    }

    func testSubscriberWithoutGrantIsDropped() {
        let rig = LocationRig.streaming([a: .full, b: .full])
        rig.grants[a] = nil
        var out = rig.fix()
        XCTAssertEqual(Set(out.updates.keys), [b])
        XCTAssertEqual(out.inUse, [])
        // Dropped for good: a grant coming back does not resume its updates.
        rig.grants[a] = .full
        out = rig.fix(Spot.north(10))
        XCTAssertEqual(Set(out.updates.keys), [b])
        // The last subscriber dropped: gpsd is no longer in use.
        rig.grants[b] = nil
        out = rig.fix(Spot.north(20))
        XCTAssertEqual(out.updates, [:])
        XCTAssertEqual(out.inUse, [false])
        XCTAssertEqual(out.scheduled, [.linger: 10])
    }

    func testGrantsAskedForEveryDelivery() {
        let rig = LocationRig.streaming([a: .full, b: .full, c: .reduced])
        let before = rig.grantQueries
        rig.fix()
        XCTAssertEqual(rig.grantQueries - before, 3, "once per subscriber")
        rig.locate(a, maxAge: 0)
        let after = rig.grantQueries
        rig.fix()
        XCTAssertEqual(rig.grantQueries - after, 4, "once per subscriber and once per waiting session")
    }

    func testDropFailsWaitingCallsAndStopsUpdates() {
        let rig = LocationRig.streaming([a: .full, b: .full])
        let step = rig.locate(a, maxAge: 0)
        let out = rig.drop(a)
        XCTAssertEqual(out, [.cancelTimer(.timeout(step.call)), .fail(step.call, .notAuthorized)])
        XCTAssertEqual(Set(rig.fix().updates.keys), [b])
        XCTAssertEqual(rig.drop(b).inUse, [false])
    }

    // MARK: - Reduced accuracy

    func testReducedViewBuiltOncePerAccuracy() {
        let rig = LocationRig.streaming([a: .full, b: .reduced, c: .reduced])
        let fix = Spot.north(1_234, timestamp: 1_700_000_000_000)
        let out = rig.fix(fix)
        let reduced = rig.core.grid.reduce(fix)
        XCTAssertEqual(out.groups, [.full: [a], .reduced: [b, c]])
        XCTAssertEqual(out.updates, [a: fix, b: reduced, c: reduced])
        XCTAssertEqual(out.filter { if case .locationUpdated = $0 { return true } else { return false } }.count, 2,
                       "one signal body per accuracy")
        XCTAssertNil(reduced.altitude)
        XCTAssertNil(reduced.speed)
        XCTAssertEqual(reduced.timestamp, fix.timestamp)
    }

    func testDistanceFilterMeasuresTheReducedView() {
        // 100 m apart, both in the same 5 km cell: the reduced sessions see no move.
        let rig = LocationRig(grants: [a: .full, b: .reduced])
        rig.start(a, distance: 50)
        rig.start(b, distance: 50)
        rig.connected()
        rig.fix(Spot.north(2_000))
        XCTAssertEqual(rig.core.grid.reduce(Spot.north(2_000)), rig.core.grid.reduce(Spot.north(2_100)))
        XCTAssertEqual(Set(rig.fix(Spot.north(2_100)).updates.keys), [a])
    }

    // MARK: - Properties

    func testInUseAndGpsdConnectedChanges() {
        let rig = LocationRig(linger: 10, grants: [a: .full, b: .full])
        // (label, event, InUse changes, GpsdConnected changes, connection attempts)
        let table: [(String, () -> [LocationEffect], [Bool], [Bool], Int)] = [
            ("RequestLocation", { rig.locate(":1.10").effects }, [true], [], 1),
            ("StartUpdates while in use", { rig.start(":1.11").effects }, [], [], 0),
            ("connected", { rig.connected() }, [], [true], 0),
            ("fix answers the call, updates go on", { rig.fix() }, [], [], 0),
            ("StopUpdates of the last", { rig.stop(":1.11").effects }, [false], [], 0),
            ("linger over", { rig.advance(10) }, [], [false], 0),
            ("StartUpdates", { rig.start(":1.11").effects }, [true], [], 1),
            ("connection refused", { rig.connectFailed() }, [], [], 0),
            ("the session leaves", { rig.drop(":1.11") }, [false], [], 0),
            ("nothing more happens", { rig.advance(60) }, [], [], 0),
        ]
        for (label, event, inUse, connected, connects) in table {
            let out = event()
            XCTAssertEqual(out.inUse, inUse, label)
            XCTAssertEqual(out.gpsdConnected, connected, label)
            XCTAssertEqual(out.connects, connects, label)
            XCTAssertEqual(rig.core.inUse, inUse.last ?? rig.core.inUse, label)
        }
    }
}
