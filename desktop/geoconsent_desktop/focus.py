"""The agent's answer to CheckFocus (docs/dbus-api.md "Agent interface"): is
the process that tapped the app in front, and did a real press land in its
window just now?

    watcher = FocusWatcher()          # once, at the agent's start
    watcher.check(pid) -> {"focused": "yes"|"no"|"unknown",
                           "press": "yes"|"no"|"unknown",
                           "via": "x11"|"sway"|"kwin-unsupported"|"none", ...}

What each desktop can tell:

* X11 (DISPLAY set, not a Wayland session): a connection of its own to the X
  server (python3-xlib). The focused window is the root's
  `_NET_ACTIVE_WINDOW`, believed only while a window manager says it is there
  (`_NET_SUPPORTING_WM_CHECK` names a live window that names itself: a killed
  window manager leaves both root properties behind). Its owner's PID comes
  from the X server (XRes `QueryClientIds`, LocalClientPID: the peer
  credentials of the client's connection), never from `_NET_WM_PID`, which
  the app writes itself. `focused` is `yes` only for that very PID: not its
  parent (a program started from a terminal in front is not in front).
  Presses: XI2 raw button presses and touch begins of every device, selected
  on the root window. Each names its source device (`sourceid`); a press
  whose source device is an XTEST device (the X server sets the "XTEST
  Device" property on each: every XTestFakeButtonEvent, xdotool click, ...
  comes from one) is ignored. A press is *counted* when its source is a
  physical device: a slave pointer (touchscreens are pointers too) with a
  "Device Node" property, the kernel input device that Xorg's libinput,
  evdev, synaptics and wacom drivers name. At each counted press the
  top-level window under the pointer is noted, with the time (monotonic);
  `press` is `yes` when one landed in the focused window's top-level within
  the last PRESS_WINDOW seconds, `no` when physical devices exist and none
  did, `unknown` when the server has no physical device (Xvfb, Xvnc, Xephyr:
  their own virtual pointers, which a person may drive but a program can
  too, are neither counted nor treated as XTEST: `presses-other`).
  The X connection's socket is watched from the GLib main loop, so presses
  are taken as they come, without polling; a check drains what is waiting
  first, and answers in a few round trips.
* sway (SWAYSOCK set): i3 IPC `get_tree` over sway's socket; the node with
  `focused: true` and its `pid`. Presses cannot be seen: `press` `unknown`.
* KDE Plasma on Wayland (org.kde.KWin on the session bus): KWin tells the
  active window's PID only to a KWin script, which would have to call back
  over D-Bus within the daemon's budget; not done: `focused` `unknown`,
  `via` `kwin-unsupported`. (Plasma on X11 takes the X11 way.)
* Anything else (GNOME on Wayland: org.gnome.Shell.Introspect is closed to
  other programs; no display): `unknown`, `via` `none`.

Diagnostics beside the contract's keys (X11): `presses-counted` u (physical
presses since the agent started), `presses-ignored` u (XTEST presses),
`presses-other` u (presses of virtual devices), `window-pid` u (the focused
window's owner as the X server says it; 0: none). A check never raises: any
failure is an `unknown` answer, said once on standard error.
"""

import json
import os
import socket
import struct
import sys
import time

PRESS_WINDOW = 1.0  # seconds a physical press counts for (docs/dbus-api.md: "within the last second")
SWAY_TIMEOUT = 0.3  # seconds for sway's reply to get_tree

_said = set()


def _warn_once(key, msg):
    if key not in _said:
        _said.add(key)
        print(f"geoconsent-agent: focus: {msg}", file=sys.stderr, flush=True)


def unknown(via="none", **extra):
    answer = {"focused": "unknown", "press": "unknown", "via": via}
    answer.update(extra)
    return answer


def to_variants(answer):
    """The answer as `a{sv}` values for GDBus: str -> s, int -> u."""
    from gi.repository import GLib
    out = {}
    for key, value in answer.items():
        if isinstance(value, bool):
            out[key] = GLib.Variant("b", value)
        elif isinstance(value, int):
            out[key] = GLib.Variant("u", max(0, min(value, 0xFFFFFFFF)))
        else:
            out[key] = GLib.Variant("s", str(value))
    return out


# ---------------------------------------------------------------------------
# X11


