import XCTest
import Foundation
import GeoTestSupport

/// The Swift example of README.md's "For app developers" compiles against the
/// built GeoConsentClient module with no other import: the client library is
/// self-contained, and the README does not rot. (The Python, GJS and C
/// examples run against the daemon: `ReadmeAppExamplesTests`.)
final class ReadmeExampleTests: XCTestCase {
    static let heading = "### Swift (the client library)"

    /// The first ```LANGUAGE block under `heading` (before the next heading).
    static func example(in readme: String, under heading: String = heading, language: String = "swift") -> String? {
        guard let h = readme.range(of: "\n" + heading + "\n") else { return nil }
        let rest = String(readme[h.upperBound...])
        let section = rest.components(separatedBy: "\n## ")[0].components(separatedBy: "\n### ")[0]
        guard let open = section.range(of: "```\(language)\n"),
              let close = section.range(of: "\n```", range: open.upperBound..<section.endIndex) else { return nil }
        return String(section[open.upperBound..<close.lowerBound]) + "\n"
    }

    func testExampleCompilesImportingOnlyGeoConsentClient() throws {
        let readme = try String(contentsOfFile: TestPaths.sourceRoot + "/README.md", encoding: .utf8)
        let code = try XCTUnwrap(Self.example(in: readme), "no ```swift block under \"\(Self.heading)\" in README.md")
        let imports = code.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("import ") }
        XCTAssertEqual(imports, ["import GeoConsentClient"], "the example imports the client library and nothing else")

        let modules = TestPaths.buildProductsDir + "/Modules"
        XCTAssertTrue(FileManager.default.fileExists(atPath: modules + "/GeoConsentClient.swiftmodule"),
                      "no GeoConsentClient module in \(modules): swift build first")
        let swiftc = try XCTUnwrap(TestPaths.findExecutable("swiftc"), "no swiftc in PATH")
        // What SwiftPM hands a dependent package for the C library underneath
        // (libdbus's module map and headers); no Swift module is added.
        var flags = ["-I", modules, "-Xcc", "-fmodule-map-file=" + TestPaths.sourceRoot + "/Sources/CDBus/module.modulemap"]
        for dir in try dbusIncludeDirs() { flags += ["-Xcc", "-I" + dir] }

        let dir = try TempDir()
        let source = dir.file("main.swift")
        try code.write(toFile: source, atomically: true, encoding: .utf8)
        for mode in ["5", "6"] {
            let log = dir.file("swiftc-\(mode).log")
            let r = try ChildProcess.run(swiftc, ["-swift-version", mode, "-c", source, "-o", dir.file("main-\(mode).o")] + flags,
                                         timeout: 120, logPath: log)
            let errors = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            XCTAssertEqual(r.status, 0, "the README example does not compile (Swift \(mode)):\n\(errors)\n\(code)")
        }
    }

    /// `pkg-config --cflags-only-I dbus-1`, else Debian's directories.
    func dbusIncludeDirs() throws -> [String] {
        if let pkgConfig = TestPaths.findExecutable("pkg-config") {
            let r = try ChildProcess.run(pkgConfig, ["--cflags-only-I", "dbus-1"])
            let dirs = r.output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .filter { $0.hasPrefix("-I") }.map { String($0.dropFirst(2)) }
            if r.status == 0, !dirs.isEmpty { return dirs }
        }
        return ["/usr/include/dbus-1.0", "/usr/lib/x86_64-linux-gnu/dbus-1.0/include"]
    }
}
