import XCTest
import Foundation
import GeoTestSupport

/// What new connections cost the daemon's identity helper, counted as the
/// helper's read system calls (`/proc/PID/io` syscr: its `/proc` reads; its
/// socket is read with `recv`, not counted), and the process descriptors the
/// daemon holds for them. Every connection of a test is of the test process,
/// so each resolution reads the same files.
struct IdentityHelperCost {
    let stack: Stack
    let helper: pid_t

    /// The stack's helper; skips unless the daemon runs one (started as root).
    init(_ stack: Stack) throws {
        guard getuid() == 0 else { throw XCTSkip("the daemon runs an identity helper when started as root") }
        self.stack = stack
        helper = try XCTUnwrap(PrivilegeSeparationTests.helper(of: stack.daemon.pid), stack.daemon.log())
    }

    func reads() throws -> Int {
        let io = try String(contentsOfFile: "/proc/\(helper)/io", encoding: .utf8)
        let line = try XCTUnwrap(io.split(separator: "\n").first { $0.hasPrefix("syscr:") }, io)
        return try XCTUnwrap(Int(line.dropFirst("syscr:".count).trimmingCharacters(in: .whitespaces)), io)
    }

    /// The daemon's process descriptors: not all its descriptors, since a
    /// state write holds two for a moment while it syncs.
    func pidfds() -> Int {
        let dir = "/proc/\(stack.daemon.pid)/fd"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)) == "anon_inode:[pidfd]"
        }.count
    }

    /// `count` new connections, each making its calls with `first` and kept
    /// open: the helper's reads per connection, the process descriptors
    /// added, and the longest any connection's calls took (seconds: past the
    /// daemon's 100 ms between checks of a known caller, a later call of the
    /// connection is checked again, which costs reads of its own). `settle` is
    /// a call answered after the last one's watch began (the watch begins
    /// after the reply is sent).
    func perConnection(_ count: Int, settle: () throws -> Void,
                       _ first: (BusPeer) throws -> Void) throws -> (reads: Double, descriptors: Int, slowest: Double) {
        let before = try reads(), fds = pidfds()
        var peers: [BusPeer] = []
        var slowest = 0.0
        for _ in 0..<count {
            let p = try stack.peer()
            let t0 = Date()
            try first(p)
            slowest = max(slowest, Date().timeIntervalSince(t0))
            peers.append(p)
        }
        let after = try reads()
        try settle()
        return (Double(after - before) / Double(count), pidfds() - fds, slowest)
    }

    /// The daemon checks a known caller's process again at most this often
    /// (`CallerResolver.recheckInterval`), less a margin.
    static let recheckInterval = 0.09
}
