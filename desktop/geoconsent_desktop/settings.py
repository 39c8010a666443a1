"""geoconsent-settings: the user's location settings, in the spirit of iOS's
Settings > Privacy > Location Services.

Shows, for the user running it:
  * whether location is on (the daemon's Enabled), and who can change it
    (root only: others are told how an administrator does it);
  * each of the user's apps: its stored decision, its precision, when it last
    used location, and, live, whether it receives fixes at this moment
    ("In use now": ListSessionDetails' `receiving`, refreshed at every
    SessionsChanged the daemon sends after WatchSessions; never per fix);
  * per app, what the user decides (SetConsent): Never, Ask Next Time or
    While Using, and Precise, as iOS's Settings offers them. Less is stored
    at once (the app's live grants end or shrink); more (While Using,
    Precise on) is asked in the user's consent dialog first, which the
    daemon opens and this window waits on: any program of the user could
    call SetConsent, so only the trusted dialog gives more. Like the consent
    dialog's buttons, the controls take clicks only ARM_DELAY_MS after they
    appeared where they are: the rows are read again whenever an app's
    session changes, which any app can cause, so a row can move under the
    pointer; controls that moved are disarmed and arm again where they are
    now (a click meant for one app cannot land on another's).

Lines on standard output (for logs and for desktop/test-desktop.sh):
  ready window=XID                         the window is on screen
  row APP decision=D accuracy=A in-use=0|1 source=gps|wifi|static|-
      never=X,Y,W,H ask=X,Y,W,H while-using=X,Y,W,H precise=X,Y,W,H
                                           one app's row, its controls armed
                                           (after each refresh or move; the
                                           rectangles are relative to the window)
  refreshed N                              the list was read again (N rows)
  sources S,S wifi=on|off|-                where positions come from (Sources), and
                                           the Wi-Fi switch (- when not configured)
  wifi-switch at=X,Y,W,H                   where that switch is
  decide APP never|ask|while-using|precise-on|precise-off
                                           the user chose it (SetConsent sent)
  decided APP WHAT status=N|error          the daemon answered (for more: after
                                           the user's dialog)
  notices on|off                           the notices switch (silent grants), as read or set
  notices-switch at=X,Y,W,H                where that switch is
  taps verifiable|unverifiable             whether this desktop can tell a real tap
                                           (unverifiable: the window says so)
  lapsed APP TEXT                          a record whose decisions lapsed, as listed
"""

import argparse
import os
import signal
import sys
import time

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gio, GLib, Gtk, Pango  # noqa: E402

from .common import (ARM_DELAY_MS, BUS_NAME, IFACE, OBJECT_PATH, RECONNECT_SECONDS, add_bus_argument,  # noqa: E402
                     connect, log, shown, source_name, translation, warn as common_warn)
from . import notices, seen  # noqa: E402

try:
    gi.require_version("GdkX11", "3.0")
    from gi.repository import GdkX11  # noqa: F401,E402
except (ValueError, ImportError):
    GdkX11 = None


_ = translation()[0]
WINDOW_TITLE = _("Location Settings")


def warn(msg):
    common_warn("geoconsent-settings", msg)


def esc(text):
    return GLib.markup_escape_text(text, -1)


def decision_text(record):
    """What the user decided for the app, in words."""
    decision = record.get("decision", "")
    if decision == "when-in-use":
        return _("While using the app")
    if decision == "denied":
        return _("Never")
    if record.get("one-time-approved") is True:
        return _("Ask each time it is used, allowed once before")
    return _("Ask next time")


def accuracy_text(record):
    acc = record.get("decision-accuracy") or record.get("one-time-accuracy") or ""
    if acc == "reduced":
        return "reduced", _("Approximate")
    if acc == "full":
        return "full", _("Precise")
    return "none", "\u2014"


def source_text(source):
    """Where an app's last position came from (ListSessionDetails' `source`),
    in words; None when the daemon did not say."""
    return {"gps": _("from the GPS receiver"), "wifi": _("from nearby Wi-Fi networks"),
            "static": _("from this computer's fixed position")}.get(source)


def last_used_text(record):
    """When the app last used location, relative ("Last used 2 minutes ago")."""
    return seen.last_used_text(record, time.time())


