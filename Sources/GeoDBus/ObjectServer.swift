/// Serves objects on a connection: routes method calls to interface tables,
/// checks signatures, and implements the standard interfaces
/// (Introspectable, Peer, Properties) for every exported object.
///
/// An object may belong to one peer (`export(_:at:interfaces:owner:)`): then
/// only that unique name may call it, read or set its properties or
/// introspect it (anyone else gets `UnknownObject`, as for a missing object), and the introspection of
/// its parents lists it to that peer alone.
public final class ObjectServer {
    public static let introspectable = "org.freedesktop.DBus.Introspectable"
    public static let peer = "org.freedesktop.DBus.Peer"
    public static let properties = "org.freedesktop.DBus.Properties"

    /// The standard interfaces as introspection shows them.
    public static let standardInterfaces: [InterfaceDescription] = [
        InterfaceDescription(name: peer, methods: [
            .init(name: "Ping", inArgs: [], outArgs: []),
            .init(name: "GetMachineId", inArgs: [], outArgs: [Arg("machine_uuid", "s")]),
        ], signals: [], properties: []),
        InterfaceDescription(name: introspectable, methods: [
            .init(name: "Introspect", inArgs: [], outArgs: [Arg("xml_data", "s")]),
        ], signals: [], properties: []),
        InterfaceDescription(name: properties, methods: [
            .init(name: "Get", inArgs: [Arg("interface_name", "s"), Arg("property_name", "s")], outArgs: [Arg("value", "v")]),
            .init(name: "GetAll", inArgs: [Arg("interface_name", "s")], outArgs: [Arg("props", "a{sv}")]),
            .init(name: "Set", inArgs: [Arg("interface_name", "s"), Arg("property_name", "s"), Arg("value", "v")], outArgs: []),
        ], signals: [
            .init(name: "PropertiesChanged", args: [Arg("interface_name", "s"), Arg("changed_properties", "a{sv}"),
                                                    Arg("invalidated_properties", "as")]),
        ], properties: []),
    ]

    private struct Exported {
        var interfaces: [BoundInterface]
        /// The only unique name that may use the object; nil: anyone.
        var owner: String?
        /// The property values of an object exported with `export(constant:of:at:owner:)`.
        var constant: ConstantValues?

        func visible(to sender: String?) -> Bool { owner == nil || owner == sender }
    }

    /// The bus it serves on: a libdbus `Connection`, or a `MemoryBus` in tests.
    public let bus: MessageBus
    private var objects: [String: Exported] = [:]

    /// Messages that are not method calls to exported objects (signals, calls
    /// elsewhere) go here.
    public var onOtherMessage: ((Message) -> Bool)?

    public convenience init(connection: Connection) { self.init(bus: connection) }

    public init(bus: MessageBus) {
        self.bus = bus
        bus.onMessage = { [weak self] msg in self?.handle(msg) ?? false }
    }

    /// Exports `object` at `path` with `interfaces`; with `owner`, for that unique name only.
    public func export<Object: AnyObject>(_ object: Object, at path: String, interfaces: [Interface<Object>],
                                          owner: String? = nil) {
        objects[path] = Exported(interfaces: interfaces.map { $0.bind(object) }, owner: owner)
    }

    /// Exports a read-only object whose property values never change: `values`
    /// for the properties of `interface`, served by `Get` and `GetAll` straight
    /// from these values. Unlike `export(_:at:interfaces:owner:)` nothing is bound
    /// per object, so this suits objects made many times a second (one per fix
    /// and client); many objects may share one `values`. With `owner`, for that
    /// unique name only.
    public func export(constant values: ConstantValues, of interface: ConstantInterface, at path: String,
                       owner: String? = nil) {
        objects[path] = Exported(interfaces: [interface.bound], owner: owner, constant: values)
    }

    /// Stops serving the object at `path`; calls to it get `UnknownObject`.
    public func unexport(_ path: String) {
        objects[path] = nil
    }

    /// The introspection XML served for `path` to `caller` (nil: a caller that owns nothing).
    public func introspectionXML(for path: String, caller: String? = nil) -> String {
        let children = childNodes(of: path, visibleTo: caller)
        if let obj = objects[path], obj.visible(to: caller) {
            return Introspection.xml(interfaces: ObjectServer.standardInterfaces + obj.interfaces.map(\.description),
                                     children: children)
        }
        return Introspection.xml(interfaces: [], children: children)
    }

