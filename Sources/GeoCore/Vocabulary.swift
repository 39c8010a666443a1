/// Vocabulary shared by every module: the words of docs/dbus-api.md as Swift values.

/// How precise a grant is. `full` covers `reduced`.
public enum Accuracy: String, Sendable, CaseIterable {
    case full
    case reduced

    /// True when a grant or confirmation of `self` also covers `other`.
    public func covers(_ other: Accuracy) -> Bool {
        self == .full || other == .reduced
    }
}

/// Authorization status, numbered as CLAuthorizationStatus (docs/dbus-api.md "Status").
public enum AuthorizationStatus: UInt32, Sendable {
    case notDetermined = 0
    case restricted = 1
    case denied = 2
    case always = 3
    case whenInUse = 4

    /// The name docs/dbus-api.md gives the value (`not-determined`, …, `when-in-use`).
    public var name: String {
        switch self {
        case .notDetermined: return "not-determined"
        case .restricted: return "restricted"
        case .denied: return "denied"
        case .always: return "always"
        case .whenInUse: return "when-in-use"
        }
    }
}

/// The persisted answer to the standard prompt.
public enum StoredDecision: String, Sendable {
    case whenInUse = "when-in-use"
    case denied = "denied"
}

/// An app as the daemon knows it: a uid and an app-id resolved from bus credentials.
public struct AppKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let uid: UInt32
    public let appID: String
    /// Hashed once: every call looks its app up in several tables, and an app id
    /// is often a long path.
    private let hash: Int

    public init(uid: UInt32, appID: String) {
        self.uid = uid
        self.appID = appID
        var h = Hasher()
        h.combine(uid)
        h.combine(appID)
        hash = h.finalize()
    }

    public static func == (a: AppKey, b: AppKey) -> Bool {
        a.hash == b.hash && a.uid == b.uid && a.appID == b.appID
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(hash) }

    public static func < (a: AppKey, b: AppKey) -> Bool {
        a.uid != b.uid ? a.uid < b.uid : a.appID < b.appID
    }

    public var description: String { "\(uid):\(appID)" }
}

/// One app's persisted consent (docs/dbus-api.md "Consent record"). Times are microseconds
/// since the Unix epoch, 0 for never.
public struct ConsentRecord: Equatable, Sendable {
    public var decision: StoredDecision?
    public var decisionAccuracy: Accuracy?
    public var oneTimeApproved: Bool
    public var oneTimeAccuracy: Accuracy?
    public var decidedAt: UInt64
    public var lastUsed: UInt64
    /// What lapsed unused ("Decisions that lapse"), `;`-separated; "" for a
    /// record that never lapsed or stored a decision since.
    public var lapsed: String = ""
    /// When it lapsed; 0 when `lapsed` is empty.
    public var lapsedAt: UInt64 = 0

    /// It stores something that lapses unused: what gives location (`when-in-use`,
    /// the button's confirmation). A denial never lapses, as Android's
    /// auto-reset takes back permissions, never refusals.
    public var mayLapse: Bool { decision == .whenInUse || oneTimeApproved }

    public init(decision: StoredDecision? = nil, decisionAccuracy: Accuracy? = nil,
                oneTimeApproved: Bool = false, oneTimeAccuracy: Accuracy? = nil,
                decidedAt: UInt64 = 0, lastUsed: UInt64 = 0) {
        self.decision = decision
        self.decisionAccuracy = decisionAccuracy
        self.oneTimeApproved = oneTimeApproved
        self.oneTimeAccuracy = oneTimeAccuracy
        self.decidedAt = decidedAt
        self.lastUsed = lastUsed
    }
}

/// What a user decides about an app in a settings window (`SetConsent`'s
/// `decision`), as iOS's Settings offers it.
public enum UserDecision: String, Equatable, Sendable {
    /// No location: a stored denial, and the button's confirmation forgotten.
    case never
    /// Nothing stored: the app is asked again (as `ResetConsent`).
    case ask
    /// Location while the app is used: a stored `when-in-use`.
    case whileUsing = "while-using"
}

/// What the admin config says of one app (`[app "ID"] policy = …`).
public enum AppPolicy: String, Sendable {
    case always
    case restricted
}

