import GeoCore
import GeoDBus

/// Whether a caller who is not root may do an administrator's action, as
/// polkit says (its `CheckAuthorization`, with the user asked through their
/// desktop's polkit agent): the settings window's switches of location for
/// everyone (`org.geoconsent.set-enabled`) and of Wi-Fi positioning for
/// everyone (`org.geoconsent.set-wifi`), polkit/org.geoconsent.policy:
/// `auth_admin_keep` for an active session's user.
///
/// Each uid has one such call at a time (a prompt for a password is one
/// person's), and all of them a few slots of the daemon's connection
/// (`OutgoingCalls`): a user who keeps asking blocks nobody else.
enum PolkitCheck {
    static let purpose = CallBudgets.Purpose("polkit", .init(perUID: 1, total: 8, guaranteed: 1))
    static let busName = "org.freedesktop.PolicyKit1"
    /// An action, and what the caller is told when it may not.
    struct Action {
        let id: String
        let refusal: String
    }
    static let setEnabled = Action(id: "org.geoconsent.set-enabled", refusal: "Only root may switch location on or off")
    static let setWiFi = Action(id: "org.geoconsent.set-wifi", refusal: "Only root may switch Wi-Fi positioning on or off")
    /// The user may be typing a password.
    static let timeout = 120.0

    /// Asks whether `caller` may do `action`; `done` gets nil when it may, else
    /// the `AccessDenied` to answer with (refused, polkit absent or failing).
    static func check(_ host: FrontEndHost, _ caller: Caller, action: Action,
                      _ done: @escaping (DBusError?) -> Void) {
        let what = action.refusal
        guard let m = try? Message.methodCall(destination: busName, path: "/org/freedesktop/PolicyKit1/Authority",
                                              interface: "org.freedesktop.PolicyKit1.Authority",
                                              member: "CheckAuthorization") else {
            return done(.accessDenied(what))
        }
        // The subject is the caller's connection: polkit finds its process and session itself.
        let subject = DBusValue.structure([.string("system-bus-name"), .vardict(["name": .string(caller.connection)])])
        let allowUserInteraction: UInt32 = 1
        try? m.append([subject, .string(action.id), .dict(key: "s", value: "s", []), .uint32(allowUserInteraction), .string("")])
        let refused = host.call(m, purpose: purpose, uid: caller.uid, callee: busName, timeout: timeout) { result in
            switch result {
            case .success(let reply):
                let authorized = reply.arguments().first.flatMap { v -> Bool? in
                    if case .structure(let fields) = v, let first = fields.first, case .bool(let b) = first { return b }
                    return nil
                }
                done(authorized == true ? nil
                     : .accessDenied("\(what), or a user polkit authorizes for \(action.id); polkit did not"))
            case .failure(let e):
                done(.accessDenied("\(what) (polkit could not be asked: \(e.message.prefix(200)))"))
            }
        }
        if let refused { done(.accessDenied("\(what) (\(refused))")) }
    }
}
