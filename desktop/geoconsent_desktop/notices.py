"""The notice at a silent grant (docs/dbus-api.md, "Agent interface",
`Notice`): a passing notification through libnotify
(org.freedesktop.Notifications on the session bus), and the user's switch
for it, kept in $XDG_CONFIG_HOME/geoconsent/desktop.conf:

    [notices]
    silent-grants=true

read at each notice (the settings window writes it). On by default; a notice
whose `always` is true (the desktop could not tell a real tap) shows anyway.
"""

import os
import time

from gi.repository import GLib

from .common import log, shown
from .seen import NoticeGate, notice_text, notices_wanted

GROUP = "notices"
KEY = "silent-grants"


def config_path():
    return os.path.join(GLib.get_user_config_dir(), "geoconsent", "desktop.conf")


def read_setting(path=None):
    """The user's switch: true unless the file says false."""
    kf = GLib.KeyFile()
    try:
        kf.load_from_file(path or config_path(), GLib.KeyFileFlags.KEEP_COMMENTS)
        return kf.get_boolean(GROUP, KEY)
    except GLib.Error:
        return True


def write_setting(on, path=None):
    """Keeps the switch, and whatever else the file holds."""
    path = path or config_path()
    kf = GLib.KeyFile()
    try:
        kf.load_from_file(path, GLib.KeyFileFlags.KEEP_COMMENTS)
    except GLib.Error:
        pass
    kf.set_boolean(GROUP, KEY, bool(on))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    kf.save_to_file(path)


def session_bus_available():
    """A session bus to show notifications and the indicator on, without
    starting one: GIO would otherwise autolaunch a bus of its own
    (dbus-launch) for a program that has none."""
    if os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return True
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return bool(runtime) and os.path.exists(os.path.join(runtime, "bus"))


class Notices:
    """Shows each `silent-grant` notice the daemon sends: once per app per
    minute at most, when the user wants them or the notice says `always`.
    `name_of(app_id, details)` names the app as the indicator does."""

    def __init__(self, name_of):
        self.name_of = name_of
        self.gate = NoticeGate()
        self.notify = None      # the Notify module, once initialised
        self.failed = False     # said once: no notifications here
        self.shown = []         # the notifications on screen (kept so they are not collected)

    def notice(self, app_id, kind, details):
        if kind != "silent-grant":
            return  # kinds of later contracts: not ours to show
        always = details.get("always") is True
        setting = read_setting()
        accuracy = "reduced" if details.get("accuracy") == "reduced" else "full"
        if not notices_wanted(setting, always):
            log("notice", shown(app_id, 4096), "skipped=setting-off")
            return
        if not self.gate.allow(app_id, time.monotonic()):
            log("notice", shown(app_id, 4096), "skipped=rate")
            return
        name = self.name_of(app_id, details)
        summary, body = notice_text(name, accuracy, always)
        log("notice", shown(app_id, 4096), f"accuracy={accuracy}", f"always={1 if always else 0}",
            f"focus={shown(details.get('focus')) or '-'}", f"text={summary}" + (f" / {body}" if body else ""))
        self._show(summary, body)

    def _show(self, summary, body):
        if self.failed:
            return
        if self.notify is None:
            if not session_bus_available():
                return self._fail("no session bus: notices are not shown")
            try:
                import gi
                gi.require_version("Notify", "0.7")
                from gi.repository import Notify
            except (ValueError, ImportError):
                return self._fail("libnotify is missing (Debian package gir1.2-notify-0.7): notices are not shown")
            if not Notify.init("geoconsent"):
                return self._fail("libnotify did not start: notices are not shown")
            self.notify = Notify
        caps = self.notify.get_server_caps() or []
        if body and "body-markup" in caps:
            body = GLib.markup_escape_text(body, -1)
        n = self.notify.Notification.new(summary, body, "org.geoconsent.Agent")
        n.set_hint("desktop-entry", GLib.Variant("s", "org.geoconsent.Agent"))
        n.set_hint("transient", GLib.Variant("b", True))
        n.set_urgency(self.notify.Urgency.NORMAL)
        n.set_category("device")
        try:
            n.show()
        except GLib.Error as e:
            log("notice-failed", e.message)
            return
        self.shown.append(n)
        n.connect("closed", lambda note: note in self.shown and self.shown.remove(note))
        del self.shown[:-8]

    def _fail(self, why):
        self.failed = True
        log("notices-off", why)
