import Foundation
import XCTest
import GeoCore
import GeoSystem

final class ConfigLoaderTests: XCTestCase {
    private func loadError(explicit: String? = nil, defaultFile: String) -> ConfigError? {
        do {
            _ = try ConfigLoader.load(explicitFile: explicit, defaultFile: defaultFile)
            XCTFail("expected an error")
        } catch let e as ConfigError {
            return e
        } catch {
            XCTFail("unexpected error \(error)")
        }
        return nil
    }

    func testMissingEverythingMeansDefaults() throws {
        let dir = TestDirectory()
        XCTAssertEqual(try ConfigLoader.load(explicitFile: nil, defaultFile: dir.sub("geoconsent.conf")), Config())
    }

    /// `--config FILE` names a file on purpose: missing, it is a mistake, not defaults.
    func testAMissingExplicitFileIsAnError() {
        let dir = TestDirectory()
        XCTAssertEqual(loadError(explicit: dir.sub("other.conf"), defaultFile: dir.sub("geoconsent.conf"))?.description,
                       dir.sub("other.conf") + ": does not exist (named by --config)")
    }

    func testMainThenDropInsInNameOrder() throws {
        let dir = TestDirectory()
        dir.write("geoconsent.conf", "[daemon]\nprompt-timeout = 10\ngpsd-linger = 3\n[app \"a\"]\npolicy = always\n")
        dir.write("conf.d/20-b.conf", "[daemon]\nprompt-timeout = 20\n[app \"a\"]\npolicy = restricted\n")
        dir.write("conf.d/10-a.conf", "[daemon]\nprompt-timeout = 15\nreduced-grid = 100\n")
        dir.write("conf.d/30-c.conf.disabled", "this is not parsed")
        dir.write("conf.d/.40-hidden.conf", "nor this")
        dir.write("conf.d/README", "nor this")
        let c = try ConfigLoader.load(explicitFile: nil, defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(c.promptTimeout, 20)
        XCTAssertEqual(c.gpsdLinger, 3)
        XCTAssertEqual(c.reducedGrid, 100)
        XCTAssertEqual(c.apps, ["a": .restricted])
    }

    func testDropInsWithoutMainFile() throws {
        let dir = TestDirectory()
        dir.write("conf.d/x.conf", "[agents]\nallow = org.gnome.Shell; /usr/bin/geoconsentctl\n")
        let c = try ConfigLoader.load(explicitFile: nil, defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(c.agentAllow, ["org.gnome.Shell", "/usr/bin/geoconsentctl"])
    }

    func testExplicitFileIgnoresDefaultAndDropIns() throws {
        let dir = TestDirectory()
        dir.write("geoconsent.conf", "[daemon]\nprompt-timeout = 10\n")
        dir.write("conf.d/a.conf", "[daemon]\nprompt-timeout = 20\n")
        dir.write("mine.conf", "[daemon]\ngpsd-linger = 1\n")
        let c = try ConfigLoader.load(explicitFile: dir.sub("mine.conf"), defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(c.promptTimeout, 60)
        XCTAssertEqual(c.gpsdLinger, 1)
    }

    func testErrorNamesTheFileAndLine() {
        let dir = TestDirectory()
        dir.write("geoconsent.conf", "[daemon]\n")
        dir.write("conf.d/b.conf", "[daemon]\n\nprompt-timeout = never\n")
        let e = loadError(defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(e?.file, dir.sub("conf.d/b.conf"))
        XCTAssertEqual(e?.line, 3)
        XCTAssertTrue(e?.description.hasPrefix(dir.sub("conf.d/b.conf") + ":3: ") ?? false, "\(String(describing: e))")
    }

    func testUnreadableFileIsAnError() throws {
        let dir = TestDirectory()
        // A directory in place of the file: exists but cannot be read (works as root too).
        try FileManager.default.createDirectory(atPath: dir.sub("geoconsent.conf"), withIntermediateDirectories: false)
        let e = loadError(defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(e?.file, dir.sub("geoconsent.conf"))
        XCTAssertEqual(e?.line, 0)
        XCTAssertTrue(e?.reason.contains("Is a directory") ?? false)

        let e2 = loadError(explicit: dir.sub("geoconsent.conf"), defaultFile: dir.sub("x"))
        XCTAssertEqual(e2?.file, dir.sub("geoconsent.conf"))
    }

    func testPermissionDeniedIsAnError() throws {
        try XCTSkipIf(geteuid() == 0, "root reads files whatever their mode")
        let dir = TestDirectory()
        dir.write("geoconsent.conf", "[daemon]\n")
        chmod(dir.sub("geoconsent.conf"), 0)
        let e = loadError(defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertTrue(e?.reason.contains("Permission denied") ?? false)
    }

    func testDropInDirectoryThatIsAFileIsAnError() {
        let dir = TestDirectory()
        dir.write("conf.d", "oops")
        let e = loadError(defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(e?.file, dir.sub("conf.d"))
    }

    func testInvalidUTF8() {
        let dir = TestDirectory()
        dir.write("geoconsent.conf", Array("[daemon]\n".utf8) + [0xC3, 0x28, 0x0A])
        let e = loadError(defaultFile: dir.sub("geoconsent.conf"))
        XCTAssertEqual(e?.line, 2)
    }
}
