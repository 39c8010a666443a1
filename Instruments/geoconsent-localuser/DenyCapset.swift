import Glibc
import CLinuxSyscalls

// `geoconsent-localuser deny-capset PROGRAM [ARGS...]`: runs PROGRAM with
// capset(2) failing with EPERM, as a unit whose SystemCallFilter= denies it
// (the default of `~@privileged`) runs the daemon: the tests check that the
// daemon then still leaves CAP_SYS_PTRACE to its helper, by executing itself
// again (GeoSystem/IdentitySeparation.swift, step 3).

/// `struct sock_filter` of <linux/filter.h>: one classic BPF instruction.
private struct SockFilter {
    var code: UInt16, jt: UInt8, jf: UInt8, k: UInt32
}

/// `struct sock_fprog`: the program's length and its instructions.
private struct SockFprog {
    var len: UInt16
    var filter: UnsafePointer<SockFilter>
}

/// Installs the filter (no_new_privs first, as an unprivileged process must)
/// and executes `argv`; returns only on failure.
func denyCapsetAndExec(_ argv: [String]) -> Never {
    guard let program = argv.first else { fail("deny-capset needs a program to run") }
    let ldNr: UInt16 = 0x20, jeq: UInt16 = 0x15, ret: UInt16 = 0x06   // BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    let errnoEPERM: UInt32 = 0x0005_0000 | UInt32(EPERM)                  // SECCOMP_RET_ERRNO | EPERM
    let allow: UInt32 = 0x7fff_0000                                      // SECCOMP_RET_ALLOW
    let instructions = [
        SockFilter(code: ldNr, jt: 0, jf: 0, k: 0),                      // seccomp_data.nr
        SockFilter(code: jeq, jt: 0, jf: 1, k: UInt32(SYS_capset)),
        SockFilter(code: ret, jt: 0, jf: 0, k: errnoEPERM),
        SockFilter(code: ret, jt: 0, jf: 0, k: allow),
    ]
    let prSetSeccomp: Int32 = 22, seccompModeFilter: UInt = 2            // <linux/prctl.h>, <linux/seccomp.h>
    let installed = instructions.withUnsafeBufferPointer { buffer -> Bool in
        var program = SockFprog(len: UInt16(buffer.count), filter: buffer.baseAddress!)
        guard geo_prctl(GEO_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 else { return false }
        return withUnsafePointer(to: &program) {
            geo_prctl(prSetSeccomp, seccompModeFilter, UInt(bitPattern: $0), 0, 0) == 0
        }
    }
    guard installed else { fail("deny-capset: cannot install the filter: \(String(cString: strerror(errno)))") }
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    execv(program, &cArgs)
    fail("deny-capset: cannot execute \(program): \(String(cString: strerror(errno)))")
}
