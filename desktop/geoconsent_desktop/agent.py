"""geoconsent-agent: the graphical consent agent of geoconsent.

Registers with geoconsentd (RegisterAgentWithOptions, features notices and
focus; RegisterAgent with an older daemon) for the uid it runs as, and shows
every Confirm the daemon sends as a GTK dialog:

  * who asks: the app-id the daemon resolved from the caller's credentials,
    and how sure the daemon is of it (the details' `identity` and
    `identity-proven`: a verified Flatpak or a Snap, a program of a system
    user, or a name the app's own program shows, marked "not verified"), the
    name the app gives itself (shown as "calls itself", not verified), the
    process id, "sandboxed", and the executable;
  * what it asks: one-time ("Allow Once" / "Don't Allow", the location
    button) or when-in-use ("Allow Once" / "Allow While Using App" /
    "Don't Allow", the standard prompt), precise or approximate; for a
    precise request, a "Precise location" switch (on by default): turned off,
    the answer allows the approximate location only (`allow-once-reduced`,
    `allow-while-using-reduced`);
  * the reason the app gives (quoted, not verified).

Replies go out asynchronously (GDBus method invocations are answered from the
button handlers; nothing ever blocks the GTK main loop). Cancel withdraws the
dialog. Several prompts queue: one dialog at a time, in arrival order, and the
dialog says how many more are waiting.

Why GTK 3 through PyGObject (python3-gi, gir1.2-gtk-3.0)
---------------------------------------------------------
* It is what desktop users already have: GNOME, Xfce, MATE, Cinnamon and
  Budgie all ship GTK 3 and python3-gi, so the agent adds no dependency to a
  desktop install and looks like the rest of the desktop.
* A consent prompt has to be a trusted, separate window owned by the user's
  session, not by the app: the app cannot draw into it, dismiss it, press its
  buttons through D-Bus, or answer in its place (only the reply of the agent's
  own connection counts, and the daemon only talks to the registered agent).
  On Wayland the compositor also keeps other clients from reading or faking
  input into it. (On X11 any client of the display can draw over or send
  synthetic input to any window; GTK drops synthetic (XSendEvent) key and
  button events, and the buttons here only arm ARM_DELAY_MS after the dialog
  appears, so a click aimed at the app cannot land on "Allow" by surprise.
  Nothing moves an armed button either: the "more requests waiting" line
  keeps its place whether it says anything or not (an app can queue a
  request at any moment), and if anything else moves a button or the switch
  (a longer text after Precise is switched off), they are disarmed and arm
  again ARM_DELAY_MS later, where they are now.
  X11 itself cannot give more.) Even a perfect fake of this dialog, drawn by
  an app, grants nothing: the decision travels only as this process's reply.
* A dialog can show everything the decision needs: the verified app-id next
  to the untrusted self-chosen name, the reason, precise vs. approximate,
  three buttons. Notifications with actions (org.freedesktop.Notifications)
  cannot promise that: action support is optional, servers expire or hide
  notifications ("do not disturb"), and a notification cannot be told apart
  from one the app sends itself. zenity runs one process per prompt, cannot
  be withdrawn except by killing it, and its button set varies by version.

Only the daemon (the current owner of org.geoconsent.GeoConsent1) may call
Confirm and Cancel; any other caller gets AccessDenied, so an app cannot pop
up or withdraw prompts itself. It starts the daemon if it is not running (bus
activation), so that it is registered before the user's first tap. If the
daemon restarts, the agent registers again; if the bus goes away (a restart
of dbus), it connects again every 2 s until the bus is back. It is started
with the desktop session by its XDG autostart entry
(/etc/xdg/autostart/org.geoconsent.Agent.desktop, which systemd's user
manager also runs, as a unit of xdg-desktop-autostart.target).

Lines on standard output (for logs and for desktop/test-desktop.sh):
  registered uid=UID path=PATH features=F,F|-
  prompt ID kind=KIND app-id=APP queued=N      a Confirm arrived
  identity ID kind=KIND proven=0|1             what the app id rests on
  shown ID                                     its dialog is on screen
  ready ID window=XID NAME=X,Y,W,H ...         its buttons accept clicks
                                               (rectangles relative to the
                                               dialog window, NAME = decision,
                                               or precise = the Precise switch)
  moved ID                                     a button or the switch moved: all
                                               are disarmed, and a new ready line
                                               follows ARM_DELAY_MS later
  precise ID on|off NAME=X,Y,W,H ...           the switch was turned; where the
                                               buttons are now, armed (after the
                                               ready line, if they moved)
  answered ID DECISION
  withdrawn ID                                 Cancel, or the daemon left
  notice APP accuracy=A always=0|1 focus=F text=T   a silent grant's notice shown
                                               (or skipped=setting-off|rate)
  indicator active N APP… | indicator passive  and stop/stopped lines: indicator.py
"""

import argparse
import os
import signal
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, Gio, GLib, Gtk, Pango  # noqa: E402

from .common import (ARM_DELAY_MS, BUS_NAME, IFACE, OBJECT_PATH, RECONNECT_SECONDS, add_bus_argument,  # noqa: E402
                     connect, log, shown, source_name, translation, warn as common_warn)
from .dialog_layout import (breaks_inside_words, contrast, hex_colour, keep_words, place_over,  # noqa: E402
                            readable)
from .focus import FocusWatcher, to_variants  # noqa: E402
from .indicator import Seen  # noqa: E402
from .notices import session_bus_available  # noqa: E402

try:
    gi.require_foreign("cairo")  # the drawn location arrow
except ImportError:
    sys.exit("geoconsent-agent: needs python3-gi-cairo (Debian package) for drawing")

try:
    gi.require_version("GdkX11", "3.0")
    from gi.repository import GdkX11  # noqa: F401,E402  (window XIDs in the log)
except (ValueError, ImportError):
    GdkX11 = None

