import XCTest
import GeoCore
import GeoDBus
import GeoConsentAPI

/// Every wire shape of GeoConsentAPI against docs/dbus-api.md, spelled out here
/// as the contract spells it (the one place outside GeoConsentAPI that does), and
/// each decoder against its encoder. The daemon encodes with these and every
/// client decodes with them, so a shape checked here is the shape on the bus.
final class WireShapeTests: XCTestCase {
    // MARK: Location

    /// The location dictionary is built by hand (sorted, no Dictionary) because it is
    /// encoded for every fix; it must stay exactly what `.vardict` of its fields gives.
    func testLocationIsTheSortedVardictOfTheReportedFields() {
        let full = Fix(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 40, ellipsoidalAltitude: 80,
                       horizontalAccuracy: 5, verticalAccuracy: 7, speed: 3, speedAccuracy: 0.5,
                       course: 90, courseAccuracy: 2, timestamp: 1_800_000_000_000_000)
        let encoded = LocationDictionary.encode(full, accuracy: .full)
        XCTAssertEqual(encoded, .vardict([
            "accuracy-authorization": .string("full"), "altitude": .double(40), "course": .double(90),
            "course-accuracy": .double(2), "ellipsoidal-altitude": .double(80), "fix": .string("3d"),
            "horizontal-accuracy": .double(5), "latitude": .double(52.52), "longitude": .double(13.405),
            "source": .string("gps"), "speed": .double(3), "speed-accuracy": .double(0.5), "timestamp": .uint64(1_800_000_000_000_000),
            "vertical-accuracy": .double(7),
        ]))
        // Missing and non-finite values are left out, not sent as NaN.
        let sparse = Fix(latitude: 1, longitude: 2, mode: .twoD, altitude: .nan, speed: .infinity, source: .static)
        XCTAssertEqual(LocationDictionary.encode(sparse, accuracy: .reduced), .vardict([
            "accuracy-authorization": .string("reduced"), "fix": .string("2d"),
            "latitude": .double(1), "longitude": .double(2), "source": .string("static"),
        ]))
        // Every source by its name, and back.
        for source in PositionSource.allCases {
            var fix = sparse
            fix.altitude = nil
            fix.speed = nil
            fix.source = source
            XCTAssertEqual(LocationDictionary.decode(LocationDictionary.encode(fix, accuracy: .full))?.fix, fix)
        }
        // A dictionary of a daemon older than sources reads as GPS.
        XCTAssertEqual(LocationDictionary.decode(.vardict(["latitude": .double(1), "longitude": .double(2)]))?.fix.source,
                       .gps)
        XCTAssertEqual(LocationBody.encode(encoded), [encoded], "RequestLocation's reply and LocationUpdated: (a{sv})")
        let decoded = LocationBody.decode([encoded])
        XCTAssertEqual(decoded?.fix, full)
        XCTAssertEqual(decoded?.accuracy, .full)
        XCTAssertEqual(decoded?.raw, encoded)
        XCTAssertNil(LocationDictionary.decode(.vardict(["latitude": .double(1)])), "no longitude, no location")
    }

    // MARK: Replies

    func testStatusReply() {
        XCTAssertEqual(StatusReply.encode(.whenInUse), [.uint32(4)])
        XCTAssertEqual(StatusReply.decode([.uint32(0)]), .notDetermined)
        XCTAssertNil(StatusReply.decode([.uint32(9)]))
        XCTAssertNil(StatusReply.decode([.string("4")]))
    }

