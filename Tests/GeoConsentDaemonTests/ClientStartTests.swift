import XCTest
import GeoCore
@testable import GeoConsentDaemon

/// A GeoClue client object's `Start` as a state machine (GeoClueStart.swift),
/// with no bus: calls are strings here.
final class ClientStartTests: XCTestCase {
    typealias S = ClientStart<String>

    func testAGrantedStartAnswersTheCallsThatJoinedIt() {
        var s = S()
        XCTAssertEqual(s.startCalled("first"), .ask)
        s.asked(id: 7, deadline: 70)
        XCTAssertTrue(s.isStarting)
        XCTAssertEqual(s.startCalled("second"), .joined)
        XCTAssertEqual(s.startCalled("third"), .joined)
        XCTAssertNil(s.granted(8), "another id grants nothing")
        let granted = s.granted(7)
        XCTAssertEqual(granted?.joined, ["second", "third"])
        XCTAssertEqual(granted?.deadline, 70)
        XCTAssertTrue(s.isActive)
        XCTAssertEqual(s.startCalled("again"), .reply, "started: answered at once")
    }

    func testARefusedOrGivenUpStartFailsItsJoinedCallsAndStops() {
        var s = S()
        s.asked(id: 1, deadline: 10)
        _ = s.startCalled("joined")
        XCTAssertNil(s.ended(2), "another id")
        let refused = s.ended(1)
        XCTAssertEqual(refused?.id, 1)
        XCTAssertEqual(refused?.joined, ["joined"])
        XCTAssertFalse(s.isStarting)
        XCTAssertNil(s.ended(), "nothing pending any more")
        XCTAssertEqual(s.startCalled("next"), .ask)
        s.asked(id: 3, deadline: 30)
        XCTAssertEqual(s.ended()?.id, 3, "given up (its deadline, Stop, the object gone): whatever its id")
    }

    /// A grant ended by the pause that began then leaves an active client
    /// waiting for the user's return; any other end, or a client not active, stops.
    func testAGrantEndedByAPauseWaitsForTheUser() {
        var s = S()
        s.asked(id: 1, deadline: 10)
        _ = s.granted(1)
        XCTAssertTrue(s.grantEnded(byPause: true), "Active goes false")
        XCTAssertTrue(s.waitsForTheUser)
        XCTAssertEqual(s.startCalled("the app's own Start"), .ask)
        s.asked(id: 2, deadline: 20)
        XCTAssertFalse(s.waitsForTheUser, "asked again: no longer waiting")
        _ = s.granted(2)
        XCTAssertTrue(s.grantEnded(byPause: false))
        XCTAssertFalse(s.waitsForTheUser, "a reset or a switch-off stays ended")
        XCTAssertFalse(s.grantEnded(byPause: true), "not active: nothing changes")
        XCTAssertFalse(s.waitsForTheUser)
    }

    func testStopEndsWhatever() {
        var s = S()
        XCTAssertFalse(s.stop())
        s.asked(id: 1, deadline: 10)
        _ = s.granted(1)
        XCTAssertTrue(s.stop(), "was active")
        XCTAssertFalse(s.isActive)
        s.asked(id: 2, deadline: 20)
        _ = s.granted(2)
        _ = s.grantEnded(byPause: true)
        XCTAssertFalse(s.stop(), "paused: not active")
        XCTAssertFalse(s.waitsForTheUser, "stopped: the return asks nothing")
    }
}
