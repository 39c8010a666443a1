/// The Flatpak rule of identity (docs/dbus-api.md, "Identity"): the app id in a
/// sandbox's `/.flatpak-info`, and when it counts as verified.
///
/// What xdg-desktop-portal checks before it believes a `.flatpak-info`
/// (flatpak/xdg-desktop-portal, src/xdp-app-info-flatpak.c: `open_flatpak_info`,
/// `xdp_app_info_flatpak_new`, `get_bwrap_pidfd`; before 1.19 the same in
/// src/xdp-utils.c, `parse_app_info_from_flatpak_info`):
/// - `/proc/PID/root` opens as a directory (EACCES on a FUSE root means "not a
///   Flatpak"); `.flatpak-info` is opened relative to it, and a missing file
///   means a host process;
/// - `fstat` shows a regular file; it parses as a key file; `name` of
///   `[Application]` (of `[Runtime]` for a runtime) is a valid app id;
/// - `[Instance] instance-id` is present, and `bwrapinfo.json` of that instance
///   in the portal's own `$XDG_RUNTIME_DIR/.flatpak/` names a `child-pid` whose
///   `/proc` entry opens.
/// It makes no `statfs` of the file and no user-namespace comparison. It need
/// not: the portal runs as the user and trusts every unsandboxed process of that
/// user anyway (they get the host app id ""); all it relies on is that a
/// sandboxed app cannot rewrite its own `/.flatpak-info`, a read-only bind mount.
///
/// A system service cannot stop there. A process of the caller's uid is
/// unsandboxed and untrusted here, and can pass every one of those checks: a
/// user namespace and mount namespace of its own, a root of its own, an instance record
/// in its own runtime directory, or simply `bwrap` run as flatpak runs it (bwrap
/// needs no privilege the user lacks). And the instance record lies in a 0700
/// directory of the user, which this daemon cannot read. So a Flatpak id is
/// verified here when:
/// 1. the file passes the portal's checks: a regular file, read safely and
///    bounded (`readCallerFile`), `[Application] name` a valid app id,
///    `[Instance] instance-id` present;
/// 2. the process's root is a mount point (`/proc/PID/mountinfo` lists one at
///    `/`): bwrap pivots into a root of its own, chroot(2) into a directory
///    makes none. (This stops the plain chroot; one who bind-mounts first or
///    runs bwrap passes it, and meets 3.);
/// 3. the app id is installed system-wide: a directory owned by root at
///    `INSTALLATION/app/ID` (`/var/lib/flatpak/app/ID`). Only the administrator
///    puts it there, and any user may run code under an installed app's id
///    anyway (`flatpak run --command=sh ID`). So even a sandbox a user built
///    to pass 1 and 2 gets from config nothing that user could not get through
///    the real app; an id installed only per user, or not at all, is never verified.
/// A `.flatpak-info` that fails 2 or 3 still makes the caller sandboxed
/// (`IdentityKind.unverifiedFlatpak`): restricting is always safe.
import Glibc
import GeoCore

extension AppIdentityResolver {
    /// Nil when the sandbox of the process at `dir`, whose `.flatpak-info` is
    /// `info` and names `appID` (already a valid app id), passes checks 1-3 of
    /// this file; otherwise which one it failed.
    func verifyFlatpak(_ appID: String, info: [UInt8], _ dir: ProcessDirectory) -> String? {
        guard AppIdentityResolver.keyFileValue(info, group: "Instance", key: "instance-id") != nil else {
            return "its .flatpak-info has no [Instance] instance-id, which Flatpak writes for every sandbox"
        }
        let mounts: (bytes: [UInt8], complete: Bool)?
        do {
            mounts = try dir.readKernelFilePrefix("mountinfo")
        } catch {
            return "its mounts cannot be read: \(error)"
        }
        guard let mounts else { return "it has no mountinfo" }
        if !AppIdentityResolver.rootIsAMount(mountinfo: mounts.bytes) {
            return mounts.complete ? "its root is no mount point: a chroot into a directory, not a sandbox"
                : "its root is no mount point in the first \(IdentityLimits.fileBytes / 1024) KiB of its mountinfo"
        }
        for installation in flatpakInstallations {
            var st = stat()
            let path = installation + "/app/" + appID
            if lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && st.st_uid == installationOwner {
                return nil
            }
        }
        return "\(appID) is not installed system-wide (no directory owned by root at " +
            flatpakInstallations.map { $0 + "/app/" + appID }.joined(separator: " or ") + ")"
    }

    /// Whether `/proc/PID/mountinfo` lists a mount at the process's root: its
    /// lines are `ID PARENT MAJ:MIN ROOT MOUNTPOINT …`, mount points relative to
    /// that root, and mounts not reachable from it are left out. bwrap pivots
    /// into a root of its own, a mount; chroot(2) into a plain directory leaves
    /// none at `/` (only complete lines count: a prefix may end mid-line).
    static func rootIsAMount(mountinfo: [UInt8]) -> Bool {
        var lines = mountinfo.split(separator: 0x0A, omittingEmptySubsequences: false)
        lines.removeLast()   // after the last newline: empty, or a cut line
        return lines.contains { line in
            let fields = line.split(separator: 0x20, maxSplits: 5, omittingEmptySubsequences: false)
            return fields.count > 4 && fields[4].elementsEqual([UInt8(ascii: "/")])
        }
    }

    /// The `name=` key of the `[Application]` group, or nil.
    static func flatpakName(_ bytes: [UInt8]) -> String? {
        keyFileValue(bytes, group: "Application", key: "name")
    }

    /// The non-empty value of `key` in `[group]` of a key file, or nil.
    static func keyFileValue(_ bytes: [UInt8], group: String, key: String) -> String? {
        var inGroup = false
        for raw in bytes.split(separator: 0x0A, omittingEmptySubsequences: true) {
            let line = String(decoding: raw, as: UTF8.self).trimmingSpaces()
            if line.hasPrefix("[") {
                inGroup = line == "[" + group + "]"
                continue
            }
            guard inGroup, let eq = line.firstIndex(of: "=") else { continue }
            if String(line[..<eq]).trimmingSpaces() == key {
                let value = String(line[line.index(after: eq)...]).trimmingSpaces()
                return value.isEmpty ? nil : value
            }
        }
        return nil
    }

    /// Flatpak's own rule for an app id (`flatpak_is_valid_name` in flatpak's
    /// common/flatpak-ref-utils.c): 1 to 255 bytes; three or more elements
    /// separated by `.`, none empty; elements of `[A-Za-z0-9_-]` that do not
    /// start with a digit; `-` only in the last element. So no path, no space, no
    /// control or bidirectional character can be an app id.
    static func isValidFlatpakID(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= IdentityLimits.flatpakIDBytes else { return false }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 3 else { return false }
        for (i, element) in elements.enumerated() {
            let last = i == elements.count - 1
            guard let first = element.first, !(0x30...0x39).contains(first) else { return false }
            for b in element {
                let letter = (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b)
                let ok = letter || (0x30...0x39).contains(b) || b == UInt8(ascii: "_") || (last && b == UInt8(ascii: "-"))
                if !ok { return false }
            }
        }
        return true
    }
}