    func testAuthorizationReply() {
        let none = AuthorizationInfo(status: .notDetermined, temporary: false, accuracy: nil, appID: "/usr/bin/x",
                                     oneTimeApproved: false)
        XCTAssertEqual(AuthorizationReply.encode(none), [.uint32(0), .vardict([
            "temporary": .bool(false), "accuracy": .string("none"), "app-id": .string("/usr/bin/x"),
            "one-time-approved": .bool(false), "agent-registered": .bool(false), "user-location": .bool(true),
        ])])
        var granted = AuthorizationInfo(status: .whenInUse, temporary: true, accuracy: .reduced, appID: "org.example.Maps",
                                        oneTimeApproved: true)
        granted.agentRegistered = true
        var off = none
        off.userLocation = false
        XCTAssertEqual(AuthorizationReply.decode(AuthorizationReply.encode(off))?.userLocation, false)
        XCTAssertEqual(AuthorizationReply.decode([.uint32(0), .vardict([:])])?.userLocation, true,
                       "a daemon without the switch: on")
        XCTAssertEqual(AuthorizationReply.encode(granted)[1].vardictValue?["accuracy"], .string("reduced"))
        XCTAssertEqual(AuthorizationReply.decode(AuthorizationReply.encode(none)), none)
        XCTAssertEqual(AuthorizationReply.decode(AuthorizationReply.encode(granted)), granted)
        XCTAssertNil(AuthorizationReply.decode([]))
    }

    func testSessionListReply() {
        let s = SessionInfo(name: ":1.1", uid: 1000, appID: "/usr/bin/x", status: .whenInUse, updates: true)
        XCTAssertEqual(SessionListReply.encode([s]),
                       [.array(element: "(susub)", [.structure([.string(":1.1"), .uint32(1000), .string("/usr/bin/x"),
                                                                 .uint32(4), .bool(true)])])])
        XCTAssertEqual(SessionListReply.encode([]).first?.signature, "a(susub)", "an empty list keeps its type")
        XCTAssertEqual(SessionListReply.decode(SessionListReply.encode([s])), [s])
    }

    func testSessionDetailsReply() {
        let paused = SessionInfo(name: ":1.1", uid: 1000, appID: "/usr/bin/x", status: .restricted, updates: true,
                                 paused: .locked)
        var running = SessionInfo(name: ":1.2/geoclue/1", uid: 0, appID: "/usr/bin/y", status: .whenInUse, updates: true,
                                  receiving: true, accuracy: .reduced)
        running.source = .wifi
        XCTAssertEqual(SessionDetailsReply.encode([running]).first?.arrayValue?.first?.structFields?[1].vardictValue?["source"],
                       .string("wifi"), "where its last position came from; absent before the first (below)")
        XCTAssertEqual(SessionDetailsReply.encode([paused]),
                       [.array(element: "(sa{sv})", [.structure([.string(":1.1"), .vardict([
                           "uid": .uint32(1000), "app-id": .string("/usr/bin/x"), "status": .uint32(1),
                           "updates": .bool(true), "paused": .string("locked"), "receiving": .bool(false),
                           "accuracy": .string("none"),
                       ])])])])
        XCTAssertEqual(SessionDetailsReply.encode([]).first?.signature, "a(sa{sv})", "an empty list keeps its type")
        XCTAssertEqual(SessionDetailsReply.decode(SessionDetailsReply.encode([paused, running])), [paused, running])
        // A newer daemon's extra keys are ignored; an unknown pause reads as none.
        let newer: [DBusValue] = [.array(element: "(sa{sv})", [.structure([.string(":1.3"), .vardict([
            "uid": .uint32(5), "app-id": .string("a"), "status": .uint32(4), "updates": .bool(false),
            "paused": .string("asleep"), "future": .double(1),
        ])])])]
        XCTAssertEqual(SessionDetailsReply.decode(newer),
                       [SessionInfo(name: ":1.3", uid: 5, appID: "a", status: .whenInUse, updates: false)])
    }

