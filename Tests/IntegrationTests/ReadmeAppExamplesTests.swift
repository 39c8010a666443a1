import XCTest
import Foundation
import GeoTestSupport
import GeoDBus

/// README.md's examples for app developers in Python, GJS and C, run as
/// written against the real daemon (their system bus is the test's, through
/// `DBUS_SYSTEM_BUS_ADDRESS`, which GIO reads): each taps, is allowed once by
/// an agent, and prints the position gpsd was fed.
final class ReadmeAppExamplesTests: XCTestCase {
    private var stack: Stack!
    private var agent: ChildProcess!
    private var dir: TempDir!

    override func setUpWithError() throws {
        stack = try Stack()
        dir = try TempDir()
        agent = try ChildProcess(executable: TestPaths.binDir + "/geoconsentctl",
                                 arguments: ["--bus", stack.bus.address, "agent", "--auto", "allow-once"],
                                 logPath: "/dev/null", captureStdout: true)
        XCTAssertTrue(agent.readStdoutLine(timeout: 10)?.contains("registered") ?? false)
    }

    override func tearDown() {
        agent?.stop()
        stack?.stop()
        dir?.remove()
    }

    private func example(_ heading: String, _ language: String) throws -> String {
        let readme = try String(contentsOfFile: TestPaths.sourceRoot + "/README.md", encoding: .utf8)
        return try XCTUnwrap(ReadmeExampleTests.example(in: readme, under: heading, language: language),
                             "no ```\(language) block under \"\(heading)\" in README.md")
    }

    /// Runs a program while gpsd is fed a position; what it printed.
    private func run(_ executable: String, _ arguments: [String]) throws -> String {
        let feed = LocationFeed(latitude: 52.52, longitude: 13.405, step: 10)
        let ticker = LoopTicker(loop: stack.peers.loop, interval: 0.05) { [gpsd = stack.gpsd] in feed.send(to: gpsd) }
        let child = try ChildProcess(executable: executable, arguments: arguments, logPath: dir.file("stderr"),
                                     captureStdout: true, environment: ["DBUS_SYSTEM_BUS_ADDRESS": stack.bus.address])
        ticker.start()
        stack.peers.pump(timeout: 60) { !child.isRunning }
        ticker.stop()
        let out = child.readAllStdout(timeout: 5)
        XCTAssertEqual(child.waitForExit(timeout: 5), 0,
                       "\(executable): \((try? String(contentsOfFile: dir.file("stderr"), encoding: .utf8)) ?? "")")
        return out
    }

    private func tool(_ name: String, package: String) throws -> String {
        guard let path = TestPaths.findExecutable(name) else {
            throw XCTSkip("\(name) is not installed (scripts/deps.sh installs \(package))")
        }
        return path
    }

    func testThePythonExample() throws {
        let code = try example("### Python (PyGObject)", "python")
        try code.write(toFile: dir.file("button.py"), atomically: true, encoding: .utf8)
        XCTAssertEqual(try run("/usr/bin/python3", [dir.file("button.py")]), "52.52000 13.40500\n")
    }

    func testTheGJSExample() throws {
        let gjs = try tool("gjs", package: "gjs")
        let code = try example("### GJS", "js")
        try code.write(toFile: dir.file("button.js"), atomically: true, encoding: .utf8)
        XCTAssertEqual(try run(gjs, [dir.file("button.js")]), "52.52000 13.40500\n")
    }

    func testTheCExample() throws {
        let cc = try tool("cc", package: "gcc")
        let pkgConfig = try tool("pkg-config", package: "pkg-config")
        let flags = try ChildProcess.run(pkgConfig, ["--cflags", "--libs", "gio-2.0"])
        guard flags.status == 0 else { throw XCTSkip("gio-2.0 is not installed (scripts/deps.sh installs libglib2.0-dev)") }
        let code = try example("### C (GDBus)", "c")
        try code.write(toFile: dir.file("button.c"), atomically: true, encoding: .utf8)
        let words = flags.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        let build = try ChildProcess.run(cc, ["-Wall", "-Werror", "-o", dir.file("button"), dir.file("button.c")] + words,
                                         timeout: 60, logPath: dir.file("cc.log"))
        XCTAssertEqual(build.status, 0, (try? String(contentsOfFile: dir.file("cc.log"), encoding: .utf8)) ?? "")
        XCTAssertEqual(try run(dir.file("button"), []), "52.52000 13.40500\n")
    }
}