# Every string the user sees goes through gettext (domain "geoconsent", po/).
_, ngettext = translation()
AGENT_PATH = "/org/geoconsent/desktop/Agent"
WINDOW_TITLE = _("Location request")

# Why an approved app's tap is asked (the daemon's `tap-not-verified`), translated when shown.
TAP_DOUBTS = {
    "behind": lambda: _("It asked while another window was in front, not with a tap on its button."),
    "no-press": lambda: _("It asked without a click or touch in its window."),
    "unchecked": lambda: _("Whether you tapped its button could not be checked."),
}

# Seconds between registration attempts while another agent of this uid holds the slot.
SLOT_RETRY_SECONDS = 2
# What this agent serves beyond Confirm and Cancel (RegisterAgentWithOptions):
# Notice at a silent grant, CheckFocus before one.
FEATURES = ["notices", "focus"]

AGENT_XML = """
<node>
  <interface name="org.geoconsent.GeoConsent1.Agent">
    <method name="Confirm">
      <arg name="request_id" type="s" direction="in"/>
      <arg name="app_id" type="s" direction="in"/>
      <arg name="kind" type="s" direction="in"/>
      <arg name="details" type="a{sv}" direction="in"/>
      <arg name="decision" type="s" direction="out"/>
    </method>
    <method name="Cancel">
      <arg name="request_id" type="s" direction="in"/>
    </method>
    <method name="Notice">
      <arg name="app_id" type="s" direction="in"/>
      <arg name="kind" type="s" direction="in"/>
      <arg name="details" type="a{sv}" direction="in"/>
    </method>
    <method name="CheckFocus">
      <arg name="pid" type="u" direction="in"/>
      <arg name="details" type="a{sv}" direction="in"/>
      <arg name="answer" type="a{sv}" direction="out"/>
    </method>
  </interface>
</node>
"""

# What the app id rests on (the details' `identity`, docs/dbus-api.md
# "What each identity proves"): the line the dialog shows for it, when the
# daemon holds it proven and when not (None: that case does not arise).
IDENTITY_TEXT = {
    "flatpak": (_("Verified Flatpak app, installed system-wide by your administrator."), None),
    "snap": (_("Snap app, confined by the system under its profile."), None),
    "flatpak-unverified": (None, _("Claims to be a Flatpak app, but this could not be verified.")),
    "systemd-unit": (_("A system service."),
                     _("Not verified: the name comes from the app's own program (its systemd unit), "
                       "which any program of yours can choose.")),
    "executable": (_("A program of the system, installed by your administrator."),
                   _("Not verified: this is the path of the program that asks, "
                     "which any program of yours can show.")),
    "script": (_("A script of the system, installed by your administrator."),
               _("Not verified: this is the path of the script that asks, "
                 "which any program of yours can show.")),
}
# For an unproven program that is not one the administrator installed
# (`program-installed` false): it lives where the user's own programs can
# change it. Shown in the dialog itself, in the warning colour.
UNINSTALLED_WARNING = _("Not verified, and the program is in a place your own programs can change: "
                        "it could be any program.")
# For an unproven program that the administrator installed: said under Details, in no warning colour.
INSTALLED_NOTE = _("Installed on this system. Not verified as this app: any program of yours "
                   "could ask under its name.")
UNKNOWN_IDENTITY = _("Not verified: the location service did not say how it identified the app.")

# With mnemonics (Alt+letter); "deny" is the safe answer the focus starts on.
ANSWERS = {
    "one-time": [("deny", _("_Don't Allow")), ("allow-once", _("Allow _Once"))],
    "when-in-use": [("deny", _("_Don't Allow")), ("allow-while-using", _("Allow _While Using App")),
                    ("allow-once", _("Allow _Once"))],
    # The user's own switch for their apps (SetUserLocation): allow-once switches it on.
    "location-on": [("deny", _("_Keep Off")), ("allow-once", _("_Switch On"))],
}
# The widest the text column may be, in characters: labels wrap there.
COLUMN_CHARS = 52

CSS = b"""
window.geoconsent-prompt { border: 1px solid alpha(black, 0.35); }
.geoconsent-prompt .headline { font-size: 13pt; font-weight: bold; }
.geoconsent-prompt .untrusted { font-style: italic; }
.geoconsent-prompt .unverified { font-weight: bold; }
.geoconsent-prompt .reason-box { background-color: alpha(currentColor, 0.06); border-radius: 6px; padding: 8px 10px; }
.geoconsent-prompt .waiting { font-size: 9pt; opacity: 0.75; }
.geoconsent-prompt .details { font-size: 9pt; opacity: 0.85; }
.geoconsent-prompt button { padding: 4px 14px; }
"""


def warn(msg):
    common_warn("geoconsent-agent", msg)


def esc(text):
    return GLib.markup_escape_text(text, -1)


def parent_window_of(value):
    """The app's window from `parent-window` (as the portal writes it:
    `x11:XID` in hex, `wayland:HANDLE`), or None. The app chose it: it only
    places the dialog, and anything else is ignored."""
    if not isinstance(value, str):
        return None
    kind, _, handle = value.partition(":")
    if kind == "x11" and 0 < len(handle) <= 8 and all(c in "0123456789abcdefABCDEF" for c in handle):
        return ("x11", int(handle, 16))
    if kind == "wayland" and 0 < len(handle) <= 256 and handle.isprintable() and " " not in handle:
        return ("wayland", handle)
    return None


# The error colour in use, from the theme, made readable on its background
# (the theme's own red can be 1.9:1 on a dark theme); set once for the screen.
ERROR_CSS = None


