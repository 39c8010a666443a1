#!/usr/bin/python3
"""A tray host's reads, for desktop/test-desktop.sh (on the test's own
session bus, never the user's), beside Debian's real StatusNotifierWatcher
(status-notifier-watcher) and a real tray that draws the items
(gtk-sni-tray-standalone): what a host reads, as text a test can check.

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

def say(*words):
    print(*words, flush=True)


def call(bus, name, path, iface, method, args, reply_type=None):
    return bus.call_sync(name, path, iface, method, args, GLib.VariantType(reply_type) if reply_type else None,
                         Gio.DBusCallFlags.NONE, 5000, None)


def item_path(bus, name, path="/"):
    """Where `name` serves its item, found as hosts find it when the watcher
    gives only a bus name (as the Haskell watcher does): the first object, by
    introspection, that has the item interface."""
    (xml,) = call(bus, name, path, "org.freedesktop.DBus.Introspectable", "Introspect", None, "(s)").unpack()
    node = Gio.DBusNodeInfo.new_for_xml(xml)
    if any(i.name == ITEM_IFACE for i in node.interfaces):
        return path
    for child in node.nodes:
        found = item_path(bus, name, path.rstrip("/") + "/" + child.path)
        if found:
            return found
    return None


def items(bus):
    (registered,) = call(bus, WATCHER, WATCHER_PATH, "org.freedesktop.DBus.Properties", "Get",
                         GLib.Variant("(ss)", (WATCHER, "RegisteredStatusNotifierItems")), "(v)").unpack()
    for service in registered:
        if "/" in service:   # NAME/PATH, as KDE's watcher keeps them
            i = service.index("/")
            yield service, service[:i], service[i:]
        else:
            path = item_path(bus, service)
            if path:
                yield service, service, path


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
    if sys.argv[1:] == ["read"]:
        sys.exit(read())
    if len(sys.argv) == 3 and sys.argv[1] == "click":
        sys.exit(click(sys.argv[2]))
    sys.exit("usage: sni_host.py read | click LABEL")
