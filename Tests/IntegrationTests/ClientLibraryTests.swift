import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
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

        var fix = try await client.requestLocation(maxAge: 0, timeout: 10)
        // gpsd's very first report of a new source can be partial (a GGA alone, no
        // time yet: LocationBusTests); the next fix has the receiver's time.
        for _ in 0..<3 where fix.timestamp == nil { fix = try await client.requestLocation(maxAge: 0, timeout: 10) }
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

    /// An app that is the user's consent agent: its prompts arrive as requests,
    /// a withdrawn one as `.cancel`, and unregistering ends the stream.
    func testAppServesTheConsentAgent() async throws {
        agent.stop()   // the command-line agent leaves: this app takes over
        let path = "/org/example/Agent"
        let app = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { app.close() }
        var registered: AsyncStream<AgentRequest>?
        for _ in 0..<100 where registered == nil {   // the slot is free once the daemon saw the old agent leave
            do {
                registered = try await app.registerAgent(at: path)
            } catch let e as DBusError where e.name == GeoConsentAPI.ErrorName.agentExists {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        var requests = try XCTUnwrap(registered, "never registered").makeAsyncIterator()

        // A client that leaves while its prompt is open: the prompt is withdrawn.
        let leaving = try GeoConsentClient(bus: .address(stack.bus.address))
        let abandoned = Task { try await leaving.requestOneTimeAuthorization(AuthOptions(reason: "leaving")) }
        guard case .confirm(let first, _)? = await requests.next() else { return XCTFail("no prompt") }
        XCTAssertEqual(first.reason, "leaving")
        leaving.close()
        _ = try? await abandoned.value
        guard case .cancel(let id)? = await requests.next() else { return XCTFail("no Cancel") }
        XCTAssertEqual(id, first.requestID)

        // A client that waits: the agent's answer is its status.
        let client = try GeoConsentClient(bus: .address(stack.bus.address))
        defer { client.close() }
        let tap = Task { try await client.requestOneTimeAuthorization(AuthOptions(reason: "show the map", accuracy: .reduced,
                                                                                  appName: "Maps")) }
        guard case .confirm(let prompt, let responder)? = await requests.next() else { return XCTFail("no prompt") }
        XCTAssertEqual(prompt.kind, .oneTime)
        XCTAssertEqual(prompt.reason, "show the map")
        XCTAssertEqual(prompt.appName, "Maps")
        XCTAssertEqual(prompt.accuracy, .reduced)
        XCTAssertEqual(prompt.pid, UInt32(getpid()))
        XCTAssertNotEqual(prompt.requestID, first.requestID)
        responder.reply(.allowOnce)
        responder.reply(.deny)   // only the first answer counts
        let status = try await tap.value
        XCTAssertEqual(status, .whenInUse)
        let info = try await client.authorization()
        XCTAssertEqual(info.accuracy, .reduced)

        try await app.unregisterAgent(at: path)
        let end = await requests.next()
        XCTAssertNil(end, "the requests end with the registration")
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