# XI2 (XInput 2.2) numbers, from XI2.h.
XI_ALL_DEVICES = 0
XI_ALL_MASTER_DEVICES = 1
XI_HIERARCHY_CHANGED = 11
XI_RAW_BUTTON_PRESS = 15
XI_RAW_TOUCH_BEGIN = 22
XI_SLAVE_POINTER = 3
XI_FLOATING_SLAVE = 5
# A raw press the server made up from another event (a touch's emulated
# button, a wheel step's): not a press of the user's on a button.
XI_POINTER_EMULATED = 1 << 16
# Buttons 4-7 are the wheel's steps and sideways scrolls: scrolling is no press.
WHEEL_BUTTONS = range(4, 8)
GENERIC_EVENT = 35


def parse_raw_event(data):
    """(deviceid, time, detail, sourceid, flags) of an XI2 raw event, from the
    bytes python-xlib leaves after a GenericEvent's first ten (it parses no
    raw events itself). The XI2 protocol's RawEvent, after the generic event
    header (type 1, extension 1, sequence 2, length 4, evtype 2):

        offset  size  field
        0       2     deviceid    (the master device when selected on XIAllMasterDevices)
        2       4     time
        6       4     detail      (the button; the touch id for touch events)
        10      2     sourceid    (the slave device the event came from)
        12      2     valuators_len
        14      4     flags
        18      4     pad
        22      ...   valuator mask, axis values, raw axis values

    Fields are in the client's byte order (python-xlib asks for the native one)."""
    data = bytes(data)
    if len(data) < 18:
        raise ValueError("short raw event")
    deviceid, ev_time, detail, sourceid, _vlen, flags = struct.unpack_from("=HIIHHI", data, 0)
    return deviceid, ev_time, detail, sourceid, flags


