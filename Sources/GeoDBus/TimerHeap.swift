/// The event loop's one-shot timers: a binary min-heap by (deadline, token),
/// so that finding the next deadline costs nothing and arming or firing one
/// costs log n, however many are armed.
///
/// Why a heap: the loop asks for the next deadline on every turn. A table
/// scanned each turn makes every call of every caller pay for each timer
/// armed, and callers can make the daemon arm timers (a red team armed
/// 35,000 and held the daemon at 93 % CPU). A cancelled timer leaves the table
/// at once and its heap entry is dropped when it reaches the top, or when
/// dead entries outnumber live ones (then the heap is rebuilt), so memory
/// stays proportional to the timers armed.
struct TimerHeap {
    typealias Token = Int

    private struct Entry {
        var deadline: UInt64
        var token: Token
        func before(_ other: Entry) -> Bool { (deadline, token) < (other.deadline, other.token) }
    }

    private var heap: [Entry] = []
    private var handlers: [Token: () -> Void] = [:]

    /// Timers armed and not yet fired or cancelled.
    var count: Int { handlers.count }
    /// Heap entries, live and cancelled ones not yet dropped.
    var storedEntries: Int { heap.count }

    mutating func insert(_ token: Token, deadline: UInt64, handler: @escaping () -> Void) {
        handlers[token] = handler
        push(Entry(deadline: deadline, token: token))
    }

    mutating func cancel(_ token: Token) {
        guard handlers.removeValue(forKey: token) != nil else { return }
        if heap.count > 64 && heap.count > 2 * handlers.count { rebuild() }
    }

    /// The earliest deadline of a live timer.
    mutating func nextDeadline() -> UInt64? {
        dropDeadTop()
        return heap.first?.deadline
    }

    /// Removes and returns the earliest live timer due at `now`, if any.
    mutating func popDue(now: UInt64) -> (() -> Void)? {
        dropDeadTop()
        guard let top = heap.first, top.deadline <= now else { return nil }
        pop()
        return handlers.removeValue(forKey: top.token)
    }

    private mutating func dropDeadTop() {
        while let top = heap.first, handlers[top.token] == nil { pop() }
    }

    private mutating func rebuild() {
        heap.removeAll { handlers[$0.token] == nil }
        var i = heap.count / 2
        while i > 0 {
            i -= 1
            siftDown(i)
        }
    }

    private mutating func push(_ e: Entry) {
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].before(heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func pop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && heap[l].before(heap[m]) { m = l }
            if r < heap.count && heap[r].before(heap[m]) { m = r }
            if m == i { return }
            heap.swapAt(i, m)
            i = m
        }
    }
}
