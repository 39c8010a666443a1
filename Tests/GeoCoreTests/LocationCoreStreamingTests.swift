import XCTest
@testable import GeoCore

/// A fix fed the way the daemon feeds it (`handleFix`): each session's signal is
/// handed over as soon as that session's grant is checked, the fan-out starts one
/// session further along with every fix, and the grant is still asked per session
/// at delivery (see LocationCoreDSL's `streamFix`).
final class LocationCoreStreamingTests: XCTestCase {
    let a: SessionID = ":1.10", b: SessionID = ":1.11", c: SessionID = ":1.12", d: SessionID = ":1.13"

    func testEachSignalGoesOutRightAfterItsSessionsGrantIsChecked() {
        let rig = LocationRig.streaming([a: .full, b: .reduced, c: .full])
        var trace: [String] = []
        let fix = Spot.north(1_234)
        let out = rig.streamFix(fix) { trace.append($0) }
        // grant X, send X, grant Y, send Y, …: nothing waits for the other sessions.
        XCTAssertEqual(trace.count, 6, "\(trace)")
        for pair in stride(from: 0, to: trace.count, by: 2) {
            let session = trace[pair].dropFirst("grant ".count)
            XCTAssertEqual(trace[pair + 1], "send \(session)", "\(trace)")
        }
        XCTAssertEqual(out.sent.updates, [a: fix, b: rig.core.grid.reduce(fix), c: fix])
        XCTAssertEqual(out.sent.groups, [.full: [a, c], .reduced: [b]])
        XCTAssertEqual(out.sent.count, 3, "one effect per session")
        XCTAssertTrue(out.rest.updates.isEmpty, "no signal left for after the core: \(out.rest)")
    }

    func testAStreamedFixNeverReachesASessionWhoseGrantEnded() {
        let rig = LocationRig.streaming([a: .full, b: .full, c: .full])
        rig.grants[b] = nil
        XCTAssertEqual(Set(rig.streamFix().sent.updates.keys), [a, c])
        rig.grants[b] = .full   // a new grant does not bring the dropped subscriber back
        XCTAssertEqual(Set(rig.streamFix().sent.updates.keys), [a, c])
        rig.grants[a] = .reduced
        XCTAssertEqual(rig.streamFix().sent.groups, [.reduced: [a], .full: [c]])
    }

    func testTheFanOutStartsOneSessionFurtherAlongWithEveryFix() {
        let sessions = [a, b, c, d]
        let rig = LocationRig.streaming(Dictionary(uniqueKeysWithValues: sessions.map { ($0, Accuracy.full) }))
        var orders: [[SessionID]] = []
        for i in 0..<8 {
            var order: [SessionID] = []
            _ = rig.streamFix(Spot.north(Double(i))) { if $0.hasPrefix("send ") { order.append(.connection(String($0.dropFirst(5)))) } }
            XCTAssertEqual(Set(order), Set(sessions), "every subscriber, once, at fix \(i)")
            XCTAssertEqual(order.count, sessions.count)
            orders.append(order)
        }
        // The same cycle, rotated by one each time: every session is first (and last) equally often.
        let firsts = orders.map { $0[0] }
        XCTAssertEqual(Set(firsts.prefix(4)), Set(sessions), "\(orders)")
        XCTAssertEqual(Array(firsts.prefix(4)), Array(firsts.suffix(4)), "\(orders)")
        for (previous, next) in zip(orders, orders.dropFirst()) {
            XCTAssertEqual(Array(previous.dropFirst()) + [previous[0]], next, "rotated by one: \(orders)")
        }
    }

    func testWaitingRequestsAreAnsweredBeforeTheSubscribersSignals() {
        let rig = LocationRig(grants: [a: .full, b: .reduced])
        rig.start(a)
        let call = rig.locate(b).call
        rig.connected()
        let fix = Spot.north(50)
        let out = rig.streamFix(fix)
        XCTAssertEqual(out.sent.first, .reply(call, .location(rig.core.grid.reduce(fix), .reduced)))
        XCTAssertEqual(Array(out.sent.dropFirst()).updates, [a: fix])
        XCTAssertTrue(out.rest.cancelled.contains(.timeout(call)), "the request's timer goes with the rest: \(out.rest)")
    }

    func testStreamedAndCollectedFixesReachTheSameSessions() {
        let grants: [SessionID: Accuracy] = [a: .full, b: .reduced, c: .full]
        let streamed = LocationRig.streaming(grants), collected = LocationRig.streaming(grants)
        streamed.grants[c] = nil
        collected.grants[c] = nil
        let fix = Spot.north(10)
        XCTAssertEqual(streamed.streamFix(fix).sent.updates, collected.fix(fix).updates)
        XCTAssertEqual(streamed.grantQueries, collected.grantQueries, "one grant query per session either way")
    }
}
