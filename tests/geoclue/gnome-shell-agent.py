#!/usr/bin/python3
"""A stand-in for GNOME Shell's GeoClue agent (js/ui/status/location.js).

Serves org.freedesktop.GeoClue2.Agent at /org/freedesktop/GeoClue2/Agent on the
system bus (DBUS_SYSTEM_BUS_ADDRESS), registers it with
Manager.AddAgent("gnome-shell") as the shell does, answers AuthorizeApp with
AUTHORIZED and an allowed accuracy level, and reports MaxAccuracyLevel. The
allowed level is ALLOWED if given, else what the shell returns: the requested
level, at most MaxAccuracyLevel. Each SIGUSR1 moves to the next level of the
list and emits PropertiesChanged, as the shell does when the user switches
location off or on.

usage: gnome-shell-agent.py true|false LEVEL[,LEVEL...] [ALLOWED]
prints: "registered", "authorize DESKTOP_ID LEVEL", "level N", "error ..."
"""
import signal
import sys

from gi.repository import Gio, GLib

PATH = "/org/freedesktop/GeoClue2/Agent"
INTERFACE = "org.freedesktop.GeoClue2.Agent"
XML = """<node><interface name="org.freedesktop.GeoClue2.Agent">
  <method name="AuthorizeApp">
    <arg name="desktop_id" type="s" direction="in"/>
    <arg name="req_accuracy_level" type="u" direction="in"/>
    <arg name="authorized" type="b" direction="out"/>
    <arg name="allowed_accuracy_level" type="u" direction="out"/>
  </method>
  <property name="MaxAccuracyLevel" type="u" access="read"/>
</interface></node>"""


def say(*words):
    print(*words, flush=True)


def main():
    authorized = sys.argv[1] == "true"
    levels = [int(x) for x in sys.argv[2].split(",")]
    allowed = int(sys.argv[3]) if len(sys.argv) > 3 else None
    state = {"index": 0}
    level = lambda: levels[state["index"]]
    loop = GLib.MainLoop()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def method_call(_conn, _sender, _path, _iface, method, params, invocation):
        if method != "AuthorizeApp":
            invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod", method)
            return
        desktop_id, req = params.unpack()
        say("authorize", desktop_id or "-", req)
        invocation.return_value(GLib.Variant("(bu)", (authorized, min(req, level()) if allowed is None else allowed)))

    def get_property(_conn, _sender, _path, _iface, name):
        return GLib.Variant("u", level()) if name == "MaxAccuracyLevel" else None

    node = Gio.DBusNodeInfo.new_for_xml(XML)
    bus.register_object(PATH, node.interfaces[0], method_call, get_property, None)

    def next_level():
        state["index"] = min(state["index"] + 1, len(levels) - 1)
        bus.emit_signal(None, PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                        GLib.Variant("(sa{sv}as)", (INTERFACE, {"MaxAccuracyLevel": GLib.Variant("u", level())}, [])))
        say("level", level())
        return True

    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, next_level)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, lambda: loop.quit() or False)

    def added(conn, result):
        try:
            conn.call_finish(result)
            say("registered")
        except GLib.Error as e:
            say("error", e.message)
            loop.quit()

    # As GNOME Shell does (js/ui/status/location.js): it watches the name and
    # calls AddAgent whenever GeoClue appears (at start, or when the bus starts
    # it again after an idle exit), asynchronously: the daemon reads
    # MaxAccuracyLevel before it answers.
    def appeared(conn, _name, _owner):
        conn.call("org.freedesktop.GeoClue2", "/org/freedesktop/GeoClue2/Manager", "org.freedesktop.GeoClue2.Manager",
                  "AddAgent", GLib.Variant("(s)", ("gnome-shell",)), None, Gio.DBusCallFlags.NONE, -1, None, added)

    Gio.bus_watch_name_on_connection(bus, "org.freedesktop.GeoClue2", Gio.BusNameWatcherFlags.NONE,
                                     appeared, None)
    loop.run()


if __name__ == "__main__":
    main()
