import Glibc
import CMalloc
import GeoDBus
import GeoGPS

/// Connects to gpsd off the event loop: `gps_open` resolves the host and does a
/// blocking connect, which must never stall bus traffic. One short-lived thread
/// per attempt hands its result back through a pipe the loop watches.
///
/// libgps cannot adopt a socket connected elsewhere (its per-connection buffer
/// is private to gps_sock.c and filled in only by `gps_open`), so the connect
/// stays on a thread; but a lean one (`ThreadFootprint`): glibc would otherwise
/// reserve a 64 MiB malloc arena for it and an 8 MiB stack, 72 MiB of VmSize
/// that a process listing shows for a daemon that needs a few.
final class GPSDConnector {
    /// How small the connect thread is kept.
    enum ThreadFootprint {
        /// `getaddrinfo` (NSS modules included) and `gps_open` need far less;
        /// glibc's own minimum is 16 KiB.
        static let stackBytes = 256 * 1024

        /// Threads share the main malloc arena: the loop thread and this
        /// short-lived one never allocate in a contended way, and a thread's
        /// own arena is a 64 MiB reservation that outlives the thread. Set once,
        /// before the first thread exists (glibc picks a thread's arena at its
        /// first allocation).
        static let sharedArena: Void = { _ = mallopt(M_ARENA_MAX, 1) }()
    }

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
        ThreadFootprint.sharedArena
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        pthread_attr_setstacksize(&attr, ThreadFootprint.stackBytes)
        // Detached from birth: nothing joins it, and its stack goes back at exit.
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        var tid = pthread_t()
        let arg = Unmanaged.passRetained(job).toOpaque()
        let rc = pthread_create(&tid, &attr, { arg in
            Unmanaged<Job>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, arg)
        if rc != 0 {
            Unmanaged<Job>.fromOpaque(arg).release()
            job.result = .failure(GPSDError(operation: "pthread_create", code: rc, message: "cannot start a thread"))
            var byte: UInt8 = 1
            _ = write(fds[1], &byte, 1)
        }
    }
}
