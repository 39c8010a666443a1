/// D-Bus interfaces declared once, as tables. Dispatch, the `Introspect` reply
/// and the committed introspection XML are all derived from these values.

/// A named argument of a method or signal.
public struct Arg: Sendable {
    public var name: String
    public var signature: String
    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }
}

extension [Arg] {
    /// The arguments' types in order: a method's in- or out-signature.
    var signature: String { map(\.signature).joined() }
}

/// Property access as introspection spells it.
public enum PropertyAccess: String, Sendable {
    case read
    case readwrite
}

/// The `org.freedesktop.DBus.Property.EmitsChangedSignal` annotation.
public enum EmitsChanged: String, Sendable {
    case yes = "true"
    case invalidates
    case const
    case no = "false"
}

/// The names and types of an interface, without behaviour: what introspection needs.
public struct InterfaceDescription: Sendable {
    public struct Method: Sendable {
        public var name: String
        public var inArgs: [Arg]
        public var outArgs: [Arg]
        public init(name: String, inArgs: [Arg], outArgs: [Arg]) {
            self.name = name
            self.inArgs = inArgs
            self.outArgs = outArgs
        }
        public var inSignature: String { inArgs.signature }
        public var outSignature: String { outArgs.signature }
    }
    public struct Signal: Sendable {
        public var name: String
        public var args: [Arg]
        public init(name: String, args: [Arg]) {
            self.name = name
            self.args = args
        }
    }
    public struct Property: Sendable {
        public var name: String
        public var signature: String
        public var access: PropertyAccess
        public var emitsChanged: EmitsChanged
        public init(name: String, signature: String, access: PropertyAccess, emitsChanged: EmitsChanged) {
            self.name = name
            self.signature = signature
            self.access = access
            self.emitsChanged = emitsChanged
        }
    }
    public var name: String
    public var methods: [Method]
    public var signals: [Signal]
    public var properties: [Property]
    public init(name: String, methods: [Method], signals: [Signal], properties: [Property]) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
    }
}

/// A method of `Object`'s interface: its signature and its handler.
public struct MethodEntry<Object: AnyObject> {
    public var name: String
    public var inArgs: [Arg]
    public var outArgs: [Arg]
    public var handler: (Object, MethodCall) -> Void

    public init(_ name: String, in inArgs: [Arg] = [], out outArgs: [Arg] = [],
                handler: @escaping (Object, MethodCall) -> Void) {
        self.name = name
        self.inArgs = inArgs
        self.outArgs = outArgs
        self.handler = handler
    }
}

/// A signal of an interface.
public struct SignalEntry {
    public var name: String
    public var args: [Arg]
    public init(_ name: String, _ args: [Arg] = []) {
        self.name = name
        self.args = args
    }
}

/// A property whose value depends on who reads it: given the reader's unique
/// name, it answers (now or later: finding out who that is may take a bus
/// round trip).
public typealias CallerGetter<Object> = (Object, String, @escaping (DBusValue) -> Void) -> Void

/// A property of `Object`'s interface. `set` answers the `Set` call itself
/// (`reply()` or `fail(_:)`), now or later: checking the caller may take a bus round trip.
/// With `getForCaller`, `Get` and `GetAll` use it instead of `get`.
public struct PropertyEntry<Object: AnyObject> {
    public var name: String
    public var signature: String
    public var emitsChanged: EmitsChanged
    public var get: (Object) -> DBusValue
    public var set: ((Object, MethodCall, DBusValue) -> Void)?
    public var getForCaller: CallerGetter<Object>?

    public init(_ name: String, _ signature: String, emitsChanged: EmitsChanged = .yes,
                get: @escaping (Object) -> DBusValue,
                set: ((Object, MethodCall, DBusValue) -> Void)? = nil,
                getForCaller: CallerGetter<Object>? = nil) {
        self.name = name
        self.signature = signature
        self.emitsChanged = emitsChanged
        self.get = get
        self.set = set
        self.getForCaller = getForCaller
    }
}

/// One interface of `Object`, declared as a table.
public struct Interface<Object: AnyObject> {
    public var name: String
    public var methods: [MethodEntry<Object>]
    public var signals: [SignalEntry]
    public var properties: [PropertyEntry<Object>]

