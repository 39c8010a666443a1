import XCTest
import Glibc
@testable import GeoSystem
import GeoCore

/// `users-off` (docs/state-format.md): the users who switched location off for
/// their apps, as written and read; a damaged file leaves every user but root off.
final class UsersOffStoreTests: XCTestCase {
    func testRoundTripAndTheFileAsDocumented() throws {
        let dir = TestDirectory()
        let store = StateStore(directory: dir.path)
        XCTAssertEqual(store.loadUsersOff().users, UsersOff(), "missing: nobody off")
        try store.saveUsersOff(UsersOff(uids: [1001, 1000]))
        XCTAssertEqual(dir.read("users-off"), "# geoconsent users-off v1\n1000\n1001\n")
        XCTAssertEqual(store.loadUsersOff().users, UsersOff(uids: [1000, 1001]))
        var after = UsersOff.everyone
        after.set(1000, off: false)
        try store.saveUsersOff(after)
        XCTAssertEqual(dir.read("users-off"), "# geoconsent users-off v1\n*\n+1000\n")
        XCTAssertEqual(store.loadUsersOff().users, after)
    }

    func testADamagedFileIsMovedAsideAndEveryUserButRootIsOff() {
        for bad in ["# geoconsent users-off v1\n1000", "# other\n1000\n", "# geoconsent users-off v1\n01000\n",
                    "# geoconsent users-off v1\n1000\n1000\n", "# geoconsent users-off v1\n*\n1000\n",
                    "# geoconsent users-off v1\n4294967296\n"] {
            let dir = TestDirectory()
            dir.write("users-off", bad)
            let loaded = StateStore(directory: dir.path).loadUsersOff()
            XCTAssertEqual(loaded.users, .everyone, bad)
            XCTAssertTrue(loaded.problem?.contains("location stays off for every user's apps") ?? false, "\(bad): \(loaded.problem ?? "")")
            XCTAssertNil(dir.read("users-off"), "moved aside: \(bad)")
        }
    }
}