class X11Focus:
    via = "x11"

    def __init__(self, display_name=None, watch=True):
        from Xlib import X, Xatom, display, error  # python3-xlib; ImportError: FocusWatcher says so
        from Xlib.ext import xinput
        self.X, self.Xatom, self.error, self.xinput = X, Xatom, error, xinput
        self.d = display.Display(display_name)
        # Errors of requests that have no reply (XISelectEvents on a vanished
        # window, ...) must not print or raise later: they are ignored.
        self.d.set_error_handler(lambda err, *_: None)
        self.root = self.d.screen().root
        self.atom = {name: self.d.intern_atom(name) for name in (
            "_NET_ACTIVE_WINDOW", "_NET_SUPPORTING_WM_CHECK", "XTEST Device", "Device Node")}
        self.has_res = self.d.has_extension("X-Resource")
        if not self.has_res:
            _warn_once("x-res", "the X server has no X-Resource extension: who owns a window cannot be told")
        self.counted = self.ignored = self.other = 0
        self.presses = []  # (monotonic, top-level window) of counted presses, newest last
        # Once seen, kept for the agent's lifetime: a client that detaches the
        # mouse, or deletes the root's properties, does not turn the answer
        # into "cannot tell" (which keeps a tap silent); it turns into "no".
        self.physical_seen = False
        self.wm_seen = False
        self.devices = {}  # sourceid -> "xtest" | "physical" | "other"
        self.has_xi2 = self.d.has_extension("XInputExtension")
        self.xi_opcode = None
        self.dead = False
        self.watch_id = None
        if self.has_xi2:
            try:
                self._select_presses()
            except self.error.XError as e:
                _warn_once("xi2-select", f"cannot select XInput 2 raw events ({e}): presses cannot be seen")
                self.has_xi2 = False
                self.devices = {}
        else:
            _warn_once("xi2", "the X server has no XInput 2: presses cannot be seen")
        self.d.flush()
        if watch:
            from gi.repository import GLib
            self.watch_id = GLib.io_add_watch(self.d.fileno(), GLib.PRIORITY_DEFAULT,
                                              GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, self._on_readable)

    def close(self):
        if self.watch_id is not None:
            from gi.repository import GLib
            GLib.source_remove(self.watch_id)
            self.watch_id = None
        if not self.dead:
            self.dead = True
            try:
                self.d.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

    def _select_presses(self):
        xinput = self.xinput
        self.xi_opcode = self.d.query_extension("XInputExtension").major_opcode
        # XI 2.2: raw events reach every client that selects them on the root
        # window, whatever grabs are active (2.0 gave them to the grabbing
        # client only), and raw touch events exist.
        reply = xinput.XIQueryVersion(display=self.d.display, opcode=self.xi_opcode,
                                      major_version=2, minor_version=2)
        if (reply.major_version, reply.minor_version) < (2, 2):
            _warn_once("xi22", f"the X server has XInput {reply.major_version}.{reply.minor_version}, "
                               "not 2.2: presses cannot be seen")
            self.has_xi2 = False
            return
        self._classify_devices()
        mask = (1 << XI_RAW_BUTTON_PRESS) | (1 << XI_RAW_TOUCH_BEGIN)
        self.root.xinput_select_events([(XI_ALL_MASTER_DEVICES, mask),
                                        (XI_ALL_DEVICES, 1 << XI_HIERARCHY_CHANGED)])

    # -- devices

    def _classify_devices(self):
        devices = {}
        for dev in self.d.xinput_query_device(XI_ALL_DEVICES).devices:
            try:
                atoms = set(self.d.xinput_list_device_properties(dev.deviceid).atoms)
            except self.error.XError:  # gone meanwhile (BadDevice)
                continue
            name = dev.name.decode("utf-8", "replace") if isinstance(dev.name, bytes) else str(dev.name)
            if self.atom["XTEST Device"] in atoms or "XTEST" in name:
                devices[dev.deviceid] = "xtest"
            elif dev.use in (XI_SLAVE_POINTER, XI_FLOATING_SLAVE) and self.atom["Device Node"] in atoms:
                devices[dev.deviceid] = "physical"
            else:
                devices[dev.deviceid] = "other"
        self.devices = devices
        if any(kind == "physical" for kind in devices.values()):
            self.physical_seen = True

    def physical_devices(self):
        return sorted(i for i, kind in self.devices.items() if kind == "physical")

    # -- events

    def _on_readable(self, _fd, condition):
        from gi.repository import GLib
        if condition & (GLib.IO_HUP | GLib.IO_ERR):
            self._lost("the X connection was closed")
            return False
        self.drain()
        if self.dead:
            self.watch_id = None
            return False
        return True

    def _lost(self, why):
        _warn_once("x-lost", f"{why}: focus is unknown from now on")
        self.close()

    def drain(self):
        """Handles every event waiting, on the socket or already read into
        python-xlib's queue (a reply read meanwhile may have brought some)."""
        if self.dead:
            return
        try:
            while self.d.pending_events():
                self._handle(self.d.next_event())
        except self.error.ConnectionClosedError:
            self._lost("the X connection was closed")
        except Exception as e:  # noqa: BLE001 - never into the agent
            _warn_once("x-event", f"reading X events failed: {e!r}")

    def _handle(self, ev):
        if ev.type != GENERIC_EVENT or getattr(ev, "extension", None) != self.xi_opcode:
            return
        if ev.evtype == XI_HIERARCHY_CHANGED:
            self._classify_devices()
            return
        if ev.evtype not in (XI_RAW_BUTTON_PRESS, XI_RAW_TOUCH_BEGIN):
            return
        _deviceid, _t, detail, sourceid, flags = parse_raw_event(ev.data)
        if flags & XI_POINTER_EMULATED or (ev.evtype == XI_RAW_BUTTON_PRESS and detail in WHEEL_BUTTONS):
            return  # a scroll, or a press the server emulated: nobody pressed a button
        kind = self.devices.get(sourceid)
        if kind is None:  # a device that came meanwhile
            self._classify_devices()
            kind = self.devices.get(sourceid, "other")
        if kind == "xtest":
            self.ignored += 1
        elif kind == "physical":
            self.counted += 1
            self.presses.append((time.monotonic(), self._toplevel_under_pointer()))
            del self.presses[:-16]
        else:
            self.other += 1

    def _toplevel_under_pointer(self):
        try:
            child = self.root.query_pointer().child  # a Window, or 0 (X.NONE) over the bare root
        except self.error.XError:
            return 0
        return int(getattr(child, "id", child) or 0)

    # -- the check

    def _prop(self, window, atom, type_=None):
        try:
            prop = window.get_full_property(atom, type_ if type_ is not None else self.X.AnyPropertyType)
        except self.error.XError:  # BadWindow: gone
            return None
        return prop

    def _window_prop(self, window, atom):
        prop = self._prop(window, atom, self.Xatom.WINDOW)
        if prop is None or prop.format != 32 or len(prop.value) < 1:
            return None
        return int(prop.value[0])

    def _wm_present(self):
        """EWMH: the root names a check window, which names itself. A killed
        window manager leaves the root's property behind, naming a window that
        is gone."""
        check = self._window_prop(self.root, self.atom["_NET_SUPPORTING_WM_CHECK"])
        if not check:
            return False
        again = self._window_prop(self.d.create_resource_object("window", check),
                                  self.atom["_NET_SUPPORTING_WM_CHECK"])
        return again == check

    def _toplevel_of(self, xid):
        """The child of the root that holds window xid (its frame, under a
        reparenting window manager)."""
        window = self.d.create_resource_object("window", xid)
        for _ in range(64):
            parent = window.query_tree().parent  # a Window, or 0 (X.NONE) for the root itself
            if int(getattr(parent, "id", parent) or 0) in (0, self.root.id):
                return window.id
            window = parent
        return 0

    def owner_pid(self, xid):
        """The PID of the client that created window xid, as the X server has it (0: unknown)."""
        if not self.has_res:
            return 0
        from Xlib.ext import res
        reply = self.d.res_query_client_ids([{"client": xid, "mask": res.LocalClientPIDMask}])
        for item in reply.ids:
            if item.spec.mask & res.LocalClientPIDMask and len(item.value) >= 1:
                return int(item.value[0])
        return 0

    def check(self, pid):
        if self.dead:
            return unknown("x11", reason="x11-lost")
        self.drain()
        try:
            answer = self._check(pid)
        except self.error.ConnectionClosedError:
            self._lost("the X connection was closed")
            return unknown("x11", reason="x11-lost")
        except self.error.XError as e:  # something went meanwhile
            _warn_once("x-check", f"the X11 focus check failed: {e!r}")
            answer = self._cannot_say("x-error")
        # Events that came in with the replies are taken now, not at the next
        # check: a press is stamped with the time it is handled.
        self.drain()
        return answer

    def _stats(self):
        return {"presses-counted": self.counted, "presses-ignored": self.ignored, "presses-other": self.other}

    def _cannot_say(self, reason):
        """What a check that cannot finish answers: "cannot tell" only on a
        display that never had a window manager. Once one was seen, anything
        that stops the check (the root's properties deleted or zeroed, which
        any client may do, the window manager gone, a window gone) answers
        "no", and the tap is asked as a first tap (fail closed)."""
        if self.wm_seen:
            return {"focused": "no", "press": "unknown", "via": "x11", "reason": reason, **self._stats()}
        return unknown("x11", reason=reason, **self._stats())

    def _check(self, pid):
        stats = self._stats()
        if not self._wm_present():
            return self._cannot_say("no-window-manager")
        self.wm_seen = True
        active = self._window_prop(self.root, self.atom["_NET_ACTIVE_WINDOW"])
        if not active:
            return self._cannot_say("no-active-window")
        if not self.has_res:
            return unknown("x11", reason="no-x-resource", **stats)
        owner = self.owner_pid(active)
        toplevel = self._toplevel_of(active)
        # _NET_ACTIVE_WINDOW is a root property any client may write: the
        # window the keyboard's input goes to must be the same client's.
        focus = self.d.get_input_focus().focus
        focus_id = int(getattr(focus, "id", focus) or 0)
        focus_owner = self.owner_pid(focus_id) if focus_id > 1 else 0   # 0 None, 1 PointerRoot
        # A window whose owner the server cannot name (a client over TCP) is
        # not the tapping process's as far as anyone can tell: no.
        focused = "yes" if owner != 0 and owner == pid and focus_owner == owner else "no"
        if not self.physical_devices():
            # No physical pointer now: on a display that never had one (Xvfb,
            # Xvnc) presses cannot be seen; where one was, none landed.
            press = "no" if self.physical_seen else "unknown"
        else:
            now = time.monotonic()
            press = "yes" if any(now - t <= PRESS_WINDOW and w == toplevel and w != 0
                                 for t, w in self.presses) else "no"
        return {"focused": focused, "press": press, "via": "x11", "window-pid": owner, "focus-pid": focus_owner, **stats}


