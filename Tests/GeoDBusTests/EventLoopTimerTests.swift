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
final class EventLoopIdleTests: XCTestCase {
    /// Turns the loop until `done` or 2 s have passed.
    private func turn(_ loop: EventLoop, until done: () -> Bool) {
        let deadline = EventLoop.monotonicNanos() + 2_000_000_000
        while !done() && EventLoop.monotonicNanos() < deadline { loop.runOnce(timeoutMillis: 10) }
    }

    func testIdleLongEnoughRunsOnIdleOnce() {
        let loop = EventLoop()
        var fired = 0
        loop.exitWhenIdle(after: 0.02, isIdle: { true }, onIdle: { fired += 1 })
        turn(loop) { fired > 0 }
        XCTAssertEqual(fired, 1)
        // Still idle: a new countdown begins at the next turn, as the rule says.
        turn(loop) { fired > 1 }
        XCTAssertEqual(fired, 2)
        loop.stopIdleWatch()
        XCTAssertEqual(loop.armedTimerCount, 0)
    }

    func testABusyTurnCancelsTheCountdown() {
        let loop = EventLoop()
        var busy = false
        var fired = 0
        var turns = 0
        loop.exitWhenIdle(after: 0.05, isIdle: { !busy }, onIdle: { fired += 1 })
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(loop.armedTimerCount, 1, "idle: the countdown is armed before the wait")
        busy = true
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(loop.armedTimerCount, 0, "busy: cancelled")
        // Busy across its length: never fires.
        let deadline = EventLoop.monotonicNanos() + 150_000_000
        while EventLoop.monotonicNanos() < deadline { loop.runOnce(timeoutMillis: 10); turns += 1 }
        XCTAssertEqual(fired, 0, "\(turns) busy turns")
        busy = false
        turn(loop) { fired > 0 }
        XCTAssertEqual(fired, 1)
    }

    /// The countdown's timer asks again when it fires: busy by then (an event
    /// the loop has not turned for yet), nothing runs.
    func testTheRuleIsAskedAgainWhenTheCountdownEnds() {
        let loop = EventLoop()
        var idle = true
        var fired = 0
        loop.exitWhenIdle(after: 0.02, isIdle: { idle }, onIdle: { fired += 1 })
        loop.runOnce(timeoutMillis: 0)
        idle = false   // changed with no turn in between
        usleep(40_000)
        loop.runOnce(timeoutMillis: 0)
        XCTAssertEqual(fired, 0)
    }
}
