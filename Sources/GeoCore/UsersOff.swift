/// Which users switched location off for their own apps (`SetUserLocation`,
/// docs/dbus-api.md): the per-user switch of the settings window, beside the
/// administrator's `Enabled` for everyone. Kept in the state directory's
/// `users-off` (docs/state-format.md).
public struct UsersOff: Equatable, Sendable {
    /// The users who switched it off.
    public private(set) var uids: Set<UInt32> = []
    /// After a damaged file, whose contents are unknown: every user is off
    /// (the most private value) but root and those who switched it on since.
    public private(set) var allBut: Set<UInt32>?

    public init(uids: Set<UInt32> = [], allBut: Set<UInt32>? = nil) {
        self.uids = uids
        self.allBut = allBut
    }

    /// Every user off but root, until each switches location on again.
    public static var everyone: UsersOff { UsersOff(allBut: []) }

    public func isOff(_ uid: UInt32) -> Bool {
        if let allBut { return uid != 0 && !allBut.contains(uid) }
        return uids.contains(uid)
    }

    /// Sets `uid`'s switch; false when nothing changed.
    @discardableResult
    public mutating func set(_ uid: UInt32, off: Bool) -> Bool {
        guard isOff(uid) != off else { return false }
        if allBut != nil {
            if off { allBut?.remove(uid) } else { allBut?.insert(uid) }
        } else if off {
            uids.insert(uid)
        } else {
            uids.remove(uid)
        }
        return true
    }
}
