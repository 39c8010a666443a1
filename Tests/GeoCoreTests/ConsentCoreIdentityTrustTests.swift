import XCTest
@testable import GeoCore

/// docs/dbus-api.md, "Identity", what each identity proves: `policy = always`
/// and `[agents] allow` grant by name only to a verified sandbox or a process of
/// a system uid; `policy = restricted` takes away from whoever shows the name.
final class ConsentCoreIdentityTrustTests: XCTestCase {
    private typealias W = Who
    static let firefox = "org.mozilla.firefox"

    /// A caller of `uid` showing the app-id `id` as `kind`.
    private func caller(_ n: Int, uid: UInt32, _ kind: IdentityKind, _ id: String = firefox) -> Caller {
        Caller(session: .connection(":1.\(700 + n)"), uid: uid, pid: UInt32(7000 + n), appID: id, identity: kind,
               executable: kind == .executable ? id : "/app/bin/firefox")
    }

    func testWhoConfigNamingAnAppIDGrantsTo() {
        // (label, uid, kind, granted with the default system-uid-max 999)
        let table: [(String, UInt32, IdentityKind, Bool)] = [
            ("root's executable", 0, .executable, true),
            ("a system service's executable", 120, .executable, true),
            ("a system uid's unit id", 999, .systemdUnit, true),
            ("uid 1000's executable", 1000, .executable, false),
            ("uid 1000's unit id", 1000, .systemdUnit, false),
            ("nobody's executable", 65534, .executable, false),
            ("a verified Flatpak of uid 1000", 1000, .flatpak, true),
            ("a verified Snap of uid 1000", 1000, .snap, true),
            ("an unverified Flatpak of uid 1000", 1000, .unverifiedFlatpak, false),
            ("an unverified Flatpak of a system uid", 120, .unverifiedFlatpak, true),
        ]
        let c = Config()
        for (i, (label, uid, kind, granted)) in table.enumerated() {
            XCTAssertEqual(c.grantsByName(to: caller(i, uid: uid, kind)), granted, label)
        }
        XCTAssertEqual(IdentityKind.allCases.filter(\.isSandboxed), [.flatpak, .unverifiedFlatpak, .snap])
        XCTAssertEqual(IdentityKind.allCases.filter(\.isVerifiedSandbox), [.flatpak, .snap])
    }

    func testPolicyAlways() {
        // (label, caller, status of a tap, of GetAuthorization, accuracy)
        let table: [(String, Caller, AuthorizationStatus?, AuthorizationStatus, Accuracy?)] = [
            ("system uid, executable", caller(1, uid: 120, .executable), .always, .always, .full),
            ("root, executable", caller(2, uid: 0, .executable), .always, .always, .full),
            ("verified Flatpak of uid 1000", caller(3, uid: 1000, .flatpak), .always, .always, .full),
            ("verified Snap of uid 1000", caller(4, uid: 1000, .snap, "firefox"), .always, .always, .full),
            // The forged ones: the name does not apply, the tap prompts as for any app.
            ("uid 1000, executable", caller(5, uid: 1000, .executable), nil, .notDetermined, nil),
            ("uid 1000, unit id", caller(6, uid: 1000, .systemdUnit), nil, .notDetermined, nil),
            ("uid 1000, unverified Flatpak", caller(7, uid: 1000, .unverifiedFlatpak), nil, .notDetermined, nil),
        ]
        for (label, c, tap, status, accuracy) in table {
            let rig = Rig(config: config(apps: [Self.firefox: .always, "firefox": .always]))
            let t = rig.tap(c)
            if let tap {
                XCTAssertEqual(t.effects, [.reply(t.call, .status(tap))], label)
            } else {
                XCTAssertEqual(t.confirm?.kind, .oneTime, "\(label): prompts like any app: \(t.effects)")
                XCTAssertEqual(t.confirm?.appID, c.appID, "\(label): the name still keys its records")
                rig.noAnswer(t.promptID)
            }
            let info = rig.auth(c)
            XCTAssertEqual(info?.status, status, label)
            XCTAssertEqual(info?.accuracy, accuracy, label)
            XCTAssertEqual(rig.core.grantedAccuracy(for: c.session), accuracy, label)
            let fix = rig.call(c, .requestLocation(LocationOptions()))
            XCTAssertEqual(fix.error == .notAuthorized, accuracy == nil, "\(label): \(fix.effects)")
        }
    }

    /// The desktop's own components run as the user: an `always` naming them
    /// does not apply, even when the program is the administrator's file.
    /// Any program of the user can run it with its own code loaded
    /// (`LD_PRELOAD`, `ptrace`, the dynamic loader, a unit of that name).
    func testAnInstalledProgramOfAUserIsNotGrantedByName() {
        var x = Caller(session: .connection(":1.801"), uid: 1000, pid: 8001, appID: "/usr/libexec/gsd-datetime",
                       identity: .executable, executable: "/usr/libexec/gsd-datetime")
        x.installed = true
        let rig = Rig(config: config(apps: ["/usr/libexec/gsd-datetime": .always]))
        XCTAssertEqual(rig.tap(x).confirm?.kind, .oneTime, "prompts as any app of the user")
    }

