/// This process's Linux capabilities, and giving them up: the daemon keeps
/// none, its identity helper keeps CAP_SYS_PTRACE alone (IdentitySeparation.swift).
import Glibc
import CLinuxSyscalls

/// The five capability sets of this process, each as a mask (bit N = capability N).
public struct CapabilitySets: Equatable, CustomStringConvertible {
    public var effective: UInt64
    public var permitted: UInt64
    public var inheritable: UInt64
    public var ambient: UInt64
    public var bounding: UInt64

    /// The sets of this process now.
    public static func current() throws -> CapabilitySets {
        var e: UInt64 = 0, p: UInt64 = 0, i: UInt64 = 0
        if geo_capget(&e, &p, &i) != 0 { throw SystemError.last("capget", "self") }
        var ambient: UInt64 = 0, bounding: UInt64 = 0
        for cap in Capabilities.known {
            if geo_prctl(CLinuxSyscalls.GEO_PR_CAP_AMBIENT, CLinuxSyscalls.GEO_PR_CAP_AMBIENT_IS_SET, UInt(cap), 0, 0) == 1 {
                ambient |= 1 << UInt64(cap)
            }
            if geo_prctl(CLinuxSyscalls.GEO_PR_CAPBSET_READ, UInt(cap), 0, 0, 0) == 1 { bounding |= 1 << UInt64(cap) }
        }
        return CapabilitySets(effective: e, permitted: p, inheritable: i, ambient: ambient, bounding: bounding)
    }

    public var description: String {
        func hex(_ v: UInt64) -> String { String(v, radix: 16) }
        return "effective \(hex(effective)) permitted \(hex(permitted)) inheritable \(hex(inheritable)) " +
            "ambient \(hex(ambient)) bounding \(hex(bounding))"
    }
}

/// Capability operations on this process.
public enum Capabilities {
    /// CAP_SYS_PTRACE: reading another uid's `/proc/PID/exe` and `/proc/PID/root`.
    public static let sysPtrace = Int(CLinuxSyscalls.GEO_CAP_SYS_PTRACE)
    /// CAP_SETPCAP: needed to shrink the bounding set.
    static let setpcap = Int(CLinuxSyscalls.GEO_CAP_SETPCAP)

    /// The capabilities this kernel knows (PR_CAPBSET_READ answers EINVAL past
    /// the last; `/proc/sys/kernel/cap_last_cap` is hidden under ProcSubset=pid).
    static let known: [Int] = {
        var caps: [Int] = []
        while caps.count < 64, geo_prctl(CLinuxSyscalls.GEO_PR_CAPBSET_READ, UInt(caps.count), 0, 0, 0) >= 0 {
            caps.append(caps.count)
        }
        return caps
    }()

    /// Whether `cap` is in the effective set.
    public static func isEffective(_ cap: Int) -> Bool {
        ((try? CapabilitySets.current().effective) ?? 0) & (1 << UInt64(cap)) != 0
    }

    /// Keeps `keep` (a mask) and gives up every other capability, as far as this
    /// process can: the ambient set is cleared; the bounding set is cut to `keep`
    /// when CAP_SETPCAP allows (without it a bounding set cannot shrink: under
    /// no_new_privs, with nothing else permitted or inheritable, it grants
    /// nothing); effective and permitted become `keep`, inheritable empty. That
    /// last step is `capset`, which systemd's `SystemCallFilter=~@privileged`
    /// denies: returns false then, and the caller must finish the drop another
    /// way (an `execve` without ambient capabilities empties permitted and
    /// effective; IdentitySeparation.swift). Throws when the kernel refuses
    /// anything else.
    @discardableResult
    public static func keepOnly(_ keep: UInt64) throws -> Bool {
        if geo_prctl(CLinuxSyscalls.GEO_PR_CAP_AMBIENT, CLinuxSyscalls.GEO_PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 {
            throw SystemError.last("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", "self")
        }
        let now = try CapabilitySets.current()
        if now.effective & (1 << UInt64(setpcap)) != 0 {
            for cap in known where keep & (1 << UInt64(cap)) == 0 && now.bounding & (1 << UInt64(cap)) != 0 {
                if geo_prctl(CLinuxSyscalls.GEO_PR_CAPBSET_DROP, UInt(cap), 0, 0, 0) != 0 {
                    throw SystemError.last("prctl(PR_CAPBSET_DROP)", "self")
                }
            }
        }
        let wanted = now.permitted & keep
        if geo_capset(wanted, wanted, 0) != 0 {
            if errno == EPERM { return false }
            throw SystemError.last("capset", "self")
        }
        return true
    }

    /// Sets no_new_privs: no `execve` can grant a privilege again.
    public static func setNoNewPrivileges() throws {
        if geo_prctl(CLinuxSyscalls.GEO_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            throw SystemError.last("prctl(PR_SET_NO_NEW_PRIVS)", "self")
        }
    }
}
