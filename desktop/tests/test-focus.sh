#!/usr/bin/env bash
# test-focus.sh: the agent's focus check (CheckFocus, geoconsent_desktop/focus.py)
# under Xvfb with a real EWMH window manager (openbox). Runs alone; `make test`
# runs it too. A few seconds.
#
# Starts, each stopped by its PID at the end (on failure too):
#   Xvfb (-displayfd), a private dbus-daemon (tests/dbus/test-bus.conf),
#   openbox, desktop/geoconsent-agent on that bus, and two windows (A, B) of
#   two processes (focus_driver.py window); B's _NET_WM_PID lies: it says A.
# Then focus_driver.py run: XTEST clicks move the focus A -> B; the watcher
# (and the agent over D-Bus, asked by a stand-in for the daemon) says who is
# in front by the X server's XRes PID, counts no XTEST press, and says
# "unknown" once openbox is killed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DESKTOP=$ROOT/desktop
PY=/usr/bin/python3   # Debian's: python3-gi and python3-xlib live in its dist-packages

bash "$ROOT/scripts/deps.sh" --desktop >/dev/null || { echo "focus: installing the desktop packages failed" >&2; exit 1; }
for tool in Xvfb openbox dbus-daemon; do
    command -v "$tool" >/dev/null || { echo "focus: $tool not found (scripts/deps.sh --desktop)" >&2; exit 1; }
done
"$PY" -c 'import Xlib.ext.res' 2>/dev/null || { echo "focus: python3-xlib not found (scripts/deps.sh --desktop)" >&2; exit 1; }

STARTED=$SECONDS
TMP=$(mktemp -d /tmp/geoconsent-focus.XXXXXX) || exit 1
NAMES=()
PIDS=()
CLEANED=no
FAILED=no

# shellcheck source=../../scripts/procs.sh
source "$ROOT/scripts/procs.sh"

cleanup() {
    [[ $CLEANED == yes ]] && return
    CLEANED=yes
    trap '' INT TERM HUP
    stop_started focus 50
    if [[ $FAILED == yes ]]; then
        local f
        for f in "$TMP"/*.log "$TMP"/*.err; do
            [[ -s $f ]] || continue
            echo "---- $f ----" >&2
            tail -n 30 "$f" >&2
        done
        echo "focus: logs kept in $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'FAILED=yes; exit 130' INT
trap 'FAILED=yes; exit 143' TERM
trap 'FAILED=yes; exit 129' HUP

fail() {
    FAILED=yes
    echo "focus: FAIL: $*" >&2
    echo "focus: 0 passed, 1 failed"
    exit 1
}
# shellcheck source=harness.sh
source "$ROOT/desktop/tests/harness.sh"

mkdir -m 0700 "$TMP/xdg-runtime" "$TMP/home"
ENV=(env -u WAYLAND_DISPLAY -u SWAYSOCK -u XDG_SESSION_TYPE -u DBUS_SESSION_BUS_ADDRESS GDK_BACKEND=x11
     NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory XDG_RUNTIME_DIR="$TMP/xdg-runtime" HOME="$TMP/home"
     XDG_CONFIG_HOME="$TMP/home/.config" XDG_CACHE_HOME="$TMP/home/.cache"
     XDG_DATA_HOME="$TMP/home/.local/share" LANG=C.UTF-8 LC_ALL=C.UTF-8)

start xvfb Xvfb -displayfd 3 -screen 0 800x600x24 -nolisten tcp -noreset 3>"$TMP/display"
xvfb_up() { [[ -s $TMP/display ]] || ! alive xvfb; }
wait_for 20 "Xvfb to report its display" xvfb_up
alive xvfb || fail "Xvfb exited"
ENV+=(DISPLAY=":$(head -n 1 "$TMP/display")")

start bus dbus-daemon --config-file="$ROOT/tests/dbus/test-bus.conf" --nofork --print-address=1 \
    --address="unix:dir=$TMP"
wait_for 20 "dbus-daemon's address" has_line bus '^unix:'
BUS=$(head -n 1 "$TMP/bus.log")

start openbox "${ENV[@]}" openbox --sm-disable
# The agent first, so that it sees every press; it waits for the daemon's name.
start agent "${ENV[@]}" "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
start window-a "${ENV[@]}" "$PY" "$DESKTOP/tests/focus_driver.py" window A 40 60
wait_for 20 "window A" has_line window-a '^window A '
A=$(grep '^window A ' "$TMP/window-a.log")
[[ $(field "$A" pid) == "$(pid_of window-a)" ]] || fail "window A's process is not the one started ($A)"
start window-b "${ENV[@]}" "$PY" "$DESKTOP/tests/focus_driver.py" window B 440 60 --lie-pid "$(field "$A" pid)"
wait_for 20 "window B" has_line window-b '^window B '
B=$(grep '^window B ' "$TMP/window-b.log")

start driver "${ENV[@]}" "$PY" "$DESKTOP/tests/focus_driver.py" run \
    --a-pid "$(field "$A" pid)" --a-xid "$(field "$A" xid)" --b-pid "$(field "$B" pid)" --b-xid "$(field "$B" xid)" \
    --openbox-pid "$(pid_of openbox)" --bus "$BUS"
DRIVER=$(pid_of driver)
wait "$DRIVER" 2>/dev/null
status=$?
grep -v '^focus: [0-9]* passed, [0-9]* failed$' "$TMP/driver.log"
[[ -s $TMP/driver.err ]] && cat "$TMP/driver.err" >&2
read -r PASSED FAILS < <(sed -n 's/^focus: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$TMP/driver.log")
PASSED=${PASSED:-0} FAILS=${FAILS:-1}
((status == 0)) || { FAILED=yes; echo "focus: the driver failed (exit $status)" >&2; }
# The agent's own line for each CheckFocus (answers before openbox went, and one after).
if grep -q '^focus pid=.* focused=yes press=unknown via=x11$' "$TMP/agent.log" &&
   grep -q '^focus pid=.* focused=no press=unknown via=x11$' "$TMP/agent.log"; then
    PASSED=$((PASSED + 1))
    echo "focus: ok $PASSED - the agent logs each CheckFocus (focus pid=... focused=... press=... via=...)"
else
    FAILED=yes FAILS=$((FAILS + 1))
    echo "focus: FAIL - the agent did not log its CheckFocus answers" >&2
fi
((FAILS == 0)) || FAILED=yes
echo "focus: took $((SECONDS - STARTED)) s"
echo "focus: $PASSED passed, $FAILS failed"
[[ $FAILED == no ]]