# ---------------------------------------------------------------------------
# sway


I3_MAGIC = b"i3-ipc"
I3_GET_TREE = 4


def i3_request(path, kind, payload=b"", timeout=SWAY_TIMEOUT):
    """One i3 IPC request over the unix socket at path: "i3-ipc", the
    payload's length and the message type (native 32-bit), the payload; the
    reply has the same header. Returns the reply's JSON."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(I3_MAGIC + struct.pack("=II", len(payload), kind) + payload)
        head = _recv_exactly(s, len(I3_MAGIC) + 8)
        if head[:len(I3_MAGIC)] != I3_MAGIC:
            raise ValueError("not an i3 IPC reply")
        length, _kind = struct.unpack("=II", head[len(I3_MAGIC):])
        if length > 64 << 20:
            raise ValueError("i3 IPC reply too long")
        return json.loads(_recv_exactly(s, length))


def _recv_exactly(s, n):
    chunks, got = [], 0
    while got < n:
        chunk = s.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("i3 IPC socket closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def focused_node(tree):
    """The node of sway's tree with `focused: true` (a window, or a workspace or output with none), or None."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict):
            continue
        if node.get("focused") is True:
            return node
        todo.extend(node.get("nodes") or [])
        todo.extend(node.get("floating_nodes") or [])
    return None


