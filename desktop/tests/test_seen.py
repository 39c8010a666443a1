"""Unit tests of what a person sees of location in use
(geoconsent_desktop.seen, and the notices' setting file): no bus, no display."""

import os
import tempfile
import time
import unittest
from unittest import mock

from geoconsent_desktop import seen

NOW = time.mktime((2026, 12, 5, 14, 30, 0, 0, 0, -1))
US = 1_000_000


def english():
    """The texts as written (no catalog), whatever the caller's language."""
    import gettext
    t = gettext.NullTranslations()
    return mock.patch.object(seen, "translation", lambda: (t.gettext, t.ngettext))


class RelativeTimeTests(unittest.TestCase):
    def test_ago_says_minutes_hours_days_then_a_date(self):
        with english():
            self.assertEqual(seen.ago_text(NOW - 5, NOW), "just now")
            self.assertEqual(seen.ago_text(NOW - 60, NOW), "1 minute ago")
            self.assertEqual(seen.ago_text(NOW - 150, NOW), "2 minutes ago")
            self.assertEqual(seen.ago_text(NOW - 3600, NOW), "1 hour ago")
            self.assertEqual(seen.ago_text(NOW - 5 * 3600, NOW), "5 hours ago")
            self.assertEqual(seen.ago_text(NOW - 86400, NOW), "1 day ago")
            self.assertEqual(seen.ago_text(NOW - 3 * 86400, NOW), "3 days ago")
            self.assertEqual(seen.ago_text(NOW - 30 * 86400, NOW),
                             time.strftime("%Y-%m-%d", time.localtime(NOW - 30 * 86400)))
            # A time ahead of the clock (a clock stepped back) is not "in -3 minutes".
            self.assertEqual(seen.ago_text(NOW + 180, NOW), "just now")

    def test_last_used_of_a_record(self):
        with english():
            self.assertEqual(seen.last_used_text({}, NOW), "Not used yet")
            self.assertEqual(seen.last_used_text({"last-used": 0}, NOW), "Not used yet")
            self.assertEqual(seen.last_used_text({"last-used": int((NOW - 120) * US)}, NOW), "Last used 2 minutes ago")

    def test_since_within_the_hour_the_day_and_before(self):
        with english():
            self.assertEqual(seen.since_text(NOW - 10, NOW), "since a moment ago")
            self.assertEqual(seen.since_text(NOW - 120, NOW), "since 2 minutes ago")
            self.assertEqual(seen.since_text(NOW - 60, NOW), "since 1 minute ago")
            self.assertEqual(seen.since_text(NOW - 2 * 3600, NOW), "since 12:30")
            self.assertEqual(seen.since_text(NOW - 86400, NOW), "since 2026-12-04 14:30")

    def test_plural_forms_come_from_the_catalog(self):
        asked = []

        def ngettext(one, many, n):
            asked.append((one, many, n))
            return "{n}분 전" if "ago" in one else one
        with mock.patch.object(seen, "translation", lambda: (lambda s: s, ngettext)):
            self.assertEqual(seen.ago_text(NOW - 180, NOW), "3분 전")
        self.assertEqual(asked, [("{n} minute ago", "{n} minutes ago", 3)])


