import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The daemon leaves CAP_SYS_PTRACE to its identity helper and keeps no
/// capability itself (geoconsentd(8), SECURITY; GeoSystem/IdentitySeparation.swift):
/// what each process holds, as the unit runs them (the service user with the
/// capability, on the local-user rig) and as root; that a lost helper fails
/// callers closed and ends the daemon with status 1; and, with `setpriv`, what
/// a process with the daemon's credentials can no longer do that one with the
/// capability could.
final class PrivilegeSeparationTests: XCTestCase {
    static let ptraceBit: UInt64 = 1 << 19   // CAP_SYS_PTRACE

    // MARK: what each process holds

    func testServiceDaemonHoldsNoCapabilityAndItsHelperOnlyPtrace() throws {
        let rig = try LocalUserRig()
        defer { rig.stop() }
        let daemon = rig.daemon.process.pid
        let main = try XCTUnwrap(ProcessStatus(daemon))
        XCTAssertEqual(main.cap("CapEff"), 0, main.text)
        XCTAssertEqual(main.cap("CapPrm"), 0, main.text)
        XCTAssertEqual(main.cap("CapAmb"), 0, main.text)
        // The bounding set shrinks only with CAP_SETPCAP, which the unit does
        // not grant (the rig, like the unit, bounds the daemon to CAP_SYS_PTRACE):
        // under no_new_privs, with nothing permitted, it grants nothing.
        XCTAssertEqual(main.cap("CapBnd") & ~Self.ptraceBit, 0, main.text)
        XCTAssertEqual(main.cap("CapInh") & ~Self.ptraceBit, 0, main.text)
        XCTAssertEqual(main.field("NoNewPrivs"), "1", main.text)
        // capset allowed (as the unit allows it): dropped in place, no second exec.
        let cmdline = (try? String(contentsOfFile: "/proc/\(daemon)/cmdline", encoding: .utf8)) ?? ""
        XCTAssertFalse(cmdline.contains("--identity-helper-socket="), "capset works here, yet it executed itself again: \(cmdline)")

        let helper = try XCTUnwrap(Self.helper(of: daemon), "no identity helper under pid \(daemon):\n\(rig.daemon.log())")
        let h = try XCTUnwrap(ProcessStatus(helper))
        XCTAssertEqual(h.cap("CapEff"), Self.ptraceBit, h.text)
        XCTAssertEqual(h.cap("CapPrm"), Self.ptraceBit, h.text)
        XCTAssertEqual(h.cap("CapAmb"), 0, h.text)
        XCTAssertEqual(h.cap("CapBnd"), Self.ptraceBit, h.text)
        XCTAssertEqual(h.cap("CapInh") & ~Self.ptraceBit, 0, h.text)
        XCTAssertEqual(h.field("NoNewPrivs"), "1", h.text)
        XCTAssertEqual(h.field("Uid")?.split(separator: "\t").first.map(String.init), String(rig.serviceUser.uid), h.text)
        // Standard error (for its one line on a failure) and its socket; nothing else.
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(helper)/fd").sorted()
        XCTAssertEqual(fds.count, 2, "\(fds)")
        XCTAssertTrue(fds.contains("2"), "\(fds)")

        // Identity across uids still works, through the helper.
        let auth = try rig.bus.busctl(["call", GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                       "GetAuthorization"], as: ServiceTests.nobody)
        XCTAssertEqual(auth.status, 0, auth.log + "\ndaemon:\n" + rig.daemon.log())
        XCTAssertTrue(auth.output.contains("busctl\""), auth.output)
    }

