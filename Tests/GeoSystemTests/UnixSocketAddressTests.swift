import XCTest
import Glibc
import GeoSystem

/// `withUnixSocketAddress`: a path connects, an abstract "@name" reaches the
/// abstract socket, and a path that does not fit is refused.
final class UnixSocketAddressTests: XCTestCase {
    private func listener(bindingTo name: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        XCTAssertEqual(withUnixSocketAddress(name) { bind(fd, $0, $1) }, 0, name)
        XCTAssertEqual(listen(fd, 1), 0)
        return fd
    }

    private func connects(to name: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        return withUnixSocketAddress(name) { connect(fd, $0, $1) } == 0
    }

    func testAPathAndAnAbstractNameConnectAndATooLongPathIsRefused() {
        let dir = TestDirectory()
        let path = dir.sub("s.sock")
        let a = listener(bindingTo: path)
        defer { close(a) }
        XCTAssertTrue(connects(to: path))
        XCTAssertFalse(connects(to: path + "-none"))
        let abstract = "@geoconsent-test-\(getpid())"
        let b = listener(bindingTo: abstract)
        defer { close(b) }
        XCTAssertTrue(connects(to: abstract))
        XCTAssertFalse(connects(to: abstract + "x"), "an abstract name is exactly its bytes")
        XCTAssertNil(withUnixSocketAddress("/" + String(repeating: "x", count: 200)) { _, _ in 0 })
    }
}
