import GeoDBus

/// Replaced location objects of the GeoClue facade, in the order they were
/// replaced, each with when it goes: clients read the `old` path of
/// `LocationUpdated`, so an object stays `lifetime` seconds after the next one
/// came. One timer, for the oldest, removes them all in turn, instead of a timer
/// per object: with many clients those were hundreds, each costing the event
/// loop something on every iteration.
final class RetiredLocations {
    /// Seconds a removal may wait past its time, so that one wake-up removes all
    /// that came due meanwhile: with fast fixes (or many clients, fix after fix)
    /// the loop wakes about twice a second for them, not once per fix.
    static let slack = 0.5
    private let loop: EventLoop
    private let lifetime: UInt64
    /// Removes the object at the path of the client numbered so, if it is still
    /// served (its client may have gone, or dropped it for a newer one).
    private let remove: (_ client: UInt32, _ path: String) -> Void
    /// Oldest first; the entries from `head` on are still to go.
    private var queue: [(client: UInt32, path: String, removeAt: UInt64)] = []
    private var head = 0
    private var timer: EventLoop.Token?

    init(loop: EventLoop, lifetime: Double, remove: @escaping (_ client: UInt32, _ path: String) -> Void) {
        self.loop = loop
        self.lifetime = UInt64(lifetime * 1e9)
        self.remove = remove
    }

    /// The object at `path` of client `client` was replaced at `now` (monotonic nanoseconds).
    func add(client: UInt32, path: String, now: UInt64) {
        queue.append((client, path, now &+ lifetime))
        if timer == nil { schedule() }
    }

    /// Forgets every entry: no client is left, so no wake-up for them either.
    func clear() {
        if let t = timer { loop.cancelTimer(t) }
        timer = nil
        queue = []
        head = 0
    }

    private func schedule() {
        guard head < queue.count else {
            queue.removeAll()
            head = 0
            return
        }
        let due = queue[head].removeAt, now = loop.now
        let wait = (due > now ? Double(due - now) / 1e9 : 0) + RetiredLocations.slack
        timer = loop.schedule(after: wait) { [weak self] in self?.sweep() }
    }

    /// Removes the objects whose time is up, then waits for the next.
    private func sweep() {
        timer = nil
        let now = loop.now
        while head < queue.count, queue[head].removeAt <= now {
            let r = queue[head]
            head += 1
            remove(r.client, r.path)
        }
        if head >= 256 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        schedule()
    }
}
