#!/usr/bin/python3
"""gpsd-signal-probe.py SECONDS: count org.gpsd signals this process receives
on the system bus.

Subscribes to every signal of interface org.gpsd (what gpsd's D-Bus export
broadcasts, one "fix" per fix), prints "ready" once the bus has the match
rule, then prints the number of such signals received within SECONDS and
exits 0. Run it as different users to see whom the bus policy lets them reach.
"""
import sys

from gi.repository import Gio, GLib

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
received = []
bus.signal_subscribe(None, "org.gpsd", None, None, None, Gio.DBusSignalFlags.NONE,
                     lambda *args: received.append(args[3]))
# A round trip to the bus after AddMatch: once it returns, the match is in place.
bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
              "GetId", None, None, Gio.DBusCallFlags.NONE, -1, None)
print("ready", flush=True)
loop = GLib.MainLoop()
GLib.timeout_add(int(seconds * 1000), loop.quit)
loop.run()
print(len(received), flush=True)
