import GeoCore
import GeoDBus
import GeoConsentAPI

/// The Manager's `AvailableAccuracyLevel`, as each caller's uid has it: 0
/// while location is switched off, for everyone or for that uid (its GeoClue
/// agent's `MaxAccuracyLevel` is 0), else that agent's level, and EXACT for a
/// uid without one. A value for one uid is never broadcast: a change goes to
/// each connection that read the property, with the value for its own uid.
extension GeoClueFacade {
    /// `AvailableAccuracyLevel` for `uid` (nil: a caller whose uid is not known).
    func availableLevel(uid: UInt32?) -> UInt32 {
        // A reader whose uid is not known is told nothing is available (fail closed).
        guard host.consent.enabled, let uid else { return GeoClueAccuracyLevel.none }
        guard let agent = host.consent.externalAgent(forUID: uid) else { return GeoClueAccuracyLevel.exact }
        guard let cap = agent.maxAccuracy else { return GeoClueAccuracyLevel.none }
        let level = agentLevels[agent.name] ?? (cap == .full ? GeoClueAccuracyLevel.exact : GeoClueAccuracyLevel.city)
        return min(level, GeoClueAccuracyLevel.exact)
    }

    /// A `Get` or `GetAll` of the Manager by `sender`: the value for its uid,
    /// and the reader is kept, to be told of changes.
    func availableLevel(for sender: String, _ done: @escaping (DBusValue) -> Void) {
        host.resolveCaller(connection: sender) { [weak self] caller in
            guard let self else { return done(.uint32(GeoClueAccuracyLevel.none)) }
            guard let caller else { return done(.uint32(self.availableLevel(uid: nil))) }
            let level = self.availableLevel(uid: caller.uid)
            self.levelReaders[sender] = (caller.uid, level)
            done(.uint32(level))
        }
    }

    /// Location was switched on or off, or a GeoClue agent came, changed its
    /// level or left: each reader whose value changed gets a `PropertiesChanged`.
    func availableLevelsChanged() {
        for (reader, known) in levelReaders {
            let level = availableLevel(uid: known.uid)
            guard level != known.sent else { continue }
            levelReaders[reader] = (known.uid, level)
            server.propertiesChanged(path: GeoClueAPI.managerPath, interface: GeoClueAPI.managerInterfaceName,
                                     changed: [ManagerProperty.availableAccuracyLevel: .uint32(level)], destination: reader)
        }
    }
}
