/// A D-Bus error as a value: the error name and its message. Errors from
/// libdbus (a `DBusError`) and error replies from peers both become this.
public struct DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String
    /// A `NoReply` that libdbus made itself when a call's timeout ran out (no
    /// sender): the callee may still answer, and the bus still counts the
    /// call against the caller. A `NoReply` from the bus (the callee left
    /// without answering) is not one.
    public var isLocalTimeout = false

    public init(_ name: String, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    // The standard names the daemon uses.
    public static let invalidArgsName = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let unknownMethodName = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownInterfaceName = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownObjectName = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownPropertyName = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnlyName = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let accessDeniedName = "org.freedesktop.DBus.Error.AccessDenied"
    public static let limitsExceededName = "org.freedesktop.DBus.Error.LimitsExceeded"
    public static let failedName = "org.freedesktop.DBus.Error.Failed"
    public static let noReplyName = "org.freedesktop.DBus.Error.NoReply"
    public static let timeoutName = "org.freedesktop.DBus.Error.Timeout"
    public static let disconnectedName = "org.freedesktop.DBus.Error.Disconnected"

    public static func invalidArgs(_ message: String) -> DBusError { DBusError(invalidArgsName, message) }
    public static func accessDenied(_ message: String) -> DBusError { DBusError(accessDeniedName, message) }
    public static func failed(_ message: String) -> DBusError { DBusError(failedName, message) }
}
