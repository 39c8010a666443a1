import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentClient
import GeoTestSupport

/// The Swift client library (what apps import) against the real daemon, with
/// `geoconsentctl agent --auto allow-once` as the user's agent.
final class ClientLibraryTests: XCTestCase {
    var stack: Stack!
    var agent: ChildProcess!
    var feeder: Task<Void, Never>?

    override func setUpWithError() throws {
        stack = try Stack()
        let dir = try TempDir()
        agent = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                 arguments: ["--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                                 logPath: dir.file("agent.log"), captureStdout: true)
        XCTAssertNotNil(agent.readStdoutLine(timeout: 10), "the agent registered")
        // Feed gpsd one epoch every 50 ms with increasing receiver times.
        let gpsd = stack.gpsd
        feeder = Task.detached {
            var i = 0
            while !Task.isCancelled {
                i += 1
                let date = Date(timeIntervalSince1970: 1_790_000_000 + Double(i))
                gpsd.send(NMEA.epoch(at: date, lat: 48.1173, lon: 11.5167, altitude: 545.4, speedKnots: 22.4, course: 84.4))
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
        }
    }

    override func tearDown() {
        feeder?.cancel()
        agent?.stop()
        stack?.stop()
    }

    func testTapLocateStreamAndEndOfSession() async throws {
        let client = try GeoConsentClient(bus: .address(stack.bus.address))
        let before = try await client.authorization()
        XCTAssertEqual(before.status, .notDetermined)
        XCTAssertNil(before.accuracy)
        let status = try await client.requestOneTimeAuthorization(AuthOptions(reason: "test", accuracy: .full))
        XCTAssertEqual(status, .whenInUse)
        let info = try await client.authorization()
        XCTAssertEqual(info.status, .whenInUse)
        XCTAssertTrue(info.temporary)
        XCTAssertTrue(info.oneTimeApproved)

        let fix = try await client.requestLocation(maxAge: 0, timeout: 10)
        XCTAssertEqual(fix.latitude, 48.1173, accuracy: 1e-6)
        XCTAssertEqual(fix.longitude, 11.5167, accuracy: 1e-6)
        XCTAssertEqual(fix.accuracy, .full)
        XCTAssertNotNil(fix.timestamp)

        try await client.startUpdates()
        var updates = 0
        for await event in client.events {
            if case .locationUpdated(let loc) = event {
                XCTAssertEqual(loc.latitude, 48.1173, accuracy: 1e-6)
                updates += 1
                if updates == 3 { break }
            }
        }
        XCTAssertEqual(updates, 3)
        let sessions = try await client.listSessions()
        XCTAssertTrue(sessions.contains { $0.status == .whenInUse && $0.updates }, "\(sessions)")

        try await client.revoke()
        let after = try await client.authorization()
        XCTAssertEqual(after.status, .notDetermined, "Revoke ended the temporary grant")
        client.close()

        // A new connection is a new session: silent tap (the button was confirmed once).
        let again = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { again.close() }
        let consents = try await again.listConsents()
        XCTAssertEqual(consents.count, 1)
        XCTAssertTrue(consents[0].record.oneTimeApproved)
        let second = try await again.requestOneTimeAuthorization()
        XCTAssertEqual(second, .whenInUse)
        let st = try await again.status()
        XCTAssertEqual(st.version, geoconsentVersion)
        XCTAssertTrue(st.enabled)
    }

    func testCallsFailInsteadOfHangingWhenTheBusGoes() async throws {
        let client = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { client.close() }
        let before = try await client.authorization()
        XCTAssertEqual(before.status, .notDetermined)
        stack.bus.stop()
        for _ in 0..<2 {   // the one in flight when the bus goes, and one after
            do {
                _ = try await client.requestLocation(timeout: 60)
                XCTFail("a location with no bus")
            } catch let e as DBusError {
                XCTAssertTrue([DBusError.disconnectedName, DBusError.noReplyName].contains(e.name), "\(e)")
            }
        }
    }

    func testErrorsArriveAsDBusErrors() async throws {
        let client = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { client.close() }
        do {
            _ = try await client.requestLocation()
            XCTFail("a location without a grant")
        } catch let e as DBusError {
            XCTAssertEqual(e.name, "org.geoconsent.GeoConsent1.Error.NotAuthorized")
        }
    }
}
