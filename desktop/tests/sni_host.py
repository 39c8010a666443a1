#!/usr/bin/python3
"""A StatusNotifierWatcher stand-in and a tray host's reads, for
desktop/test-desktop.sh (on the test's own session bus, never the user's).

  sni_host.py watcher
      owns org.kde.StatusNotifierWatcher at /StatusNotifierWatcher, as KDE's
      does: RegisterStatusNotifierItem, RegisterStatusNotifierHost, the
      properties RegisteredStatusNotifierItems, IsStatusNotifierHostRegistered
      (true: a host is said to be there, so items show themselves) and
      ProtocolVersion, and the signals. Prints `watching` once it owns the
      name, `item SERVICE` for each item registered, `gone SERVICE` when
      its owner leaves the bus.
  sni_host.py read
      reads every registered item as a tray host does: its
      org.kde.StatusNotifierItem properties and its com.canonical.dbusmenu
      layout. Prints `item SERVICE`, `status S`, `title T`, `icon I`, and
      `menu ID enabled=0|1 LABEL` per menu entry.
  sni_host.py click LABEL
      sends the menu entry labelled LABEL (as read) the host's click
      (dbusmenu Event "clicked"); prints `clicked ID`. Fails if no entry has it.
"""

import re
import sys

from gi.repository import Gio, GLib

WATCHER = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ITEM_IFACE = "org.kde.StatusNotifierItem"
MENU_IFACE = "com.canonical.dbusmenu"

WATCHER_XML = """
<node>
  <interface name="org.kde.StatusNotifierWatcher">
    <method name="RegisterStatusNotifierItem"><arg name="service" type="s" direction="in"/></method>
    <method name="RegisterStatusNotifierHost"><arg name="service" type="s" direction="in"/></method>
    <property name="RegisteredStatusNotifierItems" type="as" access="read"/>
    <property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
    <property name="ProtocolVersion" type="i" access="read"/>
    <signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
    <signal name="StatusNotifierItemUnregistered"><arg type="s"/></signal>
    <signal name="StatusNotifierHostRegistered"/>
    <signal name="StatusNotifierHostUnregistered"/>
  </interface>
</node>
"""


def say(*words):
    print(*words, flush=True)


def watcher():
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    items = {}  # service -> name watch id

    def gone(service):
        GLib.idle_add(lambda: forget(service))

    def forget(service):
        if service in items:
            Gio.bus_unwatch_name(items.pop(service))
            bus.emit_signal(None, WATCHER_PATH, WATCHER, "StatusNotifierItemUnregistered", GLib.Variant("(s)", (service,)))
            say("gone", service)
        return False

    def on_call(conn, sender, _path, _iface, method, params, invocation):
        if method == "RegisterStatusNotifierItem":
            (arg,) = params.unpack()
            # A path: the item is on the caller's connection; a bus name: at the usual path.
            service = sender + arg if arg.startswith("/") else arg + "/StatusNotifierItem"
            owner = sender if arg.startswith("/") else arg
            invocation.return_value(None)
            if service not in items:
                items[service] = Gio.bus_watch_name_on_connection(conn, owner, Gio.BusNameWatcherFlags.NONE, None,
                                                                  lambda *_: gone(service))
                conn.emit_signal(None, WATCHER_PATH, WATCHER, "StatusNotifierItemRegistered", GLib.Variant("(s)", (service,)))
                say("item", service)
        elif method == "RegisterStatusNotifierHost":
            invocation.return_value(None)
        else:
            invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod", method)

    def on_get(_conn, _sender, _path, _iface, prop):
        return {"RegisteredStatusNotifierItems": GLib.Variant("as", sorted(items)),
                "IsStatusNotifierHostRegistered": GLib.Variant("b", True),
                "ProtocolVersion": GLib.Variant("i", 0)}.get(prop)

    node = Gio.DBusNodeInfo.new_for_xml(WATCHER_XML)
    bus.register_object(WATCHER_PATH, node.interfaces[0], on_call, on_get, None)
    loop = GLib.MainLoop()
    Gio.bus_own_name_on_connection(bus, WATCHER, Gio.BusNameOwnerFlags.DO_NOT_QUEUE,
                                   lambda *_: say("watching"), lambda *_: (say("name lost"), loop.quit()))
    for sig in (2, 15):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, lambda *_: (loop.quit(), False)[1])
    loop.run()
    return 0


def call(bus, name, path, iface, method, args, reply_type=None):
    return bus.call_sync(name, path, iface, method, args, GLib.VariantType(reply_type) if reply_type else None,
                         Gio.DBusCallFlags.NONE, 5000, None)


def items(bus):
    (registered,) = call(bus, WATCHER, WATCHER_PATH, "org.freedesktop.DBus.Properties", "Get",
                         GLib.Variant("(ss)", (WATCHER, "RegisteredStatusNotifierItems")), "(v)").unpack()
    for service in registered:
        i = service.index("/")
        yield service, service[:i], service[i:]


def menu_entries(layout, out):
    ident, props, children = layout
    if ident != 0 and props.get("type") != "separator" and props.get("visible", True):
        # As a host shows it: "_x" marks a mnemonic, "__" is an underscore.
        label = re.sub(r"_(.)", r"\1", props.get("label", ""))
        out.append((ident, label, props.get("enabled", True)))
    for child in children:
        menu_entries(child, out)
    return out


def read():
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    for service, name, path in items(bus):
        (props,) = call(bus, name, path, "org.freedesktop.DBus.Properties", "GetAll",
                        GLib.Variant("(s)", (ITEM_IFACE,)), "(a{sv})").unpack()
        say("item", service)
        say("status", props.get("Status", ""))
        say("title", props.get("Title", ""))
        say("icon", props.get("IconName", ""))
        menu = props.get("Menu")
        if not menu:
            continue
        _rev, layout = call(bus, name, menu, MENU_IFACE, "GetLayout", GLib.Variant("(iias)", (0, -1, [])),
                            "(u(ia{sv}av))").unpack()
        for ident, label, enabled in menu_entries(layout, []):
            say("menu", ident, f"enabled={1 if enabled else 0}", label)
    return 0


def click(wanted):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    for _service, name, path in items(bus):
        (menu,) = call(bus, name, path, "org.freedesktop.DBus.Properties", "Get",
                       GLib.Variant("(ss)", (ITEM_IFACE, "Menu")), "(v)").unpack()
        _rev, layout = call(bus, name, menu, MENU_IFACE, "GetLayout", GLib.Variant("(iias)", (0, -1, [])),
                            "(u(ia{sv}av))").unpack()
        for ident, label, enabled in menu_entries(layout, []):
            if label == wanted and enabled:
                call(bus, name, menu, MENU_IFACE, "Event",
                     GLib.Variant("(isvu)", (ident, "clicked", GLib.Variant("s", ""), 0)))
                say("clicked", ident)
                return 0
    print(f"sni_host: no menu entry {wanted!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if sys.argv[1:] == ["watcher"]:
        sys.exit(watcher())
    if sys.argv[1:] == ["read"]:
        sys.exit(read())
    if len(sys.argv) == 3 and sys.argv[1] == "click":
        sys.exit(click(sys.argv[2]))
    sys.exit("usage: sni_host.py watcher | read | click ID")
