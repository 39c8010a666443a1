"""How the consent dialog reads for everyone: colours that stay readable on
any theme, Korean lines that break between words, and a place over the app
that asked. Pure functions (no GTK), unit-tested in tests/test_dialog_layout.py."""

# WCAG 2's minimum contrast for normal text (success criterion 1.4.3).
MIN_CONTRAST = 4.5

WORD_JOINER = "\u2060"


def _channel(c):
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb):
    """WCAG 2's relative luminance of an (r, g, b) colour, each 0..1."""
    r, g, b = (_channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    """WCAG 2's contrast ratio of two colours, 1 to 21."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def readable(fg, bg, minimum=MIN_CONTRAST):
    """`fg`, or the nearest colour of its hue that reaches `minimum` contrast
    on `bg`: mixed towards white on a dark background, towards black on a
    light one, in small steps, so that the theme's error colour stays the
    theme's as far as it can."""
    target = (1.0, 1.0, 1.0) if luminance(bg) < 0.18 else (0.0, 0.0, 0.0)
    colour = tuple(fg)
    for step in range(0, 101):
        t = step / 100
        colour = tuple(c + (w - c) * t for c, w in zip(fg, target))
        if contrast(colour, bg) >= minimum:
            return colour
    return colour


def hex_colour(rgb):
    return "#" + "".join(f"{round(max(0.0, min(1.0, c)) * 255):02x}" for c in rgb)


def _hangul(ch):
    o = ord(ch)
    # Syllables, and the jamo a syllable can be written with.
    return 0xAC00 <= o <= 0xD7A3 or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F


def keep_words(text):
    """Korean keeps its words whole when a line wraps: Unicode's line breaking
    allows a break between any two Hangul syllables (class H2/H3), as for
    Chinese, while Korean is written with spaces between words and is read
    broken there (CSS's `word-break: keep-all`). A word joiner between two
    syllables forbids that break; spaces stay where a line may break."""
    out = []
    for i, ch in enumerate(text):
        if i and _hangul(ch) and _hangul(text[i - 1]):
            out.append(WORD_JOINER)
        out.append(ch)
    return "".join(out)


def breaks_inside_words(text, line_starts):
    """How many of the line starts (character offsets into `text`, the first
    line's left out) fall between two Hangul letters of one word."""
    n = 0
    for start in line_starts:
        if 0 < start < len(text):
            before, after = text[start - 1], text[start]
            if _hangul(before) and _hangul(after):
                n += 1
    return n


def place_over(parent, size, screen):
    """Where a dialog of `size` (w, h) goes to sit centred over the window
    `parent` (x, y, w, h), kept inside `screen` (x, y, w, h)."""
    px, py, pw, ph = parent
    w, h = size
    sx, sy, sw, sh = screen
    x = px + (pw - w) // 2
    y = py + (ph - h) // 2
    x = max(sx, min(x, sx + sw - w))
    y = max(sy, min(y, sy + sh - h))
    return x, y