    func testConsentListReplyAndRecord() {
        let r = ConsentRecord(decision: .whenInUse, decisionAccuracy: .reduced, oneTimeApproved: true,
                              oneTimeAccuracy: .full, decidedAt: 1_700_000_000_000_000, lastUsed: 1_800_000_000_000_000)
        XCTAssertEqual(ConsentRecordDictionary.encode(r), .vardict([
            "decision": .string("when-in-use"), "decision-accuracy": .string("reduced"),
            "one-time-approved": .bool(true), "one-time-accuracy": .string("full"),
            "decided-at": .uint64(1_700_000_000_000_000), "last-used": .uint64(1_800_000_000_000_000),
            "lapsed": .string(""), "lapsed-at": .uint64(0),
        ]))
        var lapsed = ConsentRecord(decidedAt: 5, lastUsed: 3)
        lapsed.lapsed = "when-in-use;one-time-approved"
        lapsed.lapsedAt = 5
        XCTAssertEqual(ConsentRecordDictionary.decode(ConsentRecordDictionary.encode(lapsed)), lapsed)
        let empty = ConsentRecord()
        XCTAssertEqual(Set(ConsentRecordDictionary.encode(empty).vardictValue?.keys ?? [:].keys),
                       ["decision", "decision-accuracy", "one-time-approved", "one-time-accuracy", "decided-at", "last-used",
                        "lapsed", "lapsed-at"],
                       "every key always present")
        XCTAssertEqual(ConsentRecordDictionary.encode(empty).vardictValue?["decision"], .string(""))
        XCTAssertEqual(ConsentRecordDictionary.decode(ConsentRecordDictionary.encode(r)), r)
        XCTAssertEqual(ConsentRecordDictionary.decode(ConsentRecordDictionary.encode(empty)), empty)

        let key = AppKey(uid: 1000, appID: "org.example.Maps")
        let list = ConsentListReply.encode([(key, r)])
        XCTAssertEqual(list, [.array(element: "(usa{sv})",
                                     [.structure([.uint32(1000), .string("org.example.Maps"), ConsentRecordDictionary.encode(r)])])])
        XCTAssertEqual(ConsentListReply.decode(list), [StoredConsent(uid: 1000, appID: "org.example.Maps", record: r)])
        XCTAssertEqual(ConsentListReply.encode([]).first?.signature, "a(usa{sv})")
    }

    // MARK: Signals and properties

    func testSignals() {
        XCTAssertEqual(AuthorizationChangedSignal.encode(.restricted), [.uint32(1)])
        XCTAssertEqual(AuthorizationChangedSignal.decode([.uint32(1)]), .restricted)
        let e = LocationErrorSignal.encode(name: GeoConsentAPI.ErrorName.gpsUnavailable, message: "gpsd is gone")
        XCTAssertEqual(e, [.string("org.geoconsent.GeoConsent1.Error.GpsUnavailable"), .string("gpsd is gone")])
        XCTAssertEqual(LocationErrorSignal.decode(e)?.name, GeoConsentAPI.ErrorName.gpsUnavailable)
        XCTAssertEqual(LocationErrorSignal.decode(e)?.message, "gpsd is gone")
        // The members are the ones the interface table declares, with these signatures.
        let declared = Dictionary(uniqueKeysWithValues: GeoConsentAPI.interface.signals.map { ($0.name, $0.args.map(\.signature).joined()) })
        XCTAssertEqual(declared[AuthorizationChangedSignal.member], "u")
        XCTAssertEqual(declared[LocationErrorSignal.member], "ss")
        XCTAssertEqual(declared[LocationUpdatedSignal.member], "a{sv}")
    }

    func testProperties() {
        var s = DaemonStatus(version: "0.1.0", enabled: true, gpsdConnected: false, inUse: true)
        s.sources = [.gps, .wifi]
        s.wifiEnabled = true
        XCTAssertEqual(DaemonProperties.encode(s), ["Version": .string("0.1.0"), "Enabled": .bool(true),
                                                    "GpsdConnected": .bool(false), "InUse": .bool(true),
                                                    "Sources": .strings(["gps", "wifi"]), "WiFiEnabled": .bool(true)])
        XCTAssertEqual(DaemonProperties.decode(DaemonProperties.encode(s)), s)
        XCTAssertEqual(Set(GeoConsentAPI.interface.properties.map(\.name)),
                       [DaemonProperties.version, DaemonProperties.enabled, DaemonProperties.gpsdConnected,
                        DaemonProperties.inUse, DaemonProperties.sources, DaemonProperties.wifiEnabled])
        let changed: [DBusValue] = [.string(GeoConsentAPI.interfaceName), .vardict(DaemonProperties.changed("Enabled", false)),
                                    .strings([])]
        XCTAssertEqual(DaemonProperties.decodeChanged(changed), ["Enabled": .bool(false)])
        XCTAssertNil(DaemonProperties.decodeChanged([.string("org.example.Other"), .vardict([:]), .strings([])]))
    }

