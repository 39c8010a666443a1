import XCTest
import GeoDBus
import GeoCore
import GeoConsentAPI
import GeoTestSupport

/// The revoke race: five sessions of one app stream fixes fed 40 times a second,
/// and each way a grant can end (Revoke, the connection closing, ResetConsent,
/// location switched off) must stop that session's fixes at once, while the
/// other sessions keep getting theirs.
extension LocationBusTests {
    /// Five streaming sessions of one app, a feed of 40 epochs a second (each 0.1 s
    /// of receiver time later than the last), and the checks on what arrives.
    final class FastFeed {
        let test: LocationBusTests
        let admin: BusPeer
        let sessions: [BusPeer]
        let appID: String
        let ticker: LoopTicker

        init(_ test: LocationBusTests) throws {
            self.test = test
            admin = try test.stack.peer()
            var made: [BusPeer] = []
            for _ in 0..<5 { made.append(try test.tappedClient()) }
            sessions = made
            for s in sessions { XCTAssertNoThrow(try s.geo("StartUpdates", [.vardict([:])]).get()) }
            appID = try sessions[0].authorization().appID
            XCTAssertFalse(appID.isEmpty)
            ticker = test.ticker(LocationFeed(step: 10), interval: 0.025)
            ticker.start()
            XCTAssertTrue(test.stack.peers.pump(timeout: 10) { made.allSatisfy { !$0.locations().isEmpty } },
                          "every session gets fixes")
        }

        func stop() { ticker.stop() }

        /// `s` got no LocationUpdated at or after signal index `index`.
        func assertSilentAfter(_ s: BusPeer, _ index: Int, _ what: String, line: UInt = #line) {
            let leaked = s.locations(from: index)
            XCTAssertTrue(leaked.isEmpty, "\(what): \(leaked.count) LocationUpdated after the grant ended", line: line)
        }

        /// Each of `group` gets at least three more fixes.
        func assertStillFed(_ group: [BusPeer], _ what: String, line: UInt = #line) {
            let marks = group.map(\.signals.count)
            XCTAssertTrue(test.stack.peers.pump(timeout: 5) {
                zip(group, marks).allSatisfy { $0.0.locations(from: $0.1).count >= 3 }
            }, "\(what): the other sessions keep getting fixes", line: line)
        }

        /// After `change`, each of `group` gets `AuthorizationChanged` to `status`
        /// and no fix after it (checked at once and again half a second later).
        func assertEachStopsAt(_ group: [BusPeer], _ status: AuthorizationStatus, _ what: String,
                               line: UInt = #line, _ change: () throws -> Void) rethrows {
            let marks = group.map(\.signals.count)
            try change()
            var changedAt: [Int?] = []
            for (s, mark) in zip(group, marks) {
                guard let ac = s.waitForSignal("AuthorizationChanged", from: mark, timeout: 5),
                      let idx = s.indexOfSignal("AuthorizationChanged", from: mark) else {
                    XCTFail("\(what): no AuthorizationChanged", line: line)
                    changedAt.append(nil)
                    continue
                }
                XCTAssertEqual(AuthorizationChangedSignal.decode(ac.arguments()), status, what, line: line)
                changedAt.append(idx)
                test.stack.peers.settle(0.1)
                assertSilentAfter(s, idx, what, line: line)
            }
            test.stack.peers.settle(0.5)
            for (s, idx) in zip(group, changedAt) { if let idx { assertSilentAfter(s, idx, what, line: line) } }
        }
    }

