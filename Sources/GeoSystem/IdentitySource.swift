/// Where the daemon gets caller identities from: read from `/proc` in its own
/// process (`AppIdentityResolver`), or asked of the identity helper that holds
/// CAP_SYS_PTRACE for it (`IdentityHelperClient`). Both give the same answers.
public protocol IdentitySource {
    /// See `AppIdentityResolver.resolve(pid:uid:firstStart:securityLabel:)`.
    func resolve(pid: UInt32, uid: UInt32, firstStart: UInt64?, securityLabel: [UInt8]?) -> Result<ResolvedApp, IdentityError>
    /// See `AppIdentityResolver.verify(pid:uid:startTime:)`.
    func verify(pid: UInt32, uid: UInt32, startTime: UInt64) -> Result<Void, IdentityError>
}

extension AppIdentityResolver: IdentitySource {}
