import XCTest
@testable import GeoConsentDaemon

/// The session of a cgroup as logind reads it (libsystemd's cg_path_get_session).
final class LoginSessionOfCgroupTests: XCTestCase {
    typealias L = LoginSessionOfCgroup

    func testASessionScopeAfterTheSlicesIsTheSession() {
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/session-2.scope"),
                       .session(id: "2", path: "/org/freedesktop/login1/session/_32"))
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/session-c14.scope/sub"),
                       .session(id: "c14", path: "/org/freedesktop/login1/session/c14"))
        XCTAssertEqual(L.answer("/session-12.scope"), .session(id: "12", path: "/org/freedesktop/login1/session/_312"))
    }

    func testAUsersOwnSubtreeOrAServiceIsNoSession() {
        // An app of a desktop session started by the user's manager: no session, as logind says.
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Maps-1234.scope"), L.Answer.none)
        // A session-named scope the user made inside their delegated subtree does not count.
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/user@1000.service/app.slice/session-1.scope"), L.Answer.none)
        XCTAssertEqual(L.answer("/system.slice/cron.service"), L.Answer.none)
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/session-.scope"), L.Answer.none, "an empty id")
        XCTAssertEqual(L.answer("/user.slice/user-1000.slice/session-a_b.scope"), L.Answer.none, "not an id logind makes")
    }

    func testAPathSystemdDoesNotLayOutIsAskedOfLogind() {
        XCTAssertNil(L.answer("/"))
        XCTAssertNil(L.answer("/user.slice/user-1000.slice"))
        XCTAssertNil(L.answer("/user.slice/not a unit"))
        XCTAssertNil(L.answer("/user.slice/" + String(repeating: "x", count: 300) + ".scope"))
    }

    func testPathLabelsAsSdBusEncodesThem() {
        XCTAssertEqual(L.pathLabel("2"), "_32")
        XCTAssertEqual(L.pathLabel("c2"), "c2")
        XCTAssertEqual(L.pathLabel("a-b"), "a_2db")
    }
}
