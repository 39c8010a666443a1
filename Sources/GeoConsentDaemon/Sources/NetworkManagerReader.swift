import Glibc
import GeoCore
import GeoDBus

/// Reads the visible Wi-Fi access points from NetworkManager on the daemon's
/// bus: `GetDevices`, each device's `DeviceType`, a Wi-Fi device's
/// `GetAllAccessPoints`, and each access point's `HwAddress`, `Strength`,
/// `LastSeen` and `Ssid` (read only to honour a `_nomap` or `_optout` name;
/// never sent on). A scan is asked for (`RequestScan`) at most once each
/// `scanInterval`, and only here, while a lookup needs the list. One call at
/// a time, within the `NetworkManager` call budget.
final class NetworkManagerReader {
    static let busName = "org.freedesktop.NetworkManager"
    static let path = "/org/freedesktop/NetworkManager"
    static let deviceInterface = "org.freedesktop.NetworkManager.Device"
    static let wirelessInterface = "org.freedesktop.NetworkManager.Device.Wireless"
    static let accessPointInterface = "org.freedesktop.NetworkManager.AccessPoint"
    /// NetworkManager's `NM_DEVICE_TYPE_WIFI`.
    static let wifiDeviceType: UInt32 = 2

    /// Calls to NetworkManager: one at a time, as the daemon's own (no
    /// user's): a NetworkManager that does not answer holds 4 slots at most.
    static let purpose = CallBudgets.Purpose("NetworkManager", .init(perUID: 4, total: 4, guaranteed: 1))
    /// The uid the calls count against: none of a user's.
    static let daemonUID = UInt32.max
    static let callTimeout = 2.0
    /// Seconds between two scan requests, at least.
    static let scanInterval = 60.0
    /// Bounds on what NetworkManager's answers can make the daemon do.
    static let maxDevices = 8
    static let maxAccessPoints = 128
    /// Access points not seen in a scan for longer are left out.
    static let maxAgeSeconds = 300

    private let outgoing: OutgoingCalls
    private var lastScan: Double?
    /// The Wi-Fi devices found (ahead of a read, or by one), kept while the
    /// source is open (`forgetDevices` when it closes): a lookup reads their
    /// access points without asking for the devices again.
    private var wifiDevices: [String]?
    /// Bumped by `forgetDevices`: a search under way then keeps nothing.
    private var devicesGeneration = 0

    init(outgoing: OutgoingCalls) {
        self.outgoing = outgoing
    }

    /// The access points, strongest first, or why there are none.
    func read(_ done: @escaping (Result<[AccessPoint], WiFiReadError>) -> Void) {
        if let known = wifiDevices { return wireless(known, found: [], done) }
        readsWaiting.append(done)
        findDevices()
    }

    /// Finds the Wi-Fi devices ahead of the first read, while a grant holds
    /// and GPS is silent (`WiFiSource.warm`): a lookup then reads access
    /// points alone. Which devices there are is NetworkManager's own
    /// knowledge; nothing is scanned or sent.
    func findDevicesAhead() {
        if wifiDevices == nil { findDevices() }
    }

    /// Reads waiting for the devices being found, each told once they are.
    private var readsWaiting: [(Result<[AccessPoint], WiFiReadError>) -> Void] = []
    private var findingDevices = false

    private func findDevices() {
        guard !findingDevices else { return }
        findingDevices = true
        let generation = devicesGeneration
        let finish: (Result<[String], WiFiReadError>) -> Void = { [self] result in
            findingDevices = false
            if case .success(let devices) = result, generation == devicesGeneration { wifiDevices = devices }
            let waiting = readsWaiting
            readsWaiting = []
            for done in waiting {
                switch result {
                case .failure(let e): done(.failure(e))
                case .success(let devices): wireless(devices, found: [], done)
                }
            }
        }
        call(Self.path, Self.busName, "GetDevices", []) { [self] result in
            switch result {
            case .failure(let e): finish(.failure(e))
            case .success(let args):
                guard let paths = args.first?.arrayValue?.compactMap({ $0.objectPathValue }), args.count == 1 else {
                    return finish(.failure(.garbage("GetDevices answered \(Self.shape(args))")))
                }
                devices(Array(paths.prefix(Self.maxDevices)), [], finish)
            }
        }
    }

    /// Finds the Wi-Fi devices among `paths`, one at a time.
    private func devices(_ paths: [String], _ wifi: [String],
                         _ done: @escaping (Result<[String], WiFiReadError>) -> Void) {
        guard let device = paths.first else { return done(.success(wifi)) }
        let rest = Array(paths.dropFirst())
        call(device, ObjectServer.properties, "Get", [.string(Self.deviceInterface), .string("DeviceType")]) { [self] result in
            guard case .success(let args) = result, args.first?.unwrapped.uint32Value == Self.wifiDeviceType else {
                return devices(rest, wifi, done)   // not Wi-Fi, or gone meanwhile
            }
            devices(rest, wifi + [device], done)
        }
    }

    /// Reads each Wi-Fi device's access points in turn.
    private func wireless(_ devices: [String], found: [AccessPoint],
                          _ done: @escaping (Result<[AccessPoint], WiFiReadError>) -> Void) {
        guard let device = devices.first else {
            let strongest = found.sorted { $0.signal > $1.signal }.prefix(WiFiLookupWire.maxAccessPoints)
            return done(.success(Array(strongest)))
        }
        let rest = Array(devices.dropFirst())
        call(device, Self.wirelessInterface, "GetAllAccessPoints", []) { [self] result in
            guard case .success(let args) = result,
                  let aps = args.first?.arrayValue?.compactMap({ $0.objectPathValue }) else {
                wifiDevices = nil   // gone: look for the devices again next time
                return wireless(rest, found: found, done)
            }
            accessPoints(Array(aps.prefix(Self.maxAccessPoints)), found) { [self] more in
                wireless(rest, found: more, done)
            }
        }
        // After the list is asked for: a scan does not hold up the list NetworkManager has.
        scanIfDue(device)
    }