def say_colours(window, request_id):
    """Takes the theme's error colour, moved as little as needed to reach WCAG's
    4.5:1 on the dialog's background, and says what came of it."""
    global ERROR_CSS
    ctx = window.get_style_context()
    found_bg, bg = ctx.lookup_color("theme_bg_color")
    found_fg, fg = ctx.lookup_color("error_color")
    bg_rgb = (bg.red, bg.green, bg.blue) if found_bg else (1.0, 1.0, 1.0)
    fg_rgb = (fg.red, fg.green, fg.blue) if found_fg else (0xb3 / 255, 0x26 / 255, 0x1e / 255)
    colour = readable(fg_rgb, bg_rgb)
    if ERROR_CSS is None:
        ERROR_CSS = Gtk.CssProvider()
        Gtk.StyleContext.add_provider_for_screen(window.get_screen(), ERROR_CSS,
                                                 Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION + 1)
    ERROR_CSS.load_from_data(f".geoconsent-prompt .unverified {{ color: {hex_colour(colour)}; }}".encode())
    log("colours", request_id, f"theme-error={hex_colour(fg_rgb)}", f"error={hex_colour(colour)}",
        f"background={hex_colour(bg_rgb)}", f"contrast={contrast(colour, bg_rgb):.2f}")


def desktop_entry(path):
    """The administrator's desktop entry the daemon named the app by
    (`desktop-entry`, docs/dbus-api.md "Agent interface"), or None. Read from
    that path only: a same-named entry of the user's own could say anything."""
    if not isinstance(path, str) or not path.startswith("/") or not path.endswith(".desktop"):
        return None
    try:
        info = Gio.DesktopAppInfo.new_from_filename(path)
    except GLib.Error:
        return None
    return info if info is not None and shown(info.get_name(), 100) else None


def draw_location_arrow(cr, size, rgba, filled=True):
    """The location arrow (a navigation arrow pointing north-east), in a
    size x size square."""
    pts = [(0.88, 0.12), (0.12, 0.45), (0.50, 0.50), (0.55, 0.88)]
    cr.set_source_rgba(rgba.red, rgba.green, rgba.blue, rgba.alpha)
    cr.set_line_join(1)  # round
    cr.move_to(pts[0][0] * size, pts[0][1] * size)
    for x, y in pts[1:]:
        cr.line_to(x * size, y * size)
    cr.close_path()
    if filled:
        cr.fill_preserve()
        cr.set_line_width(max(1.0, size * 0.06))
        cr.stroke()
    else:
        cr.set_line_width(max(1.0, size * 0.08))
        cr.stroke()


class Prompt:
    def __init__(self, request_id, app_id, kind, details, invocation):
        self.request_id = request_id
        self.app_id = app_id
        self.kind = kind
        self.details = details
        self.invocation = invocation
        self.window = None
        # The administrator's entry the daemon named the app by, read once.
        self.entry = desktop_entry(details.get("desktop-entry"))

    def reply(self, decision):
        if self.invocation is not None:
            self.invocation.return_value(GLib.Variant("(s)", (decision,)))
            self.invocation = None

    def reply_withdrawn(self):
        # The daemon ignores answers to a withdrawn prompt; answer with an
        # error so the pending call is closed and cannot read as a decision.
        if self.invocation is not None:
            self.invocation.return_dbus_error("org.freedesktop.DBus.Error.Failed",
                                              "The request was withdrawn")
            self.invocation = None