class UsageTests(unittest.TestCase):
    def sessions(self, *apps, uid=1000):
        return [(f":1.{i}", {"uid": uid, "app-id": app, "receiving": receiving, "accuracy": acc})
                for i, (app, receiving, acc) in enumerate(apps)]

    def test_an_app_is_since_when_first_seen_receiving(self):
        u = seen.Usage()
        self.assertTrue(u.update(self.sessions(("/usr/bin/maps", True, "full")), 1000, 100))
        self.assertFalse(u.update(self.sessions(("/usr/bin/maps", True, "full")), 1000, 200))
        self.assertEqual(u.apps(), [("/usr/bin/maps", "full", 100)])
        # It stops, and starts again: since anew.
        self.assertTrue(u.update(self.sessions(("/usr/bin/maps", False, "full")), 1000, 300))
        self.assertEqual(u.apps(), [])
        u.update(self.sessions(("/usr/bin/maps", True, "reduced")), 1000, 400)
        self.assertEqual(u.apps(), [("/usr/bin/maps", "reduced", 400)])

    def test_precise_if_any_session_of_the_app_is(self):
        u = seen.Usage()
        u.update(self.sessions(("a", True, "reduced"), ("a", True, "full"), ("a", True, "reduced")), 1000, 1)
        self.assertEqual(u.apps(), [("a", "full", 1)])
        self.assertTrue(u.update(self.sessions(("a", True, "reduced")), 1000, 2))
        self.assertEqual(u.apps(), [("a", "reduced", 1)])

    def test_other_users_and_odd_sessions_are_not_counted(self):
        u = seen.Usage()
        odd = [(":1.1", {"uid": 1001, "app-id": "b", "receiving": True}),
               (":1.2", {"uid": 1000, "app-id": "", "receiving": True}),
               (":1.3", {"uid": 1000, "app-id": "c", "receiving": 1}),
               (":1.4", "not a dict")]
        self.assertFalse(u.update(odd, 1000, 1))
        self.assertEqual(u.apps(), [])

    def test_the_longest_receiving_comes_first(self):
        u = seen.Usage()
        u.update(self.sessions(("z", True, "full")), 1000, 1)
        u.update(self.sessions(("z", True, "full"), ("a", True, "full")), 1000, 5)
        self.assertEqual([a for a, _acc, _s in u.apps()], ["z", "a"])


class IndicatorTextTests(unittest.TestCase):
    def test_lines_title_and_stop(self):
        with english():
            line = seen.app_line("Maps", "reduced", NOW - 120, NOW)
            self.assertEqual(line, "Maps (approximate, since 2 minutes ago)")
            self.assertEqual(seen.app_line("Maps", "full", NOW - 5, NOW), "Maps (precise, since a moment ago)")
            self.assertEqual(seen.indicator_title([line, "Firefox (precise, since 14:03)"]),
                             "Using your location: Maps (approximate, since 2 minutes ago); Firefox (precise, since 14:03)")
            self.assertEqual(seen.indicator_title([]), "No app is using your location")
            self.assertEqual(seen.stop_label("Maps"), "Stop Maps")


class NoticeTests(unittest.TestCase):
    def test_texts(self):
        with english():
            self.assertEqual(seen.notice_text("Maps", "full", False), ("Maps got your location once", None))
            summary, body = seen.notice_text("Maps", "reduced", True)
            self.assertEqual(summary, "Maps got your approximate location once")
            self.assertIn("Without a verified tap", body)

    def test_once_per_app_per_minute(self):
        g = seen.NoticeGate()
        self.assertTrue(g.allow("maps", 100))
        self.assertFalse(g.allow("maps", 159))
        self.assertTrue(g.allow("other", 120))
        self.assertTrue(g.allow("maps", 160))
        # A clock that went back does not silence an app for good.
        self.assertTrue(g.allow("maps", 10))

    def test_the_gate_remembers_a_bounded_number_of_apps(self):
        g = seen.NoticeGate(memory=3)
        for i, app in enumerate("abcd"):
            self.assertTrue(g.allow(app, i))
        self.assertEqual(list(g.last), ["b", "c", "d"])
        self.assertTrue(g.allow("a", 5))  # forgotten: shown again

    def test_the_setting_and_always(self):
        self.assertTrue(seen.notices_wanted(True, False))
        self.assertFalse(seen.notices_wanted(False, False))
        self.assertTrue(seen.notices_wanted(False, True))