    /// Sends a signal; with `destination` it is unicast to that connection only.
    @discardableResult
    public func emit(path: String, interface: String, member: String, _ args: [DBusValue], destination: String? = nil) -> Bool {
        // Written in one pass where it can be (WireEncoder: a PropertiesChanged then
        // costs some 60 % of what appending its arguments one by one does).
        if let m = Message.signal(wire: path, interface: interface, member: member, destination: destination, args) {
            return bus.send(m)
        }
        guard let m = try? Message.signal(path: path, interface: interface, member: member, destination: destination),
              (try? m.append(args)) != nil else { return false }
        return bus.send(m)
    }

    /// A signal to send unicast to destinations one at a time (`UnicastSignal`):
    /// marshalled once, each destination gets its own copy as soon as it is sent.
    public func unicastSignal(path: String, interface: String, member: String, _ args: [DBusValue]) -> UnicastSignal {
        UnicastSignal(bus: bus, path: path, interface: interface, member: member, args)
    }

    /// Sends `PropertiesChanged` for `changed` properties of `interface`: broadcast,
    /// or with `destination` unicast to that connection only.
    public func propertiesChanged(path: String, interface: String, changed: [String: DBusValue],
                                  destination: String? = nil) {
        guard !changed.isEmpty else { return }
        emit(path: path, interface: ObjectServer.properties, member: "PropertiesChanged",
             [.string(interface), .vardict(changed), .strings([])], destination: destination)
    }