/// The daemon's configuration (docs/dbus-api.md "Configuration"), with its defaults.
public struct Config: Equatable, Sendable {
    /// Seconds an agent has to answer a prompt.
    public var promptTimeout: Double = 60
    /// Seconds gpsd stays connected with no demand.
    public var gpsdLinger: Double = 10
    /// Seconds with no session, agent, prompt or pending write after which the
    /// daemon gives up its name and exits (the bus starts it again on the next
    /// call); 0: never.
    public var idleExit: Double = 60
    /// Seconds after a login session began during which a request of its
    /// user that needs a prompt waits for the user's agent to register,
    /// instead of `NoAgent` at once (`[daemon] agent-wait`): the agent starts
    /// with the session, maybe after the first app. 0: never wait.
    public var agentWait: Double = 20
    /// Days an app's stored decisions last without a grant (`[daemon]
    /// unused-lapse`, "Decisions that lapse"); 0: forever.
    public var unusedLapseDays: UInt32 = 90
    /// Cell size in metres for reduced accuracy.
    public var reducedGrid: Double = 5000
    /// Where consent records and `Enabled` are kept.
    public var stateDir: String = "/var/lib/geoconsent"
    /// The system applications directories where a prompt looks for the
    /// app's desktop entry (`[daemon] desktop-entries`), first found first.
    public var desktopEntries: [String] = ["/usr/local/share/applications", "/usr/share/applications"]
    /// App-ids allowed to register agents; empty means any unsandboxed caller.
    /// An entry admits only callers `grantsByName` holds for.
    public var agentAllow: [String] = []
    /// The highest uid of a system user (`[daemon] system-uid-max`): config that
    /// names an executable or unit id applies to processes of these uids only.
    public var systemUIDMax: UInt32 = 999
    /// Admin rulings per app-id.
    public var apps: [String: AppPolicy] = [:]

    /// What one user can make the daemon hold.
    public var limits = Limits()
    /// Where positions come from (`[sources]`).
    public var sources = SourcesConfig()
    /// Sections that front ends own: named before parsing (a section of no
    /// front end's is an error), their entries kept as written, in order, for
    /// the front end to read and check itself (`frontEndEntries`).
    public var frontEndSections: Set<String> = []
    public var frontEndEntries: [String: [ConfigEntry]] = [:]

    public init() {}
}

/// The sources of positions (`[sources]`, docs/dbus-api.md "Sources").
public struct SourcesConfig: Equatable, Sendable {
    /// Read a receiver through gpsd.
    public var gps = true
    /// Seconds GPS is waited for before another source answers, and that a
    /// GPS fix stays fresh (`SourceChoice`).
    public var gpsWait: Double = 3
    /// The static position file, in GeoClue 2.7's format; empty: none.
    public var staticFile = "/etc/geolocation"
    /// The ichnaea geolocate URL Wi-Fi lookups go to (https only); empty:
    /// Wi-Fi positioning off.
    public var wifiURL = ""
    /// A CA file the helper verifies the server with instead of the
    /// system's; empty: the system's.
    public var wifiCAFile = ""
    /// The network helper's socket (socket-activated).
    public var wifiHelper = "/run/geoconsent/wifi.sock"
    /// Seconds between lookups while updates run, and after a failed one.
    public var wifiInterval: Double = 30

    public init() {}
}

/// Bounds on what one uid can make the daemon hold (docs/dbus-api.md "Limits"),
/// so that no user can grow its memory, its state file or its pending calls
/// on the bus at the expense of the others. Root (uid 0) is bound by
/// `openPrompts` only: it can do anything to the daemon anyway.
public struct Limits: Equatable, Sendable {
    /// Sessions (client connections the daemon tracks) of one uid.
    public var sessionsPerUser = 64
    /// Taps of one uid waiting on prompts (one per session at most: `PromptPending`).
    public var waitingPerUser = 32
    /// Open prompts (agent calls in flight) of one uid.
    public var promptsPerUser = 4
    /// Stored consent records of one uid.
    public var consentsPerUser = 1024
    /// `RequestLocation` calls one session may have waiting for a fix.
    public var locationRequestsPerSession = 8
    /// Open prompts in all, below the bus's limit of pending replies per
    /// connection (128 on the system bus): agent calls of one uid must never
    /// make the bus refuse the daemon's calls to another uid's agent.
    public static let openPrompts = 64
    /// Connections of one uid that may watch its sessions (`WatchSessions`):
    /// a settings window or two, not one per app.
    public static let sessionWatchersPerUser = 8

    public init() {}
}

/// The version the daemon reports (`Version` property, `--version`).
public let geoconsentVersion = "0.1.0"

/// One `key = value` of a front end's section, where it was written: the front
/// end checks it and reports a bad one as `FILE:LINE: reason` (`fail`).
public struct ConfigEntry: Equatable, Sendable {
    public var key: String
    public var value: String
    public var file: String
    public var line: Int

    public init(key: String, value: String, file: String, line: Int) {
        self.key = key
        self.value = value
        self.file = file
        self.line = line
    }

    public func fail(_ reason: String) -> ConfigError { ConfigError(file: file, line: line, reason: reason) }

    /// The value as a `;`-separated list, each item trimmed, empty ones left out.
    public var listValue: [String] { ConfigParser.list(value) }
}
