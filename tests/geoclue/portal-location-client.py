#!/usr/bin/python3
"""An unsandboxed app using xdg-desktop-portal's Location portal, for geoconsent's
tests of its GeoClue2 facade (Tests/IntegrationTests/GeoCluePortalTests.swift).

usage: portal-location-client.py ACCURACY SECONDS [DISTANCE TIME]

On the session bus (DBUS_SESSION_BUS_ADDRESS), calls
org.freedesktop.portal.Location CreateSession with the portal's ACCURACY (0 none,
1 country, 2 city, 3 neighborhood, 4 street, 5 exact) and the thresholds
DISTANCE (metres) and TIME (seconds), then Start, and follows the session for
SECONDS. The portal answers Start through a Request object's Response signal
(0 started, 1 cancelled, 2 failed), so every signal is subscribed to before the
calls. Prints one line per event, words separated by spaces:

  session SESSION_PATH
  request REQUEST_PATH
  response CODE
  update LATITUDE LONGITUDE ACCURACY ALTITUDE SPEED HEADING TIMESTAMP_SECONDS
  closed                    (the portal closed the session)
  failed MESSAGE...         (a call failed; exit status 1)
"""
import sys

from gi.repository import Gio, GLib

PORTAL = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
LOCATION = "org.freedesktop.portal.Location"


def say(*words):
    print(*words, flush=True)


def main():
    accuracy, seconds = int(sys.argv[1]), float(sys.argv[2])
    distance, time = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 0)
    loop = GLib.MainLoop()
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    state = {"session": None}

    def signal(_conn, _sender, path, iface, name, params):
        if iface == "org.freedesktop.portal.Request" and name == "Response":
            say("response", params.unpack()[0])
        elif iface == LOCATION and name == "LocationUpdated" and params.unpack()[0] == state["session"]:
            loc = params.unpack()[1]
            say("update", *(repr(loc.get(k)) for k in ("Latitude", "Longitude", "Accuracy", "Altitude", "Speed",
                                                         "Heading")), loc.get("Timestamp", (0, 0))[0])
        elif iface == "org.freedesktop.portal.Session" and name == "Closed" and path == state["session"]:
            say("closed")

    bus.signal_subscribe(None, None, None, None, None, Gio.DBusSignalFlags.NONE, signal)
    options = {
        "session_handle_token": GLib.Variant("s", "geoconsent"),
        "accuracy": GLib.Variant("u", accuracy),
        "distance-threshold": GLib.Variant("u", distance),
        "time-threshold": GLib.Variant("u", time),
    }
    try:
        reply = bus.call_sync(PORTAL, PATH, LOCATION, "CreateSession", GLib.Variant("(a{sv})", (options,)),
                              GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, -1, None)
        state["session"] = reply.unpack()[0]
        say("session", state["session"])
        reply = bus.call_sync(PORTAL, PATH, LOCATION, "Start",
                              GLib.Variant("(osa{sv})", (state["session"], "", {"handle_token": GLib.Variant("s", "start")})),
                              GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, -1, None)
        say("request", reply.unpack()[0])
    except GLib.Error as e:
        say("failed", e.message)
        return 1
    GLib.timeout_add(int(seconds * 1000), loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