    /// Where a system call filter denies capset (as `~@privileged` alone does),
    /// the daemon cannot empty its permitted set in place: it executes itself
    /// again, and holds nothing after it all the same.
    func testWithCapsetDeniedTheDaemonExecutesItselfAgainAndHoldsNothing() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root") }
        let user = try ServiceUser.standIn()
        let bus = try PolicyBus(serviceUser: user)
        defer { bus.stop() }
        let daemon = try bus.startDaemon(as: user, withPtrace: true, denyCapset: true)
        defer { daemon.stop() }
        let pid = daemon.process.pid
        // The process started is the wrapper's; the daemon is it, after its execs.
        let main = try XCTUnwrap(ProcessStatus(pid))
        for set in ["CapEff", "CapPrm", "CapAmb"] { XCTAssertEqual(main.cap(set), 0, "\(set):\n\(main.text)") }
        XCTAssertEqual(main.field("Seccomp"), "2", "the filter is on: \(main.text)")
        let cmdline = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
        XCTAssertTrue(cmdline.contains("--identity-helper-socket="), "the daemon did not execute itself afresh: \(cmdline)")
        let helper = try XCTUnwrap(Self.helper(of: pid), daemon.log())
        XCTAssertEqual(try XCTUnwrap(ProcessStatus(helper)).cap("CapEff"), Self.ptraceBit)
        let auth = try bus.busctl(["call", GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                   "GetAuthorization"], as: ServiceTests.nobody)
        XCTAssertTrue(auth.output.contains("busctl\""), auth.output + auth.log + daemon.log())
    }

    func testRootDaemonGivesUpEveryCapabilityBoundingSetIncluded() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root") }
        let bus = try PolicyBus(serviceUser: try ServiceUser.standIn())
        defer { bus.stop() }
        let daemon = try bus.startDaemon(as: ServiceUser(name: "root", uid: 0, gid: 0), withPtrace: false)
        defer { daemon.stop() }
        let main = try XCTUnwrap(ProcessStatus(daemon.process.pid))
        for set in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"] {
            XCTAssertEqual(main.cap(set), 0, "\(set):\n\(main.text)")
        }
        XCTAssertEqual(main.field("NoNewPrivs"), "1", main.text)
        let helper = try XCTUnwrap(Self.helper(of: daemon.process.pid), daemon.log())
        let h = try XCTUnwrap(ProcessStatus(helper))
        for (set, value) in [("CapEff", Self.ptraceBit), ("CapPrm", Self.ptraceBit), ("CapBnd", Self.ptraceBit),
                             ("CapInh", 0), ("CapAmb", 0)] {
            XCTAssertEqual(h.cap(set), value, "\(set):\n\(h.text)")
        }
        let auth = try bus.busctl(["call", GeoConsentAPI.busName, GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                                   "GetAuthorization"], as: ServiceTests.nobody)
        XCTAssertTrue(auth.output.contains("busctl\""), auth.output + auth.log + daemon.log())
    }

    // MARK: a lost helper

    func testKilledHelperEndsTheDaemonWithStatusOne() throws {
        let rig = try LocalUserRig()
        defer { rig.stop() }
        let helper = try XCTUnwrap(Self.helper(of: rig.daemon.process.pid))
        kill(helper, SIGKILL)
        let status = rig.daemon.process.waitForExit(timeout: 10)
        XCTAssertEqual(status, 1, "the daemon must exit with status 1 (Restart=on-failure):\n\(rig.daemon.log())")
        XCTAssertTrue(rig.daemon.log().contains("the identity helper is gone"), rig.daemon.log())
    }

    func testSilentHelperFailsTheCallerClosedThenTheDaemonExits() throws {
        let rig = try LocalUserRig()
        defer { rig.stop() }
        let helper = try XCTUnwrap(Self.helper(of: rig.daemon.process.pid))
        kill(helper, SIGSTOP)
        defer { kill(helper, SIGKILL) }
        let started = Date()
        let r = try rig.run(LocalUserRig.attacker, ["tap"], log: "tap.log", timeout: 40)
        let took = Date().timeIntervalSince(started)
        let reply = r.output.split(separator: "\n").first { $0.hasPrefix("reply ") }.map(String.init) ?? ""
        XCTAssertTrue(reply.contains("error \(DBusError.accessDeniedName) The calling process could not be identified: " +
                                     "the identity helper is gone"), "\(r.output)\ndaemon:\n\(rig.daemon.log())")
        XCTAssertLessThan(took, 15, "the helper's timeout is 5 s")
        XCTAssertEqual(rig.daemon.process.waitForExit(timeout: 10), 1, rig.daemon.log())
    }

    // MARK: what the dropped capability buys

    /// The daemon's credentials (its uid, no capability, no_new_privs, bounding
    /// set CAP_SYS_PTRACE as under the unit) against the same with
    /// CAP_SYS_PTRACE, i.e. the daemon before the split: only the latter can
    /// write-open the memory of a process of its uid that holds the capability
    /// (as the helper does), and walk through another process's root out of its
    /// own mount namespace (past ProtectSystem=, PrivateTmp=, ReadOnlyPaths=).
    /// Root's /proc/PID/mem is closed to both by its mode (0600, owner root):
    /// without CAP_DAC_OVERRIDE the capability does not reach it.
    func testWithoutPtraceTheDaemonsCredentialsReachNoOtherProcess() throws {
        let rig = try LocalUserRig()
        defer { rig.stop() }
        let user = rig.serviceUser
        let sleep = TestPaths.findExecutable("sleep") ?? "/bin/sleep"
        let setpriv = TestPaths.findExecutable("setpriv") ?? "/usr/bin/setpriv"
        // A process of the service uid holding CAP_SYS_PTRACE, as the helper does, but dumpable.
        let standIn = try ChildProcess(executable: setpriv, arguments: user.setprivArgs(ptrace: true) + [sleep, "60"],
                                       logPath: rig.work.file("stand-in.log"))
        defer { standIn.stop() }
        let rootSleep = try ChildProcess(executable: sleep, arguments: ["60"], logPath: rig.work.file("root-sleep.log"))
        defer { rootSleep.stop() }
        usleep(200_000)
        let helper = try XCTUnwrap(Self.helper(of: rig.daemon.process.pid))

        let daemonLike = user.setprivArgs(ptrace: false)
            .map { $0 == "--bounding-set=-all" ? "--bounding-set=-all,+sys_ptrace" : $0 }
        let withPtrace = user.setprivArgs(ptrace: true)
        func attempt(_ creds: [String], _ script: String, _ path: String) throws -> (ok: Bool, log: String) {
            let r = try runLogged(setpriv, creds + ["/bin/sh", "-c", script, "sh", path])
            return (r.status == 0, r.log)
        }
        let writeOpen = "exec 3>>\"$1\""
        let enter = "cd \"$1\""

        let helperMem = try attempt(daemonLike, writeOpen, "/proc/\(helper)/mem")
        XCTAssertFalse(helperMem.ok, "the daemon's credentials opened the helper's memory for writing")
        let standInMem = try attempt(daemonLike, writeOpen, "/proc/\(standIn.pid)/mem")
        XCTAssertFalse(standInMem.ok, "without CAP_SYS_PTRACE: opened a capable process's memory for writing")
        XCTAssertTrue(try attempt(withPtrace, writeOpen, "/proc/\(standIn.pid)/mem").ok,
                      "with CAP_SYS_PTRACE the write-open should succeed (what the split takes away)")

        let otherRoot = try attempt(daemonLike, enter, "/proc/\(rootSleep.pid)/root/")
        XCTAssertFalse(otherRoot.ok, "without CAP_SYS_PTRACE: entered another process's root")
        XCTAssertTrue(try attempt(withPtrace, enter, "/proc/\(rootSleep.pid)/root/").ok,
                      "with CAP_SYS_PTRACE another process's root should be reachable")

        for creds in [daemonLike, withPtrace] {
            XCTAssertFalse(try attempt(creds, writeOpen, "/proc/\(rootSleep.pid)/mem").ok, "root's memory, \(creds)")
            XCTAssertFalse(try attempt(creds, writeOpen, "/proc/1/mem").ok, "PID 1's memory, \(creds)")
        }
        print("privilege-separation: daemon credentials: helper mem: \(helperMem.log.trimmingCharacters(in: .whitespacesAndNewlines)); " +
              "other root: \(otherRoot.log.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    // MARK: helpers

    /// The identity helper: the child of `daemon` named `geoconsentd-id`.
    static func helper(of daemon: pid_t) -> pid_t? {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for e in entries {
                guard let pid = pid_t(e),
                      let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                      let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
                let comm = stat[stat.index(after: open)..<close]
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if comm == "geoconsentd-id", fields.count > 1, pid_t(fields[1]) == daemon { return pid }
            }
            usleep(20_000)
        }
        return nil
    }
}

/// `/proc/PID/status`, read once.
struct ProcessStatus {
    let text: String

    init?(_ pid: pid_t) {
        guard let t = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        text = t
    }

    func field(_ name: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    /// A capability set (`CapEff`, …) as a mask; all bits set when missing, so a check fails.
    func cap(_ name: String) -> UInt64 {
        field(name).flatMap { UInt64($0, radix: 16) } ?? .max
    }
}
