/// The Snap rule of identity (docs/dbus-api.md, "Identity"): a Snap is what the
/// kernel confines as one, not what a cgroup is called.
///
/// snapd runs every app of a strictly confined snap under the AppArmor profile
/// `snap.NAME.APP` (`snap.NAME.hook.HOOK` for hooks), in enforce mode. The bus
/// reads the label of the connecting socket's process with `SO_PEERSEC` when
/// it connects and reports it as `LinuxSecurityLabel` (`GetConnectionCredentials`):
/// the process cannot choose it. A cgroup path proves nothing: any user can put
/// a process in a unit named `snap.…` (`systemd-run --user --scope --unit=…`).
/// Complain mode (devmode snaps) and classic snaps confine nothing, so they are
/// not sandboxes; PipeWire's snap policy reads labels the same way
/// (`aa_getpeercon`, prefix `snap.`, the name up to the next dot, complain mode
/// = unconfined).
import GeoCore

extension AppIdentityResolver {
    /// The snap's instance name (`NAME` or `NAME_KEY` of a parallel install)
    /// when `label`, a `LinuxSecurityLabel` (the label's bytes, then a NUL; a
    /// final newline as `/proc/PID/attr/current` has it is ignored too), is
    /// an AppArmor label `snap.NAME.…` in enforce (or kill) mode; nil otherwise.
    static func snapName(fromSecurityLabel label: [UInt8]) -> String? {
        var bytes = label[...]
        while bytes.last == 0 || bytes.last == 0x0A { bytes = bytes.dropLast() }
        guard !bytes.isEmpty, bytes.count <= 4096, bytes.allSatisfy({ (0x20..<0x7F).contains($0) }) else {
            return nil
        }
        // AppArmor writes "LABEL (MODE)"; only "unconfined" comes without a mode.
        guard bytes.last == UInt8(ascii: ")"), let open = bytes.lastIndex(of: UInt8(ascii: "(")), open > bytes.startIndex,
              bytes[open - 1] == 0x20 else { return nil }
        let mode = String(decoding: bytes[(open + 1)..<(bytes.endIndex - 1)], as: UTF8.self)
        guard mode == "enforce" || mode == "kill" else { return nil }
        let profile = String(decoding: bytes[..<(open - 1)], as: UTF8.self)
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap", parts.dropFirst(2).allSatisfy({ !$0.isEmpty }),
              isValidSnapInstanceName(parts[1]) else { return nil }
        return String(parts[1])
    }

    /// snapd's rule for a snap instance name: `NAME` of 1 to 40 characters of
    /// `[a-z0-9-]` with at least one letter and no `-` at either end or twice in
    /// a row, optionally `_KEY` with KEY 1 to 10 characters of `[a-z0-9]`.
    static func isValidSnapInstanceName(_ s: Substring) -> Bool {
        let halves = s.split(separator: "_", maxSplits: 1, omittingEmptySubsequences: false)
        let name = Array(halves[0].utf8)
        let lowerOrDigit: (UInt8) -> Bool = { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }
        guard (1...40).contains(name.count), name.first != 0x2D, name.last != 0x2D,
              name.contains(where: { (0x61...0x7A).contains($0) }),
              name.allSatisfy({ lowerOrDigit($0) || $0 == 0x2D }),
              !zip(name, name.dropFirst()).contains(where: { $0 == 0x2D && $1 == 0x2D }) else { return false }
        if halves.count == 2 {
            let key = Array(halves[1].utf8)
            return (1...10).contains(key.count) && key.allSatisfy(lowerOrDigit)
        }
        return true
    }
}
