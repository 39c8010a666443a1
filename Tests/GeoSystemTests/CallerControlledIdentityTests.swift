import Foundation
import XCTest
@testable import GeoSystem

/// What a caller controls in its own `/proc/PID` view — the `.flatpak-info` in
/// its root, the path of its executable — must not stall, flood or redirect
/// the resolver, nor become an identity it should not be; and a PID must belong
/// to the connection's uid and stay the process first seen.
final class CallerControlledIdentityTests: XCTestCase {
    /// Resolves on another thread and gives up after `seconds`: a resolver that
    /// blocks (the old one, on a FIFO) fails the test instead of hanging it.
    private func resolveWithin(_ fake: FakeProc, seconds: Double = 5, pid: UInt32 = 100, uid: UInt32 = getuid(),
                               file: StaticString = #filePath, line: UInt = #line) -> Result<ResolvedApp, IdentityError>? {
        final class Box: @unchecked Sendable { var result: Result<ResolvedApp, IdentityError>? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let resolver = AppIdentityResolver(procRoot: fake.root)
        Thread {
            box.result = resolver.resolve(pid: pid, uid: uid)
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + seconds) == .success else {
            XCTFail("the resolver did not return within \(seconds) s (blocked on a caller's file?)", file: file, line: line)
            return nil
        }
        return box.result
    }

    /// Asserts `.refused` whose text contains `words`.
    private func assertRefused(_ r: Result<ResolvedApp, IdentityError>?, _ words: String,
                               file: StaticString = #filePath, line: UInt = #line) {
        guard let r else { return }
        guard case .failure(.refused(let why)) = r else {
            return XCTFail("expected refused(… \(words) …), got \(r)", file: file, line: line)
        }
        XCTAssertTrue(why.contains(words), "reason \"\(why)\" does not say \"\(words)\"", file: file, line: line)
    }

    private func processWithRoot(_ fake: FakeProc) -> String {
        fake.process(100)
        let root = fake.dir.sub("100/root")
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        return root + "/.flatpak-info"
    }

    // MARK: .flatpak-info, a file the caller controls

    func testFlatpakInfoFIFOIsRefusedWithoutBlocking() {
        let fake = FakeProc()
        let info = processWithRoot(fake)
        XCTAssertEqual(mkfifo(info, 0o644), 0)
        assertRefused(resolveWithin(fake), "is not a regular file (a FIFO)")
    }

    func testFlatpakInfoSymlinkToDevZeroIsRefusedWithoutReading() {
        let fake = FakeProc()
        let info = processWithRoot(fake)
        XCTAssertEqual(symlink("/dev/zero", info), 0)
        assertRefused(resolveWithin(fake), "is a symbolic link")
    }

    func testFlatpakInfoSymlinkOutOfTheRootIsNotFollowed() {
        // A well-formed marker outside the caller's root: following the link would
        // make the caller the Flatpak app it names.
        let fake = FakeProc()
        let info = processWithRoot(fake)
        fake.dir.write("elsewhere/flatpak-info", "[Application]\nname=org.gnome.Maps\n")
        XCTAssertEqual(symlink(fake.dir.sub("elsewhere/flatpak-info"), info), 0)
        assertRefused(resolveWithin(fake), "is a symbolic link")
        // A relative link climbing out is no better.
        let fake2 = FakeProc()
        let info2 = processWithRoot(fake2)
        fake2.dir.write("flatpak-info", "[Application]\nname=org.gnome.Maps\n")
        XCTAssertEqual(symlink("../../flatpak-info", info2), 0)
        assertRefused(resolveWithin(fake2), "is a symbolic link")
    }

    func testHugeFlatpakInfoIsRefusedUnread() {
        // 33 MiB of name=: as a reply it would exceed the bus's message limit.
        let fake = FakeProc()
        let info = processWithRoot(fake)
        var bytes = Array("[Application]\nname=".utf8)
        bytes += [UInt8](repeating: UInt8(ascii: "a"), count: 33 << 20)
        XCTAssertTrue(FileManager.default.createFile(atPath: info, contents: Data(bytes)))
        assertRefused(resolveWithin(fake), "is larger than 64 KiB")
        // Just over the bound, with a valid name first: still refused, not cut.
        let fake2 = FakeProc()
        let info2 = processWithRoot(fake2)
        var padded = Array("[Application]\nname=org.gnome.Maps\n#".utf8)
        padded += [UInt8](repeating: UInt8(ascii: "x"), count: IdentityLimits.fileBytes)
        XCTAssertTrue(FileManager.default.createFile(atPath: info2, contents: Data(padded)))
        assertRefused(resolveWithin(fake2), "is larger than 64 KiB")
    }

    func testDirectoryAtFlatpakInfoIsRefused() {
        let fake = FakeProc()
        let info = processWithRoot(fake)
        XCTAssertNoThrow(try FileManager.default.createDirectory(atPath: info, withIntermediateDirectories: true))
        assertRefused(resolveWithin(fake), "is not a regular file (a directory)")
    }

    func testFlatpakInfoAtTheBoundStillResolves() {
        let fake = FakeProc()
        let info = processWithRoot(fake)
        var text = Array("[Application]\nname=org.gnome.Maps\n#".utf8)
        text += [UInt8](repeating: UInt8(ascii: "x"), count: IdentityLimits.fileBytes - text.count - 1) + [0x0A]
        XCTAssertEqual(text.count, IdentityLimits.fileBytes)
        XCTAssertTrue(FileManager.default.createFile(atPath: info, contents: Data(text)))
        guard case .success(let app)? = resolveWithin(fake) else { return XCTFail("a 64 KiB marker must still be read") }
        XCTAssertEqual(app.appID, "org.gnome.Maps")
        XCTAssertTrue(app.sandboxed)
    }

    /// Where a seccomp filter refuses openat2 (systemd's RestrictSUIDSGID= answers
    /// it with ENOSYS), the marker is opened with openat and O_NOFOLLOW: the same
    /// files are refused, for the same reasons, and a good one is still read.
    func testWithoutOpenat2TheSameMarkersAreRefusedAndAGoodOneRead() {
        openat2Refused = true
        defer { openat2Refused = false }
        func marker(_ make: (String, FakeProc) -> Void) -> Result<ResolvedApp, IdentityError>? {
            let fake = FakeProc()
            make(processWithRoot(fake), fake)
            return resolveWithin(fake)
        }
        assertRefused(marker { info, _ in XCTAssertEqual(mkfifo(info, 0o644), 0) }, "is not a regular file (a FIFO)")
        assertRefused(marker { info, _ in XCTAssertEqual(symlink("/dev/zero", info), 0) }, "is a symbolic link")
        assertRefused(marker { info, fake in
            fake.dir.write("flatpak-info", "[Application]\nname=org.gnome.Maps\n")
            XCTAssertEqual(symlink("../../flatpak-info", info), 0)
        }, "is a symbolic link")
        assertRefused(marker { info, _ in XCTAssertEqual(mkdir(info, 0o755), 0) }, "is not a regular file (a directory)")
        assertRefused(marker { info, _ in
            var bytes = Array("[Application]\nname=".utf8)
            bytes += [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
            XCTAssertTrue(FileManager.default.createFile(atPath: info, contents: Data(bytes)))
        }, "is larger than 64 KiB")
        guard case .success(let app)? = marker({ info, _ in
            XCTAssertTrue(FileManager.default.createFile(atPath: info, contents: Data("[Application]\nname=org.gnome.Maps\n".utf8)))
        }) else { return XCTFail("a good marker must still be read") }
        XCTAssertEqual(app.appID, "org.gnome.Maps")
        // A process without a marker is an unsandboxed one, as with openat2.
        let plain = FakeProc()
        _ = processWithRoot(plain)
        guard case .success(let host)? = resolveWithin(plain) else { return XCTFail("no marker: a host process") }
        XCTAssertFalse(host.sandboxed)
        XCTAssertFalse(isSingleComponent("a/b") || isSingleComponent("..") || isSingleComponent(""))
    }

    func testFlatpakIDsFollowFlatpaksRules() {
        let valid = ["org.gnome.Maps", "a.b.C", "org.example.My-App", "_x.y.z", "com.example.App_2", "a.b.c.d.e",
                     String(repeating: "a", count: 251) + ".b.c"]
        let invalid = ["org.gnome", "Maps", "", ".org.gnome.Maps", "org.gnome.Maps.", "org..gnome.Maps",
                       "org.gnome.1Maps", "org.my-example.App", "org.gnome.Maps\u{202E}spaM", "org.gnome.Ma ps",
                       "org/gnome/Maps", "org.gnome.Maps\n", "org.gnome.Mäps",
                       String(repeating: "a", count: 252) + ".b.c"]
        for id in valid {
            XCTAssertTrue(AppIdentityResolver.isValidFlatpakID(id), id)
            let fake = FakeProc().process(100, flatpakInfo: "[Application]\nname=\(id)\n")
            if case .success(let app)? = resolveWithin(fake) {
                XCTAssertEqual(app.appID, id)
            } else {
                XCTFail("\(id) should resolve")
            }
        }
        for id in invalid {
            XCTAssertFalse(AppIdentityResolver.isValidFlatpakID(id), id.debugDescription)
            // Embedded newlines end the line: the file parser sees a shorter name,
            // so only the ids that survive a line are fed through the file.
            guard !id.contains("\n"), !id.isEmpty else { continue }
            let fake = FakeProc().process(100, flatpakInfo: "[Application]\nname=\(id)\n")
            assertRefused(resolveWithin(fake), "names no valid Flatpak app id")
        }
    }

    // MARK: the executable path

    func testExecutablePathWithBidiAndNewlineIsEscaped() {
        let path = "/tmp/x/\u{202E}spaM.emonG.gro\n(system app)"
        let fake = FakeProc().process(100, exe: path)
        guard case .success(let app)? = resolveWithin(fake) else { return XCTFail("should resolve") }
        XCTAssertEqual(app.appID, "/tmp/x/\\u202EspaM.emonG.gro\\u000A(system app)")
        XCTAssertEqual(app.executable, app.appID)
        XCTAssertFalse(app.appID.unicodeScalars.contains { $0.value == 0x202E || $0 == "\n" })
    }

    func testOverlongExecutablePathIsRefused() {
        // 700 × U+202E: 2,101 bytes as a path, 4,201 once escaped: over 4 KiB.
        let path = "/" + String(repeating: "\u{202E}", count: 700)
        let fake = FakeProc().process(100, exe: path)
        assertRefused(resolveWithin(fake), "longer than 4096 bytes")
        // A long plain path within the bound is fine.
        let ok = "/" + String(repeating: "d/", count: 2000) + "app"
        let fake2 = FakeProc().process(100, exe: ok)
        guard case .success(let app)? = resolveWithin(fake2) else { return XCTFail("4 KiB paths must resolve") }
        XCTAssertEqual(app.appID, ok)
    }

    func testAppUnitIDWithBidiCharacterIsIgnored() {
        let cg = "0::/user.slice/app.slice/app-gnome-evil\\xe2\\x80\\xaespaM-12.scope\n"
        let fake = FakeProc().process(100, cgroup: cg)
        guard case .success(let app)? = resolveWithin(fake) else { return XCTFail("should resolve") }
        XCTAssertEqual(app.appID, "/usr/bin/app", "an app unit id with U+202E must not be an identity")
    }

    // MARK: whose process

    func testProcessOfAnotherUidIsRefused() {
        let fake = FakeProc().process(100)
        let other = getuid() == 65533 ? 65532 : 65533
        XCTAssertEqual(resolveWithin(fake, uid: UInt32(other)),
                       .failure(.otherUser(pid: 100, owner: getuid(), connectionUID: UInt32(other))))
        // Same for the later check of a cached caller.
        let resolver = AppIdentityResolver(procRoot: fake.root)
        guard case .failure(.otherUser) = resolver.verify(pid: 100, uid: UInt32(other), startTime: 4242) else {
            return XCTFail("verify must refuse another uid's process")
        }
    }

    func testStartTimeIsRecordedAndCheckedAgainstTheFirstSeen() throws {
        let fake = FakeProc().process(100, start: 1000)
        let resolver = AppIdentityResolver(procRoot: fake.root)
        let app = try resolver.resolve(pid: 100, uid: getuid()).get()
        XCTAssertEqual(app.startTime, 1000)
        XCTAssertNoThrow(try resolver.verify(pid: 100, uid: getuid(), startTime: 1000).get())
        XCTAssertNoThrow(try resolver.resolve(pid: 100, uid: getuid(), firstStart: 1000).get())
        // The process ended and its PID went to a new one of the same uid.
        fake.setStart(100, 2000)
        XCTAssertEqual(resolver.resolve(pid: 100, uid: getuid(), firstStart: 1000), .failure(.pidReused))
        guard case .failure(.pidReused) = resolver.verify(pid: 100, uid: getuid(), startTime: 1000) else {
            return XCTFail("verify must notice the new process")
        }
        // And once it is gone altogether.
        try FileManager.default.removeItem(atPath: fake.dir.sub("100"))
        guard case .failure(.processGone) = resolver.verify(pid: 100, uid: getuid(), startTime: 1000) else {
            return XCTFail("verify must notice the process is gone")
        }
    }

    func testErrorTextsAreDisplaySafe() {
        let e = IdentityError.refused("bad \u{202E}name\nhere")
        XCTAssertEqual(e.description, "bad \\u202Ename\\u000Ahere")
    }
}