    public init(_ name: String, methods: [MethodEntry<Object>] = [], signals: [SignalEntry] = [],
                properties: [PropertyEntry<Object>] = []) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
    }

    /// Binds handlers, by name, to an interface declared elsewhere as a description
    /// (so that one declaration serves every party that implements or calls it).
    /// Every method and property of `declared` must have a handler: a missing one
    /// is a programming error caught at start-up.
    /// `callerGetters` are for properties whose value depends on the reader
    /// (`PropertyEntry.getForCaller`); they still need a getter, for no reader.
    public init(_ declared: InterfaceDescription,
                methods handlers: [String: (Object, MethodCall) -> Void],
                getters: [String: (Object) -> DBusValue] = [:],
                setters: [String: (Object, MethodCall, DBusValue) -> Void] = [:],
                callerGetters: [String: CallerGetter<Object>] = [:]) {
        self.name = declared.name
        self.signals = declared.signals.map { SignalEntry($0.name, $0.args) }
        self.methods = declared.methods.map { m in
            guard let h = handlers[m.name] else { preconditionFailure("no handler for \(declared.name).\(m.name)") }
            return MethodEntry(m.name, in: m.inArgs, out: m.outArgs, handler: h)
        }
        self.properties = declared.properties.map { p in
            guard let g = getters[p.name] else { preconditionFailure("no getter for \(declared.name).\(p.name)") }
            let setter = setters[p.name]
            precondition((setter != nil) == (p.access == .readwrite), "setter of \(p.name) does not match its access")
            return PropertyEntry(p.name, p.signature, emitsChanged: p.emitsChanged, get: g, set: setter,
                                 getForCaller: callerGetters[p.name])
        }
        precondition(Set(handlers.keys).isSubset(of: declared.methods.map(\.name)), "handler for an undeclared method")
        precondition(Set(callerGetters.keys).isSubset(of: declared.properties.map(\.name)), "getter of an undeclared property")
    }

    /// Names and types only.
    public var description: InterfaceDescription {
        InterfaceDescription(
            name: name,
            methods: methods.map { .init(name: $0.name, inArgs: $0.inArgs, outArgs: $0.outArgs) },
            signals: signals.map { .init(name: $0.name, args: $0.args) },
            properties: properties.map {
                .init(name: $0.name, signature: $0.signature,
                      access: $0.set == nil ? .read : .readwrite, emitsChanged: $0.emitsChanged)
            })
    }

    /// The interface with its handlers bound to `object` (held weakly).
    func bind(_ object: Object) -> BoundInterface {
        var methodTable: [String: BoundInterface.BoundMethod] = [:]
        for m in methods {
            let h = m.handler
            methodTable[m.name] = .init(
                inSignature: m.inArgs.signature,
                outSignature: m.outArgs.signature,
                call: { [weak object] call in
                    guard let object else { return call.fail(.failed("object gone")) }
                    h(object, call)
                })
        }
        var propertyTable: [String: BoundInterface.BoundProperty] = [:]
        for p in properties {
            let get = p.get, set = p.set
            propertyTable[p.name] = .init(
                signature: p.signature,
                get: { [weak object] in object.map(get) },
                set: set.map { s in { [weak object] call, value in
                    guard let object else { return call.fail(.failed("object gone")) }
                    s(object, call, value)
                } },
                getForCaller: p.getForCaller.map { g in { [weak object] sender, done in
                    guard let object else { return done(nil) }
                    g(object, sender) { done($0) }
                } })
        }
        return BoundInterface(description: description, methods: methodTable,
                              properties: propertyTable, propertyOrder: properties.map(\.name),
                              hasCallerProperties: properties.contains { $0.getForCaller != nil })
    }
}

/// An interface whose handlers are bound to their object: what dispatch uses.
struct BoundInterface {
    struct BoundMethod {
        var inSignature: String
        var outSignature: String
        var call: (MethodCall) -> Void
    }
    struct BoundProperty {
        var signature: String
        var get: () -> DBusValue?
        var set: ((MethodCall, DBusValue) -> Void)?
        /// The value for the reader (its unique name); nil: the object is gone.
        var getForCaller: ((String, @escaping (DBusValue?) -> Void) -> Void)?

        /// The value for `sender`, now or later; nil: none (the object is gone).
        func value(for sender: String?, _ done: @escaping (DBusValue?) -> Void) {
            guard let getForCaller, let sender else { return done(get()) }
            getForCaller(sender, done)
        }
    }
    var description: InterfaceDescription
    var methods: [String: BoundMethod]
    var properties: [String: BoundProperty]
    var propertyOrder: [String]
    /// Some property's value depends on the reader (`GetAll` may then answer later).
    var hasCallerProperties: Bool
}
