"""The indicator that names the app (issue "seen while used"): while any of
the user's apps receives location (ListSessionDetails' `receiving`, read
again at each SessionsChanged the daemon sends after WatchSessions), a
StatusNotifierItem through libayatana-appindicator (GI:
AyatanaAppIndicator3, Debian package gir1.2-ayatanaappindicator3-0.1),
whose menu is com.canonical.dbusmenu. Its title (the tooltip of tray hosts)
and menu name each app, precise or approximate, and since when; a menu
entry per app stops it (EndGrants), another opens the settings window. It
is Passive when no app receives, within a second of the last stop.

Where no org.kde.StatusNotifierWatcher is on the session bus (GNOME
without the AppIndicator extension), the agent says so once in its log;
the settings window's "In use now" stays.

Lines on standard output:
  indicator active N APP…      the item is shown, naming N apps
  indicator passive            no app receives: the item is hidden
  indicator-off WHY            no indicator here (no session bus, no library)
  no-status-notifier-watcher   said once: nothing would show the item
  stop APP                     the user chose Stop (EndGrants sent)
  stopped APP ok|error         the daemon answered
  settings-started pid=PID     the user chose Location Settings…
"""

import os
import shutil
import stat
import sys
import time

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import Gio, GLib, Gtk  # noqa: E402

from .common import BUS_NAME, IFACE, OBJECT_PATH, log, shown, translation, warn  # noqa: E402
from .notices import session_bus_available  # noqa: E402
from .seen import Usage, app_line, entry_runs, indicator_title, stop_label  # noqa: E402

_ = translation()[0]
ITEM_ID = "org.geoconsent.Agent.location"
ICON = "org.geoconsent.Agent"
# What the tray shows while location is in use: the icon theme's own "location
# in use" glyph (Adwaita's, as GNOME's top bar shows it), drawn in the panel's
# colour; the agent's own icon where the theme has none.
IN_USE_ICON = "location-services-active-symbolic"
# Seconds between WatchSessions attempts while the daemon refuses them.
WATCH_RETRY_SECONDS = 10
WATCHER = "org.kde.StatusNotifierWatcher"
# SessionsChanged come in bursts (an app starting: session, grant, updates):
# one read of ListSessionDetails after this many ms of quiet.
COALESCE_MS = 150
# While active, the "since …" texts are said again this often.
RETEXT_SECONDS = 30
# Where an administrator's desktop entries are (the daemon's default `desktop-entries`).
ADMIN_ENTRY_DIRS = ("/usr/local/share/applications", "/usr/share/applications")


class Names:
    """An app as a person knows it: the Name of the administrator's desktop
    entry the daemon named it by (a prompt's or a notice's `desktop-entry`,
    remembered per app), else, for an app id that is a program's path, an
    administrator's entry that runs that program; else the app id itself.
    `desktop_entry(path)` reads one entry (agent.py's, which checks it)."""

    def __init__(self, desktop_entry):
        self.desktop_entry = desktop_entry
        self.told = {}      # app id -> entry path the daemon named
        self.scanned = {}   # the administrator's entries, and their directories' stamps

    def learn(self, app_id, details):
        path = details.get("desktop-entry") if isinstance(details, dict) else None
        if isinstance(path, str) and path and isinstance(app_id, str):
            self.told[app_id] = path
            while len(self.told) > 256:
                self.told.pop(next(iter(self.told)))

    def name(self, app_id, details=None):
        self.learn(app_id, details)
        entry = self.desktop_entry(self.told.get(app_id)) or self.desktop_entry(self._scan(app_id))
        if entry is not None:
            return shown(entry.get_name(), 100)
        return shown(app_id, 200)

    def _scan(self, app_id):
        if not isinstance(app_id, str) or not app_id.startswith("/"):
            return None
        entries = self._admin_entries()
        found = [(path, hidden) for path, exec_line, try_exec, hidden in entries
                 if entry_runs(exec_line, try_exec, app_id)]
        shown_ones = [p for p, hidden in found if not hidden] or [p for p, _h in found]
        program = os.path.basename(app_id)
        if len(shown_ones) > 1:
            # Of several, the one named for the program; else none (no guessing).
            shown_ones = [p for p in shown_ones if os.path.basename(p)[:-8] == program
                          or os.path.basename(p)[:-8].endswith("." + program)]
        return shown_ones[0] if len(shown_ones) == 1 else None

    def _admin_entries(self):
        """(path, Exec, TryExec, NoDisplay) of the administrator's entries,
        read again only when one of their directories changed."""
        stamps = tuple(_mtime(d) for d in ADMIN_ENTRY_DIRS)
        if self.scanned.get("stamps") == stamps:
            return self.scanned["entries"]
        entries = []
        for d in ADMIN_ENTRY_DIRS:
            if not _admins(d):
                continue
            try:
                names = sorted(n for n in os.listdir(d) if n.endswith(".desktop"))
            except OSError:
                continue
            for n in names:
                path = os.path.join(d, n)
                if not _admins(path):
                    continue
                try:
                    info = Gio.DesktopAppInfo.new_from_filename(path)
                except (GLib.Error, TypeError):
                    info = None
                if info is None or info.get_is_hidden():
                    continue
                entries.append((path, info.get_string("Exec"), info.get_string("TryExec"), info.get_nodisplay()))
        self.scanned = {"stamps": stamps, "entries": entries}
        return entries


