import Glibc

/// Wall-clock time in microseconds since the Unix epoch (the unit docs/dbus-api.md
/// uses): the clock the daemon hands the pure cores, which never read one.
public func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000 &+ UInt64(ts.tv_nsec / 1000)
}
