import XCTest
@testable import GeoDBus

/// The loop's timers (TimerHeap.swift): earliest first, a cancelled one never
/// runs and leaves the count at once, a handler can stop another due timer,
/// and many armed timers cost no scan per turn (their order still holds).
final class EventLoopTimerTests: XCTestCase {
    func testTimersFireEarliestFirstWhateverTheOrderArmed() {
        var heap = TimerHeap()
        var fired: [Int] = []
        // Deadlines in a shuffled order, some equal (then the token decides).
        let deadlines: [UInt64] = [50, 10, 40, 10, 30, 20, 60, 5, 40, 1]
        for (i, d) in deadlines.enumerated() { heap.insert(i, deadline: d) { fired.append(i) } }
        XCTAssertEqual(heap.count, 10)
        XCTAssertEqual(heap.nextDeadline(), 1)
        while let h = heap.popDue(now: 45) { h() }
        XCTAssertEqual(fired, [9, 7, 1, 3, 5, 4, 2, 8])
        XCTAssertEqual(heap.count, 2)
        XCTAssertEqual(heap.nextDeadline(), 50)
    }

    func testACancelledTimerNeverRunsAndLeavesTheCountAtOnce() {
        var heap = TimerHeap()
        var fired: [Int] = []
        for i in 0..<10_000 { heap.insert(i, deadline: UInt64(10_000 - i)) { fired.append(i) } }
        for i in 0..<10_000 where i % 100 != 0 { heap.cancel(i) }
        XCTAssertEqual(heap.count, 100)
        heap.cancel(12_345)   // never armed: nothing happens
        XCTAssertEqual(heap.count, 100)
        while let h = heap.popDue(now: .max) { h() }
        XCTAssertEqual(fired, stride(from: 9_900, through: 0, by: -100).map { $0 })
        XCTAssertEqual(heap.count, 0)
        XCTAssertNil(heap.nextDeadline())
    }

    func testArmingAndCancellingOverAndOverKeepsNoDeadEntries() {
        var heap = TimerHeap()
        heap.insert(-1, deadline: 1_000_000) {}
        // A caller that makes the daemon arm and cancel a timer per call.
        for i in 0..<100_000 {
            heap.insert(i, deadline: UInt64(i)) {}
            heap.cancel(i)
        }
        XCTAssertEqual(heap.count, 1)
        XCTAssertEqual(heap.nextDeadline(), 1_000_000)
        XCTAssertLessThanOrEqual(heap.storedEntries, 130, "dead entries are dropped, not kept")
    }

    func testAHandlerThatCancelsAnotherDueTimerStopsIt() {
        let loop = EventLoop()
        var fired: [Int] = []
        var second: EventLoop.Token = 0
        loop.schedule(after: 0) { fired.append(1); loop.cancelTimer(second) }
        second = loop.schedule(after: 0) { fired.append(2) }
        loop.schedule(after: 0.001) { fired.append(3) }
        XCTAssertEqual(loop.armedTimerCount, 3)
        let deadline = EventLoop.monotonicNanos() + 1_000_000_000
        while fired.count < 2 && EventLoop.monotonicNanos() < deadline { loop.runOnce(timeoutMillis: 20) }
        XCTAssertEqual(fired, [1, 3])
        XCTAssertEqual(loop.armedTimerCount, 0)
    }

    func testManyArmedTimersStillFireInOrderThroughTheLoop() {
        let loop = EventLoop()
        var fired: [Int] = []
        // 10,000 far timers, as callers could have armed, and three near ones.
        let far = (0..<10_000).map { _ in loop.schedule(after: 3600) {} }
        loop.schedule(after: 0.02) { fired.append(2) }
        loop.schedule(after: 0.01) { fired.append(1) }
        loop.schedule(after: 0.03) { fired.append(3) }
        let deadline = EventLoop.monotonicNanos() + 2_000_000_000
        while fired.count < 3 && EventLoop.monotonicNanos() < deadline { loop.runOnce(timeoutMillis: 50) }
        XCTAssertEqual(fired, [1, 2, 3])
        XCTAssertEqual(loop.armedTimerCount, 10_000)
        for t in far { loop.cancelTimer(t) }
        XCTAssertEqual(loop.armedTimerCount, 0)
    }
}

/// Idle exit as a property of the loop (`exitWhenIdle`): asked before every
/// wait, so a program's parts need not check after each of their events.
/// On a loop with manual time (`EventLoop(clock:)`): no test waits.
final class EventLoopIdleTests: XCTestCase {
    func testIdleLongEnoughRunsOnIdleOnce() {
        let clock = ManualClock()
        let loop = EventLoop(clock: clock)
        var fired = 0
        loop.exitWhenIdle(after: 10, isIdle: { true }, onIdle: { fired += 1 })
        loop.runOnce(timeoutMillis: 0)
        clock.advance(9.9)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 0, "not yet")
        clock.advance(0.1)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 1)
        // Still idle: a new countdown begins at the next turn, as the rule says.
        loop.runOnce(timeoutMillis: 0)
        clock.advance(10)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 2)
        loop.stopIdleWatch()
        XCTAssertEqual(loop.armedTimerCount, 0)
    }

    func testABusyTurnCancelsTheCountdown() {
        let clock = ManualClock()
        let loop = EventLoop(clock: clock)
        var busy = false
        var fired = 0
        loop.exitWhenIdle(after: 10, isIdle: { !busy }, onIdle: { fired += 1 })
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(loop.armedTimerCount, 1, "idle: the countdown is armed before the wait")
        clock.advance(9)
        busy = true
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(loop.armedTimerCount, 0, "busy: cancelled")
        clock.advance(100)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 0, "busy across its length: never")
        busy = false
        loop.runOnce(timeoutMillis: 0)
        clock.advance(9.99)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 0, "a new countdown, from the turn it became idle")
        clock.advance(0.01)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 1)
    }

    /// The countdown's timer asks again when it fires: busy by then (an event
    /// the loop has not turned for yet), nothing runs.
    func testTheRuleIsAskedAgainWhenTheCountdownEnds() {
        let clock = ManualClock()
        let loop = EventLoop(clock: clock)
        var idle = true
        var fired = 0
        loop.exitWhenIdle(after: 1, isIdle: { idle }, onIdle: { fired += 1 })
        loop.runOnce(timeoutMillis: 0)
        idle = false   // changed with no turn in between
        clock.advance(2)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 0)
    }
}

/// Manual time itself: timers follow the clock alone, and a turn never sleeps for one.
final class ManualClockTests: XCTestCase {
    func testTimersRunWhenTheClockReachesThemAndNoTurnSleeps() {
        let clock = ManualClock()
        let loop = EventLoop(clock: clock)
        var fired: [Int] = []
        loop.schedule(after: 3600) { fired.append(3600) }
        loop.schedule(after: 1) { fired.append(1) }
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, [])
        clock.advance(1)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, [1])
        clock.advance(3599)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, [1, 3600])
        XCTAssertEqual(loop.now, clock.now)
    }
}
