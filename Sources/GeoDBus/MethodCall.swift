/// An incoming method call that can be answered now or later (a prompt may
/// take a minute). Exactly one reply is sent; later ones are ignored.
///
/// A call answered later keeps only where its reply goes (`ReplyAddress`), not
/// the message: a caller must not be able to pin megabytes of message, or the
/// file descriptors sent with it, for as long as a prompt stays open. Its
/// decoded arguments go too, once the handler has read them
/// (`releaseArguments()`).
public final class MethodCall {
    /// The decoded arguments; their types already match the declared signature.
    /// Empty after `releaseArguments()`.
    public private(set) var arguments: [DBusValue]
    /// Where the reply goes.
    public let replyAddress: ReplyAddress
    let expectedOutSignature: String
    private weak var bus: MessageBus?
    public private(set) var isAnswered = false

    /// The caller's unique bus name.
    public var sender: String { replyAddress.sender }

    init(message: Message, arguments: [DBusValue], bus: MessageBus, outSignature: String) {
        self.replyAddress = message.replyAddress
        self.arguments = arguments
        self.bus = bus
        self.expectedOutSignature = outSignature
    }

    /// Lets the arguments go: the handler has decoded what it needs, and the
    /// call may wait a long time for its answer.
    public func releaseArguments() { arguments = [] }

    /// Sends a method return with `values`. A reply that does not match the
    /// declared out-signature is a bug: the caller gets `Failed` instead.
    public func reply(_ values: [DBusValue] = []) {
        guard !isAnswered else { return }
        let sig = values.map(\.signature).joined()
        guard sig == expectedOutSignature else {
            return fail(.failed("internal error: reply \(sig) does not match \(expectedOutSignature)"))
        }
        isAnswered = true
        guard !replyAddress.noReplyExpected, let r = Message.methodReturn(to: replyAddress) else { return }
        do {
            try r.append(values)
            bus?.send(r)
        } catch let e as DBusError {
            isAnswered = false
            fail(e)
        } catch {
            isAnswered = false
            fail(.failed("\(error)"))
        }
    }

    /// Sends a method return whose body is a copy of `template`'s (a
    /// `Message.methodReturnTemplate`): the same reply to many calls, marshalled once.
    public func reply(copying template: Message) {
        guard !isAnswered else { return }
        guard template.signature == expectedOutSignature else {
            return fail(.failed("internal error: reply \(template.signature) does not match \(expectedOutSignature)"))
        }
        isAnswered = true
        guard !replyAddress.noReplyExpected, let r = Message.methodReturn(to: replyAddress, copying: template) else { return }
        bus?.send(r)
    }

    /// Sends an error reply.
    public func fail(_ error: DBusError) {
        guard !isAnswered else { return }
        isAnswered = true
        guard !replyAddress.noReplyExpected, let r = Message.error(error, to: replyAddress) else { return }
        bus?.send(r)
    }
}