    // MARK: Agent

    func testConfirmCallReplyAndCancel() {
        var request = ConfirmRequest(agentName: ":1.9", agentPath: "/agent", requestID: "7", appID: "org.example.Maps",
                                     kind: .oneTime, appName: "Maps", reason: "show the map", accuracy: .reduced,
                                     pid: 4711, sandboxed: true, identity: .flatpak, identityProven: true,
                                     executable: "/app/bin/maps", parentWindow: "x11:42", timeout: 60)
        request.sources = [.gps, .wifi]
        request.script = "/usr/bin/maps.py"
        request.installed = true
        request.desktopEntry = "/usr/share/applications/org.example.Maps.desktop"
        request.tapDoubt = .behind
        let args = ConfirmCall.encode(request)
        XCTAssertEqual(args, [.string("7"), .string("org.example.Maps"), .string("one-time"), .vardict([
            "app-name": .string("Maps"), "reason": .string("show the map"), "accuracy": .string("reduced"),
            "pid": .uint32(4711), "sandboxed": .bool(true), "identity": .string("flatpak"),
            "identity-proven": .bool(true), "executable": .string("/app/bin/maps"),
            "script": .string("/usr/bin/maps.py"), "program-installed": .bool(true),
            "desktop-entry": .string("/usr/share/applications/org.example.Maps.desktop"), "asked-by": .string(""),
            "tap-not-verified": .string("behind"),
            "parent-window": .string("x11:42"), "sources": .strings(["gps", "wifi"]),
        ])])
        var expected = AgentPrompt(requestID: "7", appID: "org.example.Maps", kind: .oneTime, appName: "Maps",
                                   reason: "show the map", accuracy: .reduced, pid: 4711, sandboxed: true,
                                   identity: .flatpak, identityProven: true,
                                   executable: "/app/bin/maps", parentWindow: "x11:42")
        expected.sources = [.gps, .wifi]
        expected.script = "/usr/bin/maps.py"
        expected.installed = true
        expected.desktopEntry = "/usr/share/applications/org.example.Maps.desktop"
        expected.tapDoubt = .behind
        XCTAssertEqual(ConfirmCall.decode(args), expected)
        // From a daemon of the earlier contract: no identity, so nothing is proven.
        guard var older = args.last?.vardictValue else { return XCTFail("no details") }
        older["identity"] = nil
        older["identity-proven"] = nil
        let old = ConfirmCall.decode(args.prefix(3) + [.vardict(older)])
        XCTAssertEqual(old?.identity, nil)
        XCTAssertEqual(old?.identityProven, false)
        older["sources"] = nil
        XCTAssertEqual(ConfirmCall.decode(args.prefix(3) + [.vardict(older)])?.sources, [], "no sources: not said")
        var asked = older
        asked["asked-by"] = .string("/usr/bin/geoconsent-settings")
        XCTAssertEqual(ConfirmCall.decode(args.prefix(3) + [.vardict(asked)])?.askedBy, "/usr/bin/geoconsent-settings")
        for key in ["script", "program-installed", "desktop-entry", "asked-by"] { older[key] = nil }
        let before = ConfirmCall.decode(args.prefix(3) + [.vardict(older)])
        XCTAssertEqual([before?.script, before?.desktopEntry, before?.askedBy], ["", "", ""],
                       "an earlier daemon names no script, no entry and no asker")
        XCTAssertEqual(before?.installed, false)
        older["identity"] = DBusValue.string("a-kind-of-tomorrow")
        XCTAssertEqual(ConfirmCall.decode(args.prefix(3) + [.vardict(older)])?.identity, nil, "an unknown kind")
        XCTAssertNil(ConfirmCall.decode(ConfirmCall.encode(request)[...2].map { $0 }))
        XCTAssertNil(ConfirmCall.decode(args.prefix(3) + [.string("not a dict")]))
        var unknown = args
        unknown[2] = .string("forever")
        XCTAssertNil(ConfirmCall.decode(unknown)?.kind, "a kind this library does not know")

        XCTAssertEqual(ConfirmReply.encode(.allowWhileUsing), [.string("allow-while-using")])
        XCTAssertEqual(ConfirmReply.encode(.allowOnce, accuracy: .reduced), [.string("allow-once-reduced")])
        XCTAssertEqual(ConfirmReply.encode(.allowWhileUsing, accuracy: .reduced), [.string("allow-while-using-reduced")])
        XCTAssertEqual(ConfirmReply.encode(.deny, accuracy: .reduced), [.string("deny")])
        XCTAssertEqual(ConfirmReply.encode(.allowOnce, accuracy: .full), [.string("allow-once")])
        XCTAssertEqual(ConfirmReply.decode(signature: "s", ConfirmReply.encode(.allowOnce, accuracy: .reduced)),
                       .capped(.allowOnce, .reduced))
        XCTAssertEqual(ConfirmReply.decode(signature: "s", ConfirmReply.encode(.deny)), .decision(.deny))
        XCTAssertEqual(ConfirmReply.decode(signature: "s", ConfirmReply.encode(word: "yes please")),
                       .noAnswer("unknown decision 'yes please'"))
        XCTAssertEqual(ConfirmReply.decode(signature: "u", [.uint32(1)]), .noAnswer("the agent answered with type 'u'"))

        XCTAssertEqual(CancelCall.encode(requestID: "7"), [.string("7")])
        XCTAssertEqual(CancelCall.decode([.string("7")]), "7")
        let agent = Dictionary(uniqueKeysWithValues: GeoConsentAPI.agent.methods.map {
            ($0.name, ($0.inSignature, $0.outSignature))
        })
        XCTAssertEqual(agent[ConfirmCall.member]?.0, "sssa{sv}")
        XCTAssertEqual(agent[ConfirmCall.member]?.1, "s")
        XCTAssertEqual(agent[CancelCall.member]?.0, "s")
    }

