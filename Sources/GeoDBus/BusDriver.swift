/// The bus itself (`org.freedesktop.DBus`, "the bus driver"): its name,
/// object and interface spelled once, and the calls, signals and match rules
/// of it that the daemon, the client library and the tools use.
public enum BusDriver {
    public static let name = "org.freedesktop.DBus"
    public static let path = "/org/freedesktop/DBus"
    public static let interface = "org.freedesktop.DBus"

    /// A method call of the bus driver (`AddMatch`, `GetConnectionCredentials`, …) with `args`.
    public static func call(_ member: String, _ args: [DBusValue] = []) throws -> Message {
        let m = try Message.methodCall(destination: name, path: path, interface: interface, member: member)
        try m.append(args)
        return m
    }

    /// Whether `m` is the bus driver's signal `member` (a peer cannot send one in its name).
    public static func isSignal(_ m: Message, _ member: String) -> Bool {
        m.type == .signal && m.sender == name && m.member == member && m.interface == interface
    }

    /// A match rule for the bus driver's signal `member`, with more conditions
    /// (`arg0='…'`, `arg2=''`) after it.
    public static func matchRule(_ member: String, _ more: String = "") -> String {
        "type='signal',sender='\(name)',path='\(path)',interface='\(interface)',member='\(member)'" +
            (more.isEmpty ? "" : "," + more)
    }
}
