/// What the daemon could establish about a caller's app-id, and what admin
/// config may therefore grant it (docs/dbus-api.md, "Identity": what each
/// identity proves).
///
/// Within one uid an executable path, a systemd unit name, a `.flatpak-info`
/// and a cgroup path can all be forged (exec after connecting, a bind mount in
/// a user namespace, `systemd-run --user`, a chroot of one's own). So for such
/// identities the app-id is advisory: it keys that user's own consent records,
/// and never unlocks what the uid could not otherwise get.
public enum IdentityKind: String, Equatable, Sendable, CaseIterable {
    /// A Flatpak app id that passed the sandbox checks (see GeoSystem's
    /// `FlatpakIdentity`): the process is in a sandbox of its own that claims an
    /// app the administrator installed system-wide.
    case flatpak
    /// A `.flatpak-info` that failed those checks. Restricted like a sandbox
    /// (restricting is always safe), trusted with nothing.
    case unverifiedFlatpak = "flatpak-unverified"
    /// A Snap, from the AppArmor label `snap.NAME.APP` the bus reports in
    /// enforce mode: the kernel confines the connection's process.
    case snap
    /// The id of a systemd app unit in the process's cgroup path.
    case systemdUnit = "systemd-unit"
    /// The absolute path of the process's executable.
    case executable
    /// The absolute path of the script an interpreter runs (python3, perl,
    /// gjs, sh, …), from the process's command line: so that every script
    /// under one interpreter is not one app (GeoSystem's `ScriptPath`).
    case script

    /// Flatpak and Snap callers, verified or not: they may not register agents
    /// and may reset only their own record.
    public var isSandboxed: Bool {
        switch self {
        case .flatpak, .unverifiedFlatpak, .snap: return true
        case .systemdUnit, .executable, .script: return false
        }
    }

    /// A sandbox id the process itself cannot choose.
    public var isVerifiedSandbox: Bool { self == .flatpak || self == .snap }
}

extension Config {
    /// Whether config that names `caller`'s app-id may grant it something
    /// (`policy = always`, an entry of `[agents] allow`): only a verified
    /// sandbox id, or any id of a process of a system uid (at most
    /// `systemUIDMax`), whose programs only root installs and starts. A process
    /// of another uid could show any executable or unit name, so such entries do
    /// not apply to it. (`policy = restricted` applies to everyone: it only takes away.)
    public func grantsByName(to caller: Caller) -> Bool {
        caller.identity.isVerifiedSandbox || caller.uid <= systemUIDMax
    }
}
