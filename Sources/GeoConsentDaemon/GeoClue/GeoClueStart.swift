import GeoCore

/// The `Start` of one GeoClue client object, as one state instead of five
/// fields: where it is, and what each event moves it to. Pure (generic over
/// the call it answers, so that it is tested with no bus); the facade
/// carries out what the transitions return (GeoClueFacade.swift).
struct ClientStart<Call> {
    enum State {
        /// Not started, or stopped; or its grant ended other than by a pause.
        case stopped
        /// The consent core is deciding on `Start` `id` (given up at `deadline`);
        /// more `Start` calls made meanwhile get its answer.
        case starting(id: CallID, deadline: Int, joined: [Call])
        /// Granted: fixes flow, `Active` is true.
        case active
        /// Its grant ended at a pause of its login session while it was active:
        /// the user is asked again when back (`GeoClueFacade.sessionResumed`).
        case pausedUntilBack
    }

    private(set) var state = State.stopped

    var isActive: Bool { if case .active = state { return true } else { return false } }
    var isStarting: Bool { if case .starting = state { return true } else { return false } }
    var waitsForTheUser: Bool { if case .pausedUntilBack = state { return true } else { return false } }

    /// What a `Start` call does now.
    enum StartAction: Equatable {
        /// Already active: answered at once.
        case reply
        /// Joined the `Start` the core is deciding on.
        case joined
        /// The core is to be asked (`asked`).
        case ask
    }

    mutating func startCalled(_ call: Call) -> StartAction {
        switch state {
        case .active: return .reply
        case .starting(let id, let deadline, var joined):
            joined.append(call)
            state = .starting(id: id, deadline: deadline, joined: joined)
            return .joined
        case .stopped, .pausedUntilBack: return .ask
        }
    }

    /// The core was asked, under `id`, to be given up at timer `deadline`.
    mutating func asked(id: CallID, deadline: Int) {
        state = .starting(id: id, deadline: deadline, joined: [])
    }

    /// The core granted `Start` `id`: the calls that joined it are answered
    /// and its timer cancelled; nil when `id` is not the one pending.
    mutating func granted(_ id: CallID) -> (joined: [Call], deadline: Int)? {
        guard case .starting(id, let deadline, let joined) = state else { return nil }
        state = .active
        return (joined, deadline)
    }

    /// The core refused `Start` `id` (or it was given up): the pending start
    /// and the calls that joined it; nil when none is pending (with `id`, if given).
    mutating func ended(_ id: CallID? = nil) -> (id: CallID, joined: [Call], deadline: Int)? {
        guard case .starting(let pending, let deadline, let joined) = state, id == nil || id == pending else { return nil }
        state = .stopped
        return (pending, joined, deadline)
    }

    /// `Stop`, or the object's end: true when it was active (`Active` goes false).
    mutating func stop() -> Bool {
        let was = isActive
        state = .stopped
        return was
    }

    /// Its grant ended (`byPause`: by a pause that began then): true when it
    /// was active (`Active` goes false). Active and ended by the pause, it
    /// waits for the user's return.
    mutating func grantEnded(byPause: Bool) -> Bool {
        guard isActive else { return false }
        state = byPause ? .pausedUntilBack : .stopped
        return true
    }
}
