import GeoCore
import GeoDBus
import GeoConsentAPI

/// One GeoClue client object (`/org/freedesktop/GeoClue2/Client/N`): what its
/// owner set, whether it is started, and its location objects. Exported for
/// its owner alone; the facade does everything that involves the cores.
final class GeoClueClientObject {
    let number: UInt32
    /// The unique name of the connection that made it: the only one that may use it.
    let owner: String
    let path: String
    /// Its session in the consent core (`Caller.clientSession`).
    let session: SessionID

    var distanceThreshold: UInt32 = 0
    var timeThreshold: UInt32 = 0
    var desktopID = ""
    var requestedLevel = GeoClueAccuracyLevel.defaultRequested
    /// Its `Start`: stopped, starting, active, or waiting for the user's return (GeoClueStart.swift).
    var start = ClientStart<MethodCall>()
    var active: Bool { start.isActive }
    /// The latest location object's path, `/` before the first fix.
    var location = GeoClueAPI.noLocation
    /// The number of the next location object.
    var nextLocation: UInt32 = 0
    /// Earlier location objects still served, oldest first (the facade's sweep
    /// removes them, `GeoClueFacade.retiredLifetime` after they were replaced).
    var retired: [String] = []
    /// Its `PropertiesChanged` for `Location` is queued (GeoClueFacade.sendNotices).
    var locationNoticeDue = false
    /// Who started it (its client session), for a start again when the user is back.
    var startedBy: Caller?

    init(number: UInt32, owner: String) {
        self.number = number
        self.owner = owner
        path = GeoClueAPI.clientPath(number)
        session = .clientObject(connection: owner, kind: GeoClueFacade.objectKind, number: number)
    }

    /// The filters its thresholds ask for.
    var updateOptions: UpdateOptions {
        UpdateOptions(distanceFilter: Double(distanceThreshold), minInterval: Double(timeThreshold))
    }

    /// `org.freedesktop.GeoClue2.Client`, bound by name to `GeoClueAPI.client`.
    static func interface(_ facade: GeoClueFacade) -> Interface<GeoClueClientObject> {
        Interface(
            GeoClueAPI.client,
            methods: [
                "Start": { [unowned facade] c, call in facade.start(c, call) },
                "Stop": { [unowned facade] c, call in facade.stop(c, call) },
            ],
            getters: [
                ClientProperty.location: { .objectPath($0.location) },
                ClientProperty.distanceThreshold: { .uint32($0.distanceThreshold) },
                ClientProperty.timeThreshold: { .uint32($0.timeThreshold) },
                ClientProperty.desktopID: { .string($0.desktopID) },
                ClientProperty.requestedAccuracyLevel: { .uint32($0.requestedLevel) },
                ClientProperty.active: { .bool($0.active) },
            ],
            setters: [
                ClientProperty.distanceThreshold: { [unowned facade] c, call, v in
                    facade.setThresholds(c, call, distance: v.uint32Value ?? 0, time: c.timeThreshold)
                },
                ClientProperty.timeThreshold: { [unowned facade] c, call, v in
                    facade.setThresholds(c, call, distance: c.distanceThreshold, time: v.uint32Value ?? 0)
                },
                ClientProperty.desktopID: { [unowned facade] c, call, v in facade.setDesktopID(c, call, v.stringValue ?? "") },
                ClientProperty.requestedAccuracyLevel: { [unowned facade] c, call, v in
                    facade.setRequestedLevel(c, call, v.uint32Value ?? 0)
                },
            ])
    }
}

/// Location objects (`…/Client/N/Location/M`), one per delivered fix and
/// client: never changed, exported with their values (`ObjectServer.export(constant:…)`),
/// removed a while after the next one arrives.
enum GeoClueLocationObject {
    /// `org.freedesktop.GeoClue2.Location`: read-only values.
    static let interface = ConstantInterface(GeoClueAPI.location)
}
