import Glibc
import GeoCore
import GeoDBus
import GeoSystem

/// Writing what the consent core decided to the state directory (StateStore,
/// docs/state-format.md): a decision at once (urgent: its caller is answered
/// only once it is on disk), a `last-used` change batched for 2 s (no fsync
/// per tap), and `Enabled`.
final class ConsentPersistence {
    private let store: StateStore
    private let loop: EventLoop
    /// The records to write, as the core holds them when a write happens.
    private let records: () -> [AppKey: ConsentRecord]
    /// The batched write, while one is due.
    private var lazyTimer: EventLoop.Token?

    init(store: StateStore, loop: EventLoop, records: @escaping () -> [AppKey: ConsentRecord]) {
        self.store = store
        self.loop = loop
        self.records = records
    }

    /// A write is due (the daemon is not idle while one is).
    var isPending: Bool { lazyTimer != nil }

    /// Writes the records now; nil, or why they could not be written.
    @discardableResult
    func saveConsents() -> String? {
        if let t = lazyTimer { loop.cancelTimer(t); lazyTimer = nil }
        return save("consents") { try store.saveConsents(records()) }
    }

    /// Only `last-used` changed: one write within 2 s for however many.
    func saveConsentsSoon() {
        guard lazyTimer == nil else { return }
        lazyTimer = loop.schedule(after: 2) { [weak self] in
            self?.lazyTimer = nil
            self?.saveConsents()
        }
    }

    /// Writes a pending batch before the daemon exits.
    func flush() {
        if lazyTimer != nil { saveConsents() }
    }

    /// Writes `WiFiEnabled`; nil, or why it could not be written.
    func saveWiFiEnabled(_ on: Bool) -> String? {
        save("WiFiEnabled") { try store.saveWiFiEnabled(on) }
    }

    /// Writes the per-user switches; nil, or why they could not be written.
    func saveUsersOff(_ users: UsersOff) -> String? {
        save("the users' location switches") { try store.saveUsersOff(users) }
    }

    /// Writes `Enabled`; nil, or why it could not be written.
    func saveEnabled(_ enabled: Bool) -> String? {
        save("Enabled") { try store.saveEnabled(enabled) }
    }

    /// Writes `what`; nil, or why it could not be written (logged). A
    /// directory the daemon may not write (its owner, its mode, a read-only
    /// mount) is said as such: it is the admin's to fix, and no file is damaged.
    private func save(_ what: String, _ write: () throws -> Void) -> String? {
        let error: Error
        do {
            try write()
            return nil
        } catch let e {
            error = e
        }
        let why: String
        if let e = error as? SystemError, [EACCES, EPERM, EROFS].contains(e.errno) {
            why = "the state directory \(store.directory) is not writable by uid \(getuid()) (\(e.operation): \(e.message))"
        } else {
            why = "\(error)"
        }
        Log.error("cannot save \(what): \(why)")
        return why
    }
}
