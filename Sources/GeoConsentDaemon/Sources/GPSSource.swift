import GeoCore
import GeoDBus
import GeoGPS

/// The receiver, through gpsd: connected off the loop (`GPSDConnector`),
/// read as gpsd writes, each fix handed on as soon as libgps has decoded it.
final class GPSSource: PositionSourceDriver {
    let kind = PositionSource.gps
    /// "gpsd at HOST:PORT", for messages.
    let name: String
    private let loop: EventLoop
    private let connector: GPSDConnector
    private weak var sink: SourceSink?

    /// The connection to gpsd, while there is one.
    private var gpsd: GPSDClient?
    private var watch: EventLoop.Token?

    init(loop: EventLoop, host: String, port: UInt16, sink: SourceSink) {
        self.loop = loop
        self.sink = sink
        name = "gpsd at \(host):\(port)"
        connector = GPSDConnector(loop: loop, host: host, port: port)
    }

    func open() {
        connector.connect { [weak self] result in self?.connected(result) }
    }

    func close() {
        if let w = watch { loop.unwatch(w); watch = nil }
        gpsd?.close()
        gpsd = nil
    }

    func shutdown() { close() }

    private func connected(_ result: Result<GPSDClient, GPSDError>) {
        switch result {
        case .success(let c):
            gpsd = c
            watch = loop.watch(fd: c.fd, events: .readable) { [weak self] _ in self?.readable() }
            sink?.sourceEvent(.opened(.gps))
        case .failure(let e):
            sink?.sourceEvent(.openFailed(.gps, reason: "\(e)"))
        }
    }

    private func readable() {
        guard let c = gpsd else { return }
        // Each fix goes out as soon as libgps has decoded it, before the read that
        // finds the socket empty. A fix's effects may close the connection (`gpsd`
        // is then another or nil): that is no gpsd going away.
        let closed = c.readAvailable { sink?.sourceFix($0) }
        if closed, gpsd === c { sink?.sourceEvent(.lost(.gps, reason: "\(name) closed the connection")) }
    }
}
