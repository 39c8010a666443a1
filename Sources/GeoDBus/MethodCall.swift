/// An incoming method call that can be answered now or later (a prompt may
/// take a minute). Exactly one reply is sent; later ones are ignored.
public final class MethodCall {
    public let message: Message
    /// The decoded arguments; their types already match the declared signature.
    public let arguments: [DBusValue]
    /// The caller's unique bus name.
    public let sender: String
    let expectedOutSignature: String
    private weak var connection: Connection?
    public private(set) var isAnswered = false

    init(message: Message, arguments: [DBusValue], connection: Connection, outSignature: String) {
        self.message = message
        self.arguments = arguments
        self.sender = message.sender ?? ""
        self.connection = connection
        self.expectedOutSignature = outSignature
    }

    /// Sends a method return with `values`. A reply that does not match the
    /// declared out-signature is a bug: the caller gets `Failed` instead.
    public func reply(_ values: [DBusValue] = []) {
        guard !isAnswered else { return }
        let sig = values.map(\.signature).joined()
        guard sig == expectedOutSignature else {
            return fail(.failed("internal error: reply \(sig) does not match \(expectedOutSignature)"))
        }
        isAnswered = true
        guard !message.noReplyExpected, let r = message.makeReturn() else { return }
        do {
            try r.append(values)
            connection?.send(r)
        } catch let e as DBusError {
            isAnswered = false
            fail(e)
        } catch {
            isAnswered = false
            fail(.failed("\(error)"))
        }
    }

    /// Sends an error reply.
    public func fail(_ error: DBusError) {
        guard !isAnswered else { return }
        isAnswered = true
        guard !message.noReplyExpected, let r = message.makeError(error) else { return }
        connection?.send(r)
    }
}
