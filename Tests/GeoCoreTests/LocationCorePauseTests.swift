import XCTest
@testable import GeoCore

extension Array where Element == LocationEffect {
    /// `LocationError` signals as (session, failure), in order.
    var locationErrorList: [(SessionID, LocationFailure)] {
        compactMap { if case .locationError(let s, let f) = $0 { return (s, f) } else { return nil } }
    }
}

/// A paused session (its login session locked or in the background): updates
/// kept but no fix, no demand on gpsd, waiting requests fail saying why; back
/// in use, fixes flow again by themselves.
final class LocationCorePauseTests: XCTestCase {
    let a: SessionID = ":1.10", b: SessionID = ":1.11"

    func testAPausedStreamGetsNoFixAndResumes() {
        for reason in [PauseReason.locked, .inactive] {
            let rig = LocationRig.streaming([a: .full, b: .reduced])
            let pause = rig.send(.pause(session: a, reason))
            XCTAssertEqual(pause.locationErrorList.map(\.0), [a], "\(reason)")
            XCTAssertEqual(pause.locationErrorList.first?.1, .sessionPaused(reason))
            XCTAssertEqual(pause.inUse, [], "b still needs fixes")
            let fix = rig.fix()
            XCTAssertNil(fix.updates[a], "\(reason): no fix while paused")
            XCTAssertNotNil(fix.updates[b], "\(reason): another session is unaffected")
            XCTAssertEqual(rig.send(.pause(session: a, reason)), [], "the same pause again says nothing")
            // Back: the recent fix at once, then every fix.
            rig.advance(1)
            XCTAssertEqual(rig.send(.resume(session: a)).updates[a], Spot.here, "\(reason)")
            XCTAssertNotNil(rig.fix(Spot.north(10)).updates[a])
        }
    }

    func testPausedStreamsDoNotKeepGpsdOpen() {
        let rig = LocationRig.streaming([a: .full], linger: 10)
        let pause = rig.send(.pause(session: a, .locked))
        XCTAssertEqual(pause.inUse, [false], "InUse goes off: nobody receives location")
        XCTAssertEqual(pause.scheduled[.linger], 10)
        XCTAssertEqual(rig.advance(10).disconnects, 1, "gpsd closes after the linger: no wake-up per fix while locked")
        let resume = rig.send(.resume(session: a))
        XCTAssertEqual(resume.inUse, [true])
        XCTAssertEqual(resume.connects, 1)
        XCTAssertEqual(rig.connected().inUse, [])
        XCTAssertNotNil(rig.fix().updates[a])
    }

    func testWaitingRequestsFailAtThePause() {
        let rig = LocationRig(grants: [a: .full, b: .full])
        let ra = rig.locate(a), rb = rig.locate(b)
        rig.connected()
        let pause = rig.send(.pause(session: a, .inactive))
        XCTAssertEqual(pause.failure(of: ra.call), .sessionPaused(.inactive))
        XCTAssertTrue(pause.cancelled.contains(.timeout(ra.call)))
        XCTAssertNil(pause.failure(of: rb.call))
        XCTAssertNotNil(rig.fix().reply(to: rb.call))
        // A new request while paused fails at once, even with a fresh fix cached.
        XCTAssertEqual(rig.locate(a).failure, .sessionPaused(.inactive))
    }

    func testStartWhilePausedIsAcceptedAndTold() {
        let rig = LocationRig.streaming([b: .full])
        rig.grants[a] = .full
        rig.fix()
        rig.send(.pause(session: a, .locked))
        let start = rig.start(a)
        XCTAssertEqual(start.reply, .empty)
        XCTAssertNil(start.effects.updates[a], "no cached fix while paused")
        XCTAssertEqual(start.effects.locationErrorList.map(\.0), [a])
        XCTAssertNil(rig.fix().updates[a])
        XCTAssertEqual(rig.send(.resume(session: a)).updates[a], Spot.here)
    }

    func testAnOutageIsNotSaidToPausedStreams() {
        let rig = LocationRig.streaming([a: .full, b: .full])
        rig.send(.pause(session: a, .locked))
        let closed = rig.closed()
        XCTAssertEqual(closed.locationErrorList.map(\.0), [b])
        // Back during the outage: told that gpsd is away.
        let resume = rig.send(.resume(session: a))
        XCTAssertEqual(resume.locationErrorList.map(\.0), [a])
        if case .gpsUnavailable? = resume.locationErrorList.first?.1 {} else { XCTFail("\(resume)") }
    }

    func testResumeOfASessionNotPausedDoesNothing() {
        let rig = LocationRig.streaming([a: .full])
        XCTAssertEqual(rig.send(.resume(session: a)), [])
    }
}
