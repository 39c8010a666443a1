import GeoCore

/// Where a source's news goes: the location service, which hands it to the
/// location core. A fix comes through `sourceFix` so that a stream of them
/// can go out to the sessions as each is decoded.
protocol SourceSink: AnyObject {
    func sourceFix(_ fix: Fix)
    func sourceEvent(_ event: LocationEvent)
}

/// One source of positions, as the location service drives it (GeoClue's
/// `gclue-locator.c` over its sources): the core decides when a source is
/// opened and closed and which fix a session gets; a source only produces
/// fixes and says when it has none. The service names no source but by its
/// kind.
protocol PositionSourceDriver: AnyObject {
    var kind: PositionSource { get }
    /// The core asked for the source (`LocationEffect.open`): the outcome
    /// comes back as `opened` or `openFailed`.
    func open()
    /// Make the source ready without asking it anything (`LocationEffect.warm`).
    func warm()
    /// The core no longer needs the source.
    func close()
    /// The daemon is stopping: release everything.
    func shutdown()
}

extension PositionSourceDriver {
    /// Most sources have nothing to ready.
    func warm() {}
}
