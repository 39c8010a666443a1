import XCTest
@testable import GeoCore

/// The choice among sources (`SourceChoice`, docs/dbus-api.md "Sources"): a
/// fresh GPS fix first; another source's position once GPS is silent (no fix
/// for `gpsWait` while needed, gpsd unreachable, or GPS off); never a worse
/// fix while a fresh GPS one is there; every consent rule unchanged.
final class LocationCoreSourceTests: XCTestCase {
    let a: SessionID = ":1.10", b: SessionID = ":1.11"

    /// The office, 2 km from `Spot.here`, as an admin's static file gives it.
    static func office(accuracy: Double = 100, metresNorth: Double = 2_000) -> Fix {
        Spot.from(.static, accuracy: accuracy, metresNorth: metresNorth)
    }

    static func wifi(accuracy: Double) -> Fix { Spot.from(.wifi, accuracy: accuracy, metresNorth: 500) }

    func testASilentReceiverIsWaitedForOnceThenTheStaticPositionAnswersAtOnce() {
        let rig = LocationRig(grants: [a: .full])
        XCTAssertEqual(rig.fix(Self.office()), [.sourcesChanged([.gps, .static])],
                       "no session: the position is only kept, and Sources says there is one")
        let first = rig.locate(a, timeout: 30)
        XCTAssertNil(first.reply, "GPS gets its chance first")
        XCTAssertEqual(first.effects.scheduled[.gpsWait], 3, "the documented default gps-wait")
        rig.connected()
        XCTAssertTrue(rig.advance(2.9).isEmpty, "within gps-wait: still waiting for the receiver")
        let out = rig.advance(0.1)
        XCTAssertEqual(out.reply(to: first.call), .location(Self.office(), .full))
        XCTAssertTrue(out.contains(.served(session: a, .static)), "the journal names the source once")
        XCTAssertEqual(out.logs, [.info], "one line: positions come from the static source")
        XCTAssertTrue(out.cancelled.contains(.timeout(first.call)))

        // GPS stays silent: the next request is answered at once, with no new wait.
        let second = rig.locate(a, maxAge: 0)
        XCTAssertEqual(second.reply, .location(Self.office(), .full))
        XCTAssertNil(second.effects.scheduled[.gpsWait])
        XCTAssertFalse(second.effects.contains(.served(session: a, .static)), "said once per session")

        // The receiver speaks: GPS answers again, and the static position no more.
        rig.fix(Spot.here)
        XCTAssertEqual(rig.locate(a, maxAge: 5).reply, .location(Spot.here, .full))
        rig.advance(10)
        let third = rig.locate(a, maxAge: 5)
        XCTAssertNil(third.reply, "the GPS fix is stale but GPS was not found silent again yet: wait for it")
        XCTAssertEqual(rig.fix(Spot.north(5)).reply(to: third.call), .location(Spot.north(5), .full))
    }

    func testAFreshGPSFixAlwaysWinsAndNoStaticPositionInterruptsAStream() {
        let rig = LocationRig.streaming([a: .full])
        rig.fix(Spot.here)
        let out = rig.fix(Self.office(accuracy: 1))
        XCTAssertTrue(out.updates.isEmpty, "a better radius does not beat a fresh GPS fix")
        XCTAssertEqual(rig.locate(a, maxAge: 5).reply, .location(Spot.here, .full))
        // GPS keeps speaking every second: the check re-arms itself, no fallback.
        for i in 1...10 {
            rig.advance(1)
            XCTAssertEqual(rig.fix(Spot.north(Double(i))).updates[a], Spot.north(Double(i)))
        }
        XCTAssertFalse(rig.core.receiverConnected == false)
        // The receiver goes quiet with gpsd still connected: gps-wait after its
        // last fix the stream goes on from the static file.
        let quiet = rig.advance(3)
        XCTAssertEqual(quiet.updates[a], Self.office(accuracy: 1))
        XCTAssertTrue(quiet.locationErrors.isEmpty)
    }

    func testAnUnreachableGpsdGivesTheStaticPositionInsteadOfAnError() {
        let rig = LocationRig(grants: [a: .full, b: .reduced])
        rig.fix(Self.office())
        rig.start(b)
        let waiting = rig.locate(a)
        let out = rig.connectFailed()
        XCTAssertEqual(out.reply(to: waiting.call), .location(Self.office(), .full), "answered, not failed")
        XCTAssertEqual(out.updates[b], rig.core.grid.reduce(Self.office()), "the reduced grid applies to every source")
        XCTAssertTrue(out.locationErrors.isEmpty, "a session served by another source hears of no outage")
        XCTAssertNotNil(out.scheduled[.reconnect], "the receiver is still retried")
        XCTAssertTrue(out.logs.contains(.warning), "the outage is logged")
        // A subscriber joining during the outage gets the position, no error.
        rig.grants[":1.12"] = .full
        let late = rig.start(":1.12")
        XCTAssertEqual(late.effects.updates[":1.12"], Self.office())
        XCTAssertTrue(late.effects.locationErrors.isEmpty)
    }

