import Foundation
import XCTest
import Glibc
@testable import GeoSystem

/// A host app's `DesktopId` names it to a GeoClue agent only through a
/// system desktop entry whose program is the app's own executable.
final class DesktopEntriesTests: XCTestCase {
    private func programs(_ text: String) -> [String] { DesktopEntries.programs(ofEntry: Array(text.utf8)) }

    func testTheProgramsOfAnEntry() {
        XCTAssertEqual(programs("[Desktop Entry]\nName=Maps\nExec=/usr/bin/gnome-maps %U\n"), ["/usr/bin/gnome-maps"])
        XCTAssertEqual(programs("[Desktop Entry]\nTryExec=firefox-esr\nExec=/usr/lib/firefox-esr/firefox-esr %u\n"),
                       ["firefox-esr", "/usr/lib/firefox-esr/firefox-esr"])
        XCTAssertEqual(programs("[Desktop Entry]\nExec=env GDK_BACKEND=x11 -u FOO foo --bar\n"), ["foo"])
        XCTAssertEqual(programs("[Desktop Entry]\nExec=\"/opt/My App/run\" \"%f\"\n"), ["/opt/My App/run"])
        XCTAssertEqual(programs("[Desktop Entry]\nExec = spaced %F \r\n"), ["spaced"])
        // Only the main group counts: an action's Exec is another program.
        XCTAssertEqual(programs("[Desktop Action new]\nExec=/usr/bin/other\n[Desktop Entry]\nExec=/usr/bin/main\n"),
                       ["/usr/bin/main"])
        XCTAssertEqual(programs("Exec=/usr/bin/nogroup\n"), [])
        XCTAssertEqual(programs(""), [])
    }

    func testOnlyAPlainDesktopFileIDIsLookedUp() {
        for good in ["org.gnome.Maps", "firefox-esr", "geoclue-where-am-i", "a_b"] {
            XCTAssertTrue(DesktopEntries.isValidID(good), good)
        }
        for bad in ["", "../../etc/passwd", "a/b", ".hidden", "a b", "org.gnome.Maps\n", String(repeating: "a", count: 256)] {
            XCTAssertFalse(DesktopEntries.isValidID(bad), bad)
        }
    }

    func testAnEntryNamesTheExecutableItRuns() throws {
        guard getuid() == 0 else { throw XCTSkip("the entries must be owned by root, as an administrator's are") }
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let bin = dir + "/bin"
        mkdir(bin, 0o755)
        let program = bin + "/maps"
        try writeFileAtomically(path: program, contents: "#!/bin/sh\n", mode: 0o755)
        symlink(program, bin + "/maps-link")
        let apps = dir + "/applications"
        mkdir(apps, 0o755)
        try writeFileAtomically(path: apps + "/org.example.Maps.desktop",
                                contents: "[Desktop Entry]\nExec=maps-link %U\n", mode: 0o644)
        try writeFileAtomically(path: apps + "/other.desktop",
                                contents: "[Desktop Entry]\nExec=/usr/bin/other\n", mode: 0o644)
        try writeFileAtomically(path: apps + "/writable.desktop",
                                contents: "[Desktop Entry]\nExec=\(program)\n", mode: 0o666)
        let entries = DesktopEntries(directories: [apps], searchPath: [bin])
        XCTAssertTrue(entries.entry("org.example.Maps", names: program), "a bare name by the search path, a link followed")
        XCTAssertFalse(entries.entry("other", names: program), "another program's entry")
        XCTAssertFalse(entries.entry("missing", names: program))
        XCTAssertFalse(entries.entry("writable", names: program), "an entry anyone could have written")
        XCTAssertFalse(entries.entry("org.example.Maps", names: "maps"), "the executable is a resolved path")
        chmod(apps, 0o777)
        XCTAssertFalse(entries.entry("org.example.Maps", names: program), "a directory anyone can write to")
    }

    /// The entry Debian's geoclue-2-demo installs for where-am-i, which the
    /// GeoClue agent tests rely on.
    func testWhereAmIsOwnEntry() throws {
        let exe = "/usr/libexec/geoclue-2.0/demos/where-am-i"
        guard access(exe, X_OK) == 0, access("/usr/share/applications/geoclue-where-am-i.desktop", R_OK) == 0 else {
            throw XCTSkip("geoclue-2-demo is not installed")
        }
        XCTAssertTrue(DesktopEntries().entry("geoclue-where-am-i", names: exe))
        XCTAssertFalse(DesktopEntries().entry("firefox-esr", names: exe))
    }

    private func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/geoconsent-desktop-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw SystemError.last("mkdtemp", "/tmp") }
        chmod(p, 0o755)
        return String(cString: p)
    }

    private func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
