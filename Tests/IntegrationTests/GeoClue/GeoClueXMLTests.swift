import XCTest
import Foundation
import GeoDBus
import GeoConsentAPI
import GeoTestSupport

/// The GeoClue2 interfaces as declared in GeoConsentAPI: committed as
/// `interfaces/org.freedesktop.GeoClue2.xml`, served live, and the same members
/// and signatures as GeoClue's own published XML (package geoclue-2.0).
final class GeoClueXMLTests: XCTestCase {
    static let committed = TestPaths.sourceRoot + "/interfaces/org.freedesktop.GeoClue2.xml"
    static let published = "/usr/share/dbus-1/interfaces/"

    func testIntrospectOutputMatchesCommittedXML() throws {
        let committed = try String(contentsOfFile: Self.committed, encoding: .utf8)
        let r = try ChildProcess.run(TestPaths.binDir + "/geoconsentd", ["--geoclue", "--introspect"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.output, committed,
                       "interfaces/org.freedesktop.GeoClue2.xml drifted: regenerate with geoconsentd --geoclue --introspect")
    }

    /// Every method, signal and property, with its arguments' names, types and
    /// directions and its access, as GeoClue publishes it (annotations aside:
    /// ours say that a Location object never changes).
    func testMembersAndSignaturesMatchGeoCluesPublishedXML() throws {
        let ours = try String(contentsOfFile: Self.committed, encoding: .utf8)
        for name in [GeoClueAPI.managerInterfaceName, GeoClueAPI.clientInterfaceName, GeoClueAPI.locationInterfaceName,
                     GeoClueAPI.agentInterfaceName] {
            let file = Self.published + name + ".xml"
            guard let theirs = try? String(contentsOfFile: file, encoding: .utf8) else {
                XCTFail("\(file) is missing: scripts/deps.sh installs geoclue-2.0 (with geoclue-2-demo)")
                continue
            }
            let expected = try XCTUnwrap(Self.signatures(of: name, in: Self.withoutComments(theirs)), "no \(name) in \(file)")
            XCTAssertFalse(expected.isEmpty, name)
            XCTAssertEqual(Self.signatures(of: name, in: ours), expected, "\(name) differs from \(file)")
        }
    }

    /// The comparison sees a changed type, access, argument name or direction, and a member more or less.
    func testComparisonCatchesDrift() throws {
        let ours = try String(contentsOfFile: Self.committed, encoding: .utf8)
        let client = GeoClueAPI.clientInterfaceName, manager = GeoClueAPI.managerInterfaceName
        let drifts: [(String, String, String)] = [
            (client, #"name="DistanceThreshold" type="u""#, #"name="DistanceThreshold" type="i""#),
            (client, #"name="Active" type="b" access="read""#, #"name="Active" type="b" access="readwrite""#),
            (client, #"<arg name="old" type="o"/>"#, #"<arg name="previous" type="o"/>"#),
            (manager, #"<arg name="client" type="o" direction="in"/>"#, #"<arg name="client" type="o" direction="out"/>"#),
            (client, #"<method name="Stop"/>"#, ""),
            (manager, #"<method name="AddAgent">"#, #"<method name="Reset"/><method name="AddAgent">"#),
        ]
        for (iface, from, to) in drifts {
            XCTAssertTrue(ours.contains(from), "the drift \(from) no longer applies")
            XCTAssertNotEqual(Self.signatures(of: iface, in: ours.replacingOccurrences(of: from, with: to)),
                              Self.signatures(of: iface, in: ours), "not seen: \(from) -> \(to)")
        }
    }

    func testServedLiveFromTheTables() throws {
        let stack = try Stack(config: "[geoclue]\nserve = true\n")
        defer { stack.stop() }
        let p = try stack.peer()
        let manager = try p.gc(GeoClueAPI.managerPath, ObjectServer.introspectable, "Introspect").get().first?.stringValue ?? ""
        XCTAssertEqual(Self.signatures(of: GeoClueAPI.managerInterfaceName, in: manager),
                       Self.signatures(of: GeoClueAPI.managerInterfaceName, in: GeoClueAPI.introspectionXML))
        let client = try p.geoclueClient()
        let xml = try p.gc(client, ObjectServer.introspectable, "Introspect").get().first?.stringValue ?? ""
        XCTAssertEqual(Self.signatures(of: GeoClueAPI.clientInterfaceName, in: xml),
                       Self.signatures(of: GeoClueAPI.clientInterfaceName, in: GeoClueAPI.introspectionXML))
    }

    /// A member as a line: kind, name, then access or each argument's name, type and direction.
    static func signatures(of interface: String, in xml: String) -> [String]? {
        DesktopAgentXMLTests.members(of: interface, in: xml)?.map { m in
            let a = m.element.attributes
            var words = [m.element.tag, a["name"] ?? "?"]
            if m.element.tag == "property" { words += [a["type"] ?? "?", a["access"] ?? "?"] }
            for arg in m.children where arg.tag == "arg" {
                let defaultDirection = m.element.tag == "method" ? "in" : "out"
                words.append("\(arg.attributes["name"] ?? "?"):\(arg.attributes["type"] ?? "?"):"
                             + (arg.attributes["direction"] ?? defaultDirection))
            }
            return words.joined(separator: " ")
        }.sorted()
    }

    /// GeoClue's XML documents each member in comments, some with XML-like text.
    static func withoutComments(_ xml: String) -> String {
        var out = "", rest = Substring(xml)
        while let start = rest.range(of: "<!--") {
            out += rest[..<start.lowerBound]
            guard let end = rest.range(of: "-->", range: start.upperBound..<rest.endIndex) else { return out }
            rest = rest[end.upperBound...]
        }
        return out + rest
    }
}