    func testForgedNameGetsTheUsersOwnRecordNotTheConfig() {
        // Identity is advisory within a uid: a process showing Firefox's name gets
        // what uid 1000 decided for Firefox, never what the admin granted it.
        let forged = caller(1, uid: 1000, .executable)
        let rig = Rig(config: config(apps: [Self.firefox: .always]),
                      records: [AppKey(uid: 1000, appID: Self.firefox): .whenInUseReduced])
        XCTAssertEqual(rig.auth(forged)?.status, .whenInUse)
        XCTAssertEqual(rig.auth(forged)?.accuracy, .reduced, "the user's decision, not config's full")
    }

    func testSystemUIDMaxIsTheBoundary() {
        let exe = "/usr/libexec/fleet-tracker"
        for (max, uid, granted) in [(UInt32(999), UInt32(999), true), (999, 1000, false), (0, 0, true), (0, 120, false),
                                    (60000, 59999, true), (60000, 65534, false)] {
            let rig = Rig(config: config(apps: [exe: .always], systemUIDMax: max), agents: [])
            let c = caller(1, uid: uid, .executable, exe)
            XCTAssertEqual(rig.auth(c)?.status == .always, granted, "system-uid-max \(max), uid \(uid)")
        }
    }

    func testPolicyRestrictedAppliesToEveryone() {
        for (i, kind) in IdentityKind.allCases.enumerated() {
            for uid: UInt32 in [0, 120, 1000] {
                let rig = Rig(config: config(apps: [Self.firefox: .restricted]))
                let c = caller(i, uid: uid, kind)
                XCTAssertEqual(rig.tap(c).status, .restricted, "\(kind), uid \(uid)")
                XCTAssertEqual(rig.auth(c)?.status, .restricted, "\(kind), uid \(uid)")
            }
        }
    }

    func testAgentsAllow() {
        // (label, caller, allowed) with `allow = org.mozilla.firefox`
        let table: [(String, Caller, Bool)] = [
            ("system uid, listed executable", caller(1, uid: 120, .executable), true),
            ("root, listed unit id", caller(2, uid: 0, .systemdUnit), true),
            ("uid 1000, listed executable", caller(3, uid: 1000, .executable), false),
            ("uid 1000, listed unit id", caller(4, uid: 1000, .systemdUnit), false),
            ("nobody, listed unit id", caller(5, uid: 65534, .systemdUnit), false),
            ("verified Flatpak: sandboxes never register", caller(6, uid: 1000, .flatpak), false),
            ("unverified Flatpak", caller(7, uid: 1000, .unverifiedFlatpak), false),
            ("system uid, not listed", caller(8, uid: 120, .executable, "/usr/bin/other"), false),
        ]
        for (label, c, allowed) in table {
            let rig = Rig(config: config(agentAllow: [Self.firefox]), agents: [])
            let s = rig.manage(c, .registerAgent(path: W.agentPath))
            if allowed {
                XCTAssertEqual(s.effects, [.reply(s.call, .empty)], label)
                XCTAssertEqual(rig.core.agentName(forUID: c.uid), c.connection, label)
            } else {
                XCTAssertTrue(s.accessDenied, "\(label): \(s.effects)")
                XCTAssertNil(rig.core.agentName(forUID: c.uid), label)
            }
        }
        // The refusal says why, so that an administrator can tell it from "not listed".
        let rig = Rig(config: config(agentAllow: [Self.firefox]), agents: [])
        let s = rig.manage(caller(9, uid: 1000, .systemdUnit), .registerAgent(path: W.agentPath))
        guard case .accessDenied(let why)? = s.error else { return XCTFail("\(s.effects)") }
        XCTAssertTrue(why.contains("only in processes of system uids (at most 999, [daemon] system-uid-max), not of uid 1000"), why)
        XCTAssertTrue(why.contains("unit name"), why)
        // An empty list still lets any unsandboxed program register for its own uid.
        let open = Rig(agents: [])
        let o = open.manage(caller(10, uid: 1000, .executable), .registerAgent(path: W.agentPath))
        XCTAssertEqual(o.effects, [.reply(o.call, .empty)])
    }

    func testAnUnverifiedFlatpakIsStillRestrictedAsASandbox() {
        // Restricting is always safe: it may reset only its own record.
        let c = caller(1, uid: 1000, .unverifiedFlatpak)
        let rig = Rig()
        let other = rig.manage(c, .resetConsent(appID: W.mapsID, uid: nil))
        XCTAssertTrue(other.accessDenied, "\(other.effects)")
        let own = rig.manage(c, .resetConsent(appID: c.appID, uid: nil))
        XCTAssertEqual(own.effects, [.reply(own.call, .empty)])
        // And prompts say so.
        let t = rig.tap(c)
        XCTAssertEqual(t.confirm?.sandboxed, true)
    }
}