def x11_active_window(window):
    """The X screen's window manager keeps _NET_ACTIVE_WINDOW (the agent can
    then tell the app in front)."""
    if GdkX11 is None or not isinstance(window.get_display(), GdkX11.X11Display):
        return False
    return GdkX11.X11Screen.supports_net_wm_hint(window.get_screen(), Gdk.atom_intern("_NET_ACTIVE_WINDOW", False))




class Settings(Gtk.Window):
    """The window, on a connection of its own to `bus`: when the bus goes away
    (it restarts), it says so and connects again, as the agent does; when the
    daemon comes back on it, it watches the sessions again."""

    def __init__(self, bus, conn=None):
        super().__init__(title=WINDOW_TITLE)
        self.bus = bus
        self.conn = None
        self.set_default_size(640, 600)
        # Each app's controls by name (never, ask, while-using, precise): what
        # the user decides with, armed once laid out (_arm_controls).
        self.controls = {}
        # Whether each app's Precise switch may be used (it has something stored to lower or raise).
        self.precise_applies = {}
        # Filling rows sets the controls to what is stored: no call for that.
        self.filling = False
        # Where each app's controls were when they armed; the rows' data to log then.
        self.armed_at = {}
        self.arm_timer = 0
        self.rows_data = ({}, set())
        # The rows were rebuilt and are not laid out yet (_log_rows decides then).
        self.laying_out = False
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12)
        for side in ("top", "bottom", "start", "end"):
            getattr(box, f"set_margin_{side}")(18)
        self.add(box)

        # Said instead of an empty list when the service cannot be reached.
        self.unreachable = Gtk.InfoBar()
        self.unreachable.set_message_type(Gtk.MessageType.WARNING)
        self.unreachable_text = Gtk.Label()
        self.unreachable_text.set_line_wrap(True)
        self.unreachable_text.set_xalign(0)
        self.unreachable.get_content_area().add(self.unreachable_text)
        self.unreachable.set_no_show_all(True)
        box.pack_start(self.unreachable, False, False, 0)

        top = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12)
        title = Gtk.Label()
        title.set_markup("<b>" + esc(_("Location Services")) + "</b>")
        title.set_xalign(0)
        top.pack_start(title, True, True, 0)
        self.enabled = Gtk.Switch()
        self.enabled.set_valign(Gtk.Align.CENTER)
        self.enabled.connect("state-set", self._on_enabled)
        top.pack_end(self.enabled, False, False, 0)
        box.pack_start(top, False, False, 0)
        self.who_can = Gtk.Label()
        self.who_can.set_xalign(0)
        self.who_can.set_line_wrap(True)
        box.pack_start(self.who_can, False, False, 0)

        # The user's own switch for their apps (SetUserLocation): off at once;
        # on again is confirmed in the user's consent dialog, as any program
        # of the user could ask for it.
        user_row, self.user_switch = self._switch_row(_("Location for your apps"), self._on_user_switch)
        box.pack_start(user_row, False, False, 0)

        # The agent's notice when an approved app's tap is granted without a
        # prompt: the user's own file (notices.py), read at each notice.
        notices_row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12)
        texts = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=2)
        notices_label = Gtk.Label(label=_("Notify when an app gets location without asking"))
        notices_label.set_xalign(0)
        notices_label.set_line_wrap(True)
        texts.pack_start(notices_label, False, False, 0)
        # Under it, where the desktop cannot tell a real tap, said plainly
        # (docs/dbus-api.md, CheckFocus): shown once mapped (_on_map).
        self.taps = Gtk.Label()
        self.taps.set_markup("<small>" + esc(_("This desktop cannot verify taps: apps you allowed once can get "
                                               "your location again without one. You are notified each time."))
                             + "</small>")
        self.taps.set_xalign(0)
        self.taps.set_line_wrap(True)
        self.taps.get_style_context().add_class("dim-label")
        self.taps.set_no_show_all(True)
        texts.pack_start(self.taps, False, False, 0)
        notices_row.pack_start(texts, True, True, 0)
        self.notices_switch = Gtk.Switch()
        self.notices_switch.set_valign(Gtk.Align.START)
        self.updating = True
        self.notices_switch.set_active(notices.read_setting())
        self.updating = False
        self.notices_switch.connect("state-set", self._on_notices)
        notices_row.pack_end(self.notices_switch, False, False, 0)
        box.pack_start(notices_row, False, False, 0)
        log("notices", "on" if self.notices_switch.get_active() else "off")

        # Where positions come from (Sources), and root's Wi-Fi switch when
        # Wi-Fi positioning is configured (WiFiEnabled).
        self.sources = Gtk.Label()
        self.sources.set_xalign(0)
        self.sources.set_line_wrap(True)
        box.pack_start(self.sources, False, False, 0)
        self.wifi_row, self.wifi = self._switch_row(_("Wi-Fi positioning"), self._on_wifi)
        self.wifi_row.set_no_show_all(True)
        box.pack_start(self.wifi_row, False, False, 0)
        self.wifi_who = Gtk.Label()
        self.wifi_who.set_xalign(0)
        self.wifi_who.set_line_wrap(True)
        self.wifi_who.set_no_show_all(True)
        box.pack_start(self.wifi_who, False, False, 0)

        heading = Gtk.Label()
        heading.set_markup("<b>" + esc(_("Your apps")) + "</b>")
        heading.set_xalign(0)
        box.pack_start(heading, False, False, 0)
        self.rows = Gtk.ListBox()
        self.rows.set_selection_mode(Gtk.SelectionMode.NONE)
        self.empty = Gtk.Label(label=_("No app has asked for your location yet."))
        self.rows.set_placeholder(self.empty)
        self.empty.show()
        scroll = Gtk.ScrolledWindow()
        scroll.set_vexpand(True)
        lists = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        lists.pack_start(self.rows, False, False, 0)
        # Decisions that lapsed unused (the record's `lapsed`): listed, not editable.
        self.lapsed_heading = Gtk.Label()
        self.lapsed_heading.set_markup("<b>" + esc(_("Lapsed")) + "</b>")
        self.lapsed_heading.set_xalign(0)
        self.lapsed_heading.set_no_show_all(True)
        lists.pack_start(self.lapsed_heading, False, False, 0)
        self.lapsed = Gtk.ListBox()
        self.lapsed.set_selection_mode(Gtk.SelectionMode.NONE)
        self.lapsed.set_no_show_all(True)
        lists.pack_start(self.lapsed, False, False, 0)
        scroll.add(lists)
        box.pack_start(scroll, True, True, 0)

        self.updating = False
        self.connect("map-event", self._on_map)
        self.connect("set-focus", self._on_focus)
        self._connect(conn)

    @staticmethod
    def _switch_row(text, on_state_set):
        """A row of a label and a switch at its end; the row and the switch."""
        row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12)
        label = Gtk.Label(label=text)
        label.set_xalign(0)
        row.pack_start(label, True, True, 0)
        switch = Gtk.Switch()
        switch.set_valign(Gtk.Align.CENTER)
        switch.connect("state-set", on_state_set)
        row.pack_end(switch, False, False, 0)
        return row, switch

    # -- the bus and the daemon

    def _connect(self, conn=None):
        """Serves on `conn`, else connects to the bus (again); false when it
        cannot yet (tried again later)."""
        try:
            conn = conn or connect(self.bus)
        except (GLib.Error, ValueError) as e:
            self._say_unreachable(_("The location service cannot be reached: {why}").format(
                why=getattr(e, "message", str(e))))
            GLib.timeout_add_seconds(RECONNECT_SECONDS, lambda: self._connect() and False)
            return False
        self.conn = conn
        conn.connect("closed", self._on_closed)
        conn.signal_subscribe(BUS_NAME, IFACE, "SessionsChanged", OBJECT_PATH, None,
                              Gio.DBusSignalFlags.NONE, lambda *_: self.refresh())
        conn.signal_subscribe(BUS_NAME, "org.freedesktop.DBus.Properties", "PropertiesChanged", OBJECT_PATH,
                              None, Gio.DBusSignalFlags.NONE, lambda *_: self.refresh())
        # The daemon (re)started on the bus (activation, a restart): watch again.
        conn.signal_subscribe("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                              "/org/freedesktop/DBus", BUS_NAME, Gio.DBusSignalFlags.NONE, self._on_owner_changed)
        self._watch()
        log("connected")
        return True

    def _watch(self):
        self._call("WatchSessions", None, lambda _r: self.refresh())

    def _on_owner_changed(self, _conn, _sender, _path, _iface, _signal, params):
        _name, _old, new = params.unpack()
        if new:
            self._watch()

    def _on_closed(self, conn, _remote_vanished, _error):
        if conn is not self.conn:
            return
        self.conn = None
        log("disconnected")
        self._say_unreachable(_("The location service cannot be reached: the bus went away. Trying again…"))
        GLib.timeout_add_seconds(RECONNECT_SECONDS, lambda: self._connect() and False)

    def _say_unreachable(self, text):
        self.unreachable_text.set_text(text)
        self.unreachable_text.show()
        self.unreachable.show()

    def _call(self, method, params, done, iface=IFACE, failed=None, timeout_ms=10000):
        """Calls the daemon; `done(reply)`, or on an error `failed(error)` when
        given (an answer of the daemon), else the service is said unreachable."""
        if self.conn is None:
            return

        def finish(conn, result, _data):
            try:
                reply = conn.call_finish(result)
            except GLib.Error as e:
                warn(f"{method}: {e.message}")
                if failed is not None and Gio.DBusError.get_remote_error(e):
                    failed(e)
                elif conn is self.conn:
                    self._say_unreachable(_("The location service cannot be reached: {why}").format(why=e.message))
                return
            if conn is self.conn:
                self.unreachable.hide()
            done(reply)
        self.conn.call(BUS_NAME, OBJECT_PATH, iface, method, params, None, Gio.DBusCallFlags.NONE,
                       timeout_ms, None, finish, None)

    def refresh(self):
        self._call("GetAll", GLib.Variant("(s)", (IFACE,)), self._got_properties,
                   iface="org.freedesktop.DBus.Properties")
        self._call("GetUserLocation", GLib.Variant("(a{sv})", ({},)), self._got_user_location)
        self._call("ListConsents", None, lambda r: self._call(
            "ListSessionDetails", None, lambda s: self._fill(r.unpack()[0], s.unpack()[0])))

    def _got_properties(self, reply):
        props = reply.unpack()[0]
        self._got_enabled(bool(props.get("Enabled")))
        self._got_sources(props.get("Sources") or [], props.get("WiFiEnabled") is True)

    def _got_sources(self, sources, wifi_on):
        names = [source_name(s) for s in sources if not (s == "wifi" and not wifi_on)]
        names = [n for n in names if n]
        self.sources.set_text(_("Positions come from: {sources}").format(sources=", ".join(names)) if names
                              else _("No source of positions is on."))
        configured = "wifi" in sources
        root = os.getuid() == 0
        self.updating = True
        self.wifi.set_state(wifi_on)
        self.wifi.set_active(wifi_on)
        self.updating = False
        # Hidden from the window's show_all until Wi-Fi is known to be configured.
        self.wifi_row.set_no_show_all(not configured)
        if configured:
            self.wifi_row.show_all()
        else:
            self.wifi_row.hide()
        # Anyone may try, as with location for everyone: the daemon asks polkit.
        self.wifi_who.set_visible(configured and not root)
        self.wifi_who.set_text(_("Wi-Fi positioning is for every user of this computer; switching it "
                                 "asks for an administrator's password."))
        log("sources", ",".join(sources) or "-", "wifi=" + (("on" if wifi_on else "off") if configured else "-"))
        if configured:
            GLib.idle_add(self._log_switch, "wifi-switch", self.wifi)

    def _got_user_location(self, reply):
        on = reply.unpack()[0]
        self.updating = True
        self.user_switch.set_state(on)
        self.user_switch.set_active(on)
        self.updating = False
        log("user-location", "on" if on else "off")
        GLib.idle_add(self._log_switch, "user-switch", self.user_switch)

    def _on_user_switch(self, _switch, state):
        if self.updating:
            return False
        log("user-location-set", "on" if state else "off")

        def failed(e):
            self._say_refused(Gio.DBusError.get_remote_error(e), e)
            self.refresh()
        self._call("SetUserLocation", GLib.Variant("(ba{sv})", (state, {})), lambda _r: self.refresh(),
                   failed=failed, timeout_ms=180000)
        return True  # the switch shows what the daemon says, once it has said it

    def _on_notices(self, _switch, state):
        if self.updating:
            return False
        try:
            notices.write_setting(state)
        except (GLib.Error, OSError) as e:
            warn(f"cannot keep the notices setting: {getattr(e, 'message', e)}")
            return True  # the switch stays as it was
        log("notices", "on" if state else "off")
        return False

    def _log_switch(self, name, switch):
        # Once laid out on screen: the rectangle is where a click lands.
        if not self.get_mapped() or switch.get_allocated_width() <= 1:
            GLib.timeout_add(50, self._log_switch, name, switch)
            return False
        log(name, "at={},{},{},{}".format(*self._rect(switch)))
        return False

    def _on_wifi(self, _switch, state):
        if self.updating:
            return False
        def failed(e):
            self._say_refused(Gio.DBusError.get_remote_error(e), e)
            self.refresh()
        # A user's write waits for polkit, which may ask for a password.
        self._call("Set", GLib.Variant("(ssv)", (IFACE, "WiFiEnabled", GLib.Variant("b", state))),
                   lambda _r: self.refresh(), iface="org.freedesktop.DBus.Properties", failed=failed,
                   timeout_ms=180000)
        return True  # the switch shows what the daemon says, once it has said it

    def _got_enabled(self, on):
        self.updating = True
        self.enabled.set_state(on)
        self.enabled.set_active(on)
        self.updating = False
        # Anyone may try: the daemon asks polkit, which asks an administrator's password.
        root = os.getuid() == 0
        if root:
            self.who_can.set_text(_("Location is on for every user of this computer.") if on
                                  else _("Location is off for every user of this computer."))
        else:
            self.who_can.set_text(_("Location is on for every user of this computer; switching it off "
                                    "asks for an administrator's password.") if on
                                  else _("Location is off for every user of this computer; switching it on "
                                         "asks for an administrator's password."))

    def _on_enabled(self, _switch, state):
        if self.updating:
            return False
        def failed(e):
            self._say_refused(Gio.DBusError.get_remote_error(e), e)
            self.refresh()
        # A user's write waits for polkit, which may ask for a password.
        self._call("Set", GLib.Variant("(ssv)", (IFACE, "Enabled", GLib.Variant("b", state))),
                   lambda _r: self.refresh(), iface="org.freedesktop.DBus.Properties", failed=failed,
                   timeout_ms=180000)
        return True  # the switch shows what the daemon says, once it has said it

    def _fill(self, consents, sessions):
        uid = os.getuid()
        records = {app: rec for (u, app, rec) in consents if u == uid}
        # The apps receiving now, and where each one's last position came from.
        in_use = {d.get("app-id"): d.get("source") for (_name, d) in sessions
                  if d.get("uid") == uid and d.get("receiving") is True}
        live = {d.get("app-id") for (_name, d) in sessions if d.get("uid") == uid}
        # A lapsed record gives nothing: listed under Lapsed, with a row above only
        # while the app is there, or while a denial still stands beside what lapsed.
        lapsed = {app: rec for app, rec in records.items() if seen.lapsed_text(rec)}
        records = {app: rec for app, rec in records.items()
                   if app not in lapsed or app in live or rec.get("decision")}
        self._fill_lapsed(lapsed)
        for child in self.rows.get_children():
            self.rows.remove(child)
        self.controls = {}
        self.precise_applies = {}
        self.laying_out = True
        self.filling = True
        for app in sorted(set(records) | live):
            self.rows.add(self._row(app, records.get(app, {}), app in in_use, in_use.get(app)))
        self.filling = False
        self.rows.show_all()
        log("refreshed", len(self.controls))
        GLib.idle_add(self._log_rows, records, in_use)

    def _fill_lapsed(self, lapsed):
        for child in self.lapsed.get_children():
            self.lapsed.remove(child)
        for app in sorted(lapsed):
            text = seen.lapsed_text(lapsed[app])
            row = Gtk.ListBoxRow()
            v = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=2)
            for side in ("top", "bottom", "start", "end"):
                getattr(v, f"set_margin_{side}")(6)
            name = Gtk.Label()
            name.set_markup("<b>" + esc(app) + "</b>")
            name.set_xalign(0)
            name.set_ellipsize(Pango.EllipsizeMode.START)
            v.pack_start(name, False, False, 0)
            line = Gtk.Label(label=text)
            line.set_xalign(0)
            line.set_line_wrap(True)
            v.pack_start(line, False, False, 0)
            row.add(v)
            row.show_all()
            self.lapsed.add(row)
            log("lapsed", shown(app, 4096), text)
        self.lapsed_heading.set_visible(bool(lapsed))
        self.lapsed.set_visible(bool(lapsed))

    def _row(self, app, record, using, source):
        row = Gtk.ListBoxRow()
        h = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=10)
        for side in ("top", "bottom", "start", "end"):
            getattr(h, f"set_margin_{side}")(6)
        dot = Gtk.Label()
        dot.set_markup('<span foreground="#1a73e8">\u27a4</span>' if using else " ")
        dot.set_tooltip_text(_("In use now") if using else None)
        h.pack_start(dot, False, False, 0)
        v = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=2)
        name = Gtk.Label()
        name.set_markup("<b>" + esc(app) + "</b>")
        name.set_xalign(0)
        name.set_ellipsize(Pango.EllipsizeMode.START)
        v.pack_start(name, False, False, 0)
        _acc, acc_text = accuracy_text(record)
        parts = [decision_text(record), acc_text, last_used_text(record)]
        if using:
            where = source_text(source)
            parts.insert(0, _("In use now") + (" " + where if where else ""))
        line = Gtk.Label(label=" \u00b7 ".join(parts))
        line.set_xalign(0)
        line.set_line_wrap(True)
        v.pack_start(line, False, False, 0)
        v.pack_start(self._decision_controls(app, record), False, False, 4)
        h.pack_start(v, True, True, 0)
        row.add(h)
        return row

    def _decision_controls(self, app, record):
        """Never / Ask Next Time / While Using, and Precise, as iOS's Settings
        offers them (SetConsent). Less is stored at once; more is asked in
        the user's consent dialog first, so no program can give itself more."""
        box = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=12)
        choices = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=0)
        choices.get_style_context().add_class("linked")
        # The button's confirmation alone is none of the three (the line above
        # says it): a hidden member of the group is the active one then, so that
        # Ask Next Time forgets it too.
        current = {"when-in-use": "while-using", "denied": "never"}.get(
            record.get("decision", ""), "button" if record.get("one-time-approved") is True else "ask")
        controls = {}
        group = Gtk.RadioButton()
        group.set_active(current == "button")
        for word, text, tip in (("never", _("Never"), _("No location for this app")),
                                ("ask", _("Ask Next Time"), _("Forget the decision: the app asks again, "
                                                             "and its permission ends now")),
                                ("while-using", _("While Using"), _("Location while you use the app; "
                                                                   "you confirm it in the location dialog"))):
            b = Gtk.RadioButton.new_with_label_from_widget(group, text)
            b.set_mode(False)  # a segmented button, not a round indicator
            b.set_tooltip_text(tip)
            b.set_active(word == current)
            b.connect("toggled", self._on_choice, app, word)
            choices.pack_start(b, False, False, 0)
            controls[word] = b
        box.pack_start(choices, False, False, 0)
        acc, _text = accuracy_text(record)
        precise = Gtk.CheckButton(label=_("Precise"))
        precise.set_tooltip_text(_("Your position within a few metres; off: only the area you are in"))
        granted = record.get("decision") == "when-in-use" or record.get("one-time-approved") is True
        precise.set_active(granted and acc != "reduced")
        precise.connect("toggled", self._on_precise, app)
        box.pack_start(precise, False, False, 0)
        controls["precise"] = precise
        self.precise_applies[app] = granted
        for c in controls.values():
            c.set_sensitive(False)  # armed once laid out (_arm_controls)
            c.connect("size-allocate", lambda *_: GLib.idle_add(self._check_controls))
        self.controls[app] = controls
        return box

    def _rect(self, button):
        alloc = button.get_allocation()
        pos = button.translate_coordinates(self, 0, 0)
        x, y = (pos[0], pos[1]) if pos else (alloc.x, alloc.y)
        return (x, y, alloc.width, alloc.height)

    def _log_rows(self, records, in_use):
        # Only once laid out on screen: the rectangles are where a click lands.
        if not self.get_mapped() or any(c.get_allocated_width() <= 1 for cs in self.controls.values()
                                        for c in cs.values()):
            GLib.timeout_add(50, self._log_rows, records, in_use)
            return False
        self.laying_out = False
        self.rows_data = (records, in_use)
        # Rows whose controls are where they armed take clicks at once (the list
        # was read again, nothing moved); any other arms ARM_DELAY_MS later.
        if all(self.armed_at.get(app) == self._rects(cs) for app, cs in self.controls.items()):
            self._arm_controls()
        else:
            self._arm_controls_later()
        return False

    def _rects(self, controls):
        return {name: self._rect(c) for name, c in controls.items()}

    def _arm_controls_later(self):
        for cs in self.controls.values():
            for c in cs.values():
                c.set_sensitive(False)
        self.armed_at = {}
        if self.arm_timer:
            GLib.source_remove(self.arm_timer)
        self.arm_timer = GLib.timeout_add(ARM_DELAY_MS, self._arm_controls)

    def _arm_controls(self):
        self.arm_timer = 0
        records, in_use = self.rows_data
        self.armed_at = {}
        for app, controls in self.controls.items():
            for name, c in controls.items():
                c.set_sensitive(name != "precise" or self.precise_applies.get(app, False))
            rects = self._rects(controls)
            self.armed_at[app] = rects
            rec = records.get(app, {})
            acc, _text = accuracy_text(rec)
            log("row", app, f"decision={rec.get('decision') or ('one-time' if rec.get('one-time-approved') else 'none')}",
                f"accuracy={acc}", f"in-use={1 if app in in_use else 0}", f"source={in_use.get(app) or '-'}",
                *("{}={},{},{},{}".format(name, *r) for name, r in rects.items()))
        return False

    def _check_controls(self):
        """Armed controls that moved are disarmed, with the others, and they arm again later."""
        if self.laying_out or self.arm_timer or not self.armed_at:
            return False
        if any(app in self.armed_at and self.armed_at[app] != self._rects(cs) for app, cs in self.controls.items()):
            log("moved")
            self._arm_controls_later()
        return False

    def _on_choice(self, button, app, word):
        if self.filling or not button.get_active():
            return
        self._decide(app, {"decision": GLib.Variant("s", word)}, word)

    def _on_precise(self, button, app):
        if self.filling:
            return
        acc = "full" if button.get_active() else "reduced"
        self._decide(app, {"accuracy": GLib.Variant("s", acc)}, "precise-" + ("on" if acc == "full" else "off"))

    def _decide(self, app, options, what):
        """SetConsent: waits as long as the user's dialog may (more is asked
        there), then shows what is stored now, whatever the answer was."""
        log("decide", app, what)

        def done(reply):
            log("decided", app, what, f"status={reply.unpack()[0]}")
            self.refresh()

        def failed(e):
            log("decided", app, what, "error")
            self._say_refused(Gio.DBusError.get_remote_error(e), e)
            self.refresh()
        self._call("SetConsent", GLib.Variant("(sa{sv})", (app, options)), done, failed=failed, timeout_ms=180000)

    def _say_refused(self, name, error):
        text = {
            "org.geoconsent.GeoConsent1.Error.NoAgent":
                _("No location dialog is running for you, so this cannot be confirmed: log in again, or start geoconsent-agent."),
            "org.geoconsent.GeoConsent1.Error.PromptPending":
                _("This app's location dialog is open: answer it first."),
        }.get(name, _("The location service refused: {why}").format(why=Gio.DBusError.strip_remote_error(error) or error.message))
        self.unreachable_text.set_text(text)
        self.unreachable_text.show()
        self.unreachable.show()

    def _on_focus(self, _window, widget):
        """Says which control has the keyboard focus (for a keyboard user's test)."""
        for app, controls in self.controls.items():
            for name, c in controls.items():
                if c is widget:
                    return log("focus", app, name)
        log("focus", "-")

    def _on_map(self, *_):
        verifiable = seen.taps_verifiable(os.environ, x11_active_window(self))
        self.taps.set_visible(not verifiable)
        log("taps", "verifiable" if verifiable else "unverifiable")
        GLib.idle_add(self._log_switch, "notices-switch", self.notices_switch)

        def ready():
            win = self.get_window()
            xid = str(win.get_xid()) if GdkX11 is not None and win is not None and hasattr(win, "get_xid") else ""
            log(f"ready window={xid}")
            return False
        GLib.timeout_add(300, ready)
        return False


def main(argv):
    ap = argparse.ArgumentParser(prog="geoconsent-settings",
                                 description="Your location settings: which apps may use your location, "
                                             "which use it now, and resetting them.")
    add_bus_argument(ap)
    args = ap.parse_args(argv)
    GLib.set_prgname("org.geoconsent.Settings")
    ok, _argv = Gtk.init_check(None)
    if not ok:
        warn("cannot open a display")
        return 1
    try:
        conn = connect(args.bus)   # a wrong --bus is an error at once, not a window that retries
    except (GLib.Error, ValueError) as e:
        warn(f"cannot connect to the {args.bus} bus: {getattr(e, 'message', e)}")
        return 1
    win = Settings(args.bus, conn)
    win.connect("destroy", Gtk.main_quit)
    win.show_all()
    for sig in (signal.SIGINT, signal.SIGTERM):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, lambda *_: (Gtk.main_quit(), False)[1])
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
