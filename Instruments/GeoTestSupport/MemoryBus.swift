import GeoDBus

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
