import GeoCore
import GeoDBus
import GeoConsentAPI

/// The handlers of `org.geoconsent.GeoConsent1`, bound by name to the table
/// declared in `GeoConsentAPI.client`. Each one decodes its options (wrong
/// types: `InvalidArgs`), resolves the caller from bus credentials and hands
/// the request to the core.
extension Daemon {
    static let clientInterface = Interface<Daemon>(
        GeoConsentAPI.client,
        methods: [
            "RequestOneTimeAuthorization": { d, call in
                d.decoded(call, { try OptionDictionary.decodeAuth(call.arguments[0]) }) { d.client(call, .requestOneTime($0)) }
            },
            "RequestWhenInUseAuthorization": { d, call in
                d.decoded(call, { try OptionDictionary.decodeAuth(call.arguments[0]) }) { d.client(call, .requestWhenInUse($0)) }
            },
            "GetAuthorization": { d, call in d.client(call, .getAuthorization) },
            "RequestLocation": { d, call in
                d.decoded(call, { try OptionDictionary.decodeLocation(call.arguments[0]) }) { d.client(call, .requestLocation($0)) }
            },
            "StartUpdates": { d, call in
                d.decoded(call, { try OptionDictionary.decodeUpdates(call.arguments[0]) }) { d.client(call, .startUpdates($0)) }
            },
            "StopUpdates": { d, call in d.client(call, .stopUpdates) },
            "Revoke": { d, call in d.client(call, .revoke) },
            "RegisterAgent": { d, call in
                d.decoded(call, { try OptionDictionary.agentPath(call.arguments[0]) }) { d.management(call, .registerAgent(path: $0)) }
            },
            "UnregisterAgent": { d, call in
                d.decoded(call, { try OptionDictionary.agentPath(call.arguments[0]) }) { d.management(call, .unregisterAgent(path: $0)) }
            },
            "ListConsents": { d, call in d.management(call, .listConsents) },
            "ResetConsent": { d, call in
                d.decoded(call, { (try OptionDictionary.appID(call.arguments[0]), try OptionDictionary.decodeReset(call.arguments[1])) }) {
                    d.management(call, .resetConsent(appID: $0.0, uid: $0.1))
                }
            },
            "ListSessions": { d, call in d.management(call, .listSessions) },
            "ListSessionDetails": { d, call in d.management(call, .listSessionDetails) },
            "WatchSessions": { d, call in d.management(call, .watchSessions) },
        ],
        getters: [
            DaemonProperties.version: { _ in .string(geoconsentVersion) },
            DaemonProperties.enabled: { d in .bool(d.core.enabled) },
            DaemonProperties.gpsdConnected: { d in .bool(d.location.gpsdConnected) },
            DaemonProperties.inUse: { d in .bool(d.location.inUse) },
        ],
        setters: [
            DaemonProperties.enabled: { d, call, value in d.management(call, .setEnabled(value.boolValue ?? false)) },
        ])

    /// Decodes options; a wrong type is answered with `InvalidArgs` before anything else happens.
    func decoded<T>(_ call: MethodCall, _ decode: () throws -> T, then body: (T) -> Void) {
        do {
            body(try decode())
        } catch let e as DBusError {
            call.fail(e)
        } catch {
            call.fail(.invalidArgs("\(error)"))
        }
    }

    /// A client request: starts the caller's session if it has none.
    func client(_ call: MethodCall, _ request: ClientRequest) {
        // `request` holds what was decoded; a call that waits keeps no more.
        call.releaseArguments()
        withCaller(call) { [weak self] caller in
            guard let self else { return }
            self.feed(.client(self.hold(call), caller, request))
        }
    }

    func management(_ call: MethodCall, _ request: ManagementRequest) {
        call.releaseArguments()
        withCaller(call) { [weak self] caller in
            guard let self else { return }
            self.feed(.management(self.hold(call), caller, request))
        }
    }
}