class PromptWindow(Gtk.Window):
    """One dialog for one prompt. on_answer(decision) is called once."""

    def __init__(self, prompt, waiting, on_answer):
        super().__init__(title=WINDOW_TITLE)
        self.prompt = prompt
        self.on_answer = on_answer
        self.answered = False
        self.buttons = {}
        self.precise_switch = None
        # Armed: the buttons and the switch take clicks, at armed_rects.
        self.armed = False
        self.armed_rects = None
        self.arm_timer = 0
        # Lines to log once armed where the controls are now ("precise …").
        self.pending_notes = []
        self.set_type_hint(Gdk.WindowTypeHint.DIALOG)
        self.parent_window = parent_window_of(prompt.details.get("parent-window"))
        # Over the app that asked when it named its window; else in the middle.
        self.set_position(Gtk.WindowPosition.NONE if self.parent_window else Gtk.WindowPosition.CENTER)
        self.set_keep_above(True)
        self.set_urgency_hint(True)
        self.set_resizable(False)
        self.set_border_width(0)
        self.get_style_context().add_class("geoconsent-prompt")
        # Closing the window is no answer: nothing is stored, the request
        # gets the status that applies (docs/dbus-api.md: "any other answer").
        self.connect("delete-event", self._on_delete)
        self.connect("key-press-event", self._on_key)
        self.connect("realize", self._on_realize)
        self.focus_set = False
        self.wrap_said = False

        d = prompt.details
        if prompt.kind == "location-on":
            self._build_location_on(d, waiting)
            return
        accuracy = d.get("accuracy") if isinstance(d.get("accuracy"), str) else "full"
        precise = accuracy != "reduced"
        app_name = shown(d.get("app-name", ""))
        reason = shown(d.get("reason", ""))
        pid = d.get("pid")
        executable = shown(d.get("executable"), 4096)
        app_id = shown(prompt.app_id, 4096)
        sandboxed = d.get("sandboxed") is True
        identity = d.get("identity") if isinstance(d.get("identity"), str) else ""
        proven = d.get("identity-proven") is True
        verified_text, unverified_text = IDENTITY_TEXT.get(identity, (None, None))
        identity_text = verified_text if proven and verified_text else (unverified_text or UNKNOWN_IDENTITY)
        identity_proven = proven and verified_text is not None
        script = shown(d.get("script"), 4096)
        installed = d.get("program-installed") is True
        entry = prompt.entry
        self.entry_name = shown(entry.get_name(), 100) if entry else ""
        # What the dialog itself says of the identity: a proven one, or a
        # warning where one is deserved (a claimed sandbox, a program where the
        # user's programs can change it). An installed program's unproven id
        # is no alarm: that note goes under Details with the rest.
        if identity_proven:
            main_identity, main_class = identity_text, None
        elif identity == "flatpak-unverified" or identity not in IDENTITY_TEXT:
            main_identity, main_class = identity_text, "unverified"
        elif installed:
            main_identity, main_class = None, None
        else:
            main_identity, main_class = UNINSTALLED_WARNING, "unverified"

        outer = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=16)
        outer.set_margin_top(20)
        outer.set_margin_bottom(16)
        outer.set_margin_start(20)
        outer.set_margin_end(20)
        self.add(outer)

        app_icon = entry.get_icon() if entry else None
        if app_icon is not None:
            # The app's own icon, from the administrator's entry, as a person knows the app.
            icon = Gtk.Image.new_from_gicon(app_icon, Gtk.IconSize.DIALOG)
            icon.set_pixel_size(48)
        else:
            icon = Gtk.DrawingArea()
            icon.set_size_request(44, 44)
            blue = Gdk.RGBA()
            blue.parse("#1a73e8")
            icon.connect("draw", lambda _w, cr: draw_location_arrow(cr, 44, blue, True))
        icon.set_valign(Gtk.Align.START)
        outer.pack_start(icon, False, False, 0)

        col = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        outer.pack_start(col, True, True, 0)

        # The headline names the app as a person knows it: its desktop entry's
        # Name, else its id; marked whenever the daemon does not hold it proven
        # (a program of the user's can show an installed program's path and so
        # its entry's name: the tone, not the mark, depends on the program).
        named = self.entry_name or app_id
        if identity_proven:
            self.headline_app = f"<b>{esc(named)}</b>"
        else:
            self.headline_app = _("<b>{app}</b> (not verified)").format(app=esc(named))
        self.head = self._label("", "headline")
        col.pack_start(self.head, False, False, 0)
        if main_identity:
            col.pack_start(self._label(esc(main_identity), main_class), False, False, 0)

        if app_name:
            col.pack_start(self._label(_("Calls itself <i>“{name}”</i> (a name the app chose, not verified).")
                                       .format(name=esc(app_name))), False, False, 0)
        # Another program asked for this (a settings window's SetConsent): say which.
        asked_by = shown(d.get("asked-by"), 4096)
        if asked_by:
            # The asking program's id is its own claim as much as any app's.
            col.pack_start(self._label(_("{program} asks for this, not the app itself.").format(
                program=_("<b>{app}</b> (not verified)").format(app=esc(asked_by)))), False, False, 0)

        # An app allowed once asked again, but not with a tap that could be seen
        # (the daemon's focus check, `tap-not-verified`): the user is told why
        # they are asked, and that they may not have touched its button.
        doubt = TAP_DOUBTS.get(shown(d.get("tap-not-verified")))
        if doubt:
            col.pack_start(self._label(esc(doubt()), "unverified"), False, False, 0)

        # Where the position would come from (the daemon's `sources`; an older daemon says nothing).
        sources = d.get("sources") if isinstance(d.get("sources"), list) else []
        names = [n for n in (source_name(s) for s in sources if isinstance(s, str)) if n]
        if names:
            col.pack_start(self._label(esc(_("Your position would come from: {sources}.").format(
                sources=", ".join(names)))), False, False, 0)

        # Details: what the name rests on, for whoever wants to know.
        facts = [identity_text if main_identity != identity_text else None,
                 INSTALLED_NOTE if not identity_proven and installed and main_identity is None else None,
                 _("App id: {id}").format(id=app_id),
                 _("Program: {path}").format(path=executable) if executable else None,
                 _("Script: {path}").format(path=script) if script and script != app_id else None,
                 _("Process: {pid}").format(pid=pid) if isinstance(pid, int) and pid > 0 else None,
                 _("Sandboxed: the app runs in a Flatpak or Snap sandbox.") if sandboxed else None,
                 _("Desktop entry: {path}").format(path=shown(entry.get_filename(), 4096)) if entry else None]
        self.details = Gtk.Expander(label=_("Details"))
        details_box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=2)
        details_box.set_margin_top(4)
        for fact in facts:
            if fact:
                lab = self._label(esc(fact), "details")
                lab.set_selectable(True)
                details_box.pack_start(lab, False, False, 0)
        self.details.add(details_box)
        self.details.connect("notify::expanded", self._on_details)
        self.details.connect("size-allocate", self._on_moved)
        col.pack_start(self.details, False, False, 0)

        if reason:
            reason_text = _("The app says why: <i>“{reason}”</i>").format(reason=esc(reason))
        else:
            reason_text = _("The app gave no reason.")
        if reason or not asked_by:
            rbox = Gtk.Box()
            rbox.get_style_context().add_class("reason-box")
            rbox.pack_start(self._label(reason_text), True, True, 0)
            col.pack_start(rbox, False, False, 0)

        self.one_time = prompt.kind == "one-time"
        self.acc_label = self._label("")
        if precise:
            # iOS's Precise switch: off, the app gets only the area (it asks
            # again when it needs more).
            row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=10)
            precise_label = self._label("")
            precise_label.set_markup_with_mnemonic(keep_words(_("<b>_Precise location</b>")))
            row.pack_start(precise_label, False, False, 0)
            self.precise_switch = Gtk.Switch()
            # Read by a screen reader as the switch's name, and Alt+P turns it.
            precise_label.set_mnemonic_widget(self.precise_switch)
            self.precise_switch.get_accessible().set_name(_("Precise location"))
            self.precise_switch.set_active(True)
            self.precise_switch.set_sensitive(False)  # armed with the buttons
            self.precise_switch.set_valign(Gtk.Align.CENTER)
            self.precise_switch.connect("notify::active", self._on_precise)
            self.precise_switch.connect("size-allocate", self._on_moved)
            row.pack_end(self.precise_switch, False, False, 0)
            col.pack_start(row, False, False, 0)
        col.pack_start(self.acc_label, False, False, 0)
        self._show_accuracy(precise)

        # A settings window asked for While Using: Allow Once answers nothing there.
        self._add_answers(col, waiting, [(dec, text) for dec, text in ANSWERS[prompt.kind]
                                         if not (asked_by and prompt.kind == "when-in-use" and dec == "allow-once")])

        self.connect("map-event", self._on_map)

    def _build_location_on(self, d, waiting):
        """The user switched location off for their apps, and a program asks to
        switch it back on (SetUserLocation): Keep Off or Switch On."""
        self.details = None
        outer = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=16)
        for side in ("top", "start", "end"):
            getattr(outer, f"set_margin_{side}")(20)
        outer.set_margin_bottom(16)
        self.add(outer)
        icon = Gtk.DrawingArea()
        icon.set_size_request(44, 44)
        icon.set_valign(Gtk.Align.START)
        blue = Gdk.RGBA()
        blue.parse("#1a73e8")
        icon.connect("draw", lambda _w, cr: draw_location_arrow(cr, 44, blue, False))
        outer.pack_start(icon, False, False, 0)
        col = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        outer.pack_start(col, True, True, 0)
        self.head = self._label("<b>" + esc(_("Switch location back on for your apps?")) + "</b>", "headline")
        col.pack_start(self.head, False, False, 0)
        col.pack_start(self._label(esc(_("You switched location off for your apps. Switched on, the apps you "
                                         "allowed get your location again."))), False, False, 0)
        asked_by = shown(d.get("asked-by"), 4096)
        if asked_by:
            col.pack_start(self._label(_("{program} asks for this.").format(
                program=_("<b>{app}</b> (not verified)").format(app=esc(asked_by)))), False, False, 0)
        self._add_answers(col, waiting, ANSWERS["location-on"])
        self.connect("map-event", self._on_map)

    def _add_answers(self, col, waiting, answers):
        """The line that says how many more requests wait, then a button per
        (decision, text), disarmed until ARM_DELAY_MS after it is where it is."""
        # One line, always there (empty or not): a request that queues must not move the buttons.
        self.waiting_label = Gtk.Label(label="\u00a0")
        self.waiting_label.set_xalign(0)
        self.waiting_label.set_single_line_mode(True)
        self.waiting_label.set_ellipsize(Pango.EllipsizeMode.END)
        self.waiting_label.get_style_context().add_class("waiting")
        col.pack_start(self.waiting_label, False, False, 0)
        self.set_waiting(waiting)
        bbox = Gtk.ButtonBox(orientation=Gtk.Orientation.HORIZONTAL)
        bbox.set_layout(Gtk.ButtonBoxStyle.END)
        bbox.set_spacing(8)
        bbox.set_margin_top(6)
        col.pack_start(bbox, False, False, 0)
        self.column, self.button_box, self.stacked = col, bbox, False
        for decision, text in answers:
            b = Gtk.Button.new_with_mnemonic(keep_words(text))
            b.set_sensitive(False)  # armed after ARM_DELAY_MS
            b.set_can_default(False)
            b.connect("clicked", self._on_clicked, decision)
            b.connect("size-allocate", self._on_moved)
            bbox.add(b)
            self.buttons[decision] = b

    @staticmethod
    def _label(markup, css_class=None):
        lab = Gtk.Label()
        lab.set_markup(keep_words(markup))
        lab.set_xalign(0)
        lab.set_line_wrap(True)
        lab.set_line_wrap_mode(Pango.WrapMode.WORD_CHAR)  # long app-ids (paths) too
        lab.set_max_width_chars(COLUMN_CHARS)
        lab.set_width_chars(40)
        if css_class:
            lab.get_style_context().add_class(css_class)
        return lab

    def _show_accuracy(self, precise):
        # Whole sentences, so that each language can order them its own way.
        if self.one_time:
            head = (_("Allow {app} to use your precise location once?") if precise
                    else _("Allow {app} to use your approximate location once?"))
        else:
            head = (_("Allow {app} to use your precise location while you use the app?") if precise
                    else _("Allow {app} to use your approximate location while you use the app?"))
        self.head.set_markup(keep_words(head.format(app=self.headline_app)))
        if precise:
            acc_text = _("<b>Precise:</b> your position within a few metres.")
        else:
            acc_text = _("<b>Approximate:</b> only the area you are in (a few kilometres), not your position.")
        if self.one_time:
            acc_text += " " + _("Only for now: the permission ends when the app closes.")
        self.acc_label.set_markup(keep_words(acc_text))

    def _on_precise(self, switch, _param):
        self._show_accuracy(switch.get_active())
        # The new text may wrap and move the buttons (then they arm again): say
        # where they are once the dialog is laid out again and they are armed.
        self.pending_notes.append(("precise", "on" if switch.get_active() else "off"))
        GLib.timeout_add(150, self._note_if_armed)

    def _on_details(self, expander, _param):
        # Opening it moves the buttons (they arm again): said with where they are then.
        self.pending_notes.append(("details", "open" if expander.get_expanded() else "closed"))
        GLib.timeout_add(150, self._note_if_armed)

    def _note_if_armed(self):
        self._check_moved()
        if self.armed:
            self._log_notes()
        return False  # else _arm says them

    def _log_notes(self):
        notes, self.pending_notes = self.pending_notes, []
        for what, state in notes:
            log(what, self.prompt.request_id, state, *self._rects())

    def set_waiting(self, n):
        # The line keeps its height either way (a no-break space when empty).
        self.waiting_label.set_text(ngettext("{n} more request waiting after this one.",
                                             "{n} more requests waiting after this one.", n).format(n=n)
                                    if n > 0 else "\u00a0")

    def _on_map(self, *_):
        self._arm_later()
        return False

    def _set_sensitive(self, on):
        for b in self.buttons.values():
            b.set_sensitive(on)
        if self.precise_switch is not None:
            self.precise_switch.set_sensitive(on)

    def _arm_later(self):
        if self.arm_timer:
            GLib.source_remove(self.arm_timer)
        self.arm_timer = GLib.timeout_add(ARM_DELAY_MS, self._arm)

    def _arm(self):
        self.arm_timer = 0
        if self.answered:
            return False
        self._set_sensitive(True)
        self.armed = True
        if not self.focus_set:
            # The keyboard starts on the safe answer, and shows where it is.
            self.focus_set = True
            self.buttons["deny"].grab_focus()
            self.set_focus_visible(True)
        # Log where the buttons are (relative to this window), for automation.
        GLib.idle_add(self._log_ready)
        return False

    def _on_moved(self, *_):
        if self.armed:
            GLib.idle_add(self._check_moved)

    def _check_moved(self):
        """An armed control that moved is disarmed, and arms again ARM_DELAY_MS later where it is now."""
        if not self.armed or self.armed_rects is None or self.answered:
            return False
        if self._rects() != self.armed_rects:
            self.armed = False
            self.armed_rects = None
            self._set_sensitive(False)
            log("moved", self.prompt.request_id)
            self._arm_later()
        return False

    def _log_ready(self):
        if self.answered or not self.armed:
            return False
        self.armed_rects = self._rects()
        xid = ""
        win = self.get_window()
        if GdkX11 is not None and win is not None and hasattr(win, "get_xid"):
            xid = str(win.get_xid())
        focused = next((d for d, b in self.buttons.items() if b.has_focus()), "-")
        log("ready", self.prompt.request_id, f"window={xid}", *self.armed_rects,
            f"focus={focused}", f"layout={'stacked' if self.stacked else 'row'}", f"size={self.get_size()[0]}x{self.get_size()[1]}")
        if not self.wrap_said:
            self.wrap_said = True
            self._log_wrap()
        self._log_notes()
        return False

    def _log_wrap(self):
        """Says how the dialog's text wrapped: lines broken inside a word
        (between two Hangul letters of one word) should be none."""
        lines = inside = 0
        for lab in self._main_labels():
            layout = lab.get_layout()
            text = layout.get_text()
            raw = text.encode("utf-8")
            starts = [len(raw[:line.start_index].decode("utf-8", "replace")) for line in layout.get_lines_readonly()]
            lines += len(starts)
            inside += breaks_inside_words(text, starts[1:])
        log("wrap", self.prompt.request_id, f"lines={lines}", f"inside-words={inside}")

    def _main_labels(self):
        """The dialog's labels, but those under Details (paths, which may break anywhere)."""
        found, todo = [], [self]
        while todo:
            w = todo.pop()
            if w is self.details:
                continue
            if isinstance(w, Gtk.Label) and w.get_visible() and w.get_line_wrap():
                found.append(w)
            if isinstance(w, Gtk.Container):
                todo.extend(w.get_children())
        return found

    def _on_key(self, _widget, event):
        # Esc is Close: no answer, as closing the window (docs/dbus-api.md).
        if event.keyval == Gdk.KEY_Escape:
            log("escape", self.prompt.request_id)
            self._finish("dismissed")
            return True
        return False

    def _on_realize(self, *_):
        say_colours(self, self.prompt.request_id)
        self._stack_if_too_wide()
        if self.parent_window:
            self._place_over_parent()

    def _stack_if_too_wide(self):
        """Stacks the answers when their row would be wider than the text
        above it (German's three are), as a phone's alert stacks them: the
        dialog keeps the width of its text."""
        text = max(w.get_preferred_width()[1] for w in self.column.get_children() if w is not self.button_box)
        if self.button_box.get_preferred_width()[1] > text:
            self.stacked = True
            self.button_box.set_orientation(Gtk.Orientation.VERTICAL)
            self.button_box.set_layout(Gtk.ButtonBoxStyle.EXPAND)

    def _place_over_parent(self):
        """Transient for the app's window and centred over it (X11); on
        Wayland, attached to the window the app exported (xdg-foreign)."""
        kind, handle = self.parent_window
        own = self.get_window()
        if kind == "wayland":
            try:
                gi.require_version("GdkWayland", "3.0")
                from gi.repository import GdkWayland  # noqa: F401
                if hasattr(own, "set_transient_for_exported") and own.set_transient_for_exported(handle):
                    log("placed", self.prompt.request_id, f"parent=wayland:{handle}")
            except (ValueError, ImportError):
                pass
            return
        if GdkX11 is None or not isinstance(self.get_display(), GdkX11.X11Display):
            return
        # The app chose the window and may destroy it meanwhile: an X error
        # here must not end the agent (GTK exits on an untrapped one).
        Gdk.error_trap_push()
        parent = GdkX11.X11Window.foreign_new_for_display(self.get_display(), handle)
        if parent is not None:
            own.set_transient_for(parent)
            _, px, py = parent.get_origin()
            geometry = (px, py, parent.get_width(), parent.get_height())
        if Gdk.error_trap_pop() or parent is None:  # gone, or never was
            return
        monitor = self.get_display().get_monitor_at_point(px + geometry[2] // 2, py + geometry[3] // 2)
        area = monitor.get_workarea()
        size = self.get_preferred_size()[1]
        x, y = place_over(geometry, (size.width, size.height), (area.x, area.y, area.width, area.height))
        self.move(x, y)
        log("placed", self.prompt.request_id, f"parent=x11:{handle:x}", f"at={x},{y}",
            f"over={geometry[0]},{geometry[1]},{geometry[2]},{geometry[3]}")

    def _rects(self):
        """Where each button, the switch and the Details title are now, relative to the dialog window."""
        rects = []
        for decision, b in self.buttons.items():
            alloc = b.get_allocation()
            pos = b.translate_coordinates(self, 0, 0)
            x, y = (pos[0], pos[1]) if pos else (alloc.x, alloc.y)
            rects.append(f"{decision}={x},{y},{alloc.width},{alloc.height}")
        if self.precise_switch is not None:
            alloc = self.precise_switch.get_allocation()
            pos = self.precise_switch.translate_coordinates(self, 0, 0)
            x, y = (pos[0], pos[1]) if pos else (alloc.x, alloc.y)
            rects.append(f"precise={x},{y},{alloc.width},{alloc.height}")
        # The Details expander's title: a click there opens or closes it, at any time.
        if self.details is None:
            return rects
        title = self.details.get_label_widget()
        alloc = title.get_allocation()
        pos = title.translate_coordinates(self, 0, 0)
        x, y = (pos[0], pos[1]) if pos else (alloc.x, alloc.y)
        rects.append(f"details={x},{y},{alloc.width},{alloc.height}")
        return rects

    def _on_clicked(self, _button, decision):
        # Precise off: an allowing answer allows the approximate location only.
        if decision != "deny" and self.precise_switch is not None and not self.precise_switch.get_active():
            decision += "-reduced"
        self._finish(decision)

    def _on_delete(self, *_):
        self._finish("dismissed")
        return True  # the agent destroys the window itself

    def _finish(self, decision):
        if self.answered:
            return
        self.answered = True
        if self.arm_timer:
            GLib.source_remove(self.arm_timer)
            self.arm_timer = 0
        self.on_answer(self.prompt, decision)


# The focus check (CheckFocus, focus.py): one watcher for the agent's life,
# made with the first Agent (at start), kept across reconnections to the bus.
_FOCUS = []


def focus_watcher():
    if not _FOCUS:
        _FOCUS.append(FocusWatcher())
    return _FOCUS[0]


class Agent:
    def __init__(self, conn, quit_cb, seen=None):
        self.conn = conn
        self.quit = quit_cb
        self.focus = focus_watcher()
        # The indicator and the notices (indicator.Seen), kept across reconnections.
        self.seen = seen
        self.queue = []  # Prompt, in arrival order; queue[0] is on screen
        self.daemon = None  # unique name of the daemon, when it is on the bus
        self.registered = False
        self.waiting_for_slot = False
        node = Gio.DBusNodeInfo.new_for_xml(AGENT_XML)
        self.reg_id = conn.register_object(AGENT_PATH, node.interfaces[0], self._on_method_call, None, None)
        # AUTO_START: the bus starts the daemon (D-Bus activation) when it is not
        # running, so the agent is registered before the user's first tap.
        self.watch_id = Gio.bus_watch_name_on_connection(
            conn, BUS_NAME, Gio.BusNameWatcherFlags.AUTO_START, self._on_daemon_appeared, self._on_daemon_vanished)

    def close(self):
        """The connection is gone: every dialog goes (no answer can reach the daemon)."""
        Gio.bus_unwatch_name(self.watch_id)
        self.daemon = None
        self.registered = False
        if self.seen:
            self.seen.indicator.detach()
        for p in self.queue:
            log("withdrawn", p.request_id)
            p.invocation = None
            self._close_window(p)
        self.queue = []

    # -- the daemon coming and going

    def _on_daemon_appeared(self, _conn, _name, owner):
        self.daemon = owner
        self._register(owner, FEATURES)

    def _register(self, owner, features):
        """RegisterAgentWithOptions with the features this agent serves; a
        daemon of the earlier contract has only RegisterAgent (features None)."""
        if features is None:
            method, args = "RegisterAgent", GLib.Variant("(o)", (AGENT_PATH,))
        else:
            method = "RegisterAgentWithOptions"
            args = GLib.Variant("(oa{sv})", (AGENT_PATH, {"features": GLib.Variant("as", features)}))
        self.conn.call(BUS_NAME, OBJECT_PATH, IFACE, method, args, None, Gio.DBusCallFlags.NONE,
                       30000, None, self._on_registered, (owner, features))

    def _on_registered(self, conn, result, asked):
        owner, features = asked
        try:
            conn.call_finish(result)
        except GLib.Error as e:
            if owner != self.daemon:
                return  # the daemon we asked has left meanwhile
            name = Gio.DBusError.get_remote_error(e) or ""
            if name == "org.freedesktop.DBus.Error.UnknownMethod" and features is not None:
                warn("geoconsentd has no RegisterAgentWithOptions (an older daemon): "
                     "registering without notices or focus checks")
                self._register(owner, None)
                return
            if name.endswith(".AgentExists"):
                # Another program of this uid holds the slot (after a restart of
                # the daemon, whoever registers first gets it). Wait for it to
                # free up rather than leave the user without this prompt.
                if not self.waiting_for_slot:
                    warn(f"another consent agent is registered for uid {os.getuid()}; "
                         f"retrying every {SLOT_RETRY_SECONDS} s until the slot is free")
                self.waiting_for_slot = True
                GLib.timeout_add_seconds(SLOT_RETRY_SECONDS, self._retry_register, owner)
            else:
                warn(f"RegisterAgent failed: {e.message}")
                self.quit(1)
            return
        self.registered = True
        self.waiting_for_slot = False
        log(f"registered uid={os.getuid()} path={AGENT_PATH} features={','.join(features or []) or '-'}")
        if self.seen:
            self.seen.indicator.attach(conn)

    def _retry_register(self, owner):
        if owner == self.daemon and not self.registered:
            self._on_daemon_appeared(self.conn, BUS_NAME, owner)
        return False  # one shot: _on_registered schedules the next

    def _on_daemon_vanished(self, _conn, _name):
        if self.daemon is not None:
            warn("geoconsentd left the bus; waiting for it to come back")
        self.daemon = None
        self.registered = False
        if self.seen:
            self.seen.indicator.detach()
        for p in list(self.queue):
            self._withdraw(p)

    # -- Agent interface

    def _on_method_call(self, _conn, sender, _path, _iface, method, params, invocation):
        if self.daemon is None or sender != self.daemon:
            invocation.return_dbus_error("org.freedesktop.DBus.Error.AccessDenied",
                                         "Only geoconsentd may call the consent agent")
            return
        if method == "Confirm":
            request_id, app_id, kind, details = params.unpack()
            if kind not in ANSWERS:
                invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs",
                                             f"Unknown prompt kind {kind!r}")
                return
            if any(p.request_id == request_id for p in self.queue):
                invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs",
                                             f"Request {request_id!r} is already open")
                return
            p = Prompt(request_id, app_id, kind, details if isinstance(details, dict) else {}, invocation)
            if self.seen:
                self.seen.names.learn(app_id, p.details)  # the indicator and notices name it alike
            self.queue.append(p)
            log("prompt", shown(request_id), f"kind={kind}", f"app-id={shown(app_id, 4096)}", f"queued={len(self.queue) - 1}")
            identity = p.details.get("identity")
            log("identity", shown(request_id), f"kind={shown(identity) if isinstance(identity, str) else 'unknown'}",
                f"proven={1 if p.details.get('identity-proven') is True else 0}",
                f"installed={1 if p.details.get('program-installed') is True else 0}")
            entry = p.entry
            log("named", shown(request_id), f"entry={shown(entry.get_filename(), 4096) if entry else '-'}",
                f"name={shown(entry.get_name(), 100) if entry else '-'}")
            if shown(p.details.get("asked-by")):
                log("asked-by", shown(request_id), shown(p.details.get("asked-by"), 4096))
            if shown(p.details.get("tap-not-verified")):
                log("tap-not-verified", shown(request_id), shown(p.details.get("tap-not-verified")))
            sources = p.details.get("sources")
            log("sources", shown(request_id),
                ",".join(shown(s) for s in sources if isinstance(s, str)) if isinstance(sources, list) and sources else "-")
            self._show_next()
        elif method == "Cancel":
            (request_id,) = params.unpack()
            invocation.return_value(None)
            for p in list(self.queue):
                if p.request_id == request_id:
                    self._withdraw(p)
        elif method == "Notice":
            # Sent without expecting a reply (GDBus then sends none); answered
            # anyway for a caller that wants one.
            app_id, kind, details = params.unpack()
            invocation.return_value(None)
            if self.seen:
                self.seen.notices.notice(app_id, kind, details if isinstance(details, dict) else {})
        elif method == "CheckFocus":
            # Is the tapping process the app in front (docs/dbus-api.md "Agent
            # interface")? Answered at once, from the watcher's state and a few
            # round trips to the display server; never an error.
            pid, details = params.unpack()
            answer = self.focus.check(pid, details)
            invocation.return_value(GLib.Variant("(a{sv})", (to_variants(answer),)))
            log("focus", f"pid={pid}", f"focused={answer['focused']}", f"press={answer['press']}",
                f"via={answer['via']}")
        else:
            invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod", method)

    # -- the queue

    def _show_next(self):
        if not self.queue:
            return
        head = self.queue[0]
        if head.window is None:
            head.window = PromptWindow(head, len(self.queue) - 1, self._on_answer)
            head.window.show_all()
            head.window.present()
            log("shown", head.request_id)
        else:
            head.window.set_waiting(len(self.queue) - 1)

    @staticmethod
    def _close_window(p):
        if p.window is not None:
            p.window.answered = True
            p.window.destroy()
            p.window = None

    def _remove(self, p):
        self.queue.remove(p)
        self._close_window(p)
        self._show_next()

    def _on_answer(self, p, decision):
        if p not in self.queue:
            return
        p.reply(decision)
        log("answered", p.request_id, decision)
        if decision.startswith("allow") and self.seen is not None:
            # Allowed anew: the next silent grant of the app is told, however soon (as the daemon does).
            self.seen.notices.gate.forget(p.app_id)
        self._remove(p)

    def _withdraw(self, p):
        p.reply_withdrawn()
        log("withdrawn", p.request_id)
        self._remove(p)


