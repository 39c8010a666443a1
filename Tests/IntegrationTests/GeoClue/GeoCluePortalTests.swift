import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// xdg-desktop-portal's Location portal, unmodified, in front of the facade:
/// the portal runs on a private session bus of its own with the test bus as its
/// system bus, and an unsandboxed Python app (tests/geoclue/portal-location-client.py)
/// calls `CreateSession` and `Start` on it. The host-app path needs no
/// permission store and no desktop backend: the portal gives host apps EXACT
/// without its Access dialog, and the store it then writes to is not there (it
/// logs a warning). It only exports the Location portal when some backend
/// claims `org.freedesktop.impl.portal.Access`, hence a `fake.portal` that does
/// and is never called.
final class GeoCluePortalTests: GeoClueTestCase {
    static let portal = "/usr/libexec/xdg-desktop-portal"
    static let portalClient = TestPaths.sourceRoot + "/tests/geoclue/portal-location-client.py"
    static let portalName = "org.freedesktop.portal.Desktop"
    /// The portal's accuracies in `CreateSession` (its own scale, not GeoClue's levels).
    static let portalExact: UInt32 = 5, portalCity: UInt32 = 2

    private var sessionBus: TestBus?
    private var portalDir: TempDir?
    private var portalRun: ChildProcess?

    override var clientEnvironment: [String: String] {
        var env = super.clientEnvironment
        env["DBUS_SESSION_BUS_ADDRESS"] = sessionBus?.address ?? "unix:path=/nonexistent"
        return env
    }

    override func setUpWithError() throws {
        for file in [Self.portal, GeoClueClientTests.python] where !FileManager.default.isExecutableFile(atPath: file) {
            XCTFail("\(file) is missing: scripts/deps.sh installs xdg-desktop-portal and python3-gi")
        }
        try super.setUpWithError()
        let bus = try TestBus()
        sessionBus = bus
        let dir = try TempDir()
        portalDir = dir
        try FileManager.default.createDirectory(atPath: dir.file("portals"), withIntermediateDirectories: true)
        try """
        [portal]
        DBusName=org.freedesktop.impl.portal.desktop.fake
        Interfaces=org.freedesktop.impl.portal.Access
        UseIn=fake

        """.write(toFile: dir.file("portals/fake.portal"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: dir.file("runtime"), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let environment = [
            "DBUS_SESSION_BUS_ADDRESS": bus.address,
            "DBUS_SYSTEM_BUS_ADDRESS": stack.bus.address,
            "XDG_DESKTOP_PORTAL_DIR": dir.file("portals"),
            "XDG_CURRENT_DESKTOP": "fake",
            // Hermetic: no dconf, no gvfs, no PipeWire or other services of the machine's own session.
            "XDG_RUNTIME_DIR": dir.file("runtime"),
            "GSETTINGS_BACKEND": "memory",
            "GIO_USE_VFS": "local",
        ]
        portalRun = try ChildProcess(executable: Self.portal, arguments: ["--verbose"], logPath: dir.file("portal.log"),
                                     environment: environment)
        let watcher = try stack.peers.connect(bus.address)
        let owned = stack.peers.pump(timeout: 15) {
            (try? watcher.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                               [.string(Self.portalName)]).get()) != nil || self.portalRun?.isRunning != true
        }
        XCTAssertTrue(owned && portalRun?.isRunning == true, "the portal did not take its name:\n\(portalLog)")
    }

    override func tearDown() {
        if let t = testRun, t.failureCount > 0 { print("---- xdg-desktop-portal ----\n\(portalLog.suffix(6000))") }
        portalRun?.stop()
        portalRun = nil
        sessionBus?.stop()
        sessionBus = nil
        portalDir?.remove()
        portalDir = nil
        super.tearDown()
    }

    private var portalLog: String {
        portalDir.flatMap { try? String(contentsOfFile: $0.file("portal.log"), encoding: .utf8) } ?? ""
    }

    /// Runs the portal client for `seconds` with the portal's `accuracy`.
    func portalClient(accuracy: UInt32, seconds: Int) throws -> (status: Int32?, lines: [[String]], output: String) {
        let r = try runClient(GeoClueClientTests.python, [Self.portalClient, String(accuracy), String(seconds)],
                              timeout: Double(seconds) + 25)
        return (r.status, r.output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }, r.output)
    }

    /// The `update` lines: latitude, longitude, accuracy, altitude.
    func updates(_ lines: [[String]]) -> [(latitude: Double, longitude: Double, accuracy: Double, altitude: Double)] {
        lines.filter { $0.first == "update" && $0.count >= 5 }.compactMap { l in
            guard let la = Double(l[1]), let lo = Double(l[2]), let a = Double(l[3]), let al = Double(l[4]) else { return nil }
            return (la, lo, a, al)
        }
    }

