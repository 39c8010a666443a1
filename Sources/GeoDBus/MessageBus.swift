/// What the object server, its calls and its signals need of a bus: send a
/// message, and be handed each message that arrives. A libdbus `Connection`
/// is one; `MemoryBus` (GeoTestSupport) is another, for tests of the shell with no process.
public protocol MessageBus: AnyObject {
    /// Queues `message` for the bus; false if it could not be.
    @discardableResult func send(_ message: Message) -> Bool
    /// Handed each message that arrives; true when it was handled.
    var onMessage: ((Message) -> Bool)? { get set }
}

extension Connection: MessageBus {}
