import Glibc

/// SIGINT/SIGTERM while awaiting events: exit cleanly (status 0) at once. The
/// session, its grant and an agent registration end with the connection, which
/// the bus sees closed; everything printed was a whole line or flushed already.
func exitOnInterrupt() {
    for sig in [SIGINT, SIGTERM] {
        signal(sig) { _ in
            // Async-signal-safe: nothing to flush that matters; the bus sees us leave.
            _exit(0)
        }
    }
}