    // MARK: Options

    func testNoticeAndCheckFocusAndAgentOptions() throws {
        var about = ConfirmRequest(agentName: ":1.2", agentPath: "/a", requestID: "", appID: "/usr/bin/maps", kind: .oneTime,
                                   appName: "Maps", reason: "r", accuracy: .reduced, pid: 7, sandboxed: false,
                                   identity: .executable, identityProven: false, executable: "/usr/bin/maps",
                                   parentWindow: "", timeout: 0, uid: 1000)
        about.desktopEntry = "/usr/share/applications/maps.desktop"
        let notice = NoticeRequest(about: about, witness: .unknown)
        XCTAssertEqual(NoticeCall.encode(notice), [.string("/usr/bin/maps"), .string("silent-grant"), .vardict([
            "app-name": .string("Maps"), "accuracy": .string("reduced"), "identity": .string("executable"),
            "identity-proven": .bool(false), "executable": .string("/usr/bin/maps"), "script": .string(""),
            "desktop-entry": .string("/usr/share/applications/maps.desktop"), "focus": .string("unknown"),
            "always": .bool(true),
        ])])
        let read = try XCTUnwrap(NoticeCall.decode(NoticeCall.encode(notice)))
        XCTAssertEqual(read.appID, "/usr/bin/maps")
        XCTAssertEqual(read.witness, .unknown)
        XCTAssertTrue(read.always)

        let check = FocusCheckRequest(agentName: ":1.2", agentPath: "/a", requestID: "focus-1", uid: 1000, pid: 42, appID: "x")
        XCTAssertEqual(CheckFocusCall.encode(check), [.uint32(42), .vardict(["app-id": .string("x")])])
        XCTAssertEqual(CheckFocusCall.decode(CheckFocusCall.encode(check)), 42)
        // The reply: what the agent says, and what the daemon makes of replies it cannot read (no answer: a prompt).
        let yes = CheckFocusReply.encode(focused: .yes, press: .unknown, via: "x11")
        XCTAssertEqual(CheckFocusReply.decode(signature: "a{sv}", yes), .answered(focused: .yes, press: .unknown))
        XCTAssertEqual(CheckFocusReply.decode(signature: "a{sv}", [.vardict(["focused": .string("no")])]),
                       .answered(focused: .no, press: .unknown))
        XCTAssertEqual(CheckFocusReply.decode(signature: "a{sv}", [.vardict(["focused": .string("yes"), "press": .uint32(1)])]),
                       .answered(focused: .yes, press: .no), "a press it cannot read is no press")
        for (signature, values) in [("a{sv}", [DBusValue.vardict([:])]), ("a{sv}", [.vardict(["focused": .string("maybe")])]),
                                    ("a{sv}", [.vardict(["focused": .bool(true)])]), ("s", [.string("yes")])] {
            if case .noAnswer = CheckFocusReply.decode(signature: signature, values) {} else {
                XCTFail("\(values) should be no answer")
            }
        }

        XCTAssertEqual(try OptionDictionary.decodeAgentOptions(OptionDictionary.encodeAgentOptions(features: ["notices", "focus"])),
                       [.notices, .focus])
        XCTAssertEqual(try OptionDictionary.decodeAgentOptions(.vardict([:])), [])
        XCTAssertThrowsError(try OptionDictionary.decodeAgentOptions(.vardict(["features": .string("focus")])))
        XCTAssertThrowsError(try OptionDictionary.decodeAgentOptions(OptionDictionary.encodeAgentOptions(
            features: Array(repeating: "x", count: 17))))
        XCTAssertThrowsError(try OptionDictionary.decodeAgentOptions(OptionDictionary.encodeAgentOptions(
            features: [String(repeating: "y", count: 65)])))
    }

