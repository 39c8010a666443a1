import GeoDBus
import GeoCore

// What the daemon sends a GeoClue agent and reads back from it
// (`org.freedesktop.GeoClue2.Agent`, docs/geoclue.md "GeoClue agents").

/// `AuthorizeApp(s desktop_id, u req_accuracy_level) -> (b authorized, u allowed_accuracy_level)`.
public enum AuthorizeAppCall {
    public static let member = "AuthorizeApp"

    public static func encode(desktopID: String, level: UInt32) -> [DBusValue] {
        [.string(desktopID), .uint32(level)]
    }

    /// `true` counts as Allow While Using (GeoClue agents store a grant for
    /// good anyway), at the accuracy its `allowed_accuracy_level` gives at most
    /// (GeoClue starts the client at that level); `false` as Don't Allow. `true`
    /// at level 0 allows nothing and stores nothing: no answer, as is any other reply.
    public static func decode(signature: String, _ args: [DBusValue]) -> AgentAnswer {
        guard signature == "bu", args.count == 2, let authorized = args[0].boolValue, let level = args[1].uint32Value else {
            return .noAnswer("AuthorizeApp replied with signature '\(signature)', not 'bu'")
        }
        guard authorized else { return .decision(.deny) }
        switch GeoClueAccuracyLevel.accuracy(forLevel: level) {
        case .full?: return .decision(.allowWhileUsing)
        case .reduced?: return .capped(.allowWhileUsing, .reduced)
        case nil: return .noAnswer("AuthorizeApp authorized at allowed_accuracy_level 0 (none)")
        }
    }
}

/// The agent's `MaxAccuracyLevel` property.
public enum MaxAccuracyLevelProperty {
    public static let name = "MaxAccuracyLevel"

    /// The cap a level gives: nil (location off) for 0, else the accuracy the
    /// level would ask for (1 to 5 reduced, 6 and up full). Not a `u`: nil too.
    public static func cap(_ value: DBusValue) -> Accuracy?? {
        guard let level = value.unwrapped.uint32Value else { return nil }
        return .some(GeoClueAccuracyLevel.accuracy(forLevel: level))
    }

    /// The new cap in a `PropertiesChanged(s interface, a{sv} changed, as invalidated)`
    /// of an agent; nil when the signal does not carry one.
    public static func changed(signature: String, _ args: [DBusValue]) -> Accuracy?? {
        changedLevel(signature: signature, args).flatMap { cap(.uint32($0)) }
    }

    /// The new level itself in such a signal; nil when it carries none.
    public static func changedLevel(signature: String, _ args: [DBusValue]) -> UInt32? {
        guard signature == "sa{sv}as", args.count == 3, args[0].stringValue == GeoClueAPI.agentInterfaceName,
              let value = args[1].vardictValue?[name] else { return nil }
        return value.unwrapped.uint32Value
    }
}
