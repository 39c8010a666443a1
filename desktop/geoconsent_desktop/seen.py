"""What a person sees of location in use, as words: relative times, the
indicator's lines, the notice at a silent grant, the lapsed decisions, and
whether this desktop can tell a real tap. Pure (no GTK, no bus): the agent's
indicator and notices and the settings window use it, and desktop/tests
test it. Every text goes through gettext (domain "geoconsent")."""

import os
import shlex
import time

from .common import translation

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR
# Beyond this a time is said as a date, not as "N days ago".
WEEK = 7 * DAY

# The agent shows one notice per app per this many seconds at most (the
# daemon already sends no more; docs/dbus-api.md "Agent interface").
NOTICE_INTERVAL = 60
# How many apps' last notice times the agent keeps.
NOTICE_MEMORY = 64


def _tr():
    return translation()


def ago_text(then, now):
    """`then` (seconds since the epoch) said relative to `now`, in the
    user's language: "just now", "2 minutes ago", "3 hours ago", "3 days
    ago"; a date (YYYY-MM-DD) beyond a week."""
    _, ngettext = _tr()
    delta = max(0, int(now - then))
    if delta < MINUTE:
        return _("just now")
    if delta < HOUR:
        n = delta // MINUTE
        return ngettext("{n} minute ago", "{n} minutes ago", n).format(n=n)
    if delta < DAY:
        n = delta // HOUR
        return ngettext("{n} hour ago", "{n} hours ago", n).format(n=n)
    if delta < WEEK:
        n = delta // DAY
        return ngettext("{n} day ago", "{n} days ago", n).format(n=n)
    return time.strftime("%Y-%m-%d", time.localtime(then))


def last_used_text(record, now):
    """The settings window's "Last used …" of a consent record (`last-used`,
    microseconds since the epoch, 0 for never)."""
    _ = _tr()[0]
    t = record.get("last-used")
    if not isinstance(t, int) or t <= 0:
        return _("Not used yet")
    return _("Last used {when}").format(when=ago_text(t / 1e6, now))


def since_text(since, now):
    """Since when an app receives location, for the indicator: "since 2
    minutes ago" within the hour, "since 14:03" the same day, else "since
    2026-12-04 14:03"."""
    _, ngettext = _tr()
    delta = max(0, int(now - since))
    if delta < MINUTE:
        return _("since a moment ago")
    if delta < HOUR:
        n = delta // MINUTE
        return ngettext("since {n} minute ago", "since {n} minutes ago", n).format(n=n)
    if time.localtime(since)[:3] == time.localtime(now)[:3]:
        return _("since {time}").format(time=time.strftime("%H:%M", time.localtime(since)))
    return _("since {time}").format(time=time.strftime("%Y-%m-%d %H:%M", time.localtime(since)))


def accuracy_word(accuracy):
    """`full` or `reduced` (ListSessionDetails' `accuracy`, a notice's) as a word."""
    _ = _tr()[0]
    return _("approximate") if accuracy == "reduced" else _("precise")


class Usage:
    """Which of the user's apps receive location now, and since when (the
    agent's own clock: when it first saw the app receiving). `update` takes
    ListSessionDetails' sessions; an app that stops receiving is forgotten,
    and is "since" anew when it starts again."""

    def __init__(self):
        self.since = {}     # app id -> seconds since the epoch
        self.accuracy = {}  # app id -> full | reduced

    def update(self, sessions, uid, now):
        """`sessions`: (unique name, details) pairs. True when what is shown changed."""
        receiving = {}
        for _name, d in sessions:
            if not isinstance(d, dict) or d.get("uid") != uid or d.get("receiving") is not True:
                continue
            app = d.get("app-id")
            if not isinstance(app, str) or not app:
                continue
            acc = "full" if d.get("accuracy") == "full" else "reduced"
            # Several sessions of one app: precise if any of them is.
            receiving[app] = "full" if receiving.get(app) == "full" else acc
        before = (dict(self.since), dict(self.accuracy))
        self.since = {app: self.since.get(app, now) for app in receiving}
        self.accuracy = receiving
        return before != (self.since, self.accuracy)

    def apps(self):
        """(app id, accuracy, since), the longest receiving first."""
        return sorted(((a, self.accuracy[a], self.since[a]) for a in self.since), key=lambda t: (t[2], t[0]))


def app_line(name, accuracy, since, now):
    """One app as the indicator's menu and tooltip say it."""
    _ = _tr()[0]
    return _("{app} ({accuracy}, {since})").format(app=name, accuracy=accuracy_word(accuracy),
                                                   since=since_text(since, now))


