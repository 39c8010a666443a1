import XCTest
@testable import GeoCore

/// Wi-Fi positioning in the location core (docs/dbus-api.md "Sources"): a
/// lookup only while a session needs a position and GPS is silent, one at a
/// time, at most one each `wifi-interval` while updates run or after a
/// failure; closed when nobody needs it or GPS speaks; its failure named in
/// the error when nothing else can answer.
final class LocationCoreWiFiTests: XCTestCase {
    let a: SessionID = ":1.10", b: SessionID = ":1.11"

    static func wifi(accuracy: Double = 60, metresNorth: Double = 300) -> Fix {
        Spot.from(.wifi, accuracy: accuracy, metresNorth: metresNorth)
    }

    func testNoLookupWithoutARequestAndOneLookupAnswersAWaitingRequest() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        XCTAssertTrue(rig.advance(3_600).isEmpty, "idle: no lookup, no timer")
        let step = rig.locate(a)
        XCTAssertTrue(step.effects.contains(.open(.wifi)), "GPS is off: Wi-Fi at once")
        XCTAssertEqual(step.effects.connects, 0)
        XCTAssertNil(step.reply)
        let out = rig.wifiFound(Self.wifi())
        XCTAssertEqual(out.reply(to: step.call), .location(Self.wifi(), .full))
        XCTAssertTrue(out.contains(.served(session: a, .wifi)))
        XCTAssertTrue(out.contains(.close(.wifi)), "nobody needs a position any more")
        XCTAssertNil(out.scheduled[.wifiLookup], "no refresh for a one-shot request")
        // Within the position's lifetime another request is answered from it.
        rig.advance(20)
        XCTAssertEqual(rig.locate(a).reply, .location(Self.wifi(), .full))
        XCTAssertEqual(rig.wifiLookups, 1)
        // After its lifetime (2 x wifi-interval) it is looked up again.
        rig.advance(60)
        XCTAssertTrue(rig.locate(a).effects.contains(.open(.wifi)))
    }

    func testUpdatesAreRefreshedEachIntervalAndTheLookupsStopWithThem() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .reduced])
        rig.start(a)
        let first = rig.wifiFound(Self.wifi())
        XCTAssertEqual(first.updates[a], rig.core.grid.reduce(Self.wifi()), "the reduced grid applies to Wi-Fi too")
        XCTAssertEqual(first.scheduled[.wifiLookup], 30, "the next lookup one interval later")
        XCTAssertFalse(first.contains(.close(.wifi)))
        let refresh = rig.advance(30)
        XCTAssertTrue(refresh.contains(.open(.wifi)))
        XCTAssertTrue(rig.wifiFound(Self.wifi()).updates.isEmpty, "the same position is not sent again")
        let moved = rig.wifiFound_after(30, Self.wifi(metresNorth: 20_000))
        XCTAssertNotNil(moved.updates[a], "a new position is")
        let stop = rig.stop(a).effects
        XCTAssertTrue(stop.contains(.close(.wifi)))
        XCTAssertTrue(stop.cancelled.contains(.wifiLookup))
        XCTAssertTrue(rig.advance(600).isEmpty, "no lookup after the last session stopped")
    }

    func testASilentReceiverIsWaitedForThenWiFiAndAGPSFixEndsTheLookups() {
        let rig = LocationRig(wifiEnabled: true, grants: [a: .full])
        rig.start(a)
        rig.connected()
        XCTAssertEqual(rig.wifiLookups, 0, "GPS first")
        let wait = rig.advance(3)
        XCTAssertTrue(wait.contains(.open(.wifi)), "after gps-wait with no fix: a lookup")
        XCTAssertEqual(rig.wifiFound(Self.wifi()).updates[a], Self.wifi())
        let gps = rig.fix(Spot.here)
        XCTAssertEqual(gps.updates[a], Spot.here)
        XCTAssertTrue(gps.contains(.close(.wifi)), "GPS speaks: the lookups end")
        for second in 1...30 {
            rig.advance(1)
            rig.fix(Spot.north(Double(second)))
        }
        XCTAssertEqual(rig.wifiLookups, 1, "no lookup while GPS is fresh")
        XCTAssertTrue(rig.advance(3.5).contains(.open(.wifi)), "and one again once it is silent")
    }

    func testTheHelperIsReadiedWhileAGrantHoldsAndClosedWhenNoneDoes() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        XCTAssertEqual(rig.send(.grantsHeld(true)), [.warm(.wifi)], "a grant began: the helper starts, nothing is asked")
        let step = rig.locate(a)
        XCTAssertTrue(step.effects.contains(.open(.wifi)))
        let found = rig.wifiFound(Self.wifi())
        XCTAssertEqual(found.reply(to: step.call), .location(Self.wifi(), .full))
        XCTAssertFalse(found.contains(.close(.wifi)), "the grant still holds: the helper stays for the next request")
        XCTAssertEqual(rig.send(.grantsHeld(false)), [.close(.wifi)], "no grant: no helper")
        XCTAssertTrue(rig.send(.grantsHeld(false)).isEmpty)

        // GPS not (yet) found silent: nothing is readied for a grant.
        let gps = LocationRig(wifiEnabled: true, grants: [a: .full])
        XCTAssertTrue(gps.send(.grantsHeld(true)).isEmpty)
        // Wi-Fi off: nothing either.
        XCTAssertTrue(LocationRig(gpsEnabled: false).send(.grantsHeld(true)).isEmpty)
    }

    func testRootsSwitchClosesTheHelperDropsThePositionAndSaysSo() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        XCTAssertEqual(rig.core.sourcesOn, [.wifi])
        rig.send(.grantsHeld(true))
        rig.start(a)
        rig.wifiFound(Self.wifi())
        let off = rig.send(.wifiSwitched(false))
        XCTAssertTrue(off.contains(.close(.wifi)))
        XCTAssertFalse(off.contains { if case .sourcesChanged = $0 { return true } else { return false } },
                       "still configured: Sources stays, WiFiEnabled says it is off")
        XCTAssertFalse(rig.core.wifiOn)
        XCTAssertTrue(off.cancelled.contains(.wifiLookup), "no refresh")
        XCTAssertEqual(off.locationErrors, [a], "updates stay on, and are told that nothing can answer now")
        XCTAssertEqual(rig.locate(a).failure, .gpsUnavailable(LocationCore.noSource), "its position is gone with it")
        XCTAssertTrue(rig.send(.wifiSwitched(false)).isEmpty, "off again: nothing")
        let on = rig.send(.wifiSwitched(true))
        XCTAssertTrue(rig.core.wifiOn)
        XCTAssertTrue(on.contains(.warm(.wifi)), "a grant holds: the helper is readied again")
        XCTAssertTrue(on.contains(.open(.wifi)), "updates run: a lookup")
    }

    /// A lookup under way when the last need and grant end is dropped before
    /// it can reach the network (the source drops its result).
    func testALookupUnderWayEndsWithTheGrant() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        rig.send(.grantsHeld(true))
        let step = rig.locate(a)
        XCTAssertTrue(step.effects.contains(.open(.wifi)))
        rig.send(.drop(session: a))
        XCTAssertEqual(rig.send(.grantsHeld(false)), [.close(.wifi)], "no grant: the lookup is closed, not finished")
    }

    /// With GPS off and nothing else, a subscriber hears at once that nothing can come.
    func testWithNoSourceAtAllASubscriberIsToldAtOnce() {
        let rig = LocationRig(gpsEnabled: false, grants: [a: .full])
        let step = rig.start(a)
        XCTAssertEqual(step.effects.reply(to: step.call), .empty)
        XCTAssertEqual(step.effects.locationErrors, [a])
    }

    func testALookupThatEndsAfterGPSSpokeIsNotSentAndClosesWiFi() {
        let rig = LocationRig(wifiEnabled: true, grants: [a: .full])
        rig.start(a)
        rig.connected()
        XCTAssertTrue(rig.advance(3).contains(.open(.wifi)))
        let gps = rig.fix(Spot.here)
        XCTAssertEqual(gps.updates[a], Spot.here, "GPS speaks while the lookup runs")
        XCTAssertTrue(gps.contains(.close(.wifi)), "the lookup under way is dropped at once")
        let late = rig.wifiFound(Self.wifi())
        XCTAssertTrue(late.updates.isEmpty, "never a worse fix while a fresh one is there")
    }

    func testAFailedLookupWithNoReceiverFailsTheRequestWithBothCauses() {
        let rig = LocationRig(wifiEnabled: true, grants: [a: .full, b: .full])
        rig.start(b)
        let step = rig.locate(a)
        let refused = rig.connectFailed()
        XCTAssertNil(refused.failure(of: step.call), "the receiver is away: Wi-Fi is asked before anyone fails")
        XCTAssertTrue(refused.contains(.open(.wifi)))
        XCTAssertTrue(refused.locationErrors.isEmpty)
        let failed = rig.wifiFailed("the server answered 503")
        XCTAssertEqual(failed.failure(of: step.call), .positionUnavailable(
            "gpsd at \(LocationRig.gpsdLabel) cannot be reached; Wi-Fi: the server answered 503"))
        XCTAssertEqual(failed.locationErrors, [b], "the subscriber is told once")
        XCTAssertTrue(failed.logs.contains(.warning))
        XCTAssertEqual(failed.scheduled[.wifiLookup], 30, "tried again one interval later, for the subscriber")
        // The same failure again: not logged again, nobody told again.
        rig.advance(0.1)
        rig.connectFailed()
        let again = rig.advance(30)
        XCTAssertTrue(again.contains(.open(.wifi)))
        let second = rig.wifiFailed("the server answered 503")
        XCTAssertFalse(second.logs.contains(.warning))
        XCTAssertTrue(second.locationErrors.isEmpty)
        // A request within the interval after a failure fails at once, with the cause.
        let late = rig.locate(a)
        XCTAssertNil(late.effects.failure(of: late.call), "the receiver is tried first")
        XCTAssertNotNil(rig.connectFailed().failure(of: late.call))
    }

    func testAFailedLookupWhileTheReceiverIsConnectedLeavesTheRequestToItsTimeout() {
        let rig = LocationRig(wifiEnabled: true, grants: [a: .full])
        let step = rig.locate(a, timeout: 10)
        rig.connected()
        rig.advance(3)
        let failed = rig.wifiFailed()
        XCTAssertNil(failed.failure(of: step.call), "a connected receiver may still give a fix")
        XCTAssertEqual(rig.fix(Spot.here).reply(to: step.call), .location(Spot.here, .full))
    }

    func testNotFoundWithdrawsTheOldPositionAndTheSmallerRadiusWins() {
        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        rig.fix(LocationCoreSourceTests.office(accuracy: 500))
        let step = rig.locate(a)
        XCTAssertEqual(step.reply, .location(LocationCoreSourceTests.office(accuracy: 500), .full),
                       "the static position answers at once")
        rig.start(a)
        XCTAssertEqual(rig.wifiFound(Self.wifi(accuracy: 40)).updates[a], Self.wifi(accuracy: 40),
                       "the lookup made for the updates finds a smaller radius")
        rig.advance(30)
        let gone = rig.send(.lost(.wifi, reason: "the server knows none of the visible access points"))
        XCTAssertEqual(gone.updates[a], LocationCoreSourceTests.office(accuracy: 500), "back to the static file")
    }
}

extension LocationRig {
    /// Moves the clock on `seconds` (the next lookup opens) and lets it find `fix`.
    func wifiFound_after(_ seconds: Double, _ fix: Fix) -> [LocationEffect] {
        advance(seconds)
        return wifiFound(fix)
    }
}
