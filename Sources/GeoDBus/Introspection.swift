/// Introspection XML generated from interface tables.
public enum Introspection {
    static let doctype = """
    <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
     "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
    """

    /// A whole `<node>` document: interfaces, then child nodes.
    public static func xml(interfaces: [InterfaceDescription], children: [String] = []) -> String {
        var out = doctype + "\n<node>\n"
        for i in interfaces { out += interfaceXML(i) }
        for c in children { out += "  <node name=\"\(escape(c))\"/>\n" }
        out += "</node>\n"
        return out
    }

    static func interfaceXML(_ i: InterfaceDescription) -> String {
        var out = "  <interface name=\"\(escape(i.name))\">\n"
        for m in i.methods {
            if m.inArgs.isEmpty && m.outArgs.isEmpty {
                out += "    <method name=\"\(escape(m.name))\"/>\n"
                continue
            }
            out += "    <method name=\"\(escape(m.name))\">\n"
            for a in m.inArgs { out += "      <arg name=\"\(escape(a.name))\" type=\"\(escape(a.signature))\" direction=\"in\"/>\n" }
            for a in m.outArgs { out += "      <arg name=\"\(escape(a.name))\" type=\"\(escape(a.signature))\" direction=\"out\"/>\n" }
            out += "    </method>\n"
        }
        for s in i.signals {
            if s.args.isEmpty {
                out += "    <signal name=\"\(escape(s.name))\"/>\n"
                continue
            }
            out += "    <signal name=\"\(escape(s.name))\">\n"
            for a in s.args { out += "      <arg name=\"\(escape(a.name))\" type=\"\(escape(a.signature))\"/>\n" }
            out += "    </signal>\n"
        }
        for p in i.properties {
            let head = "    <property name=\"\(escape(p.name))\" type=\"\(escape(p.signature))\" access=\"\(p.access.rawValue)\""
            if p.emitsChanged == .yes {
                out += head + "/>\n"
            } else {
                out += head + ">\n"
                out += "      <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(p.emitsChanged.rawValue)\"/>\n"
                out += "    </property>\n"
            }
        }
        out += "  </interface>\n"
        return out
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
