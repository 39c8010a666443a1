"""Unit tests of what the desktop programs share (geoconsent_desktop.common):
no bus, no display."""

import os
import unittest
from unittest import mock

from geoconsent_desktop import common


class ShownTests(unittest.TestCase):
    """Text an app chose, as a person sees it: one line, no control or
    format character as itself, bounded."""

    def test_controls_and_bidi_marks_are_written_out(self):
        self.assertEqual(common.shown("Maps\u202eppa metsys"), "Maps\\u202Eppa metsys")
        self.assertEqual(common.shown("a\nb\tc"), "a\\u000Ab\\u0009c")
        self.assertEqual(common.shown("zero\u200bwidth"), "zero\\u200Bwidth")
        self.assertEqual(common.shown("line\u2028sep"), "line\\u2028sep")

    def test_spaces_fold_and_the_length_is_bounded(self):
        self.assertEqual(common.shown("  many   spaces  "), "many spaces")
        self.assertEqual(len(common.shown("x" * 500)), 200)
        self.assertTrue(common.shown("x" * 500).endswith("\u2026"))
        self.assertEqual(len(common.shown("y" * 5000, 4096)), 4096)

    def test_anything_but_a_string_shows_nothing(self):
        for value in (None, 42, b"bytes", ["list"]):
            self.assertEqual(common.shown(value), "")

    def test_ordinary_text_is_unchanged(self):
        for text in ("/usr/bin/gnome-maps", "org.gnome.Maps", "위치 요청", "Standortanfrage"):
            self.assertEqual(common.shown(text), text)


class BusAddressTests(unittest.TestCase):
    def test_well_known_buses_are_asked_for_their_address(self):
        asked = []
        self.assertEqual(common.bus_address("system", lambda b: asked.append(b) or "unix:path=/sys"), "unix:path=/sys")
        self.assertEqual(common.bus_address("session", lambda b: asked.append(b) or "unix:path=/ses"), "unix:path=/ses")
        self.assertEqual(asked, ["system", "session"])

    def test_an_address_is_taken_as_it_is(self):
        self.assertEqual(common.bus_address("unix:path=/tmp/x,guid=1", None), "unix:path=/tmp/x,guid=1")

    def test_anything_else_is_refused_clearly(self):
        for bad in ("", "sytem", "/tmp/socket"):
            with self.assertRaises(ValueError) as e:
                common.bus_address(bad, lambda b: "unused")
            self.assertIn("system, session or a D-Bus address", str(e.exception))


class LocaleTests(unittest.TestCase):
    def test_the_environment_names_the_catalogs(self):
        with mock.patch.dict(os.environ, {"GEOCONSENT_LOCALEDIR": "/opt/locale"}):
            self.assertEqual(common.locale_dir(), "/opt/locale")

    def test_without_it_a_directory_beside_the_installation_or_the_checkout(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            found = common.locale_dir()
        self.assertTrue(found is None or os.path.isdir(found), found)

    def test_translation_falls_back_to_english(self):
        with mock.patch.dict(os.environ, {"GEOCONSENT_LOCALEDIR": "/nonexistent", "LANGUAGE": "ko"}):
            _, ngettext = common.translation()
        self.assertEqual(_("Location request"), "Location request")
        self.assertEqual(ngettext("{n} app", "{n} apps", 2), "{n} apps")


class LauncherTests(unittest.TestCase):
    """The launchers find the package beside them in a checkout, and in
    PREFIX/share/geoconsent/python once installed."""

    def test_each_launcher_names_a_main_of_the_package(self):
        here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        for name, module in (("geoconsent-agent", "agent"), ("geoconsent-settings", "settings")):
            with open(os.path.join(here, name), encoding="utf-8") as f:
                text = f.read()
            self.assertIn(f"from geoconsent_desktop.{module} import main", text)
            self.assertIn('os.path.join(_here, "..", "share", "geoconsent", "python")', text)
            self.assertTrue(os.path.isfile(os.path.join(here, "geoconsent_desktop", module + ".py")))


if __name__ == "__main__":
    unittest.main()
