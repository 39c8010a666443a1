import XCTest
import Glibc
@testable import GeoSystem

/// `FileWatch` (inotify on the file's directory) and `readSmallRegularFile`,
/// which the static position source reads its file with.
final class FileWatchTests: XCTestCase {
    func testEachWayAFileChangesIsSeenAndOtherNamesAreNot() throws {
        let dir = TestDirectory()
        let path = dir.sub("geolocation")
        let watch = try FileWatch(path: path)
        XCTAssertEqual(watch.changed(), .none, "nothing queued yet")

        dir.write("other", "1\n")
        XCTAssertEqual(watch.changed(), .none, "another file of the directory")

        dir.write("geolocation.new", "1\n2\n3\n4\n")
        XCTAssertEqual(rename(path + ".new", path), 0)
        XCTAssertEqual(watch.changed(), .settled, "renamed into place")
        XCTAssertEqual(watch.changed(), .none, "the queue is drained")

        let fd = open(path, O_WRONLY | O_APPEND)
        XCTAssertEqual(Glibc.write(fd, "5", 1), 1)
        XCTAssertEqual(watch.changed(), .writing, "written in place, not yet closed: half of what is meant, maybe")
        close(fd)
        XCTAssertEqual(watch.changed(), .settled, "closed after writing")

        XCTAssertEqual(unlink(path), 0)
        XCTAssertEqual(watch.changed(), .settled, "removed")
    }

    func testAMissingDirectoryCannotBeWatched() {
        XCTAssertThrowsError(try FileWatch(path: "/nonexistent-geoconsent-dir/geolocation"))
    }

    func testOnlyASmallRegularFileIsRead() throws {
        let dir = TestDirectory()
        dir.write("small", "52.5\n13.4\n34\n50\n")
        XCTAssertEqual(try readSmallRegularFile(dir.sub("small"), maxBytes: 64), Array("52.5\n13.4\n34\n50\n".utf8))
        XCTAssertNil(try readSmallRegularFile(dir.sub("missing"), maxBytes: 64))
        XCTAssertThrowsError(try readSmallRegularFile(dir.sub("small"), maxBytes: 8)) {
            XCTAssertEqual($0 as? SmallFileError, .tooLarge(8))
        }
        XCTAssertThrowsError(try readSmallRegularFile(dir.path, maxBytes: 64)) {
            XCTAssertEqual($0 as? SmallFileError, .notRegular, "a directory")
        }
        // A FIFO in the file's place: refused at once, not waited on for a writer.
        XCTAssertEqual(mkfifo(dir.sub("fifo"), 0o600), 0)
        XCTAssertThrowsError(try readSmallRegularFile(dir.sub("fifo"), maxBytes: 64)) {
            XCTAssertEqual($0 as? SmallFileError, .notRegular, "a FIFO")
        }
        // /dev/zero never ends: refused by its kind before a byte is read.
        XCTAssertThrowsError(try readSmallRegularFile("/dev/zero", maxBytes: 64)) {
            XCTAssertEqual($0 as? SmallFileError, .notRegular)
        }
    }

    /// A read with a write of the file queued when it ends is refused (the
    /// check cannot tell a write during the read from one just before it); the
    /// static source then waits for the writer to be quiet and reads again.
    func testAReadWithAWriteQueuedIsRefused() throws {
        let dir = TestDirectory()
        let path = dir.sub("geolocation")
        dir.write("geolocation", "1\n")
        let watch = try FileWatch(path: path)
        _ = watch.changed()
        XCTAssertEqual(try watch.read(maxBytes: 64), Array("1\n".utf8), "nothing happened during the read")
        // A write queued after the read began (here: before it, undrained,
        // which the check cannot tell apart) refuses it.
        let fd = open(path, O_WRONLY | O_APPEND)
        XCTAssertEqual(Glibc.write(fd, "2", 1), 1)
        XCTAssertThrowsError(try watch.read(maxBytes: 64)) { XCTAssertEqual($0 as? SmallFileError, .changing) }
        close(fd)
    }
}
