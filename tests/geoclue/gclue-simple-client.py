#!/usr/bin/python3
"""A GeoClue2 app built on libgeoclue's GClue.Simple, unmodified, for geoconsent's
tests of its GeoClue2 facade (Tests/IntegrationTests/GeoClueClientTests.swift).

usage: gclue-simple-client.py DESKTOP_ID LEVEL DISTANCE TIME RUN LINGER

Creates GClue.Simple with the accuracy LEVEL and the thresholds DISTANCE
(metres) and TIME (seconds) on the system bus (DBUS_SYSTEM_BUS_ADDRESS), which
completes with the first fix; follows updates for RUN seconds; then drops it
(libgeoclue calls DeleteClient) and stays connected LINGER more seconds.
Prints one line per event, words separated by spaces:

  ready CLIENT_PATH LOCATION_PATH LATITUDE LONGITUDE ACCURACY
  update LOCATION_PATH LATITUDE LONGITUDE ACCURACY MONOTONIC_MS
  closed
  failed MESSAGE...        (and exit status 1)
"""
import sys

import gi

gi.require_version("Geoclue", "2.0")
from gi.repository import GLib, Geoclue  # noqa: E402


def say(*words):
    print(*words, flush=True)


def describe(location):
    return [location.get_object_path(), repr(location.props.latitude), repr(location.props.longitude),
            repr(location.props.accuracy)]


def main():
    desktop_id, level, distance, time, run, linger = sys.argv[1:7]
    loop = GLib.MainLoop()
    try:
        simple = Geoclue.Simple.new_with_thresholds_sync(desktop_id, Geoclue.AccuracyLevel(int(level)),
                                                         int(time), int(distance), None)
    except GLib.Error as e:
        say("failed", e.message)
        return 1
    say("ready", simple.get_client().get_object_path(), *describe(simple.get_location()))

    def updated(s, _pspec):
        say("update", *describe(s.get_location()), str(GLib.get_monotonic_time() // 1000))

    simple.connect("notify::location", updated)

    def close():
        # The last reference: libgeoclue deletes the client object (DeleteClient).
        nonlocal simple
        simple = None
        say("closed")
        GLib.timeout_add(int(float(linger) * 1000), loop.quit)
        return False

    GLib.timeout_add(int(float(run) * 1000), close)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