    func testWithGPSOffNothingIsOpenedAndTheStaticPositionOrAnErrorAnswersAtOnce() {
        let rig = LocationRig(gpsEnabled: false, grants: [a: .full])
        let none = rig.locate(a)
        XCTAssertEqual(none.failure, .gpsUnavailable(LocationCore.noSource), "no source at all: fail at once")
        rig.fix(Self.office())
        let step = rig.locate(a)
        XCTAssertEqual(step.reply, .location(Self.office(), .full), "no wait for a receiver that is off")
        rig.start(a)
        XCTAssertEqual(rig.advance(60).connects, 0)
        XCTAssertEqual(rig.send(.lost(.static, reason: "gone")).updates.count, 0)
        XCTAssertEqual(rig.locate(a).failure, .gpsUnavailable(LocationCore.noSource))
    }

    func testAStandingPositionIsSentOnceAndAgainOnlyWhenItChanges() {
        let rig = LocationRig(gpsEnabled: false, grants: [a: .full])
        rig.fix(Self.office())
        XCTAssertEqual(rig.start(a).effects.updates[a], Self.office())
        XCTAssertTrue(rig.fix(Self.office()).updates.isEmpty, "the same file read again: nothing new to say")
        let moved = Self.office(metresNorth: 3_000)
        XCTAssertEqual(rig.fix(moved).updates[a], moved)
        // A distance filter applies to it as to any fix.
        rig.start(a, distance: 5_000)
        XCTAssertTrue(rig.fix(Self.office()).updates.isEmpty, "1 km from the last one sent: under the filter")
    }

    func testAWithdrawnPositionNoLongerAnswers() {
        let rig = LocationRig(grants: [a: .full])
        rig.fix(Self.office())
        rig.locate(a)
        rig.connectFailed()
        XCTAssertEqual(rig.locate(a).reply, .location(Self.office(), .full), "the outage left GPS silent")
        rig.send(.lost(.static, reason: "malformed"))
        let step = rig.locate(a)
        XCTAssertNil(step.reply, "nothing to answer with: try the receiver")
        XCTAssertEqual(rig.connectFailed().failure(of: step.call), LocationRig.refused, "and fail as before sources")
    }

    func testAPausedOrUngrantedSessionGetsNoPositionFromAnySource() {
        let rig = LocationRig(gpsEnabled: false, grants: [a: .full])
        rig.start(a)
        rig.send(.pause(session: a, .locked))
        XCTAssertTrue(rig.fix(Self.office()).updates.isEmpty, "locked: nothing")
        XCTAssertEqual(rig.send(.resume(session: a)).updates[a], Self.office(), "back: the position at once")
        rig.grants[a] = nil
        let step = rig.locate(a)
        XCTAssertNil(step.reply, "no grant: no answer from the cache")
    }

    func testTheSmallerRadiusWinsAmongTheOtherSources() {
        XCTAssertTrue(SourceChoice.better(Self.wifi(accuracy: 30), Self.office(accuracy: 500)))
        XCTAssertTrue(SourceChoice.better(Self.office(accuracy: 10), Self.wifi(accuracy: 50)))
        XCTAssertTrue(SourceChoice.better(Self.wifi(accuracy: 50), Self.office(accuracy: 50)), "a tie: the better kind")
        var unknown = Self.wifi(accuracy: 0)
        unknown.horizontalAccuracy = nil
        XCTAssertTrue(SourceChoice.better(Self.office(accuracy: 4_000_000), unknown), "no radius is the worst")

        let rig = LocationRig(gpsEnabled: false, wifiEnabled: true, grants: [a: .full])
        rig.fix(Self.office(accuracy: 500))
        rig.fix(Self.wifi(accuracy: 30))
        XCTAssertEqual(rig.locate(a).reply, .location(Self.wifi(accuracy: 30), .full))
        rig.send(.lost(.wifi, reason: "no access points"))
        XCTAssertEqual(rig.locate(a).reply, .location(Self.office(accuracy: 500), .full))
    }

    func testTheJournalNamesEachSourceOncePerSession() {
        let rig = LocationRig.streaming([a: .full, b: .full])
        let first = rig.fix(Spot.here)
        XCTAssertEqual(Set(first.compactMap { if case .served(let s, .gps) = $0 { return s } else { return nil } }), [a, b])
        XCTAssertFalse(rig.fix(Spot.north(1)).contains { if case .served = $0 { return true } else { return false } })
        rig.drop(a)
        rig.grants[a] = .full
        XCTAssertTrue(rig.locate(a, maxAge: 5).effects.contains(.served(session: a, .gps)),
                      "a new grant of the session: said again")
    }
}
