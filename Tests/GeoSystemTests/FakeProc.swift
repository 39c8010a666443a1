import Foundation
import XCTest

/// Builds `/proc`-like fixture entries in a temp dir.
final class FakeProc {
    let dir = TestDirectory()
    var root: String { dir.path }

    @discardableResult
    func process(_ pid: UInt32, comm: String = "app", start: UInt64 = 4242,
                 cgroup: String? = "0::/user.slice/user-1000.slice/session-2.scope\n",
                 exe: String? = "/usr/bin/app", flatpakInfo: String? = nil,
                 mountinfo: String? = nil, cmdline: [String]? = nil, cwd: String? = nil) -> FakeProc {
        let p = String(pid)
        dir.write(p + "/stat", Self.stat(pid: pid, comm: comm, start: start))
        if let cmdline { dir.write(p + "/cmdline", cmdline.map { $0 + "\0" }.joined()) }
        if let cwd { XCTAssertEqual(symlink(cwd, dir.sub(p + "/cwd")), 0) }
        if let cgroup { dir.write(p + "/cgroup", cgroup) }
        if let exe { XCTAssertEqual(symlink(exe, dir.sub(p + "/exe")), 0) }
        if let flatpakInfo { dir.write(p + "/root/.flatpak-info", flatpakInfo) }
        if let mountinfo { dir.write(p + "/mountinfo", mountinfo) }
        return self
    }

    func setStart(_ pid: UInt32, comm: String = "app", _ start: UInt64) {
        dir.write(String(pid) + "/stat", Self.stat(pid: pid, comm: comm, start: start))
    }

    static func stat(pid: UInt32, comm: String, start: UInt64) -> String {
        "\(pid) (\(comm)) S 1 \(pid) \(pid) 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \(start) 12345678 300 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n"
    }
}