class SettingFileTests(unittest.TestCase):
    def test_on_by_default_kept_with_the_rest_of_the_file(self):
        from geoconsent_desktop import notices
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "geoconsent", "desktop.conf")
            self.assertTrue(notices.read_setting(path))
            notices.write_setting(False, path)
            self.assertFalse(notices.read_setting(path))
            with open(path, "a") as f:
                f.write("[other]\nkey=1\n")
            notices.write_setting(True, path)
            self.assertTrue(notices.read_setting(path))
            with open(path) as f:
                text = f.read()
            self.assertIn("[notices]\nsilent-grants=true", text)
            self.assertIn("[other]\nkey=1", text)
            with open(path, "w") as f:
                f.write("[notices]\nsilent-grants=perhaps\n")
            self.assertTrue(notices.read_setting(path))  # unreadable: the default

    def test_no_session_bus_is_not_made_up(self):
        from geoconsent_desktop import notices
        with tempfile.TemporaryDirectory() as d:
            with mock.patch.dict(os.environ, {"XDG_RUNTIME_DIR": d}, clear=True):
                self.assertFalse(notices.session_bus_available())
                open(os.path.join(d, "bus"), "w").close()
                self.assertTrue(notices.session_bus_available())
            with mock.patch.dict(os.environ, {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"}, clear=True):
                self.assertTrue(notices.session_bus_available())


class LapsedTests(unittest.TestCase):
    def test_what_lapsed_and_when(self):
        at = int(NOW * US)
        with english():
            self.assertIsNone(seen.lapsed_text({"lapsed": "", "lapsed-at": 0}))
            self.assertIsNone(seen.lapsed_text({}))
            text = seen.lapsed_text({"lapsed": "one-time-approved", "lapsed-at": at,
                                     "last-used": at - 90 * 86400 * US})
            self.assertEqual(text, "Not used for 90 days: permission removed \u00b7 on "
                             + time.strftime("%Y-%m-%d", time.localtime(NOW)))
            self.assertTrue(seen.lapsed_text({"lapsed": "when-in-use", "lapsed-at": at, "last-used": at - 86400 * US})
                            .startswith("Not used for 1 day: permission removed"))
            self.assertTrue(seen.lapsed_text({"lapsed": "when-in-use;one-time-approved", "lapsed-at": at, "last-used": 0})
                            .startswith("Not used: permission removed"))


class TapsTests(unittest.TestCase):
    def test_which_desktops_can_tell(self):
        self.assertTrue(seen.taps_verifiable({"DISPLAY": ":0"}, True))
        self.assertFalse(seen.taps_verifiable({"DISPLAY": ":0"}, False))
        self.assertFalse(seen.taps_verifiable({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0",
                                               "XDG_CURRENT_DESKTOP": "GNOME"}, True))
        self.assertTrue(seen.taps_verifiable({"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/run/sway.sock"}, False))
        # KWin on Wayland is not asked: it cannot tell (the agent answers unknown there).
        self.assertFalse(seen.taps_verifiable({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "KDE"}, False))
        self.assertTrue(seen.taps_verifiable({"DISPLAY": ":0", "XDG_CURRENT_DESKTOP": "KDE"}, True))
        self.assertFalse(seen.taps_verifiable({}, True))


class EntryRunsTests(unittest.TestCase):
    def test_exec_and_tryexec(self):
        with tempfile.TemporaryDirectory() as d:
            prog = os.path.join(d, "maps")
            open(prog, "w").close()
            os.chmod(prog, 0o755)
            link = os.path.join(d, "maps-link")
            os.symlink(prog, link)
            # A bare Exec word is looked for on the system's PATH, never the user's:
            # a program in the user's own directory does not take an app's name.
            with mock.patch.dict(os.environ, {"PATH": d}):
                self.assertFalse(seen.entry_runs("maps --new-window", None, prog))
            with mock.patch.object(seen, "SYSTEM_PATH", d):
                self.assertTrue(seen.entry_runs(f"{prog} %U", None, prog))
                self.assertTrue(seen.entry_runs("maps --new-window", None, prog))
                self.assertTrue(seen.entry_runs(f"env GDK_BACKEND=x11 {link} %U", None, prog))
                self.assertTrue(seen.entry_runs("something-else", prog, prog))
                self.assertFalse(seen.entry_runs("other", None, prog))
                self.assertFalse(seen.entry_runs('"unterminated', None, prog))
                self.assertFalse(seen.entry_runs("", None, prog))


class NamesTests(unittest.TestCase):
    """How the indicator and the notices name an app (indicator.Names)."""

    class Entry:
        def __init__(self, name):
            self.name = name

        def get_name(self):
            return self.name

    def test_the_entry_the_daemon_named_else_the_app_id(self):
        from geoconsent_desktop import indicator
        entries = {"/usr/share/applications/maps.desktop": self.Entry("Maps")}
        names = indicator.Names(lambda path: entries.get(path))
        self.assertEqual(names.name("org.example.Maps"), "org.example.Maps")
        # A prompt's or notice's details name it once; later it is remembered.
        self.assertEqual(names.name("org.example.Maps", {"desktop-entry": "/usr/share/applications/maps.desktop"}), "Maps")
        self.assertEqual(names.name("org.example.Maps"), "Maps")
        # An app id is shown safely.
        self.assertEqual(names.name("evil\u202eppa"), "evil\\u202Eppa")

    @unittest.skipUnless(os.geteuid() == 0, "the administrator's entries are root's files")
    def test_an_administrators_entry_that_runs_the_program(self):
        from geoconsent_desktop import indicator
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            prog = os.path.join(d, "maps")
            open(prog, "w").close()
            os.chmod(prog, 0o755)  # GIO reads no entry whose program cannot run
            with open(os.path.join(d, "org.example.Maps.desktop"), "w") as f:
                f.write(f"[Desktop Entry]\nType=Application\nName=Maps\nExec={prog} %U\n")
            with open(os.path.join(d, "other.desktop"), "w") as f:
                f.write("[Desktop Entry]\nType=Application\nName=Other\nExec=/usr/bin/other\n")
            os.chmod(os.path.join(d, "other.desktop"), 0o666)  # others may write it: not the administrator's
            from geoconsent_desktop.agent import desktop_entry
            with mock.patch.object(indicator, "ADMIN_ENTRY_DIRS", (d,)):
                names = indicator.Names(desktop_entry)
                self.assertEqual(names.name(prog), "Maps")
                self.assertEqual(names.name("/usr/bin/other"), "/usr/bin/other")


class NoticesTests(unittest.TestCase):
    """The agent's decision at a Notice (notices.Notices), without libnotify."""

    def notices(self, setting):
        from geoconsent_desktop import notices
        n = notices.Notices(lambda app, details: "Maps")
        shown = []
        n._show = lambda summary, body: shown.append((summary, body))
        patch = mock.patch.object(notices, "read_setting", lambda: setting)
        return n, shown, patch

    def test_shown_when_on_skipped_when_off_unless_always(self):
        n, shown, patch = self.notices(True)
        with patch, english(), mock.patch("geoconsent_desktop.notices.log"):
            n.notice("/usr/bin/maps", "silent-grant", {"accuracy": "full"})
        self.assertEqual(shown, [("Maps got your location once", None)])
        n, shown, patch = self.notices(False)
        with patch, english(), mock.patch("geoconsent_desktop.notices.log"):
            n.notice("/usr/bin/maps", "silent-grant", {"accuracy": "reduced"})
            self.assertEqual(shown, [])
            n.notice("/usr/bin/maps", "silent-grant", {"accuracy": "reduced", "always": True})
        self.assertEqual(len(shown), 1)
        self.assertEqual(shown[0][0], "Maps got your approximate location once")
        self.assertIn("Without a verified tap", shown[0][1])

    def test_other_kinds_and_a_second_notice_within_the_minute_are_not_shown(self):
        n, shown, patch = self.notices(True)
        with patch, english(), mock.patch("geoconsent_desktop.notices.log"):
            n.notice("/usr/bin/maps", "some-later-kind", {})
            n.notice("/usr/bin/maps", "silent-grant", {})
            n.notice("/usr/bin/maps", "silent-grant", {})
        self.assertEqual(len(shown), 1)


if __name__ == "__main__":
    unittest.main()
