import Foundation
import XCTest
@testable import GeoSystem

final class FilesTests: XCTestCase {
    func testReadMissingIsNil() throws {
        let dir = TestDirectory()
        XCTAssertNil(try readFileBytes(dir.sub("nope")))
        XCTAssertNil(try readFileString(dir.sub("nope")))
    }

    func testReadDirectoryThrowsWithErrno() {
        let dir = TestDirectory()
        XCTAssertThrowsError(try readFileBytes(dir.path)) { e in
            let s = e as? SystemError
            XCTAssertEqual(s?.errno, EISDIR)
            XCTAssertEqual(s?.path, dir.path)
            XCTAssertTrue("\(e)".contains("Is a directory"), "\(e)")
        }
    }

    func testReadsProcFilesWithZeroSize() throws {
        let text = try XCTUnwrap(try readFileString("/proc/self/stat"))
        XCTAssertTrue(text.hasPrefix(String(getpid()) + " ("))
    }

    func testAtomicWriteCreatesAndReplaces() throws {
        let dir = TestDirectory()
        let big = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
        try writeFileAtomically(path: dir.sub("f"), contents: big)
        XCTAssertEqual(try readFileBytes(dir.sub("f")), big)
        XCTAssertEqual(dir.mode("f"), 0o600)
        try writeFileAtomically(path: dir.sub("f"), contents: "small", mode: 0o640)
        XCTAssertEqual(dir.read("f"), "small")
        XCTAssertEqual(dir.mode("f"), 0o640)
        try writeFileAtomically(path: dir.sub("f"), contents: [UInt8]())
        XCTAssertEqual(try readFileBytes(dir.sub("f")), [])
        XCTAssertEqual(dir.list(), ["f"])
    }

    func testAtomicWriteIntoMissingDirectoryFailsWithoutLeftovers() {
        let dir = TestDirectory()
        XCTAssertThrowsError(try writeFileAtomically(path: dir.sub("no/f"), contents: "x")) { e in
            XCTAssertEqual((e as? SystemError)?.errno, ENOENT)
        }
        XCTAssertEqual(dir.list(), [])
    }

    func testAtomicWriteOverDirectoryFailsAndCleansUp() throws {
        let dir = TestDirectory()
        try FileManager.default.createDirectory(atPath: dir.sub("d/inner"), withIntermediateDirectories: true)
        XCTAssertThrowsError(try writeFileAtomically(path: dir.sub("d"), contents: "x"))
        XCTAssertEqual(dir.list(), ["d"])
    }

    func testListDirectory() throws {
        let dir = TestDirectory()
        for name in ["b.conf", "a.conf", "B.conf", ".hidden", "é.conf", "a b"] { dir.write(name, "") }
        XCTAssertEqual(try listDirectory(dir.path), [".hidden", "B.conf", "a b", "a.conf", "b.conf", "é.conf"])
        XCTAssertThrowsError(try listDirectory(dir.sub("missing"))) { e in
            XCTAssertTrue((e as? SystemError)?.isNotFound ?? false)
        }
    }

    func testMakeDirectory() throws {
        let dir = TestDirectory()
        try makeDirectory(dir.sub("x/y/z"), mode: 0o700)
        XCTAssertEqual(dir.mode("x/y/z"), 0o700)
        XCTAssertEqual(dir.mode("x"), 0o755)
        try makeDirectory(dir.sub("x/y/z"), mode: 0o700)  // exists: fine
        try makeDirectory(dir.sub("x/y/z/"), mode: 0o700)
        XCTAssertTrue(isDirectory(dir.sub("x/y")))
    }

    func testReadLink() throws {
        let dir = TestDirectory()
        let long = "/" + String(repeating: "a/", count: 300) + "end"
        XCTAssertEqual(symlink(long, dir.sub("l")), 0)
        XCTAssertEqual(try readLink(dir.sub("l")), long)
        XCTAssertThrowsError(try readLink(dir.sub("missing")))
        XCTAssertTrue(try readLink("/proc/self/exe").hasPrefix("/"))
    }

    func testNowIsWallClockMicros() {
        let t = now()
        let expected = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        XCTAssertLessThan(t > expected ? t - expected : expected - t, 5_000_000)
    }

    func testPathHelpers() {
        let cases: [(String, String, String)] = [
            ("/etc/geoconsent/geoconsent.conf", "/etc/geoconsent", "geoconsent.conf"),
            ("/a", "/", "a"),
            ("a", ".", "a"),
            ("a/b/", "a", "b"),
            ("//x//y", "//x", "y"),
            ("/", "/", "/"),
        ]
        for (path, dir, base) in cases {
            XCTAssertEqual(directoryName(of: path), dir, path)
            XCTAssertEqual(baseName(of: path), base, path)
        }
    }
}
