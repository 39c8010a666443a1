import Glibc
import GeoDBus
import GeoConsentAPI

/// Calls of the daemon's client interface sent all at once, on one event loop,
/// each answered whenever the daemon answers it. Each answer is printed when
/// it comes, with the time since its call was sent:
/// `reply LABEL +MSms ok SUMMARY` or `reply LABEL +MSms error NAME MESSAGE`.
/// `finish()` then prints `unanswered LABEL` for each call still waiting and
/// `summary calls=N answered=M`.
final class Burst {
    let loop = EventLoop()
    private var waiting: [Int: (label: String, sentAt: Double)] = [:]
    private var calls = 0
    private var stopped = false
    private var signals: SignalPipe?

    /// SIGTERM or SIGINT end `wait` early (the tests end a held burst that way).
    init() {
        signals = SignalPipe(loop: loop) { [weak self] _ in self?.stopped = true }
    }

    /// Sends `member(args)` on `c` (attached to this loop) and writes it out.
    func send(_ c: Connection, label: String, _ member: String, _ args: [DBusValue], timeout: Double,
              summary: @escaping ([DBusValue]) -> String = { "\($0.count) values" }) {
        let m: Message
        do {
            m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                       interface: GeoConsentAPI.interfaceName, member: member)
            try m.append(args)
        } catch {
            fail("cannot build \(member): \(error)")
        }
        let id = calls
        calls += 1
        waiting[id] = (label, monotonic())
        c.call(m, timeout: timeout) { [weak self] r in
            guard let self, let w = self.waiting.removeValue(forKey: id) else { return }
            let ms = "+\(Int(((monotonic() - w.sentAt) * 1000).rounded()))ms"
            switch r {
            case .success(let reply): say("reply \(w.label) \(ms) ok \(oneLine(summary(reply.arguments())))")
            case .failure(let e): say("reply \(w.label) \(ms) error \(e.name) \(oneLine(String(e.message.prefix(500))))")
            }
        }
        // Out now, so that "sent" means the bus has them (libdbus would
        // otherwise write them from the loop, bit by bit).
        c.flush()
    }

    /// Runs the loop until every call is answered, a signal came, or `seconds` passed.
    func wait(seconds: Double) {
        let deadline = monotonic() + seconds
        while !waiting.isEmpty && !stopped && monotonic() < deadline {
            loop.runOnce(timeoutMillis: 50)
        }
    }

    /// Prints the calls still waiting and the summary line.
    func finish() {
        for (_, w) in waiting.sorted(by: { $0.key < $1.key }) { say("unanswered \(w.label)") }
        say("summary calls=\(calls) answered=\(calls - waiting.count)")
    }
}

/// A new connection to `bus`, served by `burst`'s loop.
func connect(_ bus: String, on burst: Burst) -> Connection {
    let c = connect(bus)
    c.attach(to: burst.loop)
    return c
}
