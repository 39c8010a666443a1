import XCTest
@testable import GeoSystem
import GeoCore

/// The daemon-helper protocol: what one end writes the other reads back
/// unchanged, and anything else is refused.
final class IdentityWireTests: XCTestCase {
    func testRequestsRoundTrip() {
        let requests = [
            IdentityRequest(sequence: 1, operation: .resolve, pid: 4242, uid: 1000),
            IdentityRequest(sequence: 2, operation: .resolve, pid: 1, uid: 0, startTime: 77,
                            securityLabel: Array("snap.app.app (enforce)".utf8) + [0]),
            IdentityRequest(sequence: .max, operation: .verify, pid: .max, uid: .max, startTime: 0),
            IdentityRequest(sequence: 3, operation: .resolve, pid: 5, uid: 5, securityLabel: []),
            IdentityRequest(sequence: 4, operation: .resolve, pid: 5, uid: 5,
                            securityLabel: [UInt8](repeating: 0x61, count: IdentityWire.labelBytes)),
        ]
        for r in requests {
            let bytes = IdentityWire.encode(r)
            XCTAssertEqual(bytes.count, IdentityWire.requestBytes)
            XCTAssertEqual(IdentityWire.decodeRequest(bytes), r)
        }
    }

    func testMalformedRequestsAreRefused() {
        let good = IdentityWire.encode(IdentityRequest(sequence: 1, operation: .verify, pid: 2, uid: 3, startTime: 4))
        XCTAssertNil(IdentityWire.decodeRequest(Array(good.dropLast())), "short")
        XCTAssertNil(IdentityWire.decodeRequest(good + [0]), "long")
        XCTAssertNil(IdentityWire.decodeRequest([]))
        func patched(_ at: Int, _ value: UInt32) -> [UInt8] {
            var b = good
            withUnsafeBytes(of: value) { for (i, x) in $0.enumerated() { b[at + i] = x } }
            return b
        }
        XCTAssertNil(IdentityWire.decodeRequest(patched(0, 0x4743_4932)), "magic")
        XCTAssertNil(IdentityWire.decodeRequest(patched(8, 3)), "operation")
        XCTAssertNil(IdentityWire.decodeRequest(patched(20, 0)), "verify without a start time")
        XCTAssertNil(IdentityWire.decodeRequest(patched(20, 2)), "flags")
        XCTAssertNil(IdentityWire.decodeRequest(patched(24, UInt32(IdentityWire.labelBytes + 1))), "label length")
        XCTAssertNil(IdentityWire.decodeRequest(patched(28, 1)), "padding")
    }

    func testRepliesRoundTrip() {
        let replies: [IdentityReply] = [
            .resolved(ResolvedApp(appID: "/usr/bin/app", identity: .executable, executable: "/usr/bin/app", startTime: 99),
                      procUID: 1000),
            .resolved(ResolvedApp(appID: "/usr/bin/app", identity: .executable, executable: "/usr/bin/app", startTime: 99,
                                  cgroup: "/" + String(repeating: "c", count: ResolvedApp.cgroupBytes - 1)), procUID: 1000),
            .resolved(ResolvedApp(appID: "org.example.App", identity: .unverifiedFlatpak, executable: "",
                                  startTime: 1, notVerified: "its root is no mount point"), procUID: 0),
            .resolved(ResolvedApp(appID: String(repeating: "x", count: IdentityLimits.identityBytes), identity: .snap,
                                  executable: String(repeating: "é", count: IdentityLimits.identityBytes / 2)), procUID: 7),
            .resolved(ResolvedApp(appID: "/usr/bin/meld", identity: .script, executable: "/usr/bin/python3.11",
                                  script: "/usr/bin/meld", installed: true, startTime: 5), procUID: 1000),
            .resolved(ResolvedApp(appID: "org.gnome.Maps", identity: .systemdUnit, executable: "/usr/bin/gjs-console",
                                  script: "/" + String(repeating: "s", count: IdentityLimits.identityBytes - 1),
                                  cgroup: "/" + String(repeating: "c", count: ResolvedApp.cgroupBytes - 1)), procUID: 1000),
            .verified,
            .failed(.processGone), .failed(.pidReused),
            .failed(.otherUser(pid: 4242, owner: 1001, connectionUID: 65534)),
            .failed(.unreadable("open /proc/4242/cgroup: Permission denied")),
            .failed(.refused("/proc/4242/root/.flatpak-info is not a regular file (a FIFO)")),
        ]
        for (i, reply) in replies.enumerated() {
            let bytes = IdentityWire.encode(reply, sequence: UInt32(i))
            XCTAssertLessThanOrEqual(bytes.count, IdentityWire.maxReplyBytes)
            let decoded = IdentityWire.decodeReply(bytes)
            XCTAssertEqual(decoded?.sequence, UInt32(i))
            XCTAssertEqual(decoded?.reply, reply)
        }
    }

    func testReplyTextsAreCutAndIdentitiesBounded() {
        let long = String(repeating: "é", count: 5000)
        let cut = IdentityWire.decodeReply(IdentityWire.encode(.failed(.refused(long)), sequence: 1))
        guard case .failed(.refused(let text))? = cut?.reply else { return XCTFail("\(String(describing: cut))") }
        XCTAssertLessThanOrEqual(text.utf8.count, 2048)
        XCTAssertTrue(long.hasPrefix(text))
        // An identity over the limit never crosses as one.
        let tooLong = ResolvedApp(appID: String(repeating: "a", count: IdentityLimits.identityBytes + 1),
                                  identity: .executable, executable: "/x")
        guard case .failed(.refused)? = IdentityWire.decodeReply(IdentityWire.encode(.resolved(tooLong, procUID: 1), sequence: 1))?.reply
        else { return XCTFail("an over-long identity was sent") }
    }

    func testMalformedRepliesAreRefused() {
        let good = IdentityWire.encode(.failed(.unreadable("why")), sequence: 5)
        XCTAssertNotNil(IdentityWire.decodeReply(good))
        XCTAssertNil(IdentityWire.decodeReply(good + [0]), "trailing bytes")
        for n in 0..<good.count { XCTAssertNil(IdentityWire.decodeReply(Array(good.prefix(n))), "cut at \(n)") }
        var badKind = IdentityWire.encode(.resolved(ResolvedApp(appID: "/a", identity: .executable, executable: "/a"), procUID: 1),
                                          sequence: 1)
        badKind[9] = 200
        XCTAssertNil(IdentityWire.decodeReply(badKind), "identity kind")
        var badUTF8 = good
        badUTF8[badUTF8.count - 1] = 0xFF
        XCTAssertNil(IdentityWire.decodeReply(badUTF8), "UTF-8")
        XCTAssertNil(IdentityWire.decodeReply([UInt8](repeating: 0, count: IdentityWire.maxReplyBytes + 1)), "size")
    }
}
