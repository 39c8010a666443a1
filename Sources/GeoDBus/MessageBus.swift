/// What the object server, its calls and its signals need of a bus: send a
/// message, and be handed each message that arrives. A libdbus `Connection`
/// is one; `MemoryBus` is another, for tests of the shell with no process.
public protocol MessageBus: AnyObject {
    /// Queues `message` for the bus; false if it could not be.
    @discardableResult func send(_ message: Message) -> Bool
    /// Handed each message that arrives; true when it was handled.
    var onMessage: ((Message) -> Bool)? { get set }
}

extension Connection: MessageBus {}

/// A bus in memory, as swift-nio's `EmbeddedChannel` is a channel: what is
/// sent is kept, in order, for the test to read; `deliver` hands the server a
/// message as the bus would (a method call made with `Message.methodCall`).
public final class MemoryBus: MessageBus {
    public private(set) var sent: [Message] = []
    public var onMessage: ((Message) -> Bool)?
    private var nextSerial: UInt32 = 1

    public init() {}

    @discardableResult
    public func send(_ message: Message) -> Bool {
        sent.append(message)
        return true
    }

    /// Hands the server `message`, from `sender`, as the bus would deliver it.
    @discardableResult
    public func deliver(_ message: Message, from sender: String) -> Bool {
        message.setSender(sender)
        message.setSerial(nextSerial)
        nextSerial &+= 1
        return onMessage?(message) ?? false
    }

    /// What was sent since the last call, taken out.
    public func takeSent() -> [Message] {
        defer { sent = [] }
        return sent
    }
}
