import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The GeoClue2 facade through a real bus with raw D-Bus clients: object paths,
/// properties, `Start` as a consent request, a new Location object per fix, and
/// the privacy rules (owner-only objects, unicast signals, no coordinate in a
/// broadcast). The real clients' tests are in GeoClueClientTests.
final class GeoClueBusTests: GeoClueTestCase {
    typealias API = GeoClueAPI

    /// A client object of `p` with `level` and `desktopID` set, started while
    /// fixes are fed; fails the test unless `Start` succeeds.
    @discardableResult
    func startedClient(_ p: BusPeer, level: UInt32 = GeoClueAccuracyLevel.exact, desktopID: String = "org.example.Maps",
                       file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let c = try p.geoclueClient()
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.desktopID, .string(desktopID)).get(),
                         file: file, line: line)
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(level)).get(),
                         file: file, line: line)
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get(), file: file, line: line)
        return c
    }

    /// The `Active` values of the client's `PropertiesChanged` signals `p` received.
    func activeChanges(_ p: BusPeer, _ client: String) -> [Bool] {
        p.signals.compactMap { m in
            guard m.member == "PropertiesChanged", m.path == client else { return nil }
            return m.arguments()[1].vardictValue?[ClientProperty.active]?.boolValue
        }
    }

    // MARK: Objects and properties

    func testManagerClientsAndTheirProperties() throws {
        let p = try stack.peer(), q = try stack.peer()
        let manager = try p.getAll(API.managerPath, API.managerInterfaceName).get()
        XCTAssertEqual(manager[ManagerProperty.inUse], .bool(false))
        XCTAssertEqual(manager[ManagerProperty.availableAccuracyLevel], .uint32(GeoClueAccuracyLevel.exact))

        let c1 = try p.geoclueClient()
        XCTAssertNotNil(API.clientNumber(of: c1), c1)
        XCTAssertEqual(try p.geoclueClient(), c1, "GetClient reuses the connection's client")
        let c2 = try p.geoclueClient(create: true), c3 = try q.geoclueClient()
        XCTAssertEqual(Set([c1, c2, c3]).count, 3, "CreateClient makes a new one")
        // Numbers nobody can guess, not a counter another caller could follow.
        let numbers = [c1, c2, c3].compactMap { API.clientNumber(of: $0) }
        XCTAssertEqual(numbers.count, 3)
        XCTAssertFalse(numbers == [1, 2, 3] || numbers.allSatisfy { $0 < 1000 }, "\(numbers)")

        let props = try p.getAll(c1, API.clientInterfaceName).get()
        XCTAssertEqual(props, [
            ClientProperty.location: .objectPath("/"), ClientProperty.distanceThreshold: .uint32(0),
            ClientProperty.timeThreshold: .uint32(0), ClientProperty.desktopID: .string(""),
            ClientProperty.requestedAccuracyLevel: .uint32(GeoClueAccuracyLevel.city), ClientProperty.active: .bool(false),
        ])
        XCTAssertNoThrow(try p.set(c1, API.clientInterfaceName, ClientProperty.timeThreshold, .uint32(7)).get())
        XCTAssertEqual(p.clientProperty(c1, ClientProperty.timeThreshold), .uint32(7))
        XCTAssertDBusError(p.set(c1, API.clientInterfaceName, ClientProperty.active, .bool(true)), DBusError.propertyReadOnlyName)
        XCTAssertDBusError(p.set(c1, API.clientInterfaceName, ClientProperty.desktopID,
                                 .string(String(repeating: "x", count: 257))), DBusError.invalidArgsName)

        // DeleteClient: one's own only; another's is answered as a missing one.
        XCTAssertDBusError(q.gc(API.managerPath, API.managerInterfaceName, "DeleteClient", [.objectPath(c1)]),
                           DBusError.invalidArgsName)
        XCTAssertDBusError(p.gc(API.managerPath, API.managerInterfaceName, "DeleteClient",
                                [.objectPath("/org/freedesktop/GeoClue2/Client/99")]), DBusError.invalidArgsName)
        XCTAssertNoThrow(try p.gc(API.managerPath, API.managerInterfaceName, "DeleteClient", [.objectPath(c1)]).get())
        XCTAssertDBusError(p.get(c1, API.clientInterfaceName, ClientProperty.active), DBusError.unknownObjectName)
        let again = try p.geoclueClient()
        XCTAssertFalse([c1, c2, c3].contains(again), "a deleted client is not reused: \(again)")

        // AddAgent reads the caller's MaxAccuracyLevel first: a caller serving no agent is refused.
        XCTAssertDBusError(p.gc(API.managerPath, API.managerInterfaceName, "AddAgent", [.string("gnome-shell")]),
                           DBusError.failedName)
    }

    // MARK: Start and fixes

    /// A client's connection (GetClient, its properties, Start) costs the
    /// identity helper what a connection whose one call starts no session
    /// costs: the resolution of its first call. The pidfd proven then is what
    /// the process watch takes at `Start`, not a second check of the process
    /// through the helper (IdentityHelperCost).
    func testAClientsStartAsksTheIdentityHelperNothingMore() throws {
        let cost = try IdentityHelperCost(stack)
        agent.behaviour = .answer("allow-while-using")
        startFeeding()
        let root = try stack.peer()
        try startedClient(root)   // the app's one prompt; its process watch and the set are open from now on
        _ = root.pingDaemon()
        let count = 10
        let settle = { _ = root.pingDaemon() }
        let noSession = try cost.perConnection(count, settle: settle) { _ = try $0.sessions() }
        // Four calls per connection: on a loaded machine one may come after the
        // daemon's interval between checks of a known caller, and be checked
        // for that reason. Such a batch says nothing of Start: measured again.
        var client = try cost.perConnection(count, settle: settle) { try self.startedClient($0) }
        for _ in 0..<3 where client.slowest >= IdentityHelperCost.recheckInterval {
            client = try cost.perConnection(count, settle: settle) { try self.startedClient($0) }
        }
        if client.slowest >= IdentityHelperCost.recheckInterval {
            throw XCTSkip("the machine was too slow for four calls within the daemon's 100 ms in each of four batches")
        }
        XCTAssertGreaterThan(noSession.reads, 0, "the helper resolved nothing: not the helper the daemon asks")
        XCTAssertEqual(noSession.descriptors, 0)
        XCTAssertEqual(client.descriptors, count, "each client's process is watched")
        XCTAssertEqual(client.reads, noSession.reads, "a client's Start asked the helper again")
        XCTAssertEqual(agent.confirms.count, 1, "one prompt, the first Start's")
    }

    /// The watch a client's `GetClient` begins ends with the connection's last
    /// client object: clients created and deleted without ever starting, on
    /// connections that stay, leave the daemon no process descriptor (a uid
    /// cannot pile up watches that way).
    func testADeletedClientThatNeverStartedLeavesNoProcessWatch() throws {
        let cost = try IdentityHelperCost(stack)
        let before = cost.pidfds()
        var peers: [BusPeer] = []
        for _ in 0..<10 {
            let p = try stack.peer()
            let c = try p.geoclueClient(create: true)
            _ = p.pingDaemon()   // answered once the watch has begun
            XCTAssertEqual(cost.pidfds(), before + 1, "the client's GetClient watched its process")
            XCTAssertNoThrow(try p.gc(API.managerPath, API.managerInterfaceName, "DeleteClient", [.objectPath(c)]).get())
            _ = p.pingDaemon()
            XCTAssertEqual(cost.pidfds(), before, "the watch ended with the client")
            peers.append(p)
        }
        withExtendedLifetime(peers) {}   // the connections stayed on the bus throughout
    }

    func testStartPromptsThenEachFixIsANewLocationObject() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try startedClient(p)
        XCTAssertEqual(p.clientProperty(c, ClientProperty.active), .bool(true))
        // The prompt: the standard one, for the app the bus credentials show; DesktopId only for display.
        let confirm = try XCTUnwrap(agent.confirms.first)
        XCTAssertEqual(confirm.kind, .whenInUse)
        XCTAssertEqual(confirm.appName, "org.example.Maps")
        XCTAssertNotEqual(confirm.appID, "org.example.Maps")
        XCTAssertEqual(confirm.accuracy, .full)

        let first = try XCTUnwrap(waitForUpdate(p, c))
        XCTAssertEqual(first.old, "/")
        XCTAssertEqual(first.new, c + "/Location/0")
        XCTAssertEqual(p.clientProperty(c, ClientProperty.location), .objectPath(first.new))
        let loc = try XCTUnwrap(try p.geoclueLocation(first.new).get())
        XCTAssertEqual(loc.latitude, feed.latitude, accuracy: 1e-6)
        XCTAssertEqual(loc.longitude, feed.longitude, accuracy: 1e-6)
        XCTAssertEqual(loc.altitude ?? 0, 123.4, accuracy: 0.01)
        XCTAssertEqual(loc.speed ?? 0, 12.34 * 1852 / 3600, accuracy: 0.01)
        XCTAssertEqual(loc.heading ?? 0, 56.7, accuracy: 0.01)
        XCTAssertEqual(loc.description, "gps", "the source")
        XCTAssertTrue(feed.sentTimestamps.contains(loc.timestamp ?? 0), "the receiver's time of the fix")
        XCTAssertGreaterThan(loc.accuracy ?? 0, 0)

        let second = try XCTUnwrap(waitForUpdate(p, c, count: 2))
        stopFeeding()
        XCTAssertEqual(second.old, first.new, "never updated in place")
        XCTAssertEqual(second.new, c + "/Location/1")
        XCTAssertNotNil(try p.geoclueLocation(first.new).get(), "the old one stays for a while")
        // ... at least 5 s, then it goes; the latest stays.
        stack.peers.settle(4)
        XCTAssertNotNil(try? p.geoclueLocation(first.new).get())
        let last = p.locationUpdates(of: c).last!.new
        stack.peers.settle(2.5)
        XCTAssertDBusError(p.geoclueLocation(first.new), DBusError.unknownObjectName)
        XCTAssertNotNil(try p.geoclueLocation(last).get())
        XCTAssertEqual(try p.getAll(API.managerPath, API.managerInterfaceName).get()[ManagerProperty.inUse], .bool(true))
    }

    func testFastFixesKeepSixteenEarlierObjectsAndAnnounceTheLatest() throws {
        let p = try stack.peer()
        startFeeding(interval: 0.04)
        let c = try startedClient(p)
        XCTAssertNotNil(waitForUpdate(p, c, count: 20))
        stopFeeding()
        stack.peers.settle(0.3)
        // Well within 5 s of the first: the latest and the 16 before it are served, older ones are gone.
        let paths = p.locationUpdates(of: c).map(\.new)
        XCTAssertNotNil(try p.geoclueLocation(paths[paths.count - 17]).get())
        XCTAssertDBusError(p.geoclueLocation(paths[paths.count - 18]), DBusError.unknownObjectName)
        XCTAssertDBusError(p.geoclueLocation(paths[0]), DBusError.unknownObjectName)
        // `Location` changes are announced (one announcement may cover several fixes): the
        // latest last, and each after the LocationUpdated that named it.
        let announced = p.signals.compactMap { m -> String? in
            guard m.member == "PropertiesChanged", m.path == c else { return nil }
            return m.arguments()[1].vardictValue?[ClientProperty.location]?.stringValue
        }
        XCTAssertEqual(announced.last, paths.last)
        XCTAssertEqual(p.clientProperty(c, ClientProperty.location), .objectPath(paths.last!))
        for path in announced {
            let updated = p.signals.firstIndex { $0.member == "LocationUpdated" && $0.arguments().last?.stringValue == path }
            let changed = p.signals.firstIndex { $0.member == "PropertiesChanged" && $0.path == c &&
                $0.arguments()[1].vardictValue?[ClientProperty.location]?.stringValue == path }
            XCTAssertLessThan(try XCTUnwrap(updated), try XCTUnwrap(changed), path)
        }
    }

    func testFirstFixComesFromTheCacheRightAfterStart() throws {
        let p = try stack.peer(), q = try stack.peer()
        startFeeding()
        let c = try startedClient(p)
        XCTAssertNotNil(waitForUpdate(p, c, count: 2))
        stopFeeding()
        stack.peers.settle(0.5)
        // No fix is sent any more: q's first one is the last that came, delivered at Start.
        let d = try startedClient(q)
        let first = try XCTUnwrap(waitForUpdate(q, d, timeout: 2))
        let loc = try XCTUnwrap(try q.geoclueLocation(first.new).get())
        XCTAssertEqual(loc.timestamp, feed.lastTimestamp)
    }

    func testCityLevelGetsTheGridCell() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try startedClient(p, level: GeoClueAccuracyLevel.city)
        XCTAssertEqual(agent.confirms.first?.accuracy, .reduced)
        try assertTheGridCell(p, c)
    }

    /// The client's next Location is the grid cell of the fed position, with nothing more.
    func assertTheGridCell(_ p: BusPeer, _ client: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = try XCTUnwrap(waitForUpdate(p, client), file: file, line: line).new
        let loc = try XCTUnwrap(try p.geoclueLocation(path).get(), file: file, line: line)
        let cell = ReducedGrid(cellSize: 5000).reduce(Fix(latitude: feed.latitude, longitude: feed.longitude, mode: .threeD))
        XCTAssertEqual(loc.latitude, cell.latitude, accuracy: 1e-9, file: file, line: line)
        XCTAssertEqual(loc.longitude, cell.longitude, accuracy: 1e-9, file: file, line: line)
        XCTAssertEqual(loc.accuracy ?? 0, cell.horizontalAccuracy ?? -1, accuracy: 1e-6, "the cell's half-diagonal",
                       file: file, line: line)
        XCTAssertNil(loc.altitude, file: file, line: line)
        XCTAssertNil(loc.speed, file: file, line: line)
        XCTAssertNil(loc.heading, file: file, line: line)
    }

    /// The user turns Precise off in our agent's prompt for an exact-level
    /// client (`allow-once-reduced`): the client gets the grid cell, as at city level.
    func testPreciseOffGivesAnExactClientTheGridCell() throws {
        let p = try stack.peer()
        agent.behaviour = .answer("allow-once-reduced")
        startFeeding()
        let c = try startedClient(p, level: GeoClueAccuracyLevel.exact)
        XCTAssertEqual(agent.confirms.first?.accuracy, .full, "exact was asked for")
        try assertTheGridCell(p, c)
    }

    /// Firefox changes accuracy on a live client: `Stop`, set
    /// `RequestedAccuracyLevel` and thresholds, `Start`. Each `Start` gets fixes
    /// at its own level, the first one (from the cache) included: a grant stored
    /// for reduced does not cover exact (the user is asked again), and one for
    /// full gives reduced fixes once reduced is asked for.
    func testFirefoxStopSetStartChangesAccuracyOnALiveClient() throws {
        let p = try stack.peer()
        agent.behaviour = .answer("allow-while-using")
        startFeeding(interval: 0.25, north: 10)
        let c = try startedClient(p, level: GeoClueAccuracyLevel.city, desktopID: "org.example.Firefox")
        /// Waits for `n` updates from the `from`th on and reads their locations
        /// at once (an earlier one is served 5 s after the next came).
        func locations(from: Int, _ n: Int) throws -> [GeoClueLocation] {
            XCTAssertNotNil(waitForUpdate(p, c, count: from + n))
            return try p.locationUpdates(of: c).dropFirst(from).map {
                try XCTUnwrap(try p.geoclueLocation($0.new).get(), $0.new)
            }
        }
        func restart(level: UInt32, timeThreshold: UInt32) {
            XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
            XCTAssertEqual(p.clientProperty(c, ClientProperty.active), .bool(false))
            XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(level)).get())
            XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.timeThreshold, .uint32(timeThreshold)).get())
            XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
            XCTAssertEqual(p.clientProperty(c, ClientProperty.active), .bool(true))
        }

        // Counted before each Start: its first fix may come before Start's reply is read.
        let city = try locations(from: 0, 2)
        let exactFrom = p.locationUpdates(of: c).count
        restart(level: GeoClueAccuracyLevel.exact, timeThreshold: 1)
        let exact = try locations(from: exactFrom, 3)
        let cityFrom = p.locationUpdates(of: c).count
        restart(level: GeoClueAccuracyLevel.city, timeThreshold: 0)
        let cityAgain = try locations(from: cityFrom, 2)
        stopFeeding()

        XCTAssertEqual(agent.confirms.map(\.accuracy), [.reduced, .full], "exact asked again; city covered by it")
        // Each first one came from the cache right after Start: at the new level too.
        for loc in city + cityAgain { XCTAssertTrue(isGridCell(loc), "city: \(loc)") }
        for loc in exact { XCTAssertTrue(isOnTheTrack(loc), "exact: \(loc)") }
        // TimeThreshold 1 while exact: about one fix a second of four sent.
        let times = p.signals.indices.filter { p.signals[$0].member == "LocationUpdated" }.map { p.signalTimes[$0] }
        let exactTimes = Array(times[exactFrom..<cityFrom])
        for (a, b) in zip(exactTimes, exactTimes.dropFirst()) { XCTAssertGreaterThan(Double(b - a) / 1e9, 0.8) }
    }

    func testThresholdsFilterAndChangeWhileStarted() throws {
        let p = try stack.peer()
        let c = try p.geoclueClient()
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.timeThreshold, .uint32(2)).get())
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(8)).get())
        startFeeding(interval: 0.2)
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
        stack.peers.settle(5)
        let times = p.signals.indices.filter { p.signals[$0].member == "LocationUpdated" }.map { p.signalTimes[$0] }
        XCTAssertTrue((2...4).contains(times.count), "about one fix every 2 s of 25 sent: \(times.count)")
        for (a, b) in zip(times, times.dropFirst()) { XCTAssertGreaterThan(Double(b - a) / 1e9, 1.8) }

        // A distance threshold set while started applies at once: the receiver stands still.
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.distanceThreshold, .uint32(1000)).get())
        let before = p.locationUpdates(of: c).count
        stack.peers.settle(3)
        XCTAssertEqual(p.locationUpdates(of: c).count, before)
    }

    // MARK: Refusals

    func testStartRefusalsSayWhy() throws {
        let p = try stack.peer()
        let c = try p.geoclueClient()
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(0)).get())
        guard case .failure(let none) = p.gc(c, API.clientInterfaceName, "Start") else { return XCTFail("level 0 started") }
        XCTAssertEqual(none.name, DBusError.accessDeniedName)
        XCTAssertTrue(none.message.contains("0 (none)"), none.message)
        XCTAssertEqual(agent.confirms.count, 0)

        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(8)).get())
        agent.behaviour = .answer("deny")
        guard case .failure(let denied) = p.gc(c, API.clientInterfaceName, "Start") else { return XCTFail("started") }
        XCTAssertEqual(denied.name, DBusError.accessDeniedName)
        XCTAssertTrue(denied.message.contains("denied"), denied.message)
        XCTAssertEqual(p.clientProperty(c, ClientProperty.active), .bool(false))
        // The decision is stored: another client of the app is refused without a prompt.
        let c2 = try p.geoclueClient(create: true)
        XCTAssertDBusError(p.gc(c2, API.clientInterfaceName, "Start"), DBusError.accessDeniedName)
        XCTAssertEqual(agent.confirms.count, 1)

        // Location switched off (root): refused, saying so; the Manager shows level 0.
        let root = try stack.peer()
        XCTAssertNoThrow(try root.setEnabled(false).get())
        XCTAssertEqual(try p.getAll(API.managerPath, API.managerInterfaceName).get()[ManagerProperty.availableAccuracyLevel],
                       .uint32(0))
        guard case .failure(let off) = p.gc(c, API.clientInterfaceName, "Start") else { return XCTFail("started") }
        XCTAssertTrue(off.message.contains("switched off"), off.message)

        // No agent for the uid.
        XCTAssertNoThrow(try root.setEnabled(true).get())
        agentPeer.connection.close()
        stack.peers.settle(0.3)
        let other = try stack.peer()
        let c3 = try other.geoclueClient()
        XCTAssertNoThrow(try other.set(c3, API.clientInterfaceName, ClientProperty.desktopID, .string("x")).get())
        // A new app for the daemon: the test process is one app, so reset its stored denial first.
        XCTAssertNoThrow(try other.geo("ResetConsent", [.string(agent.confirms[0].appID), .vardict([:])]).get())
        guard case .failure(let noAgent) = other.gc(c3, API.clientInterfaceName, "Start") else { return XCTFail("started") }
        XCTAssertTrue(noAgent.message.contains("No consent agent"), noAgent.message)
    }

    func testUnansweredPromptFailsStartAndIsWithdrawn() throws {
        agent.behaviour = .never
        let p = try stack.peer()
        let c = try p.geoclueClient()
        let start = p.gcAsync(c, API.clientInterfaceName, "Start")
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.agent.confirms.count == 1 })
        // Stop while the prompt is open: Start fails, the prompt is withdrawn.
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
        stack.peers.pump(timeout: 5) { start.isDone && self.agent.cancels.count == 1 }
        XCTAssertDBusError(start.result ?? .success([]), DBusError.accessDeniedName)
        XCTAssertEqual(agent.cancels, [agent.confirms[0].requestID])
    }

    // MARK: The grant's life

    func testStopEndsAllowOnceAndTheConnectionLeavingEndsEveryClient() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try startedClient(p)
        let session = p.uniqueName + "/geoclue/\(API.clientNumber(of: c) ?? 0)"
        XCTAssertTrue(try sessionNames().contains(session), "the client object's own session")
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Stop").get())
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.activeChanges(p, c) == [true, false] }, "\(activeChanges(p, c))")
        XCTAssertFalse(try sessionNames().contains(session))
        // Allow Once ended with Stop: the next Start asks again.
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
        XCTAssertEqual(agent.confirms.count, 2)
        let c2 = try startedClient(p)
        XCTAssertEqual(c2, c, "GetClient")
        let c3 = try p.geoclueClient(create: true)
        XCTAssertNoThrow(try p.gc(c3, API.clientInterfaceName, "Start").get())
        XCTAssertEqual(agent.confirms.count, 3, "each client object is its own grant")

        let q = try stack.peer()
        let mine = p.uniqueName
        p.connection.close()
        stack.peers.settle(0.5)
        XCTAssertEqual(try sessionNames().filter { $0.hasPrefix(mine) }, [])
        switch q.gc(API.clientsPath, ObjectServer.introspectable, "Introspect") {
        case .success(let r): XCTAssertFalse(r.first?.stringValue?.contains("<node name=") ?? true, "\(r)")
        case .failure(let e): XCTAssertEqual(e.name, DBusError.unknownObjectName, "no client object is left")
        }
    }

    func testSwitchingLocationOffStopsActiveClients() throws {
        let p = try stack.peer()
        startFeeding()
        let c = try startedClient(p)
        XCTAssertNotNil(waitForUpdate(p, c))
        XCTAssertNoThrow(try stack.peer().setEnabled(false).get())
        XCTAssertTrue(stack.peers.pump(timeout: 5) { self.activeChanges(p, c) == [true, false] })
        let count = p.locationUpdates(of: c).count
        stack.peers.settle(1.5)
        XCTAssertEqual(p.locationUpdates(of: c).count, count, "no fix after the switch")
    }

    // MARK: Privacy

    func testOtherCallersCannotReadOrUseAClientsObjectsAndBystandersSeeNoCoordinate() throws {
        let bystander = try stack.peer()
        try bystander.addMatch("type='signal'")
        let p = try stack.peer(), q = try stack.peer()
        startFeeding(north: 20)
        let c = try p.geoclueClient()
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.distanceThreshold, .uint32(1)).get())
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.timeThreshold, .uint32(1)).get())
        XCTAssertNoThrow(try p.set(c, API.clientInterfaceName, ClientProperty.requestedAccuracyLevel, .uint32(8)).get())
        XCTAssertNoThrow(try p.gc(c, API.clientInterfaceName, "Start").get())
        let loc = try XCTUnwrap(waitForUpdate(p, c, count: 2)).new
        XCTAssertNotNil(try p.geoclueLocation(loc).get())

        // Another app: no reading, no writing, no calling, no listing; answered as
        // for objects that do not exist, word for word.
        let missingLoc = loc + "0", missing = c + "0"
        for (path, m) in [(loc, missingLoc), (c, missing)] {
            for (label, call) in [("GetAll", { (x: String) in q.getAll(x, API.clientInterfaceName).map { _ in [DBusValue]() } }),
                                  ("Get", { (x: String) in q.get(x, API.locationInterfaceName, LocationProperties.latitude).map { [$0] } }),
                                  ("Set", { (x: String) in q.set(x, API.clientInterfaceName, ClientProperty.distanceThreshold, .uint32(0)).map { _ in [] } }),
                                  ("Stop", { (x: String) in q.gc(x, API.clientInterfaceName, "Stop") }),
                                  ("Introspect", { (x: String) in q.gc(x, ObjectServer.introspectable, "Introspect") })] {
                let theirs = call(path), none = call(m)
                XCTAssertDBusError(theirs, DBusError.unknownObjectName)
                guard case .failure(let e1) = theirs, case .failure(let e2) = none else { XCTFail(label); continue }
                XCTAssertEqual(e1.message.replacingOccurrences(of: path, with: "P"), e2.message.replacingOccurrences(of: m, with: "P"),
                               "\(label): another's object is answered as a missing one")
            }
        }
        // To another caller, a node with only others' objects below does not exist.
        XCTAssertDBusError(q.gc(API.clientsPath, ObjectServer.introspectable, "Introspect"), DBusError.unknownObjectName)
        let parent = try q.gc("/org/freedesktop/GeoClue2", ObjectServer.introspectable, "Introspect").get().first?.stringValue ?? ""
        XCTAssertTrue(parent.contains("<node name=\"Manager\"/>") && !parent.contains("<node name=\"Client\"/>"), parent)
        let own = try p.gc(API.clientsPath, ObjectServer.introspectable, "Introspect").get().first?.stringValue ?? ""
        XCTAssertTrue(own.contains("<node name=\"\(API.clientNumber(of: c) ?? 0)\"/>"), own)

        // The bystander matched every signal: it got the broadcasts (InUse) and nothing about the client.
        stack.peers.settle(1)
        let fromDaemon = bystander.signals.filter { $0.sender != "org.freedesktop.DBus" }
        XCTAssertTrue(fromDaemon.contains { $0.path == API.managerPath }, "InUse is broadcast")
        XCTAssertEqual(fromDaemon.filter { ($0.path ?? "").hasPrefix(API.clientsPath) }.count, 0)
        XCTAssertEqual(fromDaemon.flatMap { $0.arguments().flatMap(\.doubles) }, [], "no number in any broadcast")
        XCTAssertGreaterThan(p.locationUpdates(of: c).count, 1)
    }
}
