import XCTest
import Foundation
import GeoConsentAPI
import GeoTestSupport

/// The GUI agent (`desktop/geoconsent_desktop/agent.py`, Python) serves the agent interface
/// from its own copy of the introspection XML (`AGENT_XML`). That copy must
/// declare the interface exactly as the committed XML does (which
/// `SkeletonTests` holds to the tables in GeoConsentAPI): the same methods,
/// signals and properties, each argument with the same name, type and direction.
final class DesktopAgentXMLTests: XCTestCase {
    static let agentScript = TestPaths.sourceRoot + "/desktop/geoconsent_desktop/agent.py"
    /// Where the desktop programs' shared names are (`BUS_NAME`, `OBJECT_PATH`, `IFACE`).
    static let commonModule = TestPaths.sourceRoot + "/desktop/geoconsent_desktop/common.py"
    static let committedXML = TestPaths.sourceRoot + "/interfaces/org.geoconsent.GeoConsent1.xml"

    func testGUIAgentDeclaresTheCommittedAgentInterface() throws {
        let script = try String(contentsOfFile: Self.agentScript, encoding: .utf8)
        let python = try XCTUnwrap(Self.pythonString(named: "AGENT_XML", in: script), "no AGENT_XML in the agent")
        let committed = try String(contentsOfFile: Self.committedXML, encoding: .utf8)

        let name = GeoConsentAPI.agentInterfaceName
        let common = try String(contentsOfFile: Self.commonModule, encoding: .utf8)
        XCTAssertEqual(Self.pythonString(named: "BUS_NAME", in: common), GeoConsentAPI.busName)
        XCTAssertEqual(Self.pythonString(named: "OBJECT_PATH", in: common), GeoConsentAPI.objectPath)
        XCTAssertEqual(Self.pythonString(named: "IFACE", in: common), GeoConsentAPI.interfaceName)
        XCTAssertEqual(Self.interfaceNames(in: python), [name], "AGENT_XML declares the agent interface alone")
        let expected = try XCTUnwrap(Self.members(of: name, in: committed), "no \(name) in \(Self.committedXML)")
        XCTAssertFalse(expected.isEmpty)
        XCTAssertEqual(Self.members(of: name, in: python), expected,
                       "desktop/geoconsent_desktop/agent.py's AGENT_XML differs from interfaces/org.geoconsent.GeoConsent1.xml")
    }

    /// The comparison sees every kind of drift: a type, a direction, an argument's
    /// name, a missing argument or method, an extra member.
    func testComparisonCatchesEveryKindOfDrift() throws {
        let script = try String(contentsOfFile: Self.agentScript, encoding: .utf8)
        let python = try XCTUnwrap(Self.pythonString(named: "AGENT_XML", in: script))
        let name = GeoConsentAPI.agentInterfaceName
        let original = try XCTUnwrap(Self.members(of: name, in: python))
        let drifts: [(String, String)] = [
            (#"name="decision" type="s""#, #"name="decision" type="u""#),
            (#"type="s" direction="out""#, #"type="s" direction="in""#),
            (#"name="request_id""#, #"name="id""#),
            (#"<arg name="kind" type="s" direction="in"/>"#, ""),
            (#"<method name="Cancel">"#, #"<method name="Withdraw">"#),
            ("</interface>", #"<signal name="Gone"><arg name="why" type="s"/></signal></interface>"#),
        ]
        for (from, to) in drifts {
            XCTAssertTrue(python.contains(from), "the drift \(from) no longer applies to AGENT_XML")
            XCTAssertNotEqual(Self.members(of: name, in: python.replacingOccurrences(of: from, with: to)), original,
                              "not seen: \(from) -> \(to)")
        }
    }

    // MARK: Reading the files

    /// The value of `NAME = "…"` or `NAME = """…"""` at the start of a line of a Python file.
    static func pythonString(named name: String, in source: String) -> String? {
        for quote in ["\"\"\"", "\""] {
            guard let start = source.range(of: "\n\(name) = \(quote)") else { continue }
            guard let end = source.range(of: quote, range: start.upperBound..<source.endIndex) else { return nil }
            return String(source[start.upperBound..<end.lowerBound])
        }
        return nil
    }

    /// One element of introspection XML: its tag and attributes (children kept apart).
    struct Element: Equatable {
        var tag: String
        var attributes: [String: String]
    }

    /// A method, signal or property with its arguments and annotations, in document order.
    struct Member: Equatable, CustomStringConvertible {
        var element: Element
        var children: [Element]
        var description: String {
            "\(element.tag) \(element.attributes) " + children.map { "\($0.tag) \($0.attributes)" }.joined(separator: ", ")
        }
    }

    /// The tags of `xml` in order: (closing, element, self-closing).
    static func tags(in xml: String) -> [(closing: Bool, element: Element, selfClosing: Bool)] {
        let tag = try! NSRegularExpression(pattern: #"<(/?)([A-Za-z]+)((?:\s+[A-Za-z_:.-]+\s*=\s*"[^"]*")*)\s*(/?)>"#)
        let attribute = try! NSRegularExpression(pattern: #"([A-Za-z_:.-]+)\s*=\s*"([^"]*)""#)
        let ns = xml as NSString
        return tag.matches(in: xml, range: NSRange(location: 0, length: ns.length)).map { m in
            let attrText = ns.substring(with: m.range(at: 3))
            var attributes: [String: String] = [:]
            for a in attribute.matches(in: attrText, range: NSRange(location: 0, length: (attrText as NSString).length)) {
                attributes[(attrText as NSString).substring(with: a.range(at: 1))] = (attrText as NSString).substring(with: a.range(at: 2))
            }
            return (ns.substring(with: m.range(at: 1)) == "/", Element(tag: ns.substring(with: m.range(at: 2)), attributes: attributes),
                    ns.substring(with: m.range(at: 4)) == "/")
        }
    }

    static func interfaceNames(in xml: String) -> [String] {
        tags(in: xml).filter { !$0.closing && $0.element.tag == "interface" }.compactMap { $0.element.attributes["name"] }
    }

    /// The members of interface `name`, each with its `arg` and `annotation` children; nil without that interface.
    static func members(of name: String, in xml: String) -> [Member]? {
        var inside = false, found = false
        var members: [Member] = []
        for t in tags(in: xml) {
            switch (t.element.tag, t.closing) {
            case ("interface", false):
                inside = t.element.attributes["name"] == name
                found = found || inside
            case ("interface", true):
                inside = false
            case ("method", false), ("signal", false), ("property", false):
                if inside { members.append(Member(element: t.element, children: [])) }
            case ("arg", false), ("annotation", false):
                if inside, !members.isEmpty { members[members.count - 1].children.append(t.element) }
            default:
                break
            }
        }
        return found ? members : nil
    }
}
