/// One signal sent unicast to destinations one at a time, each as soon as the
/// caller names it: a fan-out sends the first subscriber's signal before it has
/// even looked at the second subscriber.
///
/// The signal is marshalled once, without a destination, when the first
/// destination is named, and each destination gets a copy of it with its
/// destination added. Marshalling is most of the cost (a location signal's
/// 13-entry dictionary: ~70,000 instructions in libdbus's iterators, callgrind)
/// and a copy with its destination set ~6,000: the first destination pays
/// about what a message built with its destination would, and the others
/// share the one marshalling. Replacing the destination of a copy that had one
/// would make libdbus re-marshal the rest of the header at every copy, hence a
/// template without.
///
/// `dbus_connection_send` writes a message at once when the socket takes it
/// (libdbus queues only what the socket refuses, and the connection's write
/// watch writes that later), so each `send(to:)` has left the process when it
/// returns, without blocking the event loop.
public final class UnicastSignal {
    private let bus: MessageBus
    private let path: String, interface: String, member: String
    private let args: [DBusValue]
    /// The message every destination gets a copy of; nil until the first.
    private var template: Message?
    private var failed = false

    public init(bus: MessageBus, path: String, interface: String, member: String, _ args: [DBusValue]) {
        self.bus = bus
        (self.path, self.interface, self.member, self.args) = (path, interface, member, args)
    }

    /// Sends the signal to `destination` now; false if it could not be built or queued.
    @discardableResult
    public func send(to destination: String) -> Bool {
        guard !failed else { return false }
        if template == nil { template = build() }
        guard let each = template?.copy() else { return false }
        each.setDestination(destination)
        return bus.send(each)
    }

    private func build() -> Message? {
        guard let m = try? Message.signal(path: path, interface: interface, member: member, destination: nil),
              (try? m.append(args)) != nil else {
            failed = true
            return nil
        }
        return m
    }
}
