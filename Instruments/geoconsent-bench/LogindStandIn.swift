import Foundation
import GeoDBus

// `geoconsent-bench --logind BUS placed|unplaced`: the part of logind the daemon
// asks about a new connection, answered at once from constants, in a process of
// its own on the bench's bus (as logind is one on the system bus). Why not
// python-dbusmock's template, which the tests use: each of its answers costs a
// Python interpreter's time (~0.5–1 ms here), so a bench row with it would
// measure dbusmock; logind is C and answers such a call in tens of µs, as this does.
//
// `placed`: every PID is in login session c1 (`GetSessionByPID`), as for an app
// started from the session's own scope. `unplaced`: no PID is in a session
// (`NoSessionForPID`), the common case for apps the user's service manager
// starts; the daemon then takes the user's `Display`, which is c1. c1 is
// active and unlocked, so nothing pauses.

/// Runs the stand-in until the bus goes away; never returns.
func runLogindStandIn(_ args: ArraySlice<String>) -> Never {
    let a = Array(args)
    guard a.count == 2, a[1] == "placed" || a[1] == "unplaced" else {
        FileHandle.standardError.write("usage: geoconsent-bench --logind BUS placed|unplaced\n".data(using: .utf8)!)
        exit(2)
    }
    let placed = a[1] == "placed"
    let loop = EventLoop()
    let bus: Connection
    do {
        bus = try Connection(bus: .address(a[0]))
        guard try bus.requestName("org.freedesktop.login1") == .primaryOwner else { exit(1) }
    } catch {
        FileHandle.standardError.write("logind stand-in: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
    bus.onDisconnect = { exit(0) }
    let session = "/org/freedesktop/login1/session/c1"
    let sessionProperties: [String: DBusValue] = [
        "Id": .string("c1"), "Active": .bool(true), "LockedHint": .bool(false), "Remote": .bool(false),
        "Class": .string("user"), "Type": .string("x11"), "State": .string("active"),
        "Seat": .structure([.string("seat0"), .objectPath("/org/freedesktop/login1/seat/seat0")]),
        // Long ago: the daemon's wait for a consent agent after login is over.
        "Timestamp": .uint64(1_000_000), "TimestampMonotonic": .uint64(1_000_000),
    ]
    bus.onMessage = { m in
        guard m.type == .methodCall, let member = m.member, let path = m.path else { return false }
        let args = m.arguments()
        var reply: [DBusValue]?
        var error: DBusError?
        switch (path, member) {
        case ("/org/freedesktop/login1", "GetSessionByPID"):
            if placed { reply = [.objectPath(session)] } else {
                error = DBusError("org.freedesktop.login1.NoSessionForPID", "PID is not part of any session")
            }
        case ("/org/freedesktop/login1", "GetUser"):
            reply = [.objectPath("/org/freedesktop/login1/user/_\(args.first?.uint32Value ?? 0)")]
        case ("/org/freedesktop/login1", "ListSessions"):
            reply = [.array(element: "(susso)", [.structure([.string("c1"), .uint32(0), .string("root"), .string("seat0"),
                                                             .objectPath(session)])])]
        case (_, "Get") where path.hasPrefix("/org/freedesktop/login1/user/"):
            reply = [.variant(.structure([.string("c1"), .objectPath(session)]))]
        case (session, "GetAll"):
            reply = [.vardict(sessionProperties)]
        default:
            error = DBusError("org.freedesktop.DBus.Error.UnknownMethod", "\(member) on \(path)")
        }
        let r = reply.flatMap { values -> Message? in
            let r = Message.methodReturn(to: m.replyAddress)
            return (try? r?.append(values)) != nil ? r : nil
        } ?? Message.error(error ?? .failed("cannot reply"), to: m.replyAddress)
        if let r { _ = bus.send(r) }
        return true
    }
    bus.attach(to: loop)
    loop.run()
    exit(0)
}
