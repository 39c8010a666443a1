import Glibc
import GeoDBus
import GeoGPS

/// Connects to gpsd off the event loop: `gps_open` resolves the host and does a
/// blocking connect, which must never stall bus traffic. One short-lived thread
/// per attempt hands its result back through a pipe the loop watches.
final class GPSDConnector {
    private final class Job {
        let host: String
        let port: UInt16
        let wakeFD: Int32
        var result: Result<GPSDClient, GPSDError>?
        init(host: String, port: UInt16, wakeFD: Int32) {
            self.host = host
            self.port = port
            self.wakeFD = wakeFD
        }
        func run() {
            do {
                result = .success(try GPSDClient.connect(host: host, port: port))
            } catch let e as GPSDError {
                result = .failure(e)
            } catch {
                result = .failure(GPSDError(operation: "connect", code: -1, message: "\(error)"))
            }
            // The pipe write publishes `result` to the loop thread.
            var byte: UInt8 = 1
            _ = write(wakeFD, &byte, 1)
        }
    }

    private let loop: EventLoop
    private let host: String
    private let port: UInt16

    init(loop: EventLoop, host: String, port: UInt16) {
        self.loop = loop
        self.host = host
        self.port = port
    }

    /// Starts one attempt; `done` runs on the loop with the result.
    func connect(_ done: @escaping (Result<GPSDClient, GPSDError>) -> Void) {
        var fds: [Int32] = [-1, -1]
        makeNonBlockingPipe(&fds)
        let job = Job(host: host, port: port, wakeFD: fds[1])
        var token: EventLoop.Token = 0
        token = loop.watch(fd: fds[0], events: .readable) { [loop] _ in
            loop.unwatch(token)
            close(fds[0])
            close(fds[1])
            done(job.result ?? .failure(GPSDError(operation: "connect", code: -1, message: "no result")))
        }
        var tid = pthread_t()
        let arg = Unmanaged.passRetained(job).toOpaque()
        let rc = pthread_create(&tid, nil, { arg in
            Unmanaged<Job>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, arg)
        if rc != 0 {
            Unmanaged<Job>.fromOpaque(arg).release()
            job.result = .failure(GPSDError(operation: "pthread_create", code: rc, message: "cannot start a thread"))
            var byte: UInt8 = 1
            _ = write(fds[1], &byte, 1)
        } else {
            pthread_detach(tid)
        }
    }
}
