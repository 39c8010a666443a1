import GeoDBus
import GeoCore
import GeoConsentAPI

// The types of the client library's API that other modules of geoconsent define,
// named here so that an app imports GeoConsentClient and nothing else. They are
// aliases, not copies: a value the library returns is the very value the API
// module decoded. (`GeoConsentAPI::` names the module, whose enum of the same name
// would otherwise be found first.)

/// Which bus to connect to: `.system` (the default), `.session`, or `.address("unix:path=…")`.
public typealias BusAddress = GeoDBus.BusAddress
/// A D-Bus value: `Location.raw`, and the arguments of `GeoConsentClient.call`.
public typealias DBusValue = GeoDBus.DBusValue
/// What a failed call throws: the D-Bus error name (docs/dbus-api.md "Errors") and its message.
public typealias DBusError = GeoDBus.DBusError

/// The sanitizer for what an agent or app shows of a caller: control, format and
/// bidirectional characters written out as `\uXXXX` (the daemon applies the same
/// to the identities it reports; agents apply it to every field they display).
public typealias DisplayText = GeoCore.DisplayText

/// Authorization status, numbered as CLAuthorizationStatus.
public typealias AuthorizationStatus = GeoCore.AuthorizationStatus
/// `full`, or `reduced` (a grid cell of a few kilometres).
public typealias Accuracy = GeoCore.Accuracy
/// Options of a request for authorization: the reason shown, the accuracy asked for, the app's name and window.
public typealias AuthOptions = GeoCore.AuthOptions
/// `GetAuthorization`'s answer: status, whether the grant is temporary, its accuracy, the app-id.
public typealias AuthorizationInfo = GeoCore.AuthorizationInfo
/// One position fix: latitude, longitude and what else the receiver reported.
public typealias Fix = GeoCore.Fix
/// 2D or 3D.
public typealias FixMode = GeoCore.FixMode
/// Where a fix came from: `gps`, `wifi` or `static` (the location dictionary's `source`).
public typealias PositionSource = GeoCore.PositionSource
/// One app's stored consent.
public typealias ConsentRecord = GeoCore.ConsentRecord
/// The stored answer to the standard prompt.
public typealias StoredDecision = GeoCore.StoredDecision
/// What a user decides about an app in a settings window (`setConsent`).
public typealias UserDecision = GeoCore.UserDecision
/// A live session, as `ListSessions` shows it.
public typealias SessionInfo = GeoCore.SessionInfo
/// Which prompt an agent is asked to show.
public typealias PromptKind = GeoCore.PromptKind
/// An agent's answer to a prompt.
public typealias AgentDecision = GeoCore.AgentDecision
/// What an app id rests on (a prompt's `identity`): a verified Flatpak or
/// Snap, an unverified Flatpak, a systemd unit, or an executable path.
public typealias IdentityKind = GeoCore.IdentityKind

/// A fix as the daemon sends it, with the accuracy it was granted at.
public typealias Location = GeoConsentAPI::Location
/// The daemon's global properties.
public typealias DaemonStatus = GeoConsentAPI::DaemonStatus
/// One stored consent, as `ListConsents` returns it.
public typealias StoredConsent = GeoConsentAPI::StoredConsent
/// What an agent is asked to show (`Agent.Confirm`).
public typealias AgentPrompt = GeoConsentAPI::AgentPrompt
