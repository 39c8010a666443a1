import XCTest
import Foundation
import GeoDBus
import GeoTestSupport

/// A logind stand-in on a test bus: python-dbusmock's `logind` template
/// (`/usr/bin/python3 -m dbusmock --template logind`, told the bus as its
/// system bus), driven through its own methods: sessions added with
/// `AddSession`, `LockedHint` set with the session's `SetLockedHint` (as a
/// screen locker does), `Lock`/`Unlock` emitted by the session's methods of
/// those names, and `Active` changed with the mock's `UpdateProperties` (as
/// logind does when another session comes to the foreground).
final class LogindMock {
    static let busName = "org.freedesktop.login1"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let mockInterface = "org.freedesktop.DBus.Mock"

    let process: ChildProcess
    private let peer: BusPeer

    /// Starts the mock on `address` and waits (up to 15 s) until it owns its name.
    init(address: String, peer: BusPeer, loop: PeerLoop, logPath: String) throws {
        guard FileManager.default.fileExists(atPath: "/usr/bin/python3"),
              (try? ChildProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]))?.status == 0 else {
            throw XCTSkip("python3-dbusmock is not installed (scripts/deps.sh installs it)")
        }
        self.peer = peer
        process = try ChildProcess(executable: "/usr/bin/python3", arguments: ["-m", "dbusmock", "--template", "logind"],
                                   logPath: logPath, environment: ["DBUS_SYSTEM_BUS_ADDRESS": address])
        let owned = loop.pump(timeout: 15) {
            (try? peer.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                            [.string(Self.busName)], timeout: 2).get().first?.boolValue) == true
        }
        guard owned else {
            process.stop()
            throw HarnessError("dbusmock's logind did not come up: \(tailOf(logPath))")
        }
        // The template's GetUser fails (it adds the uid to a string): logind's answer instead.
        _ = try peer.call(Self.busName, "/org/freedesktop/login1", Self.mockInterface, "AddMethod",
                          [.string("org.freedesktop.login1.Manager"), .string("GetUser"), .string("u"), .string("o"),
                           .string("ret = '/org/freedesktop/login1/user/%d' % args[0]")]).get()
    }

    func stop() { process.stop() }

    /// The mock on `stack`'s bus, driven through a connection of its own, with
    /// session `id` of this process's uid (where the stack's clients are placed).
    static func start(on stack: Stack, logPath: String, session id: String) throws -> LogindMock {
        let mock = try LogindMock(address: stack.bus.address, peer: try stack.peer(), loop: stack.peers, logPath: logPath)
        try mock.addSession(id, uid: getuid())
        return mock
    }

    static func path(_ id: String) -> String { "/org/freedesktop/login1/session/" + id }

    /// A session `id` of `uid` on `seat` (a seat is created with its first session).
    func addSession(_ id: String, seat: String = "seat0", uid: UInt32, active: Bool = true) throws {
        _ = try peer.call(Self.busName, "/org/freedesktop/login1", Self.mockInterface, "AddSession",
                          [.string(id), .string(seat), .uint32(uid), .string("user\(uid)"), .bool(active)]).get()
    }

    /// The screen locker's word: `SetLockedHint` on the session.
    func setLockedHint(_ id: String, _ locked: Bool) throws {
        _ = try peer.call(Self.busName, Self.path(id), Self.sessionInterface, "SetLockedHint", [.bool(locked)]).get()
    }

    /// logind's `Lock` or `Unlock` signal on the session (what `loginctl lock-session` makes it send).
    func emit(_ id: String, lock: Bool) throws {
        _ = try peer.call(Self.busName, Self.path(id), Self.sessionInterface, lock ? "Lock" : "Unlock").get()
    }

    /// When the session began, as logind gives it: `Timestamp` (the wall clock
    /// then, microseconds) and `TimestampMonotonic` (CLOCK_MONOTONIC then,
    /// microseconds); the template says 42 for both.
    func setBegan(_ id: String, wall: UInt64, monotonic: UInt64) throws {
        _ = try peer.call(Self.busName, Self.path(id), Self.mockInterface, "UpdateProperties",
                          [.string(Self.sessionInterface),
                           .vardict(["Timestamp": .uint64(wall), "TimestampMonotonic": .uint64(monotonic)])]).get()
    }

    /// The session comes to the foreground of its seat or leaves it.
    func setActive(_ id: String, _ active: Bool) throws {
        _ = try peer.call(Self.busName, Self.path(id), Self.mockInterface, "UpdateProperties",
                          [.string(Self.sessionInterface), .vardict(["Active": .bool(active)])]).get()
    }

    /// Makes session `id` the user's display (`Display` of its User object), as logind
    /// does for the user's graphical session.
    func setDisplay(uid: UInt32, _ id: String) throws {
        // Properties.Set: the mock's UpdateProperties cannot take a structure.
        _ = try peer.call(Self.busName, "/org/freedesktop/login1/user/\(uid)", "org.freedesktop.DBus.Properties", "Set",
                          [.string("org.freedesktop.login1.User"), .string("Display"),
                           .variant(.structure([.string(id), .objectPath(Self.path(id))]))]).get()
    }

    /// Makes `GetSessionByPID` fail with `LimitsExceeded` (as the bus answers when
    /// the daemon's pending calls are spent) until `until` (seconds since the
    /// epoch), then answer `id` for every PID.
    func failGetSessionByPID(until: Double, then id: String) throws {
        let code = """
        import time
        if time.time() < \(until): raise dbus.exceptions.DBusException('busy', name='org.freedesktop.DBus.Error.LimitsExceeded')
        ret = '\(Self.path(id))'
        """
        _ = try peer.call(Self.busName, "/org/freedesktop/login1", Self.mockInterface, "AddMethod",
                          [.string("org.freedesktop.login1.Manager"), .string("GetSessionByPID"), .string("u"),
                           .string("o"), .string(code)]).get()
    }

    /// Makes `GetSessionByPID` answer `id` for the processes of `uid` and
    /// `NoSessionForPID` for any other (as logind answers for a process outside
    /// every session scope).
    func placeByOwner(uid: UInt32, in id: String) throws {
        let code = """
        import os
        if os.stat('/proc/%d' % args[0]).st_uid == \(uid): ret = '\(Self.path(id))'
        else: raise dbus.exceptions.DBusException('no session', name='org.freedesktop.login1.NoSessionForPID')
        """
        _ = try peer.call(Self.busName, "/org/freedesktop/login1", Self.mockInterface, "AddMethod",
                          [.string("org.freedesktop.login1.Manager"), .string("GetSessionByPID"), .string("u"),
                           .string("o"), .string(code)]).get()
    }

    /// Makes `GetSessionByPID` answer `id` for `pid` and `NoSessionForPID` for any other.
    func mapPID(_ pid: Int32, to id: String) throws {
        let code = """
        if args[0] == \(pid): ret = '\(Self.path(id))'
        else: raise dbus.exceptions.DBusException('no session', name='org.freedesktop.login1.NoSessionForPID')
        """
        _ = try peer.call(Self.busName, "/org/freedesktop/login1", Self.mockInterface, "AddMethod",
                          [.string("org.freedesktop.login1.Manager"), .string("GetSessionByPID"), .string("u"),
                           .string("o"), .string(code)]).get()
    }
}
