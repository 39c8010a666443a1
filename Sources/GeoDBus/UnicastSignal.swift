/// One signal sent unicast to destinations one at a time, each as soon as the
/// caller names it: a fan-out sends the first subscriber's signal before it has
/// even looked at the second subscriber.
///
/// The first destination's message is built with its destination before the
/// body, as a lone signal is (setting a header field after the body is
/// marshalled makes libdbus move the body). From the second destination on,
/// a template without a destination is marshalled once and each destination
/// gets a copy of it with its destination added: replacing the destination of a
/// copy of the first message instead would make libdbus re-marshal the rest of
/// the header at every copy.
///
/// `dbus_connection_send` writes a message at once when the socket takes it
/// (libdbus queues only what the socket refuses, and the connection's write
/// watch writes that later), so each `send(to:)` has left the process when it
/// returns, without blocking the event loop.
public final class UnicastSignal {
    private let connection: Connection
    private let path: String, interface: String, member: String
    private let args: [DBusValue]
    private var sentFirst = false
    /// The message copied for the second destination on; nil until then.
    private var template: Message?
    private var failed = false

    public init(connection: Connection, path: String, interface: String, member: String, _ args: [DBusValue]) {
        self.connection = connection
        (self.path, self.interface, self.member, self.args) = (path, interface, member, args)
    }

    /// Sends the signal to `destination` now; false if it could not be built or queued.
    @discardableResult
    public func send(to destination: String) -> Bool {
        guard !failed else { return false }
        guard sentFirst else {
            sentFirst = true
            guard let m = build(destination: destination) else { return false }
            return connection.send(m)
        }
        if template == nil { template = build(destination: nil) }
        guard let each = template?.copy() else { return false }
        each.setDestination(destination)
        return connection.send(each)
    }

    private func build(destination: String?) -> Message? {
        guard let m = try? Message.signal(path: path, interface: interface, member: member, destination: destination),
              (try? m.append(args)) != nil else {
            failed = true
            return nil
        }
        return m
    }
}
