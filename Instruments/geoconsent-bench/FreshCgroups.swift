import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Each new connection of the bench in a cgroup of its own, laid out as
/// systemd lays out a desktop app (`/user.slice/user-UID.slice/user@UID.service/
/// app.slice/app-org.geoconsent.Bench-N.scope`, so that each is the same app,
/// `org.geoconsent.Bench`, approved once): the bench process moves itself there before the
/// connection opens (outside the timed part), so the daemon's identity helper
/// reads a cgroup it has never seen, as on a desktop where each app starts in
/// a scope of its own. Needs a writable cgroup v2 hierarchy (root, here);
/// without one, `FreshCgroups()` is nil and the rows say so.
final class FreshCgroups {
    /// The app id the daemon reads from these scopes (a systemd app unit's).
    static let appID = "org.geoconsent.Bench"
    private let root: String
    /// Where this process was, to go back to.
    private let home: String
    private let parent: String
    private var made: [String] = []
    private var next = 0

    init?() {
        guard let info = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8),
              let own = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
              let line = own.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        var mount: String?
        for l in info.split(separator: "\n") {
            let halves = l.components(separatedBy: " - ")
            let fields = halves[0].split(separator: " ")
            if halves.count == 2, halves[1].hasPrefix("cgroup2 "), fields.count > 4, fields[3] == "/" { mount = String(fields[4]) }
        }
        guard let mount, access(mount, W_OK) == 0 else { return nil }
        root = mount
        home = String(line.dropFirst(3))
        let uid = getuid()
        parent = "\(mount)/user.slice/user-\(uid).slice/user@\(uid).service/app.slice"
        guard (try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)) != nil else { return nil }
    }

    /// Moves this process into a new app scope.
    func enterNew() throws {
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        next += 1
        let dir = "\(parent)/app-\(Self.appID)-\(getpid())x\(next).scope"
        guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
            throw BenchFloorError(description: "cannot make the cgroup \(dir): \(String(cString: strerror(errno)))")
        }
        made.append(dir)
        try move(to: dir)
    }

    /// Back where it was; the scopes made are removed (each is empty once left).
    func leave() {
        try? move(to: root + home)
        for dir in made { rmdir(dir) }
        made = []
        // The slices it made too, where nothing else is in them (rmdir refuses a cgroup in use).
        var d = parent
        while d.count > root.count, rmdir(d) == 0 { d = (d as NSString).deletingLastPathComponent }
    }

    private func move(to dir: String) throws {
        guard let h = FileHandle(forWritingAtPath: dir + "/cgroup.procs") else {
            throw BenchFloorError(description: "cannot open \(dir)/cgroup.procs")
        }
        defer { try? h.close() }
        try h.write(contentsOf: "\(getpid())\n".data(using: .utf8)!)
    }
}