    /// The names of `path`'s children with some object `sender` may see below them.
    private func childNodes(of path: String, visibleTo sender: String?) -> [String] {
        let prefix = path == "/" ? "/" : path + "/"
        var names = Set<String>()
        for (p, obj) in objects where p.hasPrefix(prefix) && p != path && obj.visible(to: sender) {
            if let first = p.dropFirst(prefix.count).split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    private func handle(_ msg: Message) -> Bool {
        guard msg.type == .methodCall, let path = msg.path, let member = msg.member else {
            return onOtherMessage?(msg) ?? false
        }
        // No interface served here takes a file descriptor. Refuse the call now:
        // libdbus closes the descriptors when the message goes, which is as soon
        // as this returns, instead of holding them for as long as a call waits.
        if msg.containsUnixFDs {
            MethodCall(message: msg, arguments: [], bus: bus, outSignature: "")
                .fail(.invalidArgs("\(member) takes no file descriptors"))
            return true
        }
        let iface = msg.interface

        func call(_ out: String) -> MethodCall {
            MethodCall(message: msg, arguments: msg.arguments(), bus: bus, outSignature: out)
        }
        func check(_ expected: String) -> Bool {
            guard msg.signature == expected else {
                call("").fail(.invalidArgs("Expected signature '\(expected)' for \(member), got '\(msg.signature)'"))
                return false
            }
            return true
        }

        // Standard interfaces, served on every exported object and its parents.
        let sender = msg.sender
        if iface == ObjectServer.introspectable || (iface == nil && member == "Introspect") {
            guard member == "Introspect" else { return unknownMethod(msg, member) }
            let children = childNodes(of: path, visibleTo: sender)
            // Another peer's object is answered exactly as a missing one: a caller must
            // not learn that another's object exists (nor, by watching paths appear,
            // when it gets its fixes).
            if let obj = objects[path], !obj.visible(to: sender), children.isEmpty { return unknownObject(msg, path) }
            guard objects[path] != nil || !children.isEmpty else { return unknownObject(msg, path) }
            if check("") { call("s").reply([.string(introspectionXML(for: path, caller: sender))]) }
            return true
        }
        if iface == ObjectServer.peer || (iface == nil && (member == "Ping" || member == "GetMachineId")) {
            switch member {
            case "Ping": if check("") { call("").reply() }
            case "GetMachineId": if check("") { call("s").reply([.string(machineID())]) }
            default: return unknownMethod(msg, member)
            }
            return true
        }
        guard let obj = objects[path] else { return unknownObject(msg, path) }
        guard obj.visible(to: sender) else { return unknownObject(msg, path) }   // as missing: see Introspect
        if iface == ObjectServer.properties {
            handleProperties(msg, member: member, object: obj)
            return true
        }
        // The named interface, or (without a name) the first that has the member.
        let found: BoundInterface.BoundMethod?
        if let iface {
            guard let bound = obj.interfaces.first(where: { $0.description.name == iface }) else {
                call("").fail(DBusError(DBusError.unknownInterfaceName, "No such interface '\(iface)' at \(path)"))
                return true
            }
            found = bound.method(member)
        } else {
            found = obj.interfaces.lazy.compactMap { $0.method(member) }.first
        }
        guard let method = found else { return unknownMethod(msg, member) }
        if check(method.inSignature) { method.call(call(method.outSignature)) }
        return true
    }

    private func handleProperties(_ msg: Message, member: String, object: Exported) {
        let args = msg.arguments()
        let sig = msg.signature
        func fail(_ e: DBusError) { MethodCall(message: msg, arguments: args, bus: bus, outSignature: "").fail(e) }
        func find(_ ifaceName: String) -> BoundInterface? {
            object.interfaces.first { $0.description.name == ifaceName }
        }
        switch member {
        case "Get":
            guard sig == "ss", case .string(let i) = args[0], case .string(let p) = args[1] else {
                return fail(.invalidArgs("Expected signature 'ss' for Get, got '\(sig)'"))
            }
            guard let prop = (i.isEmpty ? object.interfaces.lazy.compactMap { $0.property(p) }.first : find(i)?.property(p))
            else {
                return fail(DBusError(DBusError.unknownPropertyName, "No such property '\(p)' on '\(i)'"))
            }
            let call = MethodCall(message: msg, arguments: args, bus: bus, outSignature: "v")
            if let value = object.constant?.values[p] { return call.reply([.variant(value)]) }
            prop.value(for: msg.sender) { value in
                guard let value else {
                    return call.fail(DBusError(DBusError.unknownPropertyName, "No such property '\(p)' on '\(i)'"))
                }
                call.reply([.variant(value)])
            }
        case "GetAll":
            guard sig == "s", case .string(let i) = args[0] else {
                return fail(.invalidArgs("Expected signature 's' for GetAll, got '\(sig)'"))
            }
            if let constant = object.constant, find(i) != nil {
                // A location object's GetAll, the hot path: one reply marshalled per fix, copied.
                let call = MethodCall(message: msg, arguments: args, bus: bus, outSignature: "a{sv}")
                if let template = constant.getAllReply { return call.reply(copying: template) }
                return call.reply([constant.all])
            }
            let bound = find(i)
            if bound == nil && !i.isEmpty && !ObjectServer.standardInterfaces.contains(where: { $0.name == i }) {
                return fail(DBusError(DBusError.unknownInterfaceName, "No such interface '\(i)'"))
            }
            let call = MethodCall(message: msg, arguments: args, bus: bus, outSignature: "a{sv}")
            guard let bound, bound.hasCallerProperties else {
                // Every value at hand.
                var all: [String: DBusValue] = [:]
                for name in bound?.propertyOrder ?? [] { all[name] = bound?.property(name)?.get() }
                return call.reply([.vardict(all)])
            }
            // Replies once every value is in; values for the caller may come later.
            final class Gathering { var all: [String: DBusValue] = [:]; var left = 0 }
            let g = Gathering()
            let props = bound.propertyOrder.compactMap { name in bound.property(name).map { (name, $0) } }
            g.left = props.count + 1
            func done() {
                g.left -= 1
                if g.left == 0 { call.reply([.vardict(g.all)]) }
            }
            for (name, prop) in props {
                prop.value(for: msg.sender) { value in
                    g.all[name] = value
                    done()
                }
            }
            done()
        case "Set":
            guard sig == "ssv", case .string(let i) = args[0], case .string(let p) = args[1],
                  case .variant(let value) = args[2] else {
                return fail(.invalidArgs("Expected signature 'ssv' for Set, got '\(sig)'"))
            }
            guard let prop = find(i)?.property(p) else {
                return fail(DBusError(DBusError.unknownPropertyName, "No such property '\(p)' on '\(i)'"))
            }
            guard prop.isWritable else {
                return fail(DBusError(DBusError.propertyReadOnlyName, "Property '\(p)' is read-only"))
            }
            guard value.signature == prop.signature else {
                return fail(.invalidArgs("Property '\(p)' has type '\(prop.signature)', got '\(value.signature)'"))
            }
            let call = MethodCall(message: msg, arguments: args, bus: bus, outSignature: "")
            prop.set(call, value)
        default:
            _ = unknownMethod(msg, member)
        }
    }

    private func unknownMethod(_ msg: Message, _ member: String) -> Bool {
        MethodCall(message: msg, arguments: [], bus: bus, outSignature: "").fail(
            DBusError(DBusError.unknownMethodName,
                      "Unknown method '\(member)' on interface '\(msg.interface ?? "(none)")' with signature '\(msg.signature)'"))
        return true
    }

    private func unknownObject(_ msg: Message, _ path: String) -> Bool {
        MethodCall(message: msg, arguments: [], bus: bus, outSignature: "").fail(
            DBusError(DBusError.unknownObjectName, "No such object path '\(path)'"))
        return true
    }

    private func machineID() -> String {
        localMachineID() ?? String(repeating: "0", count: 32)
    }
}
