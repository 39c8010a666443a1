import CGPS
import GeoCore
import Glibc

/// A failure talking to gpsd through libgps.
public struct GPSDError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What was being done (`gps_open`, `gps_stream`, …).
    public var operation: String
    /// The code libgps left in `errno`: positive is an errno value, negative a
    /// libgps/netlib code (e.g. -4 "can't connect to host/port pair").
    public var code: Int32
    /// `gps_errstr(code)` for libgps codes, `strerror(code)` for errno values.
    public var message: String

    public init(operation: String, code: Int32, message: String) {
        self.operation = operation
        self.code = code
        self.message = message
    }

    /// An error for `operation` from libgps's code, with its text.
    init(operation: String, code: Int32) {
        let text: String
        if code > 0 {
            // A plain errno value: gps_errstr (3.22) only knows its netlib codes.
            text = String(cString: strerror(code))
        } else if code < 0 {
            text = gps_errstr(code).map { String(cString: $0) } ?? "unknown error"
        } else {
            text = "failed without an error code"
        }
        self.init(operation: operation, code: code, message: text)
    }

    public var description: String { "\(operation): \(message) (\(code))" }
}

/// A connection to gpsd that streams its JSON reports, decoded by libgps.
///
/// This is the only code that calls libgps. Use from one thread (or one serial
/// queue) at a time: the object owns a C struct that libgps mutates in place.
///
/// Typical use: `connect` (blocking, see there), add `fd` to a poll loop or a
/// read source, and on every readable event call `readAvailable()`; when it
/// reports `closed`, call `close()` and reconnect later.
public final class GPSDClient {
    /// libgps's state. `gps_data_t` is ~24 KB, so it lives on the heap and is only
    /// ever touched through this pointer (reading `pointee.fix.…` in place); it is
    /// never copied into a Swift value.
    private let data: UnsafeMutablePointer<gps_data_t>
    /// True between a successful `gps_open` and `gps_close`.
    private var isOpen: Bool
    /// True once gpsd has gone away (or a read failed): nothing more is read or sent.
    private var isClosed = false
    private let socket: Int32
    /// Where `gps_read` copies the start of each line it decodes (allocated once,
    /// not per read): only the class tag is needed from it.
    private let head: UnsafeMutableBufferPointer<CChar>

    /// What one `readAvailable()` call found.
    public struct ReadResult: Equatable, Sendable {
        /// Position fixes decoded from TPV reports, oldest first.
        public var fixes: [Fix]
        /// True when the connection is gone (gpsd closed it, or a read error):
        /// call `close()` and reconnect later.
        public var closed: Bool

        public init(fixes: [Fix] = [], closed: Bool = false) {
            self.fixes = fixes
            self.closed = closed
        }
    }

    private init(data: UnsafeMutablePointer<gps_data_t>) {
        self.data = data
        self.isOpen = true
        self.socket = Int32(data.pointee.gps_fd)
        self.head = .allocate(capacity: 32)
        self.head.initialize(repeating: 0)
    }

    /// Connects to gpsd at `host`:`port` and asks it to stream JSON reports
    /// (`?WATCH={"enable":true,"json":true}`).
    ///
    /// **This blocks**: `gps_open` resolves `host` and does a blocking `connect`.
    /// Against 127.0.0.1 that takes microseconds and fails at once when nothing
    /// listens (code -6, libgps's NL_NOCONNECT: libgps does not keep connect's
    /// errno), so the daemon may call it on its event loop for a loopback gpsd;
    /// for a remote or name-resolved host, call it off the event loop. The
    /// returned socket is non-blocking.
    ///
    /// - Throws: `GPSDError` when the connection or the WATCH command fails.
    public static func connect(host: String, port: UInt16) throws -> GPSDClient {
        let data = UnsafeMutablePointer<gps_data_t>.allocate(capacity: 1)
        // Zeroed before libgps sees it: gps_open fills in only what it uses.
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        errno = 0
        let rc = gps_open(host, String(port), data)
        if rc != 0 {
            // On failure libgps stores its netlib code (negative) in errno.
            let code = errno
            data.deallocate()
            throw GPSDError(operation: "gps_open(\(host):\(port))", code: code)
        }
        let client = GPSDClient(data: data)
        // libgps opens its socket O_NONBLOCK; make sure, since a
        // blocking recv inside gps_read would stall the caller's event loop.
        let flags = fcntl(client.socket, F_GETFL)
        if flags >= 0 && flags & O_NONBLOCK == 0 {
            _ = fcntl(client.socket, F_SETFL, flags | O_NONBLOCK)
        }
        let streamed = client.withSIGPIPEIgnored {
            gps_stream(data, UInt32(WATCH_ENABLE | WATCH_JSON), nil)
        }
        if streamed != 0 {
            let code = errno
            client.close()
            throw GPSDError(operation: "gps_stream(WATCH_ENABLE)", code: code)
        }
        return client
    }

    deinit {
        close()
        data.deallocate()
        head.deallocate()
    }

    /// The connection's socket, for the caller's poll loop (wait for POLLIN). It
    /// is non-blocking. -1 after `close()`.
    public var fd: Int32 { isOpen ? socket : -1 }

