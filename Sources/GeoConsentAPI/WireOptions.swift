import GeoDBus
import GeoCore

/// The `a{sv}` options of docs/dbus-api.md, encoder beside decoder. Clients send
/// only keys they set; the daemon decodes: unknown keys are ignored, a known key
/// of the wrong type (or a value out of range) is `InvalidArgs`.
public enum OptionDictionary {
    /// The longest string, in bytes, each argument may be (docs/dbus-api.md
    /// "Limits"): what a caller sends is kept while its call waits and shown in
    /// prompts, so none of it may be as large as a message can be.
    public enum MaxBytes {
        public static let reason = 1024
        public static let appName = 256
        public static let parentWindow = 256
        /// An app id (`ResetConsent`), as long as an identity may be.
        public static let appID = 4096
        /// An agent's object path (`RegisterAgent`, `UnregisterAgent`).
        public static let agentPath = 1024
    }

    /// `s`, refused when longer than `max` bytes.
    private static func bounded(_ s: String, _ what: String, max: Int) throws -> String {
        guard s.utf8.count <= max else {
            throw DBusError.invalidArgs("\(what) is \(s.utf8.count) bytes long, more than the \(max) allowed")
        }
        return s
    }

    /// `ResetConsent`'s app id.
    public static func appID(_ v: DBusValue) throws -> String {
        try bounded(v.stringValue ?? "", "app_id", max: MaxBytes.appID)
    }

    /// `RegisterAgent`'s and `UnregisterAgent`'s object path.
    public static func agentPath(_ v: DBusValue) throws -> String {
        try bounded(v.stringValue ?? "", "the agent's object path", max: MaxBytes.agentPath)
    }

    private static func dict(_ v: DBusValue) throws -> [String: DBusValue] {
        guard let d = v.vardictValue else { throw DBusError.invalidArgs("options must be a{sv}") }
        return d
    }

    private static func string(_ d: [String: DBusValue], _ key: String, max: Int) throws -> String? {
        guard let v = d[key] else { return nil }
        guard case .string(let s) = v else { throw DBusError.invalidArgs("option '\(key)' must be of type s, got \(v.signature)") }
        return try bounded(s, "option '\(key)'", max: max)
    }

    /// A finite `d` option: seconds for the timing keys, metres for the distance filter.
    private static func number(_ d: [String: DBusValue], _ key: String, allowZero: Bool) throws -> Double? {
        guard let v = d[key] else { return nil }
        guard case .double(let x) = v else { throw DBusError.invalidArgs("option '\(key)' must be of type d, got \(v.signature)") }
        guard x.isFinite, allowZero ? x >= 0 : x > 0 else {
            throw DBusError.invalidArgs("option '\(key)' must be a finite number \(allowZero ? ">= 0" : "> 0")")
        }
        return x
    }

    // MARK: Request*Authorization

    /// `accuracy` always; `reason`, `app-name` and `parent-window` when not empty.
    public static func encode(_ o: AuthOptions) -> DBusValue {
        var d: [String: DBusValue] = ["accuracy": .string(o.accuracy.rawValue)]
        if !o.reason.isEmpty { d["reason"] = .string(o.reason) }
        if !o.appName.isEmpty { d["app-name"] = .string(o.appName) }
        if !o.parentWindow.isEmpty { d["parent-window"] = .string(o.parentWindow) }
        return .vardict(d)
    }

    /// `Request*Authorization` options.
    public static func decodeAuth(_ v: DBusValue) throws -> AuthOptions {
        let d = try dict(v)
        var o = AuthOptions()
        if let r = try string(d, "reason", max: MaxBytes.reason) { o.reason = r }
        if let a = try string(d, "accuracy", max: 16) {
            guard let acc = Accuracy(rawValue: a) else {
                throw DBusError.invalidArgs("option 'accuracy' must be 'full' or 'reduced'")
            }
            o.accuracy = acc
        }
        if let n = try string(d, "app-name", max: MaxBytes.appName) { o.appName = n }
        if let w = try string(d, "parent-window", max: MaxBytes.parentWindow) { o.parentWindow = w }
        return o
    }

    // MARK: RequestLocation

    /// Both keys, always.
    public static func encode(_ o: LocationOptions) -> DBusValue {
        .vardict(["max-age": .double(o.maxAge), "timeout": .double(o.timeout)])
    }