class SwayFocus:
    via = "sway"

    def __init__(self, path):
        self.path = path

    def check(self, pid):
        try:
            tree = i3_request(self.path, I3_GET_TREE)
        except (OSError, ValueError) as e:
            _warn_once("sway", f"sway's IPC ({self.path}) did not answer get_tree: {e}")
            return unknown("sway", reason="sway-ipc-failed")
        node = focused_node(tree)
        if node is None:
            return unknown("sway", reason="nothing-focused")
        if node.get("shell") == "xwayland":
            # The PID of an X11 window under sway may be the window's own claim
            # (_NET_WM_PID, in older wlroots): not proof of the app in front.
            return unknown("sway", reason="xwayland-window")
        owner = node.get("pid")
        owner = owner if isinstance(owner, int) and not isinstance(owner, bool) and owner > 0 else 0
        # A focused workspace or output (no window in front) is not the app either.
        return {"focused": "yes" if owner and owner == pid else "no", "press": "unknown", "via": "sway",
                "window-pid": owner}

    def close(self):
        pass


class FixedFocus:
    """A desktop that cannot tell: every check is unknown."""

    def __init__(self, via, reason):
        self.via, self.reason = via, reason

    def check(self, _pid):
        return unknown(self.via, reason=self.reason)

    def close(self):
        pass


def kwin_on_session_bus():
    """Whether org.kde.KWin is on the user's session bus (asked only where one
    is known: no bus is started for it)."""
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS") and not (
            os.environ.get("XDG_RUNTIME_DIR") and os.path.exists(os.path.join(os.environ["XDG_RUNTIME_DIR"], "bus"))):
        return False
    try:
        from gi.repository import Gio, GLib
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        reply = bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                              "NameHasOwner", GLib.Variant("(s)", ("org.kde.KWin",)), GLib.VariantType("(b)"),
                              0, 500, None)
        return bool(reply.unpack()[0])
    except Exception:  # noqa: BLE001 - no session bus: no KWin
        return False


def choose_backend(env=None, kwin_present=kwin_on_session_bus, watch=True):
    """The way this desktop can tell (see the module's text), from the environment."""
    env = os.environ if env is None else env
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE") == "wayland"
    if env.get("SWAYSOCK"):
        return SwayFocus(env["SWAYSOCK"])
    if wayland:
        if kwin_present():
            _warn_once("kwin", "KWin on Wayland: the active window's process cannot be asked here "
                               "(kwin-unsupported); focus is unknown")
            return FixedFocus("kwin-unsupported", "kwin-unsupported")
        return FixedFocus("none", "wayland")
    if env.get("DISPLAY"):
        try:
            return X11Focus(env["DISPLAY"], watch=watch)
        except ImportError:
            _warn_once("xlib", "python3-xlib is not installed: focus on X11 is unknown")
            return FixedFocus("none", "no-python3-xlib")
        except Exception as e:  # noqa: BLE001 - never into the agent
            _warn_once("x11", f"cannot watch the X display {env['DISPLAY']}: {e!r}")
            return FixedFocus("none", "x11-failed")
    return FixedFocus("none", "no-display")


class FocusWatcher:
    """Made once, at the agent's start (an X11 watcher sees presses only from then on)."""

    def __init__(self, env=None, **kw):
        try:
            self.backend = choose_backend(env, **kw)
        except Exception as e:  # noqa: BLE001
            _warn_once("choose", f"cannot tell the focus: {e!r}")
            self.backend = FixedFocus("none", "failed")

    @property
    def via(self):
        return self.backend.via

    def check(self, pid, details=None):
        """The CheckFocus answer for process pid, as plain values (to_variants for D-Bus)."""
        del details  # app-id: not needed to tell who is in front
        try:
            if not isinstance(pid, int) or pid <= 0:
                return unknown(self.backend.via, reason="bad-pid")
            return self.backend.check(pid)
        except Exception as e:  # noqa: BLE001 - never into the agent
            _warn_once("check", f"the focus check failed: {e!r}")
            return unknown(self.backend.via, reason="failed")

    def close(self):
        try:
            self.backend.close()
        except Exception:  # noqa: BLE001
            pass
