/// Objects whose properties are fixed when they are exported
/// (`ObjectServer.export(constant:of:at:owner:)`): read-only, no methods.

/// An interface of read-only properties and no methods, bound once for every
/// object exported with it: what dispatch needs of it is built here, not per object.
public final class ConstantInterface {
    let bound: BoundInterface

    /// `declared` must have no methods and no writable property.
    public init(_ declared: InterfaceDescription) {
        precondition(declared.methods.isEmpty, "a constant interface has no methods: \(declared.name)")
        precondition(declared.properties.allSatisfy { $0.access == .read }, "a constant interface is read-only: \(declared.name)")
        var properties: [String: InterfaceShape.Property] = [:]
        for p in declared.properties {
            // The values come from the object (`ConstantValues`), never from here.
            properties[p.name] = .init(signature: p.signature, get: { _ in nil }, set: nil, getForCaller: nil)
        }
        bound = BoundInterface(InterfaceShape(description: declared, methods: [:], properties: properties), nil)
    }
}

/// The property values of constant objects, with the `GetAll` reply value built
/// once: objects showing the same values share one of these.
public final class ConstantValues {
    let values: [String: DBusValue]
    /// `values` as the `a{sv}` that `GetAll` returns.
    let all: DBusValue

    /// The `GetAll` reply, marshalled at the first `GetAll` and copied for every
    /// later one (all clients of one fix read the same values); nil if it could not be built.
    private(set) lazy var getAllReply: Message? = try? Message.methodReturnTemplate([all])

    public init(_ values: [String: DBusValue]) {
        self.values = values
        all = .vardict(values)
    }
}