    /// The source closed: the devices are looked for again at the next read.
    /// A search under way still tells the reads waiting for it, and keeps nothing.
    func forgetDevices() {
        wifiDevices = nil
        devicesGeneration += 1
    }

    /// Calls to NetworkManager in flight at once while access points are
    /// read: within the budget's 4, one left for a scan request.
    static let readsAtOnce = 3

    /// Reads the access points' properties, `readsAtOnce` at a time.
    private func accessPoints(_ paths: [String], _ found: [AccessPoint], _ done: @escaping ([AccessPoint]) -> Void) {
        guard !paths.isEmpty else { return done(found) }
        var next = 0, answered = 0
        var collected = found
        // A refused call answers at once, inside `start`: `next` is checked each time.
        func start() {
            guard next < paths.count else { return }
            let path = paths[next]
            next += 1
            call(path, ObjectServer.properties, "GetAll", [.string(Self.accessPointInterface)]) { result in
                answered += 1
                if case .success(let args) = result, let props = args.first?.vardictValue, let a = Self.accessPoint(props) {
                    collected.append(a)
                }
                if next < paths.count { start() }
                if answered == paths.count { done(collected) }
            }
        }
        for _ in 0..<min(Self.readsAtOnce, paths.count) { start() }
    }

    /// An access point worth looking up, from its properties.
    static func accessPoint(_ props: [String: DBusValue]) -> AccessPoint? {
        guard let hw = props["HwAddress"]?.stringValue, let bssid = AccessPoint.bssid(hw),
              case .byte(let strength)? = props["Strength"], let lastSeen = props["LastSeen"]?.int32Value,
              lastSeen >= 0 else { return nil }
        if case .array("y", let bytes)? = props["Ssid"] {
            let ssid = String(decoding: bytes.compactMap { if case .byte(let b) = $0 { return b } else { return nil } },
                              as: UTF8.self)
            // The owner's opt-out of positioning (ichnaea's and Google's conventions).
            if ssid.hasSuffix("_nomap") || ssid.hasSuffix("_optout") { return nil }
        }
        let age = max(0, bootSeconds() - Int(lastSeen))
        guard age <= maxAgeSeconds else { return nil }
        return AccessPoint(bssid: bssid, signal: dBm(percent: strength), ageMilliseconds: UInt32(age * 1000))
    }

    /// NetworkManager's percentage back to dBm: it maps -90…-20 dBm linearly
    /// onto 30…100 % (`nl80211_xbm_to_percent`), so dBm = % - 120.
    static func dBm(percent: UInt8) -> Int { min(0, max(-120, Int(percent) - 120)) }

    /// `LastSeen` is in CLOCK_BOOTTIME seconds.
    static func bootSeconds() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return ts.tv_sec
    }

    private func scanIfDue(_ device: String) {
        let now = Double(EventLoop.monotonicNanos()) / 1e9
        if let last = lastScan, now - last < Self.scanInterval { return }
        lastScan = now
        call(device, Self.wirelessInterface, "RequestScan", [.vardict([:])]) { result in
            // NetworkManager refuses a scan while one runs, or too soon after one: the list it has is read all the same.
            if case .failure(let e) = result { Log.debug("RequestScan: \(e)") }
        }
    }

    private func call(_ path: String, _ interface: String, _ member: String, _ args: [DBusValue],
                      _ done: @escaping (Result<[DBusValue], WiFiReadError>) -> Void) {
        guard let m = try? Message.methodCall(destination: Self.busName, path: path, interface: interface, member: member),
              (try? m.append(args)) != nil else { return done(.failure(.garbage("cannot build \(member)"))) }
        let refused = outgoing.call(m, purpose: Self.purpose, uid: Self.daemonUID, callee: Self.busName,
                                    timeout: Self.callTimeout) { result in
            switch result {
            case .success(let reply): done(.success(reply.arguments()))
            case .failure(let e) where e.name == "org.freedesktop.DBus.Error.ServiceUnknown"
                || e.name == "org.freedesktop.DBus.Error.NameHasNoOwner":
                done(.failure(.absent))
            case .failure(let e): done(.failure(.failed("\(member): \(e.message)")))
            }
        }
        if let refused { done(.failure(.failed("\(member) not sent: \(refused)"))) }
    }

    static func shape(_ args: [DBusValue]) -> String { "(" + args.map(\.signature).joined() + ")" }
}

/// Why no access points could be read.
enum WiFiReadError: Error, Equatable, CustomStringConvertible {
    /// NetworkManager is not on the bus.
    case absent
    /// It answered something that is not its API.
    case garbage(String)
    case failed(String)

    var description: String {
        switch self {
        case .absent: return "NetworkManager is not running, so no access points can be read"
        case .garbage(let what): return "NetworkManager answered garbage: \(what)"
        case .failed(let why): return "NetworkManager: \(why)"
        }
    }
}

extension DBusValue {
    var objectPathValue: String? { if case .objectPath(let p) = self { return p } else { return nil } }
}
