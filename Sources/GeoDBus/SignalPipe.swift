import Glibc

/// Turns SIGTERM and SIGINT into a readable pipe the event loop watches
/// (the self-pipe trick: a signal handler may only do async-signal-safe work).
public final class SignalPipe {
    private static var writeFD: Int32 = -1
    private let readFD: Int32

    /// Calls `onSignal` on the loop for each SIGTERM or SIGINT received (`signals` to choose others).
    public init(loop: EventLoop, signals: [Int32] = [SIGTERM, SIGINT], onSignal: @escaping (Int32) -> Void) {
        var fds: [Int32] = [-1, -1]
        makeNonBlockingPipe(&fds)
        readFD = fds[0]
        SignalPipe.writeFD = fds[1]
        signal(SIGPIPE, SIG_IGN)
        for sig in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { sig in
                var byte = UInt8(truncatingIfNeeded: sig)
                _ = write(SignalPipe.writeFD, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(sig, &action, nil)
        }
        let fd = readFD
        loop.watch(fd: fd, events: .readable) { _ in
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1 { onSignal(Int32(byte)) }
        }
    }
}

/// pipe2() is not visible from Swift's Glibc module; pipe + fcntl does the same here.
public func makeNonBlockingPipe(_ fds: inout [Int32]) {
    _ = pipe(&fds)
    for fd in fds {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
}
