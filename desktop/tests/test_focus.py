"""Unit tests of the agent's focus check (geoconsent_desktop.focus) that need
no display: which way each desktop takes, sway's IPC against a stand-in
socket, the raw event layout, and that a check never raises. The X11 way
runs against a real X server and window manager in test-focus.sh."""

import gc
import json
import os
import socket
import struct
import tempfile
import threading
import unittest
import warnings

from geoconsent_desktop import focus


def tree(focused_pid, focused_is_window=True):
    window = {"type": "con", "pid": focused_pid, "focused": focused_is_window, "nodes": [], "floating_nodes": []}
    other = {"type": "con", "pid": 4242, "focused": False, "nodes": [], "floating_nodes": []}
    return {"type": "root", "focused": False, "nodes": [
        {"type": "output", "focused": False, "nodes": [
            {"type": "workspace", "focused": not focused_is_window, "nodes": [other],
             "floating_nodes": [window]}]}]}


class FakeSway:
    """Answers i3 IPC requests on a unix socket with a fixed tree."""

    def __init__(self, reply):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "sway-ipc.sock")
        self.reply = reply
        self.kinds = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                head = conn.recv(14)
                length, kind = struct.unpack("=II", head[6:])
                self.kinds.append((head[:6], kind))
                if length:
                    conn.recv(length)
                body = json.dumps(self.reply).encode()
                conn.sendall(b"i3-ipc" + struct.pack("=II", len(body), kind) + body)

    def close(self):
        self.server.close()
        self.dir.cleanup()


class SwayTests(unittest.TestCase):
    def test_the_focused_window_s_pid_decides(self):
        fake = FakeSway(tree(1234))
        self.addCleanup(fake.close)
        w = focus.FocusWatcher({"SWAYSOCK": fake.path, "WAYLAND_DISPLAY": "wayland-1"})
        self.assertEqual(w.via, "sway")
        answer = w.check(1234)
        self.assertEqual((answer["focused"], answer["press"], answer["via"]), ("yes", "unknown", "sway"))
        self.assertEqual(w.check(4242)["focused"], "no")  # a window behind
        self.assertEqual(w.check(1)["focused"], "no")
        self.assertEqual(fake.kinds[0], (b"i3-ipc", focus.I3_GET_TREE))

    def test_a_focused_workspace_is_nobody_in_front(self):
        fake = FakeSway(tree(1234, focused_is_window=False))
        self.addCleanup(fake.close)
        answer = focus.FocusWatcher({"SWAYSOCK": fake.path}).check(4242)
        self.assertEqual(answer["focused"], "no")

    def test_no_sway_answering_is_unknown(self):
        w = focus.FocusWatcher({"SWAYSOCK": "/nonexistent/sway-ipc.sock"})
        self.assertEqual(w.check(1234), {"focused": "unknown", "press": "unknown", "via": "sway",
                                         "reason": "sway-ipc-failed"})


class ChoiceTests(unittest.TestCase):
    def test_gnome_on_wayland_cannot_tell(self):
        w = focus.FocusWatcher({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, kwin_present=lambda: False)
        self.assertEqual(w.check(1234)["focused"], "unknown")
        self.assertEqual(w.via, "none")

    def test_kwin_on_wayland_is_detected_but_unsupported(self):
        w = focus.FocusWatcher({"XDG_SESSION_TYPE": "wayland"}, kwin_present=lambda: True)
        answer = w.check(1234)
        self.assertEqual((answer["focused"], answer["press"], answer["via"]),
                         ("unknown", "unknown", "kwin-unsupported"))

    def test_no_display_at_all(self):
        self.assertEqual(focus.FocusWatcher({}).check(1234)["via"], "none")

    def test_an_x_display_that_cannot_be_opened_is_unknown_not_an_error(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # python-xlib leaves its failed sockets to the GC
            w = focus.FocusWatcher({"DISPLAY": ":9999"}, watch=False)
            gc.collect()
        self.assertEqual(w.check(1234)["focused"], "unknown")

    def test_a_failing_backend_never_raises(self):
        w = focus.FocusWatcher({})

        class Broken:
            via = "x11"

            def check(self, _pid):
                raise RuntimeError("boom")

        w.backend = Broken()
        self.assertEqual(w.check(1234), {"focused": "unknown", "press": "unknown", "via": "x11", "reason": "failed"})
        self.assertEqual(w.check(0)["reason"], "bad-pid")


class WireTests(unittest.TestCase):
    def test_raw_event_layout(self):
        # deviceid 2 (master), time, detail (button 3), sourceid 4 (an XTEST slave), 0 valuators, flags 0, pad.
        data = struct.pack("=HIIHHI4x", 2, 28014446, 3, 4, 0, 0)
        self.assertEqual(focus.parse_raw_event(data), (2, 28014446, 3, 4, 0))
        with self.assertRaises(ValueError):
            focus.parse_raw_event(b"\0" * 10)

    def test_answer_as_variants(self):
        v = focus.to_variants({"focused": "yes", "presses-counted": 3})
        self.assertEqual(v["focused"].get_type_string(), "s")
        self.assertEqual((v["presses-counted"].get_type_string(), v["presses-counted"].unpack()), ("u", 3))


if __name__ == "__main__":
    unittest.main()