def indicator_title(lines):
    """The indicator's title (its tooltip in tray hosts): who uses location."""
    _ = _tr()[0]
    if not lines:
        return _("No app is using your location")
    return _("Using your location: {apps}").format(apps="; ".join(lines))


def stop_label(name):
    _ = _tr()[0]
    return _("Stop {app}").format(app=name)


def notice_text(name, accuracy, always):
    """The passing notification at a silent grant: (summary, body or None).
    `always`: the desktop could not tell a real tap, and it says so."""
    _ = _tr()[0]
    if accuracy == "reduced":
        summary = _("{app} got your approximate location once").format(app=name)
    else:
        summary = _("{app} got your location once").format(app=name)
    body = _("Without a verified tap: this desktop cannot tell whether you tapped the app's button.") if always else None
    return summary, body


class NoticeGate:
    """One notice per app per NOTICE_INTERVAL seconds at most, remembering
    NOTICE_MEMORY apps (the oldest forgotten first)."""

    def __init__(self, interval=NOTICE_INTERVAL, memory=NOTICE_MEMORY):
        self.interval = interval
        self.memory = memory
        self.last = {}

    def forget(self, app_id):
        """The user allowed the app anew: its next silent grant is told at once."""
        self.last.pop(app_id, None)

    def allow(self, app_id, now):
        t = self.last.get(app_id)
        if t is not None and 0 <= now - t < self.interval:
            return False
        self.last.pop(app_id, None)
        self.last[app_id] = now
        while len(self.last) > self.memory:
            self.last.pop(next(iter(self.last)))
        return True


def notices_wanted(setting_on, always):
    """Whether a silent grant's notice is shown: on by default, off when the
    user switched notices off, unless the desktop could not tell a real tap."""
    return bool(setting_on or always)


def lapsed_text(record):
    """A lapsed record's line in the settings window ("Decisions that
    lapse"): what went and when, or None for a record that did not lapse."""
    _, ngettext = _tr()
    lapsed = record.get("lapsed")
    if not isinstance(lapsed, str) or not lapsed:
        return None
    at = record.get("lapsed-at") if isinstance(record.get("lapsed-at"), int) else 0
    used = record.get("last-used") if isinstance(record.get("last-used"), int) else 0
    # Only permissions lapse (when-in-use, the button's confirmation): a denial never does.
    if used > 0 and at > used:
        n = (at - used) // (DAY * 1_000_000)
        text = ngettext("Not used for {n} day: permission removed",
                        "Not used for {n} days: permission removed", n).format(n=n)
    else:
        text = _("Not used: permission removed")
    if at > 0:
        text += " \u00b7 " + _("on {date}").format(date=time.strftime("%Y-%m-%d", time.localtime(at / 1e6)))
    return text


def taps_verifiable(env, x11_active_window):
    """Whether the agent can tell the app in front when an approved app taps
    (docs/dbus-api.md, CheckFocus): sway (its IPC), KDE (KWin), X11 with a
    window manager that keeps _NET_ACTIVE_WINDOW. GNOME on Wayland and a
    bare X server cannot: approved apps then get one-time location without a
    tap. `x11_active_window`: the X screen's window manager supports
    _NET_ACTIVE_WINDOW."""
    if env.get("SWAYSOCK"):
        return True
    # KWin on Wayland is not asked (the agent answers "cannot tell" there):
    # KDE counts only on X11, below, like any window manager.
    if env.get("WAYLAND_DISPLAY"):
        return False
    return bool(env.get("DISPLAY") and x11_active_window)


# Where a desktop entry's bare Exec word is looked for: the daemon's fixed
# list (GeoSystem's DesktopEntries), never the user's PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def entry_runs(exec_line, try_exec, program):
    """Whether a desktop entry runs `program` (an absolute path): its
    TryExec, or its Exec's first word after `env` and its VAR=value words,
    found on the system's PATH (the daemon's: a program the user put in
    ~/.local/bin must not take the name of an installed app); symbolic links
    resolved."""
    def resolve(word):
        if not word:
            return None
        if not word.startswith("/"):
            for d in SYSTEM_PATH.split(":"):
                if d and os.path.isfile(os.path.join(d, word)):
                    word = os.path.join(d, word)
                    break
            else:
                return None
        return os.path.realpath(word)

    target = os.path.realpath(program)
    if try_exec and resolve(try_exec) == target:
        return True
    try:
        words = shlex.split(exec_line or "")
    except ValueError:
        return False
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    return bool(words) and resolve(words[0]) == target