    func testOptionsDecodeWhatTheyEncode() throws {
        let auth = AuthOptions(reason: "show the map", accuracy: .reduced, appName: "Maps", parentWindow: "x11:42")
        XCTAssertEqual(OptionDictionary.encode(auth), .vardict([
            "reason": .string("show the map"), "accuracy": .string("reduced"), "app-name": .string("Maps"),
            "parent-window": .string("x11:42"),
        ]))
        XCTAssertEqual(OptionDictionary.encode(AuthOptions()), .vardict(["accuracy": .string("full")]), "empty strings left out")
        XCTAssertEqual(try OptionDictionary.decodeAuth(OptionDictionary.encode(auth)), auth)

        let loc = LocationOptions(maxAge: 0, timeout: 10)
        XCTAssertEqual(OptionDictionary.encode(loc), .vardict(["max-age": .double(0), "timeout": .double(10)]))
        XCTAssertEqual(try OptionDictionary.decodeLocation(OptionDictionary.encode(loc)), loc)

        let upd = UpdateOptions(distanceFilter: 1000, minInterval: 2)
        XCTAssertEqual(OptionDictionary.encode(upd), .vardict(["distance-filter": .double(1000), "min-interval": .double(2)]))
        XCTAssertEqual(try OptionDictionary.decodeUpdates(OptionDictionary.encode(upd)), upd)

        XCTAssertEqual(OptionDictionary.encodeReset(uid: 1000), .vardict(["uid": .uint32(1000)]))
        XCTAssertEqual(OptionDictionary.encodeReset(uid: nil), .vardict([:]))
        XCTAssertEqual(try OptionDictionary.decodeReset(OptionDictionary.encodeReset(uid: 1000)), 1000)
        XCTAssertNil(try OptionDictionary.decodeReset(OptionDictionary.encodeReset(uid: nil)))
    }
}
