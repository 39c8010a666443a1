"""What geoconsent's desktop programs share: the service's names, the
translations, a bus connection of their own, and the rule for showing text
that an app chose. No GTK here: the programs set that up themselves."""

import gettext
import os
import sys
import unicodedata

BUS_NAME = "org.geoconsent.GeoConsent1"
OBJECT_PATH = "/org/geoconsent/GeoConsent1"
IFACE = "org.geoconsent.GeoConsent1"

# A control that just appeared or moved takes clicks only this long after:
# a click meant for the app, or for where a button was, must not land on it.
ARM_DELAY_MS = 600
# Seconds between attempts to reach the bus again after it went away.
RECONNECT_SECONDS = 2


def locale_dir():
    """Where the catalogs (domain "geoconsent", from po/) are: $GEOCONSENT_LOCALEDIR,
    else beside the installation (PREFIX/share/locale, this package being in
    PREFIX/share/geoconsent/python/), else the checkout's .build/locale; None:
    the system's directory."""
    env = os.environ.get("GEOCONSENT_LOCALEDIR")
    if env:
        return env
    package = os.path.dirname(os.path.realpath(__file__))
    for d in (os.path.join(package, "..", "..", "..", "locale"), os.path.join(package, "..", "..", ".build", "locale")):
        if os.path.isdir(d):
            return os.path.normpath(d)
    return None


def translation():
    """gettext and ngettext of the "geoconsent" catalogs (English without them)."""
    catalog = gettext.translation("geoconsent", localedir=locale_dir(), fallback=True)
    return catalog.gettext, catalog.ngettext


def source_name(source):
    """A source of positions (the daemon's `Sources`, a prompt's `sources`)
    as a person names it; None for one this program does not know."""
    _ = translation()[0]
    return {"gps": _("the GPS receiver"), "wifi": _("nearby Wi-Fi networks"),
            "static": _("this computer's fixed position")}.get(source)


def log(*words):
    """One line on stdout, flushed: what the tests and the journal read."""
    print(*words, flush=True)


def warn(program, msg):
    print(f"{program}: {msg}", file=sys.stderr, flush=True)


def add_bus_argument(parser):
    """The --bus option both programs take."""
    parser.add_argument("--bus", default="system", metavar="system|session|ADDRESS",
                        help="the bus geoconsentd is on (default: system)")


def shown(value, limit=200):
    """Any string shown to a person (app id, program, app name, reason), made
    safe to show: one line, and every control, format or separator character
    (C0, DEL, C1, the bidi marks, embeddings, overrides and isolates,
    U+2028/9, any other Cf) written out as \\uXXXX, so that nothing can reorder
    or break what the user reads and a forged name looks forged; at most
    `limit` characters. The rule is the daemon's (GeoCore DisplayText) and
    the terminal agent's."""
    if not isinstance(value, str):
        return ""
    out = []
    for ch in value:
        cat = unicodedata.category(ch)
        if ch == " ":
            out.append(" ")
        elif cat in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    text = " ".join("".join(out).split())
    if len(text) > limit:
        text = text[:limit - 1] + "\u2026"
    return text


def bus_address(bus, address_for_bus):
    """The address of `bus` ("system", "session" or an address):
    `address_for_bus("system"|"session")` gives a well-known bus's."""
    if bus in ("system", "session"):
        return address_for_bus(bus)
    if not bus or ":" not in bus:
        raise ValueError(f"not a bus: {bus!r} (system, session or a D-Bus address)")
    return bus


def connect(bus):
    """A connection of its own to `bus`, not GIO's shared one: after the bus
    restarts, the shared one can stay the closed one, and no reconnection
    would work. Closing it does not end the program."""
    from gi.repository import Gio  # the caller required its versions

    def well_known(name):
        kind = Gio.BusType.SYSTEM if name == "system" else Gio.BusType.SESSION
        return Gio.dbus_address_get_for_bus_sync(kind, None)

    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    conn = Gio.DBusConnection.new_for_address_sync(bus_address(bus, well_known), flags, None, None)
    conn.set_exit_on_close(False)
    return conn
