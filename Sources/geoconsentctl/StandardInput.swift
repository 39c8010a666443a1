import Glibc

/// Standard input read on a thread of its own, so the terminal agent can await
/// prompts and keystrokes alike: each chunk read goes to `chunk`, the end of
/// input to `closed`.
final class StandardInput: @unchecked Sendable {
    private let chunk: ([UInt8]) -> Void
    private let closed: () -> Void

    private init(chunk: @escaping ([UInt8]) -> Void, closed: @escaping () -> Void) {
        self.chunk = chunk
        self.closed = closed
    }

    /// Starts the reading thread; it ends at the end of input (or a read error).
    static func read(chunk: @escaping ([UInt8]) -> Void, closed: @escaping () -> Void) {
        let reader = StandardInput(chunk: chunk, closed: closed)
        var thread = pthread_t()
        pthread_create(&thread, nil, { arg in
            Unmanaged<StandardInput>.fromOpaque(arg!).takeRetainedValue().run()
            return nil
        }, Unmanaged.passRetained(reader).toOpaque())
        pthread_detach(thread)
    }

    private func run() {
        var buf = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = Glibc.read(0, &buf, buf.count)
            if n > 0 {
                chunk(Array(buf[..<n]))
            } else if n == 0 {
                return closed()
            } else if errno == EAGAIN {
                // Inherited non-blocking: wait for input instead of spinning.
                var p = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, -1)
            } else if errno != EINTR {
                return
            }
        }
    }
}
