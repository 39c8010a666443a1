import Foundation
import XCTest
import Glibc
@testable import GeoSystem
import GeoCore

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

    /// A prompt names the app by the administrator's entry that runs its
    /// program: one shown entry, or of several the one named as the program;
    /// a unit's id only when its entry's program is the process's; sandboxes by
    /// their id among their installers' exports. The scan is kept until a
    /// directory changes.
    func testThePromptsEntryForEachKindOfApp() throws {
        guard getuid() == 0 else { throw XCTSkip("the entries must be owned by root, as an administrator's are") }
        let dir = try makeTemporaryDirectory()
        defer { removeTree(dir) }
        let bin = dir + "/bin", apps = dir + "/applications", flatpak = dir + "/flatpak", snap = dir + "/snap"
        for d in [bin, apps, flatpak, snap] { mkdir(d, 0o755) }
        for program in ["maps", "editor", "viewer", "hidden", "twice"] {
            try writeFileAtomically(path: bin + "/" + program, contents: "#!/bin/sh\n", mode: 0o755)
        }
        func entry(_ path: String, _ body: String) throws {
            try writeFileAtomically(path: path, contents: "[Desktop Entry]\nName=X\n" + body, mode: 0o644)
        }
        try entry(apps + "/org.example.Maps.desktop", "Exec=maps %U\n")
        try entry(apps + "/editor-open-with.desktop", "Exec=editor --open %f\nNoDisplay=true\n")
        try entry(apps + "/org.example.Editor.desktop", "Exec=editor\n")
        try entry(apps + "/viewer-a.desktop", "Exec=viewer\n")
        try entry(apps + "/viewer-b.desktop", "Exec=viewer\n")
        try entry(apps + "/gone.desktop", "Exec=hidden\nHidden=true\n")
        try entry(apps + "/twice.desktop", "Exec=twice\n")
        try entry(apps + "/org.example.Twice.desktop", "Exec=twice --new\n")
        try entry(flatpak + "/org.example.Flat.desktop", "Exec=/usr/bin/flatpak run org.example.Flat\n")
        try entry(snap + "/maps_maps.desktop", "Exec=/snap/bin/maps\n")
        let index = DesktopEntryIndex(entries: DesktopEntries(directories: [apps], searchPath: [bin]),
                                      flatpakDirectories: [flatpak], snapDirectories: [snap])
        func named(_ id: String, _ kind: IdentityKind, _ exe: String, script: String? = nil) -> String? {
            index.entry(naming: id, identity: kind, executable: exe, script: script)
        }
        XCTAssertEqual(named(bin + "/maps", .executable, bin + "/maps"), apps + "/org.example.Maps.desktop")
        XCTAssertEqual(named(bin + "/maps", .script, "/usr/bin/python3", script: bin + "/maps"),
                       apps + "/org.example.Maps.desktop", "a script by its own path, not the interpreter's")
        XCTAssertEqual(named(bin + "/editor", .executable, bin + "/editor"), apps + "/org.example.Editor.desktop",
                       "the shown entry before one kept out of menus")
        XCTAssertNil(named(bin + "/viewer", .executable, bin + "/viewer"), "two entries, neither named so: no guess")
        XCTAssertEqual(named(bin + "/twice", .executable, bin + "/twice"), apps + "/twice.desktop", "the one named as the program")
        XCTAssertNil(named(bin + "/hidden", .executable, bin + "/hidden"), "a deleted entry names nothing")
        XCTAssertNil(named("/usr/bin/other", .executable, "/usr/bin/other"))
        XCTAssertEqual(named("org.example.Maps", .systemdUnit, bin + "/maps"), apps + "/org.example.Maps.desktop")
        XCTAssertNil(named("org.example.Maps", .systemdUnit, bin + "/editor"), "a unit name whose entry runs another program")
        XCTAssertEqual(named("org.example.Flat", .flatpak, "/app/bin/flat"), flatpak + "/org.example.Flat.desktop")
        XCTAssertNil(named("org.example.Flat", .unverifiedFlatpak, "/app/bin/flat"), "an unverified sandbox is named by nothing")
        XCTAssertNil(named("../applications/org.example.Maps", .flatpak, "/app/bin/flat"))
        XCTAssertEqual(named("maps", .snap, "/snap/maps/1/maps"), snap + "/maps_maps.desktop")
        XCTAssertEqual(index.scans, 1, "scanned once for all of these")

        try entry(apps + "/viewer-b.desktop", "Exec=/usr/bin/other\n")   // replaced by rename, as packages do
        XCTAssertEqual(named(bin + "/viewer", .executable, bin + "/viewer"), apps + "/viewer-a.desktop")
        XCTAssertEqual(index.scans, 2, "the directory changed: scanned again")
        XCTAssertEqual(named(bin + "/maps", .executable, bin + "/maps"), apps + "/org.example.Maps.desktop")
        XCTAssertEqual(index.scans, 2)

        // An entry that runs a script through its interpreter names the script,
        // never the interpreter (else every python3 -c would be named after it).
        for program in ["python3", "sh", "tool.py"] {
            try writeFileAtomically(path: bin + "/" + program, contents: "#!/bin/sh\n", mode: 0o755)
        }
        symlink(bin + "/tool.py", bin + "/tool-link")
        try entry(apps + "/org.example.Tool.desktop", "Exec=python3 \(bin)/tool.py %U\n")
        try entry(apps + "/shell.desktop", "Exec=sh -c 'exec tool'\n")
        XCTAssertEqual(named(bin + "/tool.py", .script, bin + "/python3", script: bin + "/tool.py"), apps + "/org.example.Tool.desktop")
        XCTAssertEqual(named(bin + "/tool-link", .script, bin + "/python3", script: bin + "/tool-link"),
                       apps + "/org.example.Tool.desktop", "the caller's script through a link")
        XCTAssertNil(named(bin + "/python3", .executable, bin + "/python3"), "the interpreter alone is no app of the entry")
        XCTAssertNil(named(bin + "/sh", .executable, bin + "/sh"))
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