    /// Reads and decodes everything gpsd has sent so far, without blocking.
    ///
    /// Calls `gps_read` until it returns 0: libgps buffers whole lines itself, so
    /// stopping earlier could leave reports in its buffer that no poll() would
    /// announce. Each TPV report with a position becomes a `Fix` (see
    /// `Fix.init?(tpv:)`); other reports (SKY, DEVICES, WATCH, …) are skipped.
    public func readAvailable() -> ReadResult {
        var result = ReadResult()
        result.closed = readAvailable { result.fixes.append($0) }
        return result
    }

    /// The same, streamed: `each` gets every fix as soon as it is decoded, before
    /// the next `gps_read` (the one that ends a burst is a `recv` that finds
    /// nothing), so a fix goes out without waiting for the read that follows it.
    /// `each` may close this client; reading then stops. Returns true when the
    /// connection is gone, as `ReadResult.closed`.
    public func readAvailable(_ each: (Fix) -> Void) -> Bool {
        guard isOpen, !isClosed else { return true }
        while isOpen {
            errno = 0
            // libgps copies the line it just decoded into `head` (truncated,
            // NUL-terminated); only its start is needed, to know the report's class.
            let n = gps_read(data, head.baseAddress, Int32(head.count))
            if n < 0 {
                // -1: gpsd closed the connection (errno 0) or a socket error.
                isClosed = true
                return true
            }
            if n == 0 { break }   // nothing (complete) left to read
            // `set` is no good for telling a TPV apart: only a TPV resets it, so
            // after a TPV a SKY report still shows LATLON_SET. libgps itself
            // dispatches on the class tag, so do the same with the line's start.
            guard Self.isTPV(UnsafeBufferPointer(head)) else { continue }
            if let fix = Fix(tpv: currentTPV()) { each(fix) }
        }
        return !isOpen
    }

    private static let tpvTag: [UInt8] = Array(#"{"class":"TPV""#.utf8)

    /// True when the line starts as gpsd writes a TPV report: `{"class":"TPV"`.
    static func isTPV(_ head: UnsafeBufferPointer<CChar>) -> Bool {
        let tag = tpvTag
        guard head.count > tag.count else { return false }
        for i in 0..<tag.count where UInt8(bitPattern: head[i]) != tag[i] {
            return false
        }
        return true
    }

    /// Copies the fields of the last TPV out of libgps's struct, in place.
    private func currentTPV() -> TPVFields {
        // Read through a pointer to the `fix` member so the 24 KB gps_data_t is
        // not copied (only the doubles we need are loaded). `pointer(to:)` is nil
        // only for computed properties; `fix` is a stored C field.
        let f = data.pointer(to: \.fix)!
        let pset = data.pointee.set
        // libgps sets LATLON_SET only when the report carried a position; a TPV
        // without it (e.g. mode 1) keeps NaN coordinates, which the mapping rejects.
        let hasPosition = pset & UInt64(LATLON_SET) != 0
        return TPVFields(
            mode: f.pointee.mode,
            latitude: hasPosition ? f.pointee.latitude : .nan,
            longitude: hasPosition ? f.pointee.longitude : .nan,
            altMSL: f.pointee.altMSL,
            altHAE: f.pointee.altHAE,
            eph: f.pointee.eph,
            epx: f.pointee.epx,
            epy: f.pointee.epy,
            epv: f.pointee.epv,
            speed: f.pointee.speed,
            eps: f.pointee.eps,
            track: f.pointee.track,
            epd: f.pointee.epd,
            timeSeconds: Int(f.pointee.time.tv_sec),
            timeNanoseconds: Int(f.pointee.time.tv_nsec))
    }

    /// Stops the stream (`WATCH_DISABLE`, unless gpsd is already gone) and closes
    /// the connection. Idempotent; `deinit` calls it.
    public func close() {
        guard isOpen else { return }
        if !isClosed {
            _ = withSIGPIPEIgnored { gps_stream(data, UInt32(WATCH_DISABLE), nil) }
        }
        _ = gps_close(data)
        isOpen = false
        isClosed = true
    }

    /// Runs `body` (which writes to the gpsd socket) with SIGPIPE blocked on this
    /// thread, and swallows a SIGPIPE it raised.
    ///
    /// Why: libgps sends commands with plain write(), not send(MSG_NOSIGNAL), so a
    /// write to a gpsd that just died would raise SIGPIPE and kill the whole
    /// process. A library must not change the process's signal dispositions, so
    /// the signal is blocked here, consumed if this write raised it, and the old
    /// mask restored.
    private func withSIGPIPEIgnored(_ body: () -> Int32) -> Int32 {
        var pipeSet = sigset_t()
        sigemptyset(&pipeSet)
        sigaddset(&pipeSet, SIGPIPE)
        var pendingBefore = sigset_t()
        sigpending(&pendingBefore)
        let alreadyPending = sigismember(&pendingBefore, SIGPIPE) == 1
        var oldMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSet, &oldMask)
        let savedErrno: Int32
        let rc = body()
        savedErrno = errno
        if !alreadyPending {
            var pending = sigset_t()
            sigpending(&pending)
            if sigismember(&pending, SIGPIPE) == 1 {
                var zero = timespec(tv_sec: 0, tv_nsec: 0)
                _ = sigtimedwait(&pipeSet, nil, &zero)
            }
        }
        pthread_sigmask(SIG_SETMASK, &oldMask, nil)
        errno = savedErrno
        return rc
    }
}
