/// What a connection did that looks like an attack (calls beyond a budget,
/// pipelined calls it must wait for): said once per connection, however often
/// it does it, and within the callers' line budget (`Log.byCaller`).
final class AttackLog {
    /// Connections already logged; each leaves with its name (`forget`).
    private var said: Set<String> = []

    func note(_ connection: String, uid: UInt32? = nil, _ what: String) {
        guard said.insert(connection).inserted else { return }
        Log.byCaller(uid: uid, .warning, "\(connection)\(uid.map { " (uid \($0))" } ?? ""): \(what) " +
                     "(said once for this connection)")
    }

    func forget(_ connection: String) {
        guard said.remove(connection) != nil else { return }
        if said.isEmpty { said = [] }
    }
}