def main(argv):
    ap = argparse.ArgumentParser(
        prog="geoconsent-agent",
        description="Graphical consent agent for geoconsent: shows the daemon's location prompts "
                    "as GTK dialogs for the user running it.")
    add_bus_argument(ap)
    args = ap.parse_args(argv)

    # The name the desktop knows the agent by (its .desktop file, WM_CLASS, the icon).
    GLib.set_prgname("org.geoconsent.Agent")
    Gtk.Window.set_default_icon_name("org.geoconsent.Agent")
    ok, _ = Gtk.init_check(None)
    if not ok:
        warn("cannot open a display (is DISPLAY or WAYLAND_DISPLAY set?)")
        return 1
    provider = Gtk.CssProvider()
    provider.load_from_data(CSS)
    Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), provider,
                                             Gtk.STYLE_PROVIDER_PRIORITY_APPLICATION)
    # The indicator and the notices use GIO's shared session connection, which
    # by default ends the process when that bus goes away: the agent's prompts
    # matter more than its tray icon, so it stays.
    if session_bus_available():
        try:
            Gio.bus_get_sync(Gio.BusType.SESSION, None).set_exit_on_close(False)
        except GLib.Error as e:
            log("session-bus", shown(e.message, 200))
    try:
        conn = connect(args.bus)
    except GLib.Error as e:
        warn(f"cannot connect to the {args.bus} bus: {e.message}")
        return 1

    status = {"code": 0}
    current = {}
    # The indicator and the notices live on the session bus, across reconnections to the daemon's.
    seen = Seen(args.bus, desktop_entry)

    def quit_with(code):
        status["code"] = code
        Gtk.main_quit()

    def reconnect():
        try:
            conn = connect(args.bus)
        except GLib.Error:
            return True  # try again in RECONNECT_SECONDS
        warn(f"connected to the {args.bus} bus again")
        serve(conn)
        return False

    def on_closed(_conn, _remote_peer_vanished, _error):
        # The bus went away (dbus restarted): the prompts go with it; connect
        # again until it is back, and register again.
        warn(f"lost the bus connection; connecting again every {RECONNECT_SECONDS} s")
        current.pop("agent").close()
        GLib.timeout_add_seconds(RECONNECT_SECONDS, reconnect)

    def serve(conn):
        conn.connect("closed", on_closed)
        current["agent"] = Agent(conn, quit_with, seen)

    serve(conn)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, lambda *_: (quit_with(0), False)[1])
    Gtk.main()
    return status["code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
