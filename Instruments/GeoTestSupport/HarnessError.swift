/// An error from the test harness, with a message meant for a test log
/// (it often carries the tail of a child's log).
public struct HarnessError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let message: String
    /// Makes an error with `message`.
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
