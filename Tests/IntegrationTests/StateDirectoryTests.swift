import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// A state directory the daemon may not write (here a read-only mount, as an
/// admin's mistaken `ReadOnlyPaths=` or a full `ProtectSystem=` would make
/// it) is said as such, not as damage: the decision's caller is told why,
/// and the daemon goes on.
final class StateDirectoryTests: XCTestCase {
    func testAReadOnlyStateDirectoryIsSaidToBeNotWritable() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            throw XCTSkip("needs root and unshare(1) for a private read-only mount")
        }
        let dir = try TempDir()
        let state = dir.file("state")
        XCTAssertEqual(mkdir(state, 0o700), 0)
        // The daemon in a mount namespace of its own, where the state directory is read-only.
        let wrapper = dir.file("read-only-state")
        try """
        #!/bin/sh
        exec /usr/bin/unshare --mount --propagation private /bin/sh -c 'mount --bind -o ro "$0" "$0" && exec "$@"' \
            '\(state)' '\(TestPaths.binDir)/geoconsentd' "$@"

        """.write(toFile: wrapper, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(wrapper, 0o755), 0)
        let bus = try TestBus()
        defer { bus.stop() }
        let daemon = try DaemonInstance(busAddress: bus.address, gpsdPort: 1, stateDir: state, executable: wrapper)
        defer { daemon.stop() }
        let peers = PeerLoop()
        let agent = TestAgent(peer: try peers.connect(bus.address), behaviour: .answer("allow-while-using"))
        XCTAssertNoThrow(try agent.register().get())
        let app = try peers.connect(bus.address)
        let r = app.geo("RequestWhenInUseAuthorization", [OptionDictionary.encode(AuthOptions())], timeout: 20)
        guard case .failure(let e) = r else { return XCTFail("the decision was not stored, yet: \(r)") }
        XCTAssertTrue(e.message.hasPrefix("Could not store the decision: the state directory \(state) is not writable by uid 0 ("),
                      e.message)
        XCTAssertTrue(daemon.log().contains("cannot save consents: the state directory \(state) is not writable by uid 0"),
                      daemon.log())
        XCTAssertFalse(daemon.log().contains("corrupt"), "not damage")
        XCTAssertTrue(daemon.isRunning)
    }
}
