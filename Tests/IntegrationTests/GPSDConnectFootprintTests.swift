import XCTest
import Foundation
import GeoCore
import GeoConsentAPI
import GeoTestSupport

/// The gpsd connect runs on a short-lived thread (gps_open blocks). glibc would
/// give that thread a 64 MiB malloc arena and an 8 MiB stack, kept reserved
/// after it ends: a daemon of a few MiB that lists as 80+ MiB. The connector
/// keeps the thread lean; this checks the whole process's address space, not
/// the connector's settings.
extension LocationBusTests {
    /// Far below the 72 MiB a default thread reserves, far above what a
    /// connection's buffers and libgps's data take.
    static let maxConnectGrowthKiB = 16 * 1024

    func testConnectingToGpsdReservesNoArenaOrBigStack() throws {
        let pid = stack.daemon.pid
        let stranger = try stack.peer()
        XCTAssertEqual(propertyBool(stranger, "GpsdConnected"), false, "gpsd not connected before a grant needs it")
        let before = try XCTUnwrap(Hostile.statusKB(pid, "VmSize"))

        let p = try tappedClient()
        let feed = LocationFeed()
        XCTAssertNotNil(locate(p, feed, maxAge: 0))
        XCTAssertEqual(propertyBool(stranger, "GpsdConnected"), true)
        let afterFirst = try XCTUnwrap(Hostile.statusKB(pid, "VmSize"))
        // The thread wakes the loop just before it returns: it may still be ending.
        XCTAssertTrue(stack.peers.pump(timeout: 5) { Hostile.statusKB(pid, "Threads") == 1 }, "the connect thread has ended")

        let growth = afterFirst - before
        print("gpsd connect footprint: VmSize \(before) KiB before, \(afterFirst) KiB connected (+\(growth) KiB)")
        XCTAssertLessThan(growth, Self.maxConnectGrowthKiB,
                          "VmSize grew \(growth) KiB when gpsd connected (\(before) -> \(afterFirst) KiB)")
    }
}
