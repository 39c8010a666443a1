/// Which session a grant, a prompt or a subscription belongs to, and so which
/// front end speaks for it: the cores' effects carry it, and the daemon hands
/// each effect to the front end whose session it names, with no test of a
/// name's spelling.
public enum SessionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// A connection's own session (the daemon's own API): its unique bus name.
    case connection(String)
    /// A client object of a connection (an object a front end made for it, of
    /// that front end's `kind`), numbered by the daemon: a grant of its own,
    /// which ends with the object or the connection.
    case clientObject(connection: String, kind: ObjectKind, number: UInt32)

    /// The unique bus name of the connection the session belongs to: the
    /// session ends when it leaves the bus.
    public var connection: String {
        switch self {
        case .connection(let name), .clientObject(let name, _, _): return name
        }
    }

    /// The bus name signals of our own API go to; nil for a client object's
    /// session, which its front end serves.
    public var busName: String? {
        if case .connection(let name) = self { return name }
        return nil
    }

    /// For logs and `ListSessions`: `:1.42`, or `:1.42/KIND/7` for a client object.
    public var description: String {
        switch self {
        case .connection(let name): return name
        case .clientObject(let name, let kind, let number): return name + "/" + kind.word + "/" + String(number)
        }
    }

    public static func < (a: SessionID, b: SessionID) -> Bool {
        switch (a, b) {
        case (.connection(let x), .connection(let y)): return x < y
        case (.connection(let x), .clientObject(let y, _, _)): return x <= y
        case (.clientObject(let x, _, _), .connection(let y)): return x < y
        case (.clientObject(let x, let k, let m), .clientObject(let y, let l, let n)):
            return x != y ? x < y : k.word != l.word ? k.word < l.word : m < n
        }
    }
}

/// What a front end calls its client objects, as logs and `ListSessions` show
/// their sessions (`CONNECTION/WORD/N`): the front end declares it, the cores
/// only carry it.
public struct ObjectKind: Hashable, Sendable {
    public let word: String
    public init(word: String) { self.word = word }
}

/// Tests and tables name a connection's session by its bus name.
extension SessionID: ExpressibleByStringLiteral {
    public init(stringLiteral name: String) { self = .connection(name) }
}
