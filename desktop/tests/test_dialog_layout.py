"""Unit tests of the dialog's layout rules (geoconsent_desktop.dialog_layout):
no bus, no display."""

import unittest

from geoconsent_desktop import dialog_layout as dl


class ContrastTests(unittest.TestCase):
    def test_wcag_ratios(self):
        self.assertAlmostEqual(dl.contrast((0, 0, 0), (1, 1, 1)), 21.0, places=3)
        self.assertAlmostEqual(dl.contrast((1, 1, 1), (1, 1, 1)), 1.0, places=3)
        # The dialog's old red on Adwaita-dark's background: the 1.9:1 that was reported.
        red, dark = (0xb3 / 255, 0x26 / 255, 0x1e / 255), (0x35 / 255, 0x35 / 255, 0x35 / 255)
        self.assertLess(dl.contrast(red, dark), 2.0)

    def test_an_unreadable_colour_is_moved_to_a_readable_one_of_its_hue(self):
        red, dark, light = (0xb3 / 255, 0x26 / 255, 0x1e / 255), (0x35 / 255,) * 3, (0xf6 / 255,) * 3
        on_dark = dl.readable(red, dark)
        self.assertGreaterEqual(dl.contrast(on_dark, dark), dl.MIN_CONTRAST)
        self.assertGreater(on_dark[0], on_dark[2], "still red")
        on_light = dl.readable(red, light)
        self.assertEqual(on_light, red, "already readable on a light theme: kept as the theme has it")
        self.assertEqual(dl.hex_colour(red), "#b3261e")


class KoreanLineBreakTests(unittest.TestCase):
    def test_word_joiners_go_between_syllables_only(self):
        self.assertEqual(dl.keep_words("권한이 끝납니다."), "권\u2060한\u2060이 끝\u2060납\u2060니\u2060다.")
        self.assertEqual(dl.keep_words("GPS 수신기"), "GPS 수\u2060신\u2060기")
        self.assertEqual(dl.keep_words("Allow Once"), "Allow Once", "other scripts are left as they are")
        self.assertEqual(dl.keep_words("<b>정확한 위치</b>"), "<b>정\u2060확\u2060한 위\u2060치</b>")

    def test_breaks_inside_words_are_counted(self):
        text = "앱을 닫으면 권한이 끝납니다."
        self.assertEqual(dl.breaks_inside_words(text, [7]), 0, "at the start of 권한이")
        self.assertEqual(dl.breaks_inside_words(text, [text.index("다")]), 1, "between 끝납니 and 다")
        self.assertEqual(dl.breaks_inside_words(text, [0, len(text)]), 0)


class PlacementTests(unittest.TestCase):
    def test_centred_over_the_parent_and_kept_on_the_screen(self):
        screen = (0, 0, 800, 600)
        self.assertEqual(dl.place_over((200, 150, 400, 300), (300, 200), screen), (250, 200))
        self.assertEqual(dl.place_over((0, 0, 420, 280), (700, 350), screen), (0, 0), "clamped at the top left")
        self.assertEqual(dl.place_over((700, 500, 100, 100), (300, 200), screen), (500, 400), "and at the bottom right")


if __name__ == "__main__":
    unittest.main()