    func testAHostAppGetsTheFedFixesThroughThePortalAndThePromptNamesThePortal() throws {
        startFeeding(interval: 0.5, north: 10)
        let r = try portalClient(accuracy: Self.portalExact, seconds: 6)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertEqual(r.lines.filter { $0.first == "response" }, [["response", "0"]], r.output)
        let fixes = updates(r.lines)
        assertFullFixesOnTrack(fixes.map { ($0.latitude, $0.longitude, $0.accuracy) }, atLeast: 3, r.output)
        for f in fixes { XCTAssertGreaterThan(f.altitude, -1e300, "full accuracy: the altitude is known: \(f)") }
        XCTAssertEqual(Set(fixes.map(\.latitude)).count, fixes.count, "each update a new fix of the track")

        // The portal is one app to us: the prompt names its executable, and its DesktopId.
        XCTAssertEqual(agent.confirms.count, 1, "\(agent.confirms)")
        let confirm = try XCTUnwrap(agent.confirms.first)
        XCTAssertEqual(confirm.appID, Self.portal, "the app is the portal's executable, not the app behind it")
        XCTAssertEqual(confirm.executable, Self.portal)
        XCTAssertEqual(confirm.appName, "xdg-desktop-portal", "the DesktopId the portal sets")
        XCTAssertEqual(confirm.kind, .whenInUse)
        XCTAssertEqual(confirm.accuracy, .full, "host apps get EXACT from the portal")
    }

    /// Every app behind the portal shares its one client object (`GetClient` on
    /// its one system-bus connection): to us a second app is the portal again,
    /// with no prompt of its own, and it gets the same fixes.
    func testASecondAppThroughThePortalIsThePortalAgain() throws {
        agent.behaviour = .answer("allow-while-using")
        startFeeding(interval: 0.5, north: 10)
        let first = try ClientRun(GeoClueClientTests.python, [Self.portalClient, String(Self.portalExact), "6"],
                                  environment: clientEnvironment)
        stack.peers.pump(timeout: 10) { first.lines("update").count >= 1 }
        let second = try ClientRun(GeoClueClientTests.python, [Self.portalClient, String(Self.portalExact), "3"],
                                   environment: clientEnvironment)
        var clients: [SessionInfo] = []
        stack.peers.pump(timeout: 10) {
            if clients.isEmpty, !second.lines("update").isEmpty {
                clients = (try? self.agentPeer.sessions().filter { $0.name.contains("/geoclue/") }) ?? []
            }
            return !second.process.isRunning
        }
        XCTAssertEqual(second.lines("response").map { $0.last }, ["0"], second.output)
        XCTAssertGreaterThanOrEqual(second.lines("update").count, 2, second.output)
        XCTAssertEqual(agent.confirms.map(\.appID), [Self.portal], "one prompt, for the portal")
        XCTAssertEqual(clients.map(\.appID), [Self.portal], "one client object for both apps")
        XCTAssertEqual(clients.map(\.updates), [true])
    }

    func testCityThroughThePortalGetsTheGridCell() throws {
        startFeeding(interval: 0.5)
        let r = try portalClient(accuracy: Self.portalCity, seconds: 4)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertEqual(r.lines.filter { $0.first == "response" }, [["response", "0"]], r.output)
        let fixes = updates(r.lines)
        XCTAssertGreaterThanOrEqual(fixes.count, 2, r.output)
        let cell = ReducedGrid(cellSize: 5000).reduce(Fix(latitude: feed.latitude, longitude: feed.longitude, mode: .threeD))
        for f in fixes {
            XCTAssertEqual(f.latitude, cell.latitude, accuracy: 1e-6)
            XCTAssertEqual(f.longitude, cell.longitude, accuracy: 1e-6)
            XCTAssertEqual(f.accuracy, cell.horizontalAccuracy ?? 0, accuracy: 1e-6)
            XCTAssertEqual(f.altitude, -Double.greatestFiniteMagnitude, "reduced: no altitude")
        }
        XCTAssertEqual(agent.confirms.first?.accuracy, .reduced, "the portal passes CITY on (GeoClue level 4)")
    }

    func testDontAllowForThePortalFailsStartAndNoLocationArrives() throws {
        agent.behaviour = .answer("deny")
        startFeeding(interval: 0.5)
        let r = try portalClient(accuracy: Self.portalExact, seconds: 4)
        XCTAssertEqual(r.status, 0, r.output)
        XCTAssertEqual(r.lines.filter { $0.first == "response" }, [["response", "2"]], "Start failed\n\(r.output)")
        XCTAssertEqual(updates(r.lines).count, 0, r.output)
        XCTAssertFalse(r.output.contains("update"), r.output)
        XCTAssertEqual(agent.confirms.map(\.appID), [Self.portal])
        XCTAssertTrue(portalLog.contains("denied"), "the portal saw our AccessDenied:\n\(portalLog.suffix(2000))")
        let consents = try agentPeer.consents()
        XCTAssertEqual(consents.first { $0.appID == Self.portal }?.record.decision, .denied, "\(consents)")
        // The portal keeps its client object (its connection stays): denied, no updates.
        let clients = try agentPeer.sessions().filter { $0.name.contains("/geoclue/") }
        XCTAssertEqual(clients.map(\.appID), [Self.portal])
        XCTAssertEqual(clients.map(\.status), [.denied])
        XCTAssertEqual(clients.map(\.updates), [false])
    }
}

