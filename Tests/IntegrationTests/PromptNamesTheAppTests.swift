import XCTest
import Foundation
import GeoCore
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
import GeoSystem

/// The prompt names an app as a person knows it (docs/dbus-api.md, "Identity"
/// rule 4 and the agent's `desktop-entry`): real Python programs, started
/// through their `#!` line, tap the real daemon. Each script is an app of its
/// own, not `/usr/bin/python3.11`, and the one with an administrator's desktop
/// entry is named by it.
final class PromptNamesTheAppTests: XCTestCase {
    private var stack: Stack!
    private var agent: TestAgent!
    private var dir: TempDir!

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw XCTSkip("desktop entries count only when root owns them") }
        guard (try? ChildProcess.run("/usr/bin/python3", ["-c", "import dbus"]))?.status == 0 else {
            throw XCTSkip("python3-dbus is not installed (scripts/deps.sh installs it with python3-dbusmock)")
        }
        dir = try TempDir()
        for sub in ["bin", "applications"] { mkdir(dir.path + "/" + sub, 0o755) }
        stack = try Stack(config: "[daemon]\ndesktop-entries = \(dir.path)/applications\n")
        agent = TestAgent(peer: try stack.peer(), behaviour: .answer("allow-once"))
        XCTAssertNoThrow(try agent.register().get())
    }

    override func tearDown() {
        stack?.stop()
        dir?.remove()
    }

    /// A Python program that taps once and prints the status.
    private func script(_ name: String) throws -> String {
        let path = dir.path + "/bin/" + name
        try writeFileAtomically(path: path, contents: Array("""
            #!/usr/bin/python3
            import sys, dbus
            bus = dbus.bus.BusConnection(sys.argv[1])
            daemon = bus.get_object("\(GeoConsentAPI.busName)", "\(GeoConsentAPI.objectPath)")
            print(int(daemon.RequestOneTimeAuthorization(dbus.Dictionary({}, signature="sv"),
                                                         dbus_interface="\(GeoConsentAPI.interfaceName)", timeout=30)))

            """.utf8), mode: 0o755)
        return path
    }

    /// Runs `program` to its end, the test's agent answering meanwhile; its output.
    private func tap(_ program: String) throws -> String {
        let child = try ChildProcess(executable: program, arguments: [stack.bus.address],
                                     logPath: dir.path + "/child.log", captureStdout: true)
        stack.peers.pump(timeout: 30) { !child.isRunning }
        let out = child.readAllStdout(timeout: 5).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(child.waitForExit(timeout: 5), 0, "\(program): \((try? String(contentsOfFile: dir.path + "/child.log")) ?? "")")
        return out
    }

    func testEachScriptIsAnAppAndTheEntryNamesIt() throws {
        let maps = try script("maps-app")
        let other = try script("other-app")
        let entry = dir.path + "/applications/org.example.PyMaps.desktop"
        try writeFileAtomically(path: entry, contents: Array("[Desktop Entry]\nName=Py Maps\nExec=\(maps) %U\n".utf8),
                                mode: 0o644)
        let python = try XCTUnwrap(realpath("/usr/bin/python3", nil).map { p in defer { free(p) }; return String(cString: p) })

        XCTAssertEqual(try tap(maps), "4", "Allow Once: authorized")
        let first = try XCTUnwrap(agent.confirms.last)
        XCTAssertEqual(first.appID, maps, "the app is the script, not the interpreter")
        XCTAssertEqual(first.identity, .script)
        XCTAssertEqual(first.script, maps)
        XCTAssertEqual(first.executable, python)
        XCTAssertEqual(first.desktopEntry, entry, "named by the administrator's entry that runs it")
        XCTAssertFalse(first.installed, "a program under /tmp is not one the administrator installed")
        XCTAssertEqual(agent.rawDetails.last?["script"], "s")
        XCTAssertEqual(agent.rawDetails.last?["desktop-entry"], "s")
        XCTAssertEqual(agent.rawDetails.last?["program-installed"], "b")

        XCTAssertEqual(try tap(other), "4")
        XCTAssertEqual(agent.confirms.count, 2, "another script under the same interpreter is another app: asked")
        XCTAssertEqual(agent.confirms.last?.appID, other)
        XCTAssertEqual(agent.confirms.last?.desktopEntry, "", "no entry runs it")

        XCTAssertEqual(try tap(maps), "4")
        XCTAssertEqual(agent.confirms.count, 2, "the first script's button is approved from its own consent")
        let apps = Set(try stack.peer().consents().map(\.appID))
        XCTAssertEqual(apps, [maps, other])
    }
}