    func testNoFixAfterRevokeWhileFeedingFast() throws {
        let feed = try FastFeed(self)
        defer { feed.stop() }
        // Revoke on S0, 20 times: each time a fresh grant (no prompt: the button
        // was confirmed once), updates, a fix or two, then Revoke at some point of
        // the stream. From the dispatch of the Revoke reply to the dispatch of the
        // next StartUpdates reply, no LocationUpdated may come.
        let s0 = feed.sessions[0]
        var windows: [(from: Int, to: Int)] = []
        var revokeIndex: Int?
        for round in 0..<20 {
            if round > 0 {
                XCTAssertEqual(try s0.tap().get(), 4)
                var startIndex: Int?
                s0.geoCall("StartUpdates", [.vardict([:])]) { r, index in
                    if case .failure(let e) = r { XCTFail("StartUpdates failed: \(e)") }
                    startIndex = index
                }
                XCTAssertTrue(stack.peers.pump(timeout: 10) { startIndex != nil })
                if let r = revokeIndex, let st = startIndex { windows.append((r, st)) }
            }
            let mark = s0.signals.count
            XCTAssertTrue(stack.peers.pump(timeout: 5) { s0.locations(from: mark).count >= 1 + round % 3 },
                          "round \(round): S0 gets fixes")
            revokeIndex = nil
            s0.geoCall("Revoke") { r, index in
                if case .failure(let e) = r { XCTFail("Revoke failed: \(e)") }
                revokeIndex = index
            }
            XCTAssertTrue(stack.peers.pump(timeout: 10) { revokeIndex != nil })
            // Give a leaked fix time to show up before the next grant.
            stack.peers.settle(0.03 + Double(round % 4) * 0.02)
        }
        feed.assertStillFed(Array(feed.sessions[1...4]), "after Revoke")
        stack.peers.settle(0.5)
        for (i, w) in windows.enumerated() {
            let leaked = s0.signals[w.from..<w.to].filter { $0.member == "LocationUpdated" }
            XCTAssertTrue(leaked.isEmpty, "Revoke round \(i): \(leaked.count) LocationUpdated after the Revoke reply")
        }
        feed.assertSilentAfter(s0, revokeIndex ?? 0, "last Revoke")
        XCTAssertEqual(try s0.authorization().status, .notDetermined)
        print("LocationBusTests: revoke race fed \(feed.ticker.ticks) epochs; fixes per session: "
              + "\(feed.sessions.map { $0.locations().count })")
    }

    func testNoFixAfterTheConnectionClosesWhileFeedingFast() throws {
        let feed = try FastFeed(self)
        defer { feed.stop() }
        let s4Name = feed.sessions[4].uniqueName
        feed.sessions[4].connection.close()
        stack.peers.settle(0.3)
        let listed = SessionListReply.decode(try feed.admin.geo("ListSessions").get()) ?? []
        XCTAssertFalse(listed.contains { $0.name == s4Name }, "S4's session ended")
        feed.assertStillFed(Array(feed.sessions[0...3]), "after S4 left")
        XCTAssertTrue(stack.daemon.isRunning)
    }

    func testNoFixAfterResetConsentWhileFeedingFast() throws {
        let feed = try FastFeed(self)
        defer { feed.stop() }
        // ResetConsent of the app ends every temporary grant of the app: back to not-determined.
        try feed.assertEachStopsAt(Array(feed.sessions[1...4]), .notDetermined, "ResetConsent") {
            XCTAssertNoThrow(try feed.admin.geo("ResetConsent", [.string(feed.appID), .vardict([:])]).get())
        }
        // A grant again needs a prompt, since the confirmation was forgotten.
        let prompts = agent.confirms.count
        XCTAssertEqual(try feed.sessions[1].tap().get(), 4)
        XCTAssertEqual(agent.confirms.count, prompts + 1)
    }

    func testNoFixAfterLocationIsSwitchedOffWhileFeedingFast() throws {
        let feed = try FastFeed(self)
        defer { feed.stop() }
        try feed.assertEachStopsAt(feed.sessions, .restricted, "Enabled false") {
            XCTAssertNoThrow(try feed.admin.setEnabled(false).get())
        }
        XCTAssertEqual(propertyBool(feed.admin, "InUse"), false)
        XCTAssertDBusError(feed.sessions[1].geo("RequestLocation", [.vardict([:])]), GeoConsentAPI.ErrorName.notAuthorized)
        XCTAssertTrue(stack.daemon.isRunning)
        XCTAssertNoThrow(try feed.admin.setEnabled(true).get())
    }
}