def _mtime(path):
    try:
        st = os.stat(path)
        return (st.st_ino, st.st_mtime_ns)
    except OSError:
        return None


def _admins(path):
    """Root's, and no group or other may write it."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def settings_program():
    """geoconsent-settings beside the agent's launcher (a checkout's
    desktop/, or /usr/bin), else the one on PATH."""
    beside = os.path.join(os.path.dirname(os.path.realpath(sys.argv[0] or ".")), "geoconsent-settings")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("geoconsent-settings")


class Indicator:
    """The StatusNotifierItem of the apps that receive location. One for the
    agent's life: `attach` gives it the daemon's connection once the agent is
    registered, `detach` when the daemon or the bus went."""

    def __init__(self, bus, names):
        self.bus = bus          # the daemon's bus, as the agent was told (for the settings window)
        self.names = names
        self.usage = Usage()
        self.conn = None
        self.sub = 0
        self.timer = 0
        self.retext = 0
        self.reading = 0        # a count: only the last read's answer is taken
        self.item = None
        self.menu = None
        self.state = None
        if not session_bus_available():
            log("indicator-off", "no session bus")
            return
        try:
            gi.require_version("AyatanaAppIndicator3", "0.1")
            from gi.repository import AyatanaAppIndicator3 as AppIndicator
        except (ValueError, ImportError):
            log("indicator-off", "no libayatana-appindicator (Debian package gir1.2-ayatanaappindicator3-0.1)")
            return
        self.AppIndicator = AppIndicator
        theme = Gtk.IconTheme.get_default()
        icon = IN_USE_ICON if theme is not None and theme.has_icon(IN_USE_ICON) else ICON
        self.item = AppIndicator.Indicator.new(ITEM_ID, icon, AppIndicator.IndicatorCategory.SYSTEM_SERVICES)
        data = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "data")
        if icon == ICON and os.path.isfile(os.path.join(data, ICON + ".svg")):  # a checkout: the icon is not installed
            self.item.set_icon_theme_path(os.path.normpath(data))
        self.item.set_title(indicator_title([]))
        self.menu = Gtk.Menu()
        self._fill_menu([])
        self.item.set_menu(self.menu)
        self.item.set_status(AppIndicator.IndicatorStatus.PASSIVE)
        self.watch = Gio.bus_watch_name(Gio.BusType.SESSION, WATCHER, Gio.BusNameWatcherFlags.NONE,
                                        self._watcher_appeared, self._watcher_vanished)
        self.watcher_said = False

    # -- is anything there to show it

    def _watcher_appeared(self, *_):
        self.watcher_said = True

    def _watcher_vanished(self, *_):
        if not self.watcher_said:
            self.watcher_said = True
            warn("geoconsent-agent", "no StatusNotifierWatcher on the session bus: the location indicator is not "
                 "shown (Location Settings lists the apps using location)")
            log("no-status-notifier-watcher")

    # -- the daemon

    def attach(self, conn):
        if self.item is None:
            return
        self.detach()
        self.conn = conn
        self.sub = conn.signal_subscribe(BUS_NAME, IFACE, "SessionsChanged", OBJECT_PATH, None,
                                         Gio.DBusSignalFlags.NONE, lambda *_: self._soon())
        self._watch(conn)

    def _watch(self, conn):
        conn.call(BUS_NAME, OBJECT_PATH, IFACE, "WatchSessions", None, None, Gio.DBusCallFlags.NONE,
                  10000, None, self._watching, conn)
        return False

    def _watching(self, conn, result, _data):
        try:
            conn.call_finish(result)
        except GLib.Error as e:
            # Refused for now (another program of the user holds the uid's
            # watchers, LimitsExceeded): asked again, as registration is.
            log("indicator-off", f"WatchSessions: {e.message}")
            if conn is self.conn:
                GLib.timeout_add_seconds(WATCH_RETRY_SECONDS, lambda: self.conn is conn and self._watch(conn))
            return
        self._soon()

    def detach(self):
        if self.conn is not None and self.sub:
            self.conn.signal_unsubscribe(self.sub)
        self.conn = None
        self.sub = 0
        self.reading += 1
        if self.item is not None and self.usage.update([], os.getuid(), time.time()):
            self._show()

    def _soon(self):
        if not self.timer:
            self.timer = GLib.timeout_add(COALESCE_MS, self._read)

    def _read(self):
        self.timer = 0
        if self.conn is None:
            return False
        self.reading += 1
        self.conn.call(BUS_NAME, OBJECT_PATH, IFACE, "ListSessionDetails", None, GLib.VariantType("(a(sa{sv}))"),
                       Gio.DBusCallFlags.NONE, 10000, None, self._got_sessions, (self.conn, self.reading))
        return False

    def _got_sessions(self, conn, result, data):
        try:
            (sessions,) = conn.call_finish(result).unpack()
        except GLib.Error as e:
            log("indicator-read-failed", e.message)
            return
        if data != (self.conn, self.reading):
            return  # a later read is under way, or the daemon went
        if self.usage.update(sessions, os.getuid(), time.time()):
            self._show()

    # -- what it shows

    def _show(self):
        apps = self.usage.apps()
        now = time.time()
        lines = [app_line(self.names.name(app), acc, since, now) for app, acc, since in apps]
        self.item.set_title(indicator_title(lines))
        self._fill_menu(apps, now)
        active = bool(apps)
        self.item.set_status(self.AppIndicator.IndicatorStatus.ACTIVE if active
                             else self.AppIndicator.IndicatorStatus.PASSIVE)
        if active and not self.retext:
            self.retext = GLib.timeout_add_seconds(RETEXT_SECONDS, self._say_again)
        state = ("active", len(apps), *(app for app, _a, _s in apps)) if active else ("passive",)
        if state != self.state:
            self.state = state
            log("indicator", *(shown(str(w), 4096) for w in state))

    def _say_again(self):
        if not self.usage.since:
            self.retext = 0
            return False
        self._show()
        return True

    def _fill_menu(self, apps, now=None):
        for child in self.menu.get_children():
            self.menu.remove(child)
        for app, acc, since in apps:
            name = self.names.name(app)
            about = Gtk.MenuItem.new_with_label(app_line(name, acc, since, now))
            about.set_sensitive(False)
            self.menu.append(about)
            stop = Gtk.MenuItem.new_with_label(stop_label(name))
            stop.connect("activate", lambda _item, a=app: self.stop(a))
            self.menu.append(stop)
        if apps:
            self.menu.append(Gtk.SeparatorMenuItem())
        settings = Gtk.MenuItem.new_with_label(_("Location Settings…"))
        settings.connect("activate", lambda _item: self.open_settings())
        self.menu.append(settings)
        self.menu.show_all()

    # -- what the user does

    def stop(self, app):
        """Ends the app's grants now (EndGrants); a stored decision stays."""
        if self.conn is None:
            return
        log("stop", shown(app, 4096))

        def done(conn, result, _data):
            try:
                conn.call_finish(result)
                log("stopped", shown(app, 4096), "ok")
            except GLib.Error as e:
                log("stopped", shown(app, 4096), "error", e.message)
            self._soon()
        self.conn.call(BUS_NAME, OBJECT_PATH, IFACE, "EndGrants", GLib.Variant("(sa{sv})", (app, {})), None,
                       Gio.DBusCallFlags.NONE, 10000, None, done, None)

    def open_settings(self):
        program = settings_program()
        if program is None:
            warn("geoconsent-agent", "geoconsent-settings not found")
            return
        try:
            # Its own lines on standard output are for its tests, not the agent's log.
            pid, *_rest = GLib.spawn_async([program, "--bus", self.bus],
                                           flags=GLib.SpawnFlags.DO_NOT_REAP_CHILD | GLib.SpawnFlags.STDOUT_TO_DEV_NULL)
        except GLib.Error as e:
            warn("geoconsent-agent", f"cannot start {program}: {e.message}")
            return
        GLib.child_watch_add(GLib.PRIORITY_DEFAULT, pid, lambda p, _status: GLib.spawn_close_pid(p))
        log("settings-started", f"pid={pid}")


class Seen:
    """What the agent shows of location in use, naming apps alike: the
    indicator, and the notices at silent grants (notices.py)."""

    def __init__(self, bus, desktop_entry):
        from .notices import Notices
        self.names = Names(desktop_entry)
        self.indicator = Indicator(bus, self.names)
        self.notices = Notices(self.names.name)