    /// `RequestLocation` options; a timeout above a day is cut to a day.
    public static func decodeLocation(_ v: DBusValue) throws -> LocationOptions {
        let d = try dict(v)
        var o = LocationOptions()
        if let x = try number(d, "max-age", allowZero: true) { o.maxAge = x }
        if let x = try number(d, "timeout", allowZero: false) { o.timeout = min(x, 86_400) }
        return o
    }

    // MARK: StartUpdates

    /// Both keys, always.
    public static func encode(_ o: UpdateOptions) -> DBusValue {
        .vardict(["distance-filter": .double(o.distanceFilter), "min-interval": .double(o.minInterval)])
    }

    /// `StartUpdates` options.
    public static func decodeUpdates(_ v: DBusValue) throws -> UpdateOptions {
        let d = try dict(v)
        var o = UpdateOptions()
        if let x = try number(d, "distance-filter", allowZero: true) { o.distanceFilter = x }
        if let x = try number(d, "min-interval", allowZero: true) { o.minInterval = x }
        return o
    }

    // MARK: ResetConsent

    /// `uid` when given: root resets another user's consent.
    public static func encodeReset(uid: UInt32?) -> DBusValue {
        .vardict(uid.map { ["uid": .uint32($0)] } ?? [:])
    }

    /// `ResetConsent` options: the optional `uid`.
    public static func decodeReset(_ v: DBusValue) throws -> UInt32? {
        try uid(try dict(v))
    }

    private static func uid(_ d: [String: DBusValue]) throws -> UInt32? {
        guard let u = d["uid"] else { return nil }
        guard case .uint32(let uid) = u else { throw DBusError.invalidArgs("option 'uid' must be of type u, got \(u.signature)") }
        return uid
    }

    // MARK: SetConsent

    /// The keys given: `decision`, `accuracy`, and `uid` for root.
    public static func encodeSetConsent(decision: UserDecision?, accuracy: Accuracy?, uid: UInt32?) -> DBusValue {
        var d: [String: DBusValue] = [:]
        if let decision { d["decision"] = .string(decision.rawValue) }
        if let accuracy { d["accuracy"] = .string(accuracy.rawValue) }
        if let uid { d["uid"] = .uint32(uid) }
        return .vardict(d)
    }

    /// `SetConsent` options: what to decide (nil keeps it), at what accuracy (nil keeps it), for which uid.
    public static func decodeSetConsent(_ v: DBusValue) throws -> (decision: UserDecision?, accuracy: Accuracy?, uid: UInt32?) {
        let d = try dict(v)
        var decision: UserDecision?
        if let s = try string(d, "decision", max: 16) {
            guard let u = UserDecision(rawValue: s) else {
                throw DBusError.invalidArgs("option 'decision' must be 'never', 'ask' or 'while-using'")
            }
            decision = u
        }
        var accuracy: Accuracy?
        if let s = try string(d, "accuracy", max: 16) {
            guard let a = Accuracy(rawValue: s) else { throw DBusError.invalidArgs("option 'accuracy' must be 'full' or 'reduced'") }
            accuracy = a
        }
        guard decision != nil || accuracy != nil else {
            throw DBusError.invalidArgs("SetConsent needs a 'decision' or an 'accuracy'")
        }
        return (decision, accuracy, try uid(d))
    }

    // MARK: RegisterAgentWithOptions

    /// At most this many features, each at most this long (a later contract
    /// may name more than this one knows; none needs to be long).
    public static let maxFeatures = 16
    public static let maxFeatureBytes = 64

    /// `features` when given.
    public static func encodeAgentOptions(features: [String]) -> DBusValue {
        .vardict(["features": .array(element: "s", features.map { .string($0) })])
    }

    /// `RegisterAgentWithOptions` options: the features the agent names; unknown ones are ignored.
    public static func decodeAgentOptions(_ v: DBusValue) throws -> AgentFeatures {
        let d = try dict(v)
        guard let f = d["features"] else { return [] }
        guard case .array(let element, let items) = f, element == "s" else {
            throw DBusError.invalidArgs("option 'features' must be of type as, got \(f.signature)")
        }
        guard items.count <= maxFeatures else {
            throw DBusError.invalidArgs("option 'features' names \(items.count) features, more than the \(maxFeatures) allowed")
        }
        let words = try items.map { try bounded($0.stringValue ?? "", "a feature", max: maxFeatureBytes) }
        return AgentFeatures(words: words)
    }
}
