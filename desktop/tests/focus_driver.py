#!/usr/bin/python3
"""The Python half of desktop/tests/test-focus.sh (which starts every process
and stops them by PID): the agent's focus check (geoconsent_desktop.focus)
under Xvfb with a real EWMH window manager (openbox).

  focus_driver.py window NAME X Y [--lie-pid PID]
      a plain X window (python3-xlib) of its own process at X,Y, 300x200,
      whose _NET_WM_PID says PID (a lie) or its own; prints
      "window NAME pid=PID xid=XID" once mapped, and runs until killed.

  focus_driver.py run --a-pid P --a-xid X --b-pid P --b-xid X --openbox-pid P
                      [--bus ADDRESS --agent-pid P]
      the checks. With --bus it also plays the daemon on that bus (owns
      org.geoconsent.GeoConsent1 and takes the agent's registration) and asks
      the running geoconsent-agent CheckFocus over D-Bus.

Prints "focus: ok N - ..." per check and ends with "focus: N passed, M failed".
"""

import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # desktop/, for geoconsent_desktop

from Xlib import X, Xatom, display  # noqa: E402
from Xlib.ext import xtest  # noqa: E402,F401  (fake_input)

WIDTH, HEIGHT = 300, 200


def window_main(args):
    d = display.Display()
    screen = d.screen()
    w = screen.root.create_window(args.x, args.y, WIDTH, HEIGHT, 1, screen.root_depth,
                                  background_pixel=screen.white_pixel,
                                  event_mask=X.ExposureMask | X.StructureNotifyMask | X.ButtonPressMask)
    w.set_wm_name(f"focus-test {args.name}")
    w.set_wm_class(f"focus-test-{args.name}", "GeoconsentFocusTest")
    w.set_wm_normal_hints(flags=1 | 2 | 4 | 8, x=args.x, y=args.y, width=WIDTH, height=HEIGHT)  # US/P Position, Size
    w.set_wm_hints(flags=1, input=1)  # InputHint: takes the keyboard focus when given
    w.change_property(d.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [args.lie_pid or os.getpid()])
    w.map()
    d.sync()
    while True:
        ev = d.next_event()
        if ev.type == X.MapNotify:
            break
    print(f"window {args.name} pid={os.getpid()} xid={w.id}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        d.next_event()


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def ok(self, cond, what, got=None):
        if cond:
            self.passed += 1
            print(f"focus: ok {self.passed} - {what}", flush=True)
        else:
            self.failed += 1
            print(f"focus: FAIL - {what}" + (f" (got {got!r})" if got is not None else ""), flush=True)
        return cond


def spin(seconds=0.0, until=None):
    """Runs the GLib main loop (the focus watcher's X socket watch, GDBus)
    for `seconds`, or until `until()` is true (then True; False on time-out)."""
    from gi.repository import GLib
    ctx = GLib.MainContext.default()
    deadline = time.monotonic() + seconds
    while True:
        while ctx.pending():
            ctx.iteration(False)
        if until is not None and until():
            return True
        if time.monotonic() >= deadline:
            return until is None
        ctx.iteration(False) or time.sleep(0.01)


class Ctl:
    """A connection of the test's own: reads root properties, clicks with XTEST."""

    def __init__(self):
        self.d = display.Display()
        self.root = self.d.screen().root

    def prop(self, window, name, type_=X.AnyPropertyType):
        try:
            p = window.get_full_property(self.d.intern_atom(name), type_)
        except Exception:  # noqa: BLE001 - BadWindow
            return None
        return list(p.value) if p is not None else None

    def active(self):
        v = self.prop(self.root, "_NET_ACTIVE_WINDOW")
        return int(v[0]) if v else 0

    def clients(self):
        return [int(x) for x in (self.prop(self.root, "_NET_CLIENT_LIST") or [])]

    def activate(self, xid):
        """Asks the window manager to make window xid active (EWMH, source: a pager)."""
        from Xlib.protocol import event
        ev = event.ClientMessage(window=self.d.create_resource_object("window", xid), client_type=self.d.intern_atom(
            "_NET_ACTIVE_WINDOW"), data=(32, [2, X.CurrentTime, 0, 0, 0]))
        self.root.send_event(ev, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        self.d.sync()

    def click(self, xid):
        """An XTEST click in the middle of window xid."""
        w = self.d.create_resource_object("window", xid)
        g = w.get_geometry()
        pos = w.translate_coords(self.root, 0, 0)
        return self.click_at(-pos.x + g.width // 2, -pos.y + g.height // 2)

    def click_at(self, x, y):
        """An XTEST click at x, y of the root window."""
        xtest.fake_input(self.d, X.MotionNotify, x=x, y=y)
        self.d.sync()
        xtest.fake_input(self.d, X.ButtonPress, 1)
        xtest.fake_input(self.d, X.ButtonRelease, 1)
        self.d.sync()
        return x, y


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class FakeDaemon:
    """The daemon's side on a private bus: owns its name, takes the agent's
    registration, and calls the agent's CheckFocus as the daemon does."""

    XML = """<node><interface name="org.geoconsent.GeoConsent1">
      <method name="RegisterAgent"><arg type="o" direction="in"/></method>
      <method name="RegisterAgentWithOptions"><arg type="o" direction="in"/><arg type="a{sv}" direction="in"/></method>
    </interface></node>"""

    def __init__(self, address):
        from gi.repository import Gio, GLib
        from geoconsent_desktop.common import BUS_NAME, OBJECT_PATH
        self.Gio, self.GLib = Gio, GLib
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        self.conn = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        self.other = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        self.agent = None  # (unique name, path) of the registered agent
        node = Gio.DBusNodeInfo.new_for_xml(self.XML)
        self.conn.register_object(OBJECT_PATH, node.interfaces[0], self._on_call, None, None)
        reply = self.conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                    "RequestName", GLib.Variant("(su)", (BUS_NAME, 4)), GLib.VariantType("(u)"),
                                    0, 5000, None)
        if reply.unpack()[0] != 1:
            raise RuntimeError(f"could not own {BUS_NAME}")

    def _on_call(self, _conn, sender, _path, _iface, method, params, invocation):
        self.agent = (sender, params.unpack()[0])
        print(f"focus: the agent registered ({method}, {sender})", flush=True)
        invocation.return_value(None)

    def check_focus(self, pid, conn=None):
        """CheckFocus(pid) on the agent: (answer dict, None) or (None, D-Bus error name)."""
        GLib = self.GLib
        result = {}

        def done(c, res):
            try:
                result["answer"] = c.call_finish(res).unpack()[0]
            except GLib.Error as e:
                result["error"] = self.Gio.DBusError.get_remote_error(e) or e.message

        (conn or self.conn).call(self.agent[0], self.agent[1], "org.geoconsent.GeoConsent1.Agent", "CheckFocus",
                                 GLib.Variant("(ua{sv})", (pid, {"app-id": GLib.Variant("s", "focus-test")})),
                                 GLib.VariantType("(a{sv})"), 0, 1000, None, done)
        spin(2.0, until=lambda: result)
        return result.get("answer"), result.get("error", None if result else "no reply")


def run_main(args):
    from geoconsent_desktop.focus import PRESS_WINDOW, FocusWatcher, X11Focus
    t = Checks()
    ctl = Ctl()
    a, b = args.a_xid, args.b_xid

    # openbox is up (its check window names itself) and manages both windows.
    t.ok(spin(10, until=lambda: a in ctl.clients() and b in ctl.clients()),
         "openbox manages both windows (_NET_CLIENT_LIST)", ctl.clients())
    t.ok(ctl.prop(ctl.d.create_resource_object("window", b), "_NET_WM_PID") == [args.a_pid],
         "window B's _NET_WM_PID lies: it says A's PID")

    watcher = FocusWatcher({"DISPLAY": os.environ["DISPLAY"]})
    xb = watcher.backend
    if not t.ok(isinstance(xb, X11Focus), "the watcher takes the X11 way", type(xb).__name__):
        return t
    t.ok(xb.physical_devices() == [], "Xvfb has no physical pointer (its own mouse has no device node)",
         xb.devices)
    t.ok(any(kind == "xtest" for kind in xb.devices.values()), "the XTEST devices are known as such", xb.devices)

    fake = None
    if args.bus:
        fake = FakeDaemon(args.bus)
        t.ok(spin(10, until=lambda: fake.agent is not None), "geoconsent-agent registers with the (fake) daemon")

    def timed_check(pid):
        start = time.monotonic()
        answer = watcher.check(pid)
        return answer, time.monotonic() - start

    # 1. An XTEST click focuses A.
    before = xb.ignored
    ctl.click(a)
    t.ok(spin(5, until=lambda: ctl.active() == a), "an XTEST click on A makes A the active window", ctl.active())
    # The press arrives through the GLib watch of the X socket alone, no check needed.
    t.ok(spin(2, until=lambda: xb.ignored == before + 1), "the watcher saw the XTEST press from the main loop",
         (before, xb.ignored))
    r, took = timed_check(args.a_pid)
    t.ok(r["focused"] == "yes" and r["via"] == "x11", "A in front: check(pid A) -> focused yes, via x11", r)
    t.ok(took < 0.1, f"the check answered in {took * 1000:.1f} ms (< 100 ms)", took)
    t.ok(r.get("window-pid") == args.a_pid, "the focused window's owner is A's PID, from XRes", r)
    r, _ = timed_check(args.b_pid)
    t.ok(r["focused"] == "no", "A in front: check(pid B) -> focused no", r)
    r, _ = timed_check(parent_of(args.a_pid))
    t.ok(r["focused"] == "no", "A in front: check(A's parent) -> focused no (the PID itself only)", r)
    r, _ = timed_check(args.a_pid)
    t.ok(r["presses-counted"] == 0 and r["presses-ignored"] == before + 1,
         "the XTEST click is not counted: presses-ignored grew by one, presses-counted stays 0", r)
    t.ok(r["press"] == "unknown", "press unknown: no physical device on Xvfb, presses cannot be seen", r)

    # 2. An XTEST click moves the focus to B (whose _NET_WM_PID says A).
    ctl.click(b)
    t.ok(spin(5, until=lambda: ctl.active() == b), "an XTEST click on B makes B the active window", ctl.active())
    r, _ = timed_check(args.b_pid)
    t.ok(r["focused"] == "yes", "B in front: check(pid B) -> focused yes", r)
    r, _ = timed_check(args.a_pid)
    t.ok(r["focused"] == "no",
         "B in front: check(pid A) -> focused no, although B's _NET_WM_PID says A (XRes, not _NET_WM_PID)", r)
    t.ok(r["presses-ignored"] == before + 2 and r["presses-counted"] == 0 and r["press"] == "unknown",
         "two XTEST clicks: presses-ignored +2, presses-counted 0, press unknown", r)

    # 3. The same through the agent, over D-Bus, as the daemon asks it.
    if fake is not None:
        ans, err = fake.check_focus(args.b_pid)
        t.ok(err is None and ans.get("focused") == "yes" and ans.get("via") == "x11" and ans.get("press") == "unknown",
             "the agent's CheckFocus(pid B) -> focused yes, press unknown, via x11", (ans, err))
        t.ok(err is None and ans.get("presses-ignored", 0) >= 2 and ans.get("presses-counted") == 0,
             "the agent saw the XTEST presses and counted none", (ans, err))
        ans, err = fake.check_focus(args.a_pid)
        t.ok(err is None and ans.get("focused") == "no", "the agent's CheckFocus(pid A) -> focused no", (ans, err))
        ans, err = fake.check_focus(args.a_pid, conn=fake.other)
        t.ok(ans is None and err == "org.freedesktop.DBus.Error.AccessDenied",
             "CheckFocus from another connection than the daemon's -> AccessDenied", (ans, err))

    # 4. The counting of physical presses, with the XTEST pointer taken for a
    # physical one (Xvfb has none: only this watcher's table is changed, the
    # X server's events are real). A press counts for the window in front
    # only, and only for PRESS_WINDOW seconds.
    xtest_pointer = [i for i, kind in xb.devices.items() if kind == "xtest"]
    saved = dict(xb.devices)
    xb.devices.update({i: "physical" for i in xtest_pointer})
    counted = xb.counted
    ctl.click(a)
    t.ok(spin(5, until=lambda: ctl.active() == a and xb.counted == counted + 1),
         "(XTEST taken for physical) a click on A is counted", (ctl.active(), xb.counted))
    r, _ = timed_check(args.a_pid)
    t.ok(r["focused"] == "yes" and r["press"] == "yes", "(XTEST taken for physical) A in front, pressed: press yes", r)
    spin(PRESS_WINDOW + 0.2)
    r, _ = timed_check(args.a_pid)
    t.ok(r["press"] == "no", f"(XTEST taken for physical) {PRESS_WINDOW + 0.2:.1f} s later: press no", r)
    ctl.click(a)
    t.ok(spin(2, until=lambda: xb.counted == counted + 2), "(XTEST taken for physical) another click on A is counted")
    # B is brought to front without a press (as a pager or alt-tab does: EWMH's request to the window manager).
    ctl.activate(b)
    t.ok(spin(5, until=lambda: ctl.active() == b), "B in front by _NET_ACTIVE_WINDOW request, no press")
    r, _ = timed_check(args.b_pid)
    recent = bool(xb.presses) and time.monotonic() - xb.presses[-1][0] < PRESS_WINDOW
    t.ok(recent and r["focused"] == "yes" and r["press"] == "no",
         "(XTEST taken for physical) B in front, the last press (within the second) landed in A: press no", r)
    xb.devices = saved

    # 5. No window manager: openbox killed (SIGKILL: it leaves its root properties behind).
    os.kill(args.openbox_pid, signal.SIGKILL)
    t.ok(spin(5, until=lambda: gone(args.openbox_pid)), "openbox is gone")
    r, _ = timed_check(args.b_pid)
    if r.get("reason") != "no-window-manager":  # the X server may take a moment to free openbox's windows
        spin(2, until=lambda: watcher.check(args.b_pid).get("reason") == "no-window-manager")
        r, _ = timed_check(args.b_pid)
    # One was seen: whatever stops the check now (the manager gone, the root's
    # properties deleted, as any client may) answers no, never "cannot tell".
    t.ok(r["focused"] == "no" and r.get("reason") == "no-window-manager",
         "the window manager gone after one was seen: check(pid B) -> focused no (fail closed)", r)
    t.ok(ctl.active() == b, "(the root's _NET_ACTIVE_WINDOW is stale: still B; the check did not believe it)",
         ctl.active())
    fresh = FocusWatcher({"DISPLAY": os.environ["DISPLAY"]})
    r = fresh.check(args.b_pid)
    t.ok(r["focused"] == "unknown" and r.get("reason") == "no-window-manager",
         "a display that never had a window manager: focused unknown", r)
    fresh.close()
    if fake is not None:
        ans, err = fake.check_focus(args.b_pid)
        t.ok(err is None and ans.get("focused") == "no", "the agent's CheckFocus -> focused no", (ans, err))
    watcher.close()
    return t


def main(argv):
    ap = argparse.ArgumentParser(prog="focus_driver.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("window")
    w.add_argument("name")
    w.add_argument("x", type=int)
    w.add_argument("y", type=int)
    w.add_argument("--lie-pid", type=int, default=0)
    r = sub.add_parser("run")
    for opt in ("--a-pid", "--a-xid", "--b-pid", "--b-xid", "--openbox-pid"):
        r.add_argument(opt, type=int, required=True)
    r.add_argument("--bus")
    args = ap.parse_args(argv)
    if args.cmd == "window":
        return window_main(args)
    t = run_main(args)
    print(f"focus: {t.passed} passed, {t.failed} failed", flush=True)
    return 0 if t.failed == 0 and t.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
