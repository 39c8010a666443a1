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
    public let name: String
    public let methods: [MethodEntry<Object>]
    public let signals: [SignalEntry]
    public let properties: [PropertyEntry<Object>]
    /// What dispatch needs of the interface whatever the object, made once
    /// here: an object exported with it gets a reference to it and to itself
    /// (`bind`), not tables and closures of its own.
    let shape: InterfaceShape

    public init(_ name: String, methods: [MethodEntry<Object>] = [], signals: [SignalEntry] = [],
                properties: [PropertyEntry<Object>] = []) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
        shape = Self.shape(name, methods, signals, properties)
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
        shape = Self.shape(name, methods, signals, properties)
    }

    /// Names and types only.
    public var description: InterfaceDescription { shape.description }

    /// The interface with its handlers bound to `object` (held weakly).
    func bind(_ object: Object) -> BoundInterface { BoundInterface(shape, object) }

    /// The tables of `bind`, with the object's type erased: each handler is
    /// only ever given an object bound with this interface, an `Object`.
    private static func shape(_ name: String, _ methods: [MethodEntry<Object>], _ signals: [SignalEntry],
                              _ properties: [PropertyEntry<Object>]) -> InterfaceShape {
        let description = InterfaceDescription(
            name: name,
            methods: methods.map { .init(name: $0.name, inArgs: $0.inArgs, outArgs: $0.outArgs) },
            signals: signals.map { .init(name: $0.name, args: $0.args) },
            properties: properties.map {
                .init(name: $0.name, signature: $0.signature,
                      access: $0.set == nil ? .read : .readwrite, emitsChanged: $0.emitsChanged)
            })
        var methodTable: [String: InterfaceShape.Method] = [:]
        for m in methods {
            let h = m.handler
            methodTable[m.name] = .init(inSignature: m.inArgs.signature, outSignature: m.outArgs.signature,
                                        call: { object, call in h(unsafeDowncast(object, to: Object.self), call) })
        }
        var propertyTable: [String: InterfaceShape.Property] = [:]
        for p in properties {
            let get = p.get
            propertyTable[p.name] = .init(
                signature: p.signature,
                get: { get(unsafeDowncast($0, to: Object.self)) },
                set: p.set.map { s in { object, call, value in s(unsafeDowncast(object, to: Object.self), call, value) } },
                getForCaller: p.getForCaller.map { g in { object, sender, done in
                    g(unsafeDowncast(object, to: Object.self), sender) { done($0) }
                } })
        }
        return InterfaceShape(description: description, methods: methodTable, properties: propertyTable)
    }
}

/// An interface's tables for dispatch, whatever the object: made once per
/// interface (`Interface.shape`, `ConstantInterface`) and shared by every
/// object bound with it.
final class InterfaceShape {
    struct Method {
        var inSignature: String
        var outSignature: String
        var call: (AnyObject, MethodCall) -> Void
    }
    struct Property {
        var signature: String
        /// nil: the value is not the object's to give (a constant object's).
        var get: (AnyObject) -> DBusValue?
        var set: ((AnyObject, MethodCall, DBusValue) -> Void)?
        var getForCaller: ((AnyObject, String, @escaping (DBusValue?) -> Void) -> Void)?
    }
    let description: InterfaceDescription
    let methods: [String: Method]
    let properties: [String: Property]
    let propertyOrder: [String]
    /// Some property's value depends on the reader (`GetAll` may then answer later).
    let hasCallerProperties: Bool

    init(description: InterfaceDescription, methods: [String: Method], properties: [String: Property]) {
        self.description = description
        self.methods = methods
        self.properties = properties
        propertyOrder = description.properties.map { $0.name }
        hasCallerProperties = properties.values.contains { $0.getForCaller != nil }
    }
}

/// An interface whose handlers are bound to their object: what dispatch uses.
struct BoundInterface {
    /// A method of the interface with its object: what dispatch calls.
    struct BoundMethod {
        let entry: InterfaceShape.Method
        let object: AnyObject?
        var inSignature: String { entry.inSignature }
        var outSignature: String { entry.outSignature }
        func call(_ call: MethodCall) {
            guard let object else { return call.fail(.failed("object gone")) }
            entry.call(object, call)
        }
    }
    /// A property of the interface with its object.
    struct BoundProperty {
        let entry: InterfaceShape.Property
        let object: AnyObject?
        var signature: String { entry.signature }
        var isWritable: Bool { entry.set != nil }
        /// The value; nil: none (the object is gone, or the value is not the object's to give).
        func get() -> DBusValue? { object.flatMap(entry.get) }
        func set(_ call: MethodCall, _ value: DBusValue) {
            guard let object, let set = entry.set else { return call.fail(.failed("object gone")) }
            set(object, call, value)
        }
        /// The value for `sender`, now or later; nil: none (the object is gone).
        func value(for sender: String?, _ done: @escaping (DBusValue?) -> Void) {
            guard let getForCaller = entry.getForCaller, let sender else { return done(get()) }
            guard let object else { return done(nil) }
            getForCaller(object, sender, done)
        }
    }
    let shape: InterfaceShape
    /// Held weakly: an object gone answers "object gone" (methods) or no value (properties).
    private(set) weak var object: AnyObject?

    init(_ shape: InterfaceShape, _ object: AnyObject?) {
        self.shape = shape
        self.object = object
    }

    var description: InterfaceDescription { shape.description }
    var propertyOrder: [String] { shape.propertyOrder }
    var hasCallerProperties: Bool { shape.hasCallerProperties }

    /// The method `name`, with the object (looked up at dispatch).
    func method(_ name: String) -> BoundMethod? { shape.methods[name].map { BoundMethod(entry: $0, object: object) } }

    /// The property `name`, with the object.
    func property(_ name: String) -> BoundProperty? { shape.properties[name].map { BoundProperty(entry: $0, object: object) } }
}
