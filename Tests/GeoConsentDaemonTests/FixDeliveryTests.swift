import XCTest
import GeoCore
import GeoDBus
@testable import GeoConsentDaemon

/// The one path of a fix (FixDelivery.swift), in process with no bus: each
/// session's fix reaches the front end that owns it, and only it; a
/// streaming front end gets each session at once in the core's order and a
/// flush at the end; a gathering one gets its sessions once per view of the fix.
final class FixDeliveryTests: XCTestCase {
    /// A front end that notes what it is handed.
    final class Recorder: FrontEnd {
        let kind: ObjectKind
        let streams: Bool
        let connections: Bool
        var log: [String] = []
        init(_ word: String, streams: Bool, connections: Bool = false) {
            kind = ObjectKind(word: word)
            self.streams = streams
            self.connections = connections
        }
        var busNames: [String] { [] }
        var objectKind: ObjectKind? { kind }
        var servesConnectionSessions: Bool { connections }
        var streamsFixes: Bool { streams }
        func serve() {}
        func grantEnded(session: SessionID, byPause: Bool) {}
        func deliver(_ sessions: [SessionID], _ fix: Fix) {
            log.append("deliver \(sessions.map(\.description).joined(separator: ",")) @\(fix.latitude)")
        }
        func sendFix(to session: SessionID, _ fix: Fix, _ acc: Accuracy) {
            log.append("send \(session) \(acc.rawValue) @\(fix.latitude)")
        }
        func flushFixes() { log.append("flush") }
    }

    private let full = Fix(latitude: 52.52, longitude: 13.4, mode: .threeD)
    private let cell = Fix(latitude: 52.5, longitude: 13.4, mode: .twoD)

    func testEachSessionReachesItsOwnerAloneByItsPath() {
        let own = Recorder("", streams: true, connections: true)
        let facade = Recorder("geoclue", streams: false)
        let lab = Recorder("lab", streams: false)
        let frontEnds = FrontEnds()
        for f in [own, facade, lab] { frontEnds.add(f) }
        func object(_ c: String, _ kind: Recorder, _ n: UInt32) -> SessionID {
            .clientObject(connection: c, kind: kind.kind, number: n)
        }
        var d = FixDelivery(frontEnds: frontEnds)
        d.add([.connection(":1.5"), object(":1.6", facade, 1), .connection(":1.7"), object(":1.8", lab, 1),
               object(":1.9", facade, 2)], .full, full)
        XCTAssertEqual(own.log, ["send :1.5 full @52.52", "send :1.7 full @52.52"], "streamed at once, in the core's order")
        XCTAssertEqual(facade.log, [], "gathered: nothing before the flush")
        d.add([object(":1.6", facade, 3), .connection(":1.10")], .reduced, cell)
        d.flush()
        XCTAssertEqual(own.log, ["send :1.5 full @52.52", "send :1.7 full @52.52", "send :1.10 reduced @52.5", "flush"])
        XCTAssertEqual(facade.log, ["deliver :1.6/geoclue/1,:1.9/geoclue/2 @52.52", "deliver :1.6/geoclue/3 @52.5"],
                       "once per view, its own sessions only")
        XCTAssertEqual(lab.log, ["deliver :1.8/lab/1 @52.52"])
        d.flush()
        XCTAssertEqual(own.log.last, "flush")
        XCTAssertEqual(own.log.filter { $0 == "flush" }.count, 1, "nothing streamed since: no second flush")
        XCTAssertEqual(facade.log.count, 2, "nothing gathered since")
    }

    func testASessionOfNoFrontEndServedGoesNowhere() {
        let frontEnds = FrontEnds()
        let own = Recorder("", streams: true, connections: true)
        frontEnds.add(own)
        var d = FixDelivery(frontEnds: frontEnds)
        d.add([.clientObject(connection: ":1.4", kind: ObjectKind(word: "geoclue"), number: 1), .connection(":1.5")], .full, full)
        d.flush()
        XCTAssertEqual(own.log, ["send :1.5 full @52.52", "flush"])
    }
}
