import GeoCore
import GeoDBus
import GeoSystem

/// The admin's static position (`[sources] static-file`, GeoClue 2.7's
/// `/etc/geolocation` format): read at start and again whenever the file
/// changes, so it stands ready without any work at request time. A file
/// that is missing, malformed or being written gives no position, says
/// why in the log (`FILE:LINE: reason`), and leaves the other sources be.
final class StaticSource: PositionSourceDriver {
    let kind = PositionSource.static
    let path: String
    private let loop: EventLoop
    private weak var sink: SourceSink?
    private var fileWatch: FileWatch?
    private var watchToken: EventLoop.Token?
    /// The position last reported; nil: none.
    private var current: Fix?
    /// The last problem logged, so a file rewritten the same wrong way is
    /// said once.
    private var lastProblem: String?
    /// The file has existed since the daemon started.
    private var fileSeen = false
    /// A file written in place is read once no write has come for this
    /// long, or at once when its writer closes it: what it holds between two
    /// writes may be half of what the writer means.
    static let quietSeconds = 0.25
    private var quietTimer: EventLoop.Token?

    init(loop: EventLoop, path: String, sink: SourceSink) {
        self.loop = loop
        self.path = path
        self.sink = sink
    }

    /// Starts watching the file and reads it.
    func start() {
        do {
            let w = try FileWatch(path: path)
            fileWatch = w
            watchToken = loop.watch(fd: w.fd, events: .readable) { [weak self] _ in
                guard let self, let w = self.fileWatch else { return }
                switch w.changed() {
                case .none: break
                case .settled: self.reload()
                case .writing: self.readWhenQuiet()
                }
            }
        } catch {
            Log.notice("static position \(path): not watched for changes (\(error)); read once")
        }
        reload()
    }

    /// Standing: nothing to open or close.
    func open() {}
    func close() {}

    func shutdown() {
        if let t = quietTimer { loop.cancelTimer(t) }
        quietTimer = nil
        if let t = watchToken { loop.unwatch(t) }
        watchToken = nil
        fileWatch = nil
    }

    /// (Re)starts the wait for the writer to be quiet.
    private func readWhenQuiet() {
        if let t = quietTimer { loop.cancelTimer(t) }
        quietTimer = loop.schedule(after: Self.quietSeconds) { [weak self] in
            self?.quietTimer = nil
            self?.reload()
        }
    }

    /// The file as it is now: nil when it does not exist. A read that a
    /// write overlapped is made again when the writer is quiet.
    private func read() throws(SmallFileError) -> [UInt8]? {
        guard let w = fileWatch else { return try readSmallRegularFile(path, maxBytes: StaticPositionFile.maxBytes) }
        do throws(SmallFileError) {
            return try w.read(maxBytes: StaticPositionFile.maxBytes)
        } catch .changing {
            readWhenQuiet()
            throw .changing
        }
    }

    private func reload() {
        if let t = quietTimer { loop.cancelTimer(t); quietTimer = nil }
        let fix: Fix?
        do throws(SmallFileError) {
            guard let bytes = try read() else {
                // No file is the usual case, and none at all is said nowhere:
                // the daemon starts at every bus activation. One that goes away is.
                guard fileSeen else { return }
                return withdraw("\(path) does not exist", level: .notice)
            }
            fileSeen = true
            do {
                let p = try StaticPositionFile.parse(bytes: bytes, file: path)
                fix = Fix(latitude: p.latitude, longitude: p.longitude, mode: .threeD, altitude: p.altitude,
                          horizontalAccuracy: p.accuracy, source: .static)
            } catch {
                return withdraw("\(error)", level: .warning)
            }
        } catch .changing {
            return   // being written: read again when the writer is done
        } catch {
            return withdraw("\(path): \(error)", level: .warning)
        }
        lastProblem = nil
        guard let fix, fix != current else { return }
        current = fix
        Log.notice("static position read from \(path) (accuracy \(fix.horizontalAccuracy ?? 0) m)")
        sink?.sourceFix(fix)
    }

    /// The file gives no position now: say why once, and withdraw the old one.
    private func withdraw(_ problem: String, level: Log.Level) {
        if problem != lastProblem {
            lastProblem = problem
            Log.write(level, "no static position: \(problem)")
        }
        guard current != nil else { return }
        current = nil
        sink?.sourceEvent(.lost(.static, reason: problem))
    }
}
