import GeoCore
import GeoDBus

/// The calls the consent core will answer, by the id it knows them by
/// (`CallID`), and the requests a front end made of its own accord, which
/// have an id and no call to answer (a client object started again by the
/// facade). Each is taken out once, by the effect that answers it.
final class HeldCalls {
    private var calls: [CallID: MethodCall] = [:]
    private var callless: Set<CallID> = []
    private var nextID: CallID = 1

    /// No call waits for the core (the daemon may be idle).
    var isEmpty: Bool { calls.isEmpty }

    /// Keeps `call` for the core; its id.
    func hold(_ call: MethodCall) -> CallID {
        let id = newID()
        calls[id] = call
        return id
    }

    /// An id for a request with no call to answer.
    func holdWithoutCall() -> CallID {
        let id = newID()
        callless.insert(id)
        return id
    }

    /// Takes out what `id` holds: `held` is false when nothing was held under
    /// it any more (answered already, or its caller left), `call` is nil for a
    /// request with no call.
    func take(_ id: CallID) -> (held: Bool, call: MethodCall?) {
        if let call = calls.removeValue(forKey: id) { return (true, call) }
        return (callless.remove(id) != nil, nil)
    }

    /// The calls of a connection that left: the core never answers them, and
    /// each would keep its message and arguments for good.
    func forget(sender: String) {
        for (id, call) in calls where call.sender == sender { calls[id] = nil }
    }

    private func newID() -> CallID {
        defer { nextID += 1 }
        return nextID
    }
}
