import CBenchFloor
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

// `geoconsent-bench --relay BUS GPSD_PORT DESTINATION`: the cheapest process that
// can stand where the daemon stands. It reads gpsd's JSON on a raw socket and, for
// each TPV line, sends one prebuilt LocationUpdated-sized unicast signal (plus the
// TPV's time, for matching) through the same bus; no libgps, no consent, no
// encoding per fix.
//
// Why it is in the benchmark: the issue's floor adds two separate hops (gpsd → a
// client, and a signal through the bus), each a two-process ping-pong that the
// scheduler keeps on one CPU. Any location service adds a third process in the
// middle, and on this 2-vCPU VM waking a process on the other, idle vCPU costs
// ~100 µs per hop. The relay measures that architectural cost, so the report can
// say how much of the gap to the floor is the daemon's own work.

/// Runs the relay until gpsd or the bus goes away; never returns.
func runRelay(_ args: ArraySlice<String>) -> Never {
    let a = Array(args)
    guard a.count == 3, let port = UInt16(a[1]) else {
        FileHandle.standardError.write("usage: geoconsent-bench --relay BUS GPSD_PORT DESTINATION\n".data(using: .utf8)!)
        exit(2)
    }
    let destination = a[2]
    let loop = EventLoop()
    let bus: Connection
    do { bus = try Connection(bus: .address(a[0])) } catch {
        FileHandle.standardError.write("relay: cannot connect to the bus: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
    bus.onDisconnect = { exit(0) }
    bus.attach(to: loop)

    // The template: the same path, interface, member and dictionary a daemon signal carries.
    let fix = LocationDictionary.encode(.init(latitude: 52.52, longitude: 13.405, mode: .threeD, altitude: 40,
                                              horizontalAccuracy: 5, speed: 5, course: 90, timestamp: 1),
                                        accuracy: .full)
    guard let template = try? Message.signal(path: GeoConsentAPI.objectPath, interface: GeoConsentAPI.interfaceName,
                                             member: LocationUpdatedSignal.member, destination: destination),
          (try? template.append(LocationBody.encode(fix))) != nil else {
        exit(1)
    }

    guard let fd = openGpsdWatch(port: port) else { exit(1) }

    let tpv = Array(#"{"class":"TPV""#.utf8), timeKey = Array(#""time":""#.utf8)
    var pending: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    _ = loop.watch(fd: fd, events: .readable) { _ in
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { exit(0) }
        pending.append(contentsOf: chunk[..<n])
        while let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
            let line = pending[..<nl]
            if line.starts(with: tpv), let t = line.firstRange(of: timeKey) {
                let rest = line[t.upperBound...]
                let end = rest.firstIndex(of: UInt8(ascii: "\"")) ?? rest.endIndex
                if let m = template.copy(), (try? m.append([.string(String(decoding: rest[..<end], as: UTF8.self))])) != nil {
                    _ = bus.send(m)
                }
            }
            pending.removeSubrange(...nl)
        }
    }
    loop.run()
    exit(0)
}

/// `geoconsent-bench --relay-c BUS GPSD_PORT DEST,DEST,... [--geoclue]`: the C
/// relay (Instruments/CBenchFloor/relay_floor.c), the reference for the fan-out
/// rows, and with `--geoclue` for the facade's C rows (the destinations then
/// GeoClue clients): what a process in the daemon's place costs when it does
/// nothing but relay.
func runCRelay(_ args: ArraySlice<String>) -> Never {
    let a = Array(args)
    guard a.count == 3 || (a.count == 4 && a[3] == "--geoclue"), let port = UInt16(a[1]) else {
        FileHandle.standardError.write("usage: geoconsent-bench --relay-c BUS GPSD_PORT DEST,DEST,... [--geoclue]\n"
            .data(using: .utf8)!)
        exit(2)
    }
    guard let fd = openGpsdWatch(port: port) else {
        FileHandle.standardError.write("relay-c: cannot connect to gpsd on port \(port)\n".data(using: .utf8)!)
        exit(1)
    }
    let destinations = a[2].split(separator: ",").map(String.init)
    var error = [CChar](repeating: 0, count: 256)
    let r = destinations.withCStrings { list in
        bf_relay_run(a[0], fd, list, Int32(list.count), GeoConsentAPI.objectPath, GeoConsentAPI.interfaceName,
                     LocationUpdatedSignal.member, Int32(cRelayYieldAfter), a.count == 4 ? 1 : 0, &error, Int32(error.count))
    }
    if r != 0 { FileHandle.standardError.write("relay-c: \(String(cString: error))\n".data(using: .utf8)!) }
    exit(r == 0 ? 0 : 1)
}

/// The daemon's own number (LocationService.signalsBeforeYield), kept equal so
/// that the relay sends in the same order.
let cRelayYieldAfter = 8

/// A running C relay and the gpsd that feeds it, measured one fix at a time.
struct CRelayRounds {
    let gpsd: GpsdInstance
    let process: ChildProcess

    /// One fix through the relay: the next epoch's NMEA to its gpsd, then `wait`
    /// for that fix (by its timestamp) at the receivers. The result and the
    /// round's start, or nil if it did not come; throws if the relay has exited.
    func round<T>(_ epoch: () -> (sentences: [String], micros: UInt64, iso: String),
                  wait: (UInt64) -> T?) throws -> (result: T, start: UInt64)? {
        let e = epoch()
        let t0 = nowNanos()
        gpsd.send(e.sentences)
        if let r = wait(e.micros) { return (r, t0) }
        if !process.isRunning {
            throw BenchFloorError(description: "the C relay exited (status \(process.exitCode ?? -1))")
        }
        return nil
    }
}

/// Starts the C relay (`--relay-c`) on `bus` for `destinations`, fed by
/// `gpsd`, and waits until it is on the bus; its log goes to `log`.
func startCRelay(bus: String, gpsd: GpsdInstance, destinations: [String], geoclue: Bool = false,
                 log: String) throws -> ChildProcess {
    let p = try ChildProcess(executable: ownExecutable(),
                             arguments: ["--relay-c", bus, String(gpsd.port), destinations.joined(separator: ",")]
                                 + (geoclue ? ["--geoclue"] : []),
                             logPath: log, captureStdout: true)
    // On the bus and connected to gpsd; the warm-up rounds absorb gpsd's side.
    guard p.readStdoutLine(timeout: 10) == "ready" else {
        p.stop()
        throw BenchFloorError(description: "the C relay did not start: " +
                              ((try? String(contentsOfFile: log, encoding: .utf8)) ?? ""))
    }
    return p
}

/// A raw TCP connection to gpsd on 127.0.0.1:`port` that has asked for JSON
/// reports (`?WATCH`), without libgps: the benchmark's floor client and the relay.
/// Nil if the connection fails.
func openGpsdWatch(port: UInt16) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else {
        close(fd)
        return nil
    }
    let watch = "?WATCH={\"enable\":true,\"json\":true}\n"
    _ = watch.withCString { write(fd, $0, strlen($0)) }
    return fd
}
