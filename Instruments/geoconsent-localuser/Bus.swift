import Glibc
import GeoDBus
import GeoConsentAPI

/// Prints one line and flushes it (the tests read lines as they come).
func say(_ line: String) {
    print(line)
    fflush(stdout)
}

func fail(_ message: String) -> Never {
    fputs("geoconsent-localuser: \(message)\n", stderr)
    exit(2)
}

/// Connects to `bus`; exits with a message when that fails.
func connect(_ bus: String) -> Connection {
    do {
        return try Connection(bus: BusAddress(argument: bus))
    } catch {
        say("connect error \(oneLine("\(error)"))")
        exit(1)
    }
}

/// A blocking call of the daemon's client interface.
func call(_ c: Connection, _ member: String, _ args: [DBusValue] = [], timeout: Double = 20) -> Result<[DBusValue], DBusError> {
    do {
        let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                       interface: GeoConsentAPI.interfaceName, member: member)
        try m.append(args)
        let reply = try c.callBlocking(m, timeout: timeout)
        if let e = reply.asError { return .failure(e) }
        return .success(reply.arguments())
    } catch let e as DBusError {
        return .failure(e)
    } catch {
        return .failure(.failed("\(error)"))
    }
}

/// `reply LABEL ok SUMMARY` or `reply LABEL error NAME MESSAGE`, on one line.
func report(_ label: String, _ r: Result<[DBusValue], DBusError>, summary: ([DBusValue]) -> String = { "\($0.count) values" }) {
    switch r {
    case .success(let v): say("reply \(label) ok \(oneLine(summary(v)))")
    case .failure(let e): say("reply \(label) error \(e.name) \(oneLine(String(e.message.prefix(2000))))")
    }
}

/// Text on one line, whatever it holds (newlines and other controls as `\xNN`).
func oneLine(_ s: String) -> String {
    var out = ""
    for u in s.unicodeScalars {
        if u.value < 0x20 || u.value == 0x7F {
            out += "\\x" + String(u.value, radix: 16)
        } else {
            out.unicodeScalars.append(u)
        }
    }
    return out
}

/// The UTF-8 bytes of `s` in hex: what the daemon sent, exactly, on one line.
func hex(_ s: String) -> String {
    s.utf8.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

/// Monotonic seconds.
func monotonic() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A libc function Swift's Glibc module hides (`fork`, `unshare`), looked up at run time.
func libc<T>(_ name: String, as type: T.Type) -> T {
    guard let sym = dlsym(nil, name) else { fail("no \(name) in libc") }
    return unsafeBitCast(sym, to: type)
}
