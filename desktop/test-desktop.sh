#!/usr/bin/env bash
# test-desktop.sh [BIN_DIR]: the desktop end-to-end test, in a real X server.
#
#   Xvfb on a display number it picks itself (-displayfd), 800x600
#   scripts/run-stack.sh BIN_DIR: private dbus-daemon, gpsd fed data/track.nmea
#       (a drive through Berlin), the built geoconsentd
#   desktop/geoconsent-agent (the graphical consent agent) on that bus
#   desktop/location-button-demo (the app with the location button)
#
# and then, as a person would, with xdotool on real X input:
#   1. the button is clicked; the consent dialog appears, naming the app;
#   2. "Allow Once" is clicked; the fix appears in the app, inside the track's
#      area; the dialog is gone;
#   3. the button is clicked again: a fix, and no second prompt (one-time
#      approval is remembered; the action runs on every press); a second
#      instance of the app (a new session) taps: no prompt either, the daemon
#      tells the agent (Notice) and a notification names the app;
#   4. two more apps ask at once (geoconsentctl locate: one-time; busctl:
#      when-in-use): one dialog at a time, the second queued; the first app
#      quits, so the daemon cancels its prompt and the dialog is withdrawn; the
#      queued three-button dialog follows; "Don't Allow" is clicked and busctl
#      gets status 2 (denied);
#   5. the demo refuses --label none --icon none; other button styles render;
#   6. with another agent of the same uid registered first, the agent waits for
#      the slot (retrying) and registers once it is free.
# It also checks that a client calling the agent directly (Confirm, Cancel)
# is refused: only the daemon may open or withdraw prompts; and, on a session
# bus of the test's own with Debian's StatusNotifierWatcher and dunst (a tray
# host's reads: desktop/tests/sni_host.py), that the agent registers with its
# features, that its indicator names an app that receives location (read as
# a tray host reads it), that its Stop entry ends the app's grant and the
# item goes Passive, and that the notice shows in Korean too.
#
# Screenshots (PNG) go to DESKTOP_SCREENSHOTS (default docs/screenshots):
#   location-button.png            the app before the press
#   consent-prompt.png             the app and the one-time prompt above it
#   location-result.png            the app showing the fix
#   consent-prompt-when-in-use.png the standard prompt (three answers)
#   button-styles.png              other CLLocationButton styles
#   notice.png, notice-ko.png      the notification at a silent tap, in English
#                                  and Korean (dunst draws it)
#   settings-lapsed.png, settings-lapsed-ko.png
#                                  the settings window scrolled to "Lapsed"
#   indicator.png, indicator-ko.png
#                                  the indicator's menu, opened in a tray that
#                                  draws StatusNotifierItems (gtk-sni-tray-standalone)
#   consent-prompt-not-in-front.png
#                                  an app allowed once asked with another window in front
#
# BIN_DIR holds geoconsentd, geoconsentctl and nmea-replay; default: $GEOCONSENT_BIN,
# else `swift build --show-bin-path`. Missing Debian packages are installed
# first (scripts/deps.sh --desktop). Every process started here is stopped at
# the end, on failure too, by its PID. Logs are kept in the temp dir (and
# printed) only when the test fails.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DESKTOP=$ROOT/desktop
SHOTS=${DESKTOP_SCREENSHOTS:-$ROOT/docs/screenshots}
PY=/usr/bin/python3   # Debian's: python3-gi lives in its dist-packages

if (($# > 1)); then echo "usage: $0 [BIN_DIR]" >&2; exit 2; fi
if (($# == 1)); then
    BIN=$1
elif [[ -n ${GEOCONSENT_BIN:-} ]]; then
    BIN=$GEOCONSENT_BIN
else
    BIN=$(cd "$ROOT" && swift build --show-bin-path) || { echo "desktop: swift build --show-bin-path failed" >&2; exit 1; }
fi
[[ -d $BIN ]] || { echo "desktop: no such directory: $BIN" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)

bash "$ROOT/scripts/deps.sh" --desktop || { echo "desktop: installing the desktop packages failed" >&2; exit 1; }

STARTED=$SECONDS
PASSED=0
TMP=$(mktemp -d /tmp/geoconsent-desktop.XXXXXX) || exit 1
NAMES=()
PIDS=()
CLEANED=no
FAILED=no

say() { echo "desktop: $*"; }

show_logs() {
    local f
    for f in "$TMP"/*.log "$TMP"/*.err; do
        [[ -s $f ]] || continue
        echo "---- $f ----" >&2
        tail -n 30 "$f" >&2
    done
    echo "----" >&2
}

# shellcheck source=../scripts/procs.sh
source "$ROOT/scripts/procs.sh"

cleanup() {
    [[ $CLEANED == yes ]] && return
    CLEANED=yes
    trap '' INT TERM HUP
    # The daemon's log lives in run-stack.sh's directory, removed when it stops: kept on a failure.
    if [[ $FAILED == yes ]]; then
        local dlog
        dlog=$(sed -n 's/^  daemon .*, log \([^ ,]*\).*/\1/p' "$TMP/stack.log" 2>/dev/null | head -n 1)
        [[ -n $dlog && -f $dlog ]] && cp "$dlog" "$TMP/geoconsentd.log"
    fi
    # Reverse start order: apps and clients, then the stack, then the X server.
    # run-stack.sh needs up to ~3 s to stop its own children; give everyone 8 s.
    stop_started desktop 80
    if [[ $FAILED == yes ]]; then
        show_logs
        echo "desktop: logs kept in $TMP" >&2
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
    echo "desktop: FAIL: $*" >&2
    echo "desktop: took $((SECONDS - STARTED)) s"
    echo "desktop: $PASSED passed, 1 failed"
    exit 1
}
pass() { PASSED=$((PASSED + 1)); say "ok $PASSED - $*"; }

# shellcheck source=tests/harness.sh
source "$DESKTOP/tests/harness.sh"
# running PID: the process exists and is not a zombie.
running() { pid_running "$1"; }
# stop NAME: SIGTERM (SIGKILL after 5 s), reap it (it is our child), forget it.
stop() {
    local pid i
    pid=$(pid_of "$1")
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    if running "$pid"; then
        echo "desktop: $1 (pid $pid) ignored SIGTERM; killing" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
    for i in "${!PIDS[@]}"; do [[ ${PIDS[i]} == "$pid" ]] && unset 'PIDS[i]' 'NAMES[i]'; done
    PIDS=("${PIDS[@]}")
    NAMES=("${NAMES[@]}")
}

# has_line_after NAME FIRST THEN: a line matching THEN after one matching FIRST.
has_line_after() { awk -v a="$2" -v b="$3" '$0 ~ a {seen=1; next} seen && $0 ~ b {found=1} END {exit !found}' "$TMP/$1.log"; }

# Window helpers (xdotool finds windows by name; rectangles are x,y,w,h).
find_window() { xdotool search --onlyvisible --name "$1" 2>/dev/null | head -n 1; }
window_count() { xdotool search --onlyvisible --name "$1" 2>/dev/null | wc -l; }
geometry() {   # WID -> "X Y W H"
    local X Y WIDTH HEIGHT
    eval "$(xdotool getwindowgeometry --shell "$1" | grep -E '^(X|Y|WIDTH|HEIGHT)=[0-9]+$')"
    echo "$X $Y $WIDTH $HEIGHT"
}
# click_rect WID X,Y,W,H: a real (XTEST) click in the middle of that rectangle
# of window WID.
click_rect() {
    local x y w h
    IFS=, read -r x y w h <<<"$2"
    # A pixel aside first: --sync waits (15 s) for a motion that never comes
    # when the pointer is already there (a second click on the same switch).
    xdotool mousemove --window "$1" $((x + w / 2 + 1)) $((y + h / 2)) || fail "xdotool mousemove"
    xdotool mousemove --sync --window "$1" $((x + w / 2)) $((y + h / 2)) || fail "xdotool mousemove"
    sleep 0.15
    xdotool click 1 || fail "xdotool click"
}
shot() {   # shot NAME [X Y W H]
    "$PY" "$DESKTOP/xvfb-helper" screenshot "$SHOTS/$1" "${@:2}" || fail "screenshot $1"
}
shot_window() {   # shot_window NAME WID [MARGIN]
    local g m=${3:-0}
    read -r -a g <<<"$(geometry "$2")"
    shot "$1" $((g[0] - m)) $((g[1] - m)) $((g[2] + 2 * m)) $((g[3] + 2 * m))
}

mkdir -p "$SHOTS" || fail "cannot create $SHOTS"
# The catalogs the agent reads from the checkout (.build/locale), for step 7.
bash "$ROOT/scripts/po-check.sh" >/dev/null || fail "the translations do not compile (scripts/po-check.sh)"
for exe in geoconsentd geoconsentctl nmea-replay; do
    [[ -x $BIN/$exe ]] || fail "$BIN/$exe not found (build first)"
done
BUSCTL=$(command -v busctl) || fail "busctl not found (scripts/deps.sh)"

# The track's area: the fix must lie inside it (with ~100 m to spare).
read -r LAT0 LAT1 LON0 LON1 < <("$PY" - "$ROOT/data/track.nmea" <<'EOF'
import sys
lats, lons = [], []
for line in open(sys.argv[1]):
    f = line.split(",")
    if f[0].endswith("GGA") and f[2] and f[4]:
        lat = int(f[2][:2]) + float(f[2][2:]) / 60
        lon = int(f[4][:3]) + float(f[4][3:]) / 60
        lats.append(-lat if f[3] == "S" else lat)
        lons.append(-lon if f[5] == "W" else lon)
print(min(lats) - 0.001, max(lats) + 0.001, min(lons) - 0.0015, max(lons) + 0.0015)
EOF
)
[[ -n ${LON1:-} ]] || fail "could not read data/track.nmea"
in_track() {   # in_track LAT LON
    "$PY" -c "import sys; la, lo = float(sys.argv[1]), float(sys.argv[2]); \
sys.exit(0 if $LAT0 <= la <= $LAT1 and $LON0 <= lo <= $LON1 else 1)" "$1" "$2"
}

# GUI programs: X only, no session bus, accessibility bus or dconf, nothing
# written to the caller's home.
mkdir -m 0700 "$TMP/xdg-runtime" "$TMP/home"
GUI_ENV=(env -u WAYLAND_DISPLAY -u DBUS_SESSION_BUS_ADDRESS GDK_BACKEND=x11 NO_AT_BRIDGE=1
         GSETTINGS_BACKEND=memory XDG_RUNTIME_DIR="$TMP/xdg-runtime" HOME="$TMP/home"
         XDG_CONFIG_HOME="$TMP/home/.config" XDG_CACHE_HOME="$TMP/home/.cache"
         XDG_DATA_HOME="$TMP/home/.local/share" LANG=C.UTF-8 LC_ALL=C.UTF-8)

# ---- Xvfb ------------------------------------------------------------------
start xvfb Xvfb -displayfd 3 -screen 0 800x600x24 -nolisten tcp -noreset 3>"$TMP/display"
xvfb_up() { [[ -s $TMP/display ]] || ! alive xvfb; }
wait_for 20 "Xvfb to report its display" xvfb_up
alive xvfb || fail "Xvfb exited"
DISPLAY=:$(head -n 1 "$TMP/display")
export DISPLAY
GUI_ENV+=(DISPLAY="$DISPLAY")
say "Xvfb on $DISPLAY"

start backdrop "${GUI_ENV[@]}" "$PY" "$DESKTOP/xvfb-helper" backdrop '#4b5563'
wait_for 20 "the backdrop" has_line backdrop '^backdrop ready'

# ---- a session bus: a tray's StatusNotifierWatcher, a notification server ----
# The agent's indicator and notices live on the session bus: one of the test's
# own (no activation: nothing starts by itself), with Debian's
# StatusNotifierWatcher (status-notifier-watcher, where trays find items) and
# dunst, which draws the notices and prints each one (-print). Only the
# agents given SESSION use it. A tray that draws the items
# (gtk-sni-tray-standalone) comes up for the indicator's pictures only.
cat >"$TMP/session-bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$TMP/session-bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
CONF
start sessionbus dbus-daemon --config-file="$TMP/session-bus.conf" --nofork
session_bus_up() { [[ -S $TMP/session-bus ]] || ! alive sessionbus; }
wait_for 10 "the session bus" session_bus_up
SESSION=(DBUS_SESSION_BUS_ADDRESS="unix:path=$TMP/session-bus")
start watcher "${GUI_ENV[@]}" "${SESSION[@]}" status-notifier-watcher
printf '[global]\n    width = 360\n    offset = 10x40\n    font = DejaVu Sans 9\n' >"$TMP/dunstrc"
start dunst "${GUI_ENV[@]}" "${SESSION[@]}" dunst -config "$TMP/dunstrc" -print
sni_host() { "${GUI_ENV[@]}" "${SESSION[@]}" "$PY" "$DESKTOP/tests/sni_host.py" "$@"; }
# Notices on screen go once shot: they would cover the windows clicked next.
close_notices() { "${GUI_ENV[@]}" "${SESSION[@]}" dunstctl close-all || fail "dunstctl close-all"; }
notifications_up() {
    gdbus call --address "unix:path=$TMP/session-bus" --dest org.freedesktop.DBus --object-path / \
        --method org.freedesktop.DBus.NameHasOwner org.freedesktop.Notifications 2>/dev/null | grep -q true
}
watcher_up() {
    gdbus call --address "unix:path=$TMP/session-bus" --dest org.freedesktop.DBus --object-path / \
        --method org.freedesktop.DBus.NameHasOwner org.kde.StatusNotifierWatcher 2>/dev/null | grep -q true
}
wait_for 10 "the StatusNotifierWatcher" watcher_up
# tray_shot NAME: a tray that draws the items, the agent's item's menu opened
# as a user opens it (a right click on its icon), shot, closed.
tray_shot() {
    start tray "${GUI_ENV[@]}" "${SESSION[@]}" gtk-sni-tray-standalone --top --end -s 32 -c '#e8e8e8'
    tray_up() { [[ -n $(xdotool search --onlyvisible --name '^gtk-sni-tray-standalone$' 2>/dev/null) ]]; }
    wait_for 10 "the tray" tray_up
    sleep 1   # its items' icons read and drawn
    xdotool mousemove 783 15 click 3 || fail "xdotool click on the tray's icon"
    sleep 0.6
    shot "$1" 0 0 800 140
    xdotool key Escape
    stop tray
}
wait_for 10 "dunst on the session bus" notifications_up

# ---- bus, gpsd, daemon -------------------------------------------------------
# No automatic agent: the graphical one under test is the user's agent. Wi-Fi
# positioning is configured, so that the settings window shows root its switch
# (GPS answers here: no lookup is made, and its helper is nowhere).
printf '[sources]\nwifi-url = https://127.0.0.1:9/v1/geolocate\nwifi-helper = %s\n' "$TMP/no-helper.sock" >"$TMP/sources.conf"
# The administrator's desktop entry for the demo (docs/dbus-api.md, "The app's
# desktop entry"): the prompt names the app by it. Only root's entries count,
# so as another user the prompt names the script instead.
DEMO_SCRIPT=$(realpath "$DESKTOP/location-button-demo")
mkdir -m 0755 "$TMP/applications"
printf '[Desktop Entry]\nType=Application\nName=Location Button Demo\nName[de]=Standort-Knopf-Demo\nIcon=%s\nExec=%s\n' \
    "$(realpath "$DESKTOP/data/org.geoconsent.Agent.svg")" "$DEMO_SCRIPT" >"$TMP/applications/org.geoconsent.ButtonDemo.desktop"
printf '[daemon]\ndesktop-entries = %s\n' "$TMP/applications" >>"$TMP/sources.conf"
# A stored decision of an app unused for 100 days: the daemon lapses it as it
# starts ([daemon] unused-lapse, 90 by default), and the settings window lists it.
LAPSE_USED=$(( ($(date +%s) - 100 * 86400) * 1000000 ))
printf '# geoconsent consents v1\n%s\t/usr/bin/old-weather\twhen-in-use\tfull\t0\t-\t%s\t%s\n' \
    "$(id -u)" "$LAPSE_USED" "$LAPSE_USED" >"$TMP/consents"
GEOCONSENT_CONFIG="$TMP/sources.conf" GEOCONSENT_STATE="$TMP/consents" GEOCONSENT_AGENT=none \
    start stack bash "$ROOT/scripts/run-stack.sh" "$BIN"
stack_up() { has_line stack '^geoconsent stack is running' || ! alive stack; }
wait_for 30 "scripts/run-stack.sh" stack_up
has_line stack '^geoconsent stack is running' || fail "scripts/run-stack.sh did not start the stack"
BUS=$(sed -n 's/^  bus      //p' "$TMP/stack.log")
[[ $BUS == unix:* ]] || fail "no bus address from run-stack.sh"
say "stack on $BUS"

# ---- the agent and the app ---------------------------------------------------
start agent "${GUI_ENV[@]}" "${SESSION[@]}" "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
wait_for 20 "the agent to register" has_line agent '^registered uid='
has_line agent '^registered uid=.* features=notices,focus$' || fail "registered without its features: $(line agent '^registered ')"
item_registered() { sni_host read >"$TMP/sni-read.log" 2>&1 && grep -q '^item ' "$TMP/sni-read.log"; }
wait_for 10 "its indicator at the watcher" item_registered
grep -qx 'status Passive' "$TMP/sni-read.log" || fail "the indicator is not Passive with no app receiving: $(cat "$TMP/sni-read.log")"
pass "geoconsent-agent registered with the daemon (RegisterAgentWithOptions, features notices,focus); its indicator is at the StatusNotifierWatcher, Passive"

start demo "${GUI_ENV[@]}" "$PY" "$DESKTOP/location-button-demo" --bus "$BUS" \
    --reason "Show where you are on the map"
wait_for 20 "the demo window" has_line demo '^ready window='
DEMO_WIN=$(find_window '^Location Button Demo$')
[[ -n $DEMO_WIN ]] || fail "no window named 'Location Button Demo'"
BUTTON=$(field "$(line demo '^ready window=')" button)
[[ -n $BUTTON ]] || fail "the demo did not say where its button is"
sleep 0.3   # let it paint
shot_window location-button.png "$DEMO_WIN"
pass "the app shows its location button (window $DEMO_WIN, button at $BUTTON)"

# ---- 1. press: the prompt ---------------------------------------------------
click_rect "$DEMO_WIN" "$BUTTON"
wait_for 10 "the app to see the press" has_line demo '^press 1$'
wait_for 20 "the consent dialog" has_line agent '^ready '
READY=$(line agent '^ready ')
REQ=$(awk '{print $2}' <<<"$READY")
PROMPT=$(line agent "^prompt $REQ ")
# The demo is a Python script: it is the app, not /usr/bin/python3 (rule 4 of "Identity").
[[ $PROMPT == *"kind=one-time app-id=$DEMO_SCRIPT "* ]] || fail "unexpected prompt: '$PROMPT' (app is $DEMO_SCRIPT)"
# How sure the daemon is of the app: a script's path is proven only for a system
# uid; a checkout's script is no program the administrator installed.
PROVEN=$(( $(id -u) <= 999 ? 1 : 0 ))
IDENT=$(line agent "^identity $REQ ")
[[ $IDENT == "identity $REQ kind=script proven=$PROVEN installed=0" ]] || fail "identity line: '$IDENT' (expected proven=$PROVEN)"
if (( $(id -u) == 0 )); then
    NAMED="named $REQ entry=$TMP/applications/org.geoconsent.ButtonDemo.desktop name=Location Button Demo"
else
    NAMED="named $REQ entry=- name=-"
fi
[[ $(line agent "^named $REQ ") == "$NAMED" ]] || fail "the entry naming the app: '$(line agent "^named $REQ ")', not '$NAMED'"
# Where the position would come from: the receiver, and Wi-Fi (configured here).
[[ $(line agent "^sources $REQ ") == "sources $REQ gps,wifi" ]] || fail "sources line: '$(line agent "^sources $REQ ")'"
[[ -n $(field "$READY" precise) ]] || fail "no Precise switch in a precise request's dialog: '$READY'"
DLG=$(find_window '^Location request$')
[[ -n $DLG && $DLG == "$(field "$READY" window)" ]] || fail "no visible 'Location request' window matching '$READY'"
# The keyboard starts on the safe answer.
[[ $(field "$READY" focus) == deny ]] || fail "the focus is not on Don't Allow: '$READY'"
# Over the app that asked (its parent-window), not in the middle of the screen.
PLACED=$(line agent "^placed $REQ ")
[[ $PLACED == "placed $REQ parent=x11:$(printf '%x' "$DEMO_WIN") "* ]] || fail "not placed over the demo's window: '$PLACED'"
read -r DX DY DW DH <<<"$(geometry "$DLG")"
read -r AX AY AW AH <<<"$(geometry "$DEMO_WIN")"
(( DX <= AX + AW / 2 && AX + AW / 2 < DX + DW && DY <= AY + AH / 2 && AY + AH / 2 < DY + DH )) ||
    fail "the dialog ($DX,$DY ${DW}x$DH) is not over the demo's window ($AX,$AY ${AW}x$AH)"
# The warning colour is readable on the theme's background (WCAG 4.5:1).
readable() { awk -v c="$(field "$1" contrast)" 'BEGIN { exit !(c + 0 >= 4.5) }'; }
readable "$(line agent "^colours $REQ ")" || fail "the warning colour: '$(line agent "^colours $REQ ")'"
sleep 0.2
shot consent-prompt.png
pass "pressing the button opens a one-time prompt for $DEMO_SCRIPT, identity script proven=$PROVEN, ${NAMED#* * }, with a Precise switch (dialog $DLG, over the demo's window, the focus on Don't Allow, $(field "$(line agent "^colours $REQ ")" contrast):1 for warnings)"

# Details: what the name rests on (kind, program, script, process, entry).
click_rect "$DLG" "$(field "$READY" details)"
wait_for 10 "Details to open (and the buttons to arm again)" has_line agent "^details $REQ open "
READY=$(line agent "^details $REQ open ")
sleep 0.2
shot consent-prompt-details.png
pass "Details opens under the headline, and the buttons arm again where they moved to"

# ---- 2. Allow Once: the fix --------------------------------------------------
ALLOW=$(field "$READY" allow-once)
[[ -n $ALLOW && -z $(field "$READY" allow-while-using) ]] || fail "one-time dialog buttons: '$READY'"
click_rect "$DLG" "$ALLOW"
wait_for 10 "the agent to answer" has_line agent "^answered $REQ allow-once$"
wait_for 40 "the fix in the app" has_line demo '^(fix|error) press=1 '
FIX=$(line demo '^(fix|error) press=1 ')
[[ $FIX == fix* ]] || fail "the app got no fix: $FIX"
LAT=$(field "$FIX" latitude)
LON=$(field "$FIX" longitude)
in_track "$LAT" "$LON" || fail "fix $LAT, $LON is outside the track ($LAT0..$LAT1, $LON0..$LON1)"
[[ $(field "$FIX" accuracy-authorization) == full ]] || fail "expected a precise fix: $FIX"
no_dialog() { [[ -z $(find_window '^Location request$') ]]; }
wait_for 5 "the dialog to close" no_dialog
sleep 0.4   # let it paint
shot_window location-result.png "$DEMO_WIN"
pass "Allow Once: the app shows the fix $LAT, $LON (inside the track) and the dialog is gone"

# ---- 3. press again: no prompt, a fix ----------------------------------------
click_rect "$DEMO_WIN" "$BUTTON"
wait_for 40 "the second fix" has_line demo '^(fix|error) press=2 '
FIX2=$(line demo '^(fix|error) press=2 ')
[[ $FIX2 == fix* ]] || fail "second press: $FIX2"
in_track "$(field "$FIX2" latitude)" "$(field "$FIX2" longitude)" || fail "second fix outside the track: $FIX2"
(($(grep -c '^prompt ' "$TMP/agent.log") == 1)) || fail "the second press prompted again"
pass "a second press gets a fix without a prompt"

# ---- 3b. the notice at a silent tap ------------------------------------------
# The second press was on the connection that still holds its grant (rule 2).
# A second instance of the app is a new session: its press is a silent tap
# (rule 3); the daemon tells the agent (Notice), and a passing notification
# names the app (by its desktop entry for root, as the prompt did).
start demo2 "${GUI_ENV[@]}" "$PY" "$DESKTOP/location-button-demo" --bus "$BUS"
wait_for 20 "the second demo window" has_line demo2 '^ready window='
READY2=$(line demo2 '^ready window=')
click_rect "$(field "$READY2" window)" "$(field "$READY2" button)"
wait_for 40 "its fix" has_line demo2 '^(fix|error) press=1 '
[[ $(line demo2 '^(fix|error) press=1 ') == fix* ]] || fail "the second instance got no fix: $(line demo2 '^(fix|error) press=1 ')"
(($(grep -c '^prompt ' "$TMP/agent.log") == 1)) || fail "the second instance's press prompted"
if (( $(id -u) == 0 )); then APP_NAME="Location Button Demo"; else APP_NAME=$DEMO_SCRIPT; fi
wait_for 10 "the agent's notice" has_line agent "^notice $DEMO_SCRIPT "
NOTICE=$(line agent "^notice $DEMO_SCRIPT ")
[[ $NOTICE == *" text=$APP_NAME got your location once"* ]] || fail "the notice: '$NOTICE' (app $APP_NAME)"
shown_by_dunst() { grep -qF "summary: '$1'" "$TMP/dunst.log"; }
wait_for 10 "dunst to show it" shown_by_dunst "$APP_NAME got your location once"
sleep 0.3
shot notice.png
close_notices
stop demo2
pass "the silent press shows a notification: '$APP_NAME got your location once' ($(field "$NOTICE" focus), always=$(field "$NOTICE" always))"

# ---- an app cannot drive the agent itself -----------------------------------
AGENT_NAME=$("$BUSCTL" --address="$BUS" list --no-pager 2>/dev/null |
             awk -v p="$(pid_of agent)" '$1 ~ /^:/ && $2 == p { print $1; exit }')
[[ -n $AGENT_NAME ]] || fail "cannot find the agent's connection on the bus"
for call in "Confirm sssa{sv} fake /usr/bin/fake one-time 0" "Cancel s $REQ"; do
    read -r -a c <<<"$call"
    if out=$("$BUSCTL" --address="$BUS" call "$AGENT_NAME" /org/geoconsent/desktop/Agent \
             org.geoconsent.GeoConsent1.Agent "${c[@]}" 2>&1); then
        fail "a client's ${c[0]} to the agent succeeded: $out"
    fi
    [[ $out == *"ccess denied"* ]] || fail "a client's ${c[0]} to the agent: expected AccessDenied, got: $out"
done
has_line agent '^prompt fake ' && fail "the agent took a Confirm from a client"
pass "the agent refuses Confirm and Cancel from anyone but the daemon"

# ---- 4. queue and Cancel -----------------------------------------------------
start locate "$BIN/geoconsentctl" --bus "$BUS" locate
wait_for 20 "geoconsentctl's prompt" has_line agent '^prompt [^ ]+ kind=one-time app-id=.*/geoconsentctl '
REQ_L=$(awk '{print $2}' <<<"$(line agent '^prompt [^ ]+ kind=one-time app-id=.*/geoconsentctl ')")
wait_for 10 "geoconsentctl's dialog" has_line agent "^ready $REQ_L "
start busctl "$BUSCTL" --address="$BUS" --timeout=120 call org.geoconsent.GeoConsent1 /org/geoconsent/GeoConsent1 \
    org.geoconsent.GeoConsent1 RequestWhenInUseAuthorization 'a{sv}' 2 \
    reason s "Find restaurants near you" app-name s "Busy Maps"
wait_for 20 "busctl's prompt to queue" has_line agent '^prompt [^ ]+ kind=when-in-use app-id=.*busctl queued=1$'
REQ_B=$(awk '{print $2}' <<<"$(line agent '^prompt [^ ]+ kind=when-in-use ')")
sleep 0.3
(($(window_count '^Location request$') == 1)) || fail "expected one dialog while the second prompt queues"
has_line agent "^shown $REQ_B$" && fail "the queued prompt was shown at once"
pass "a second prompt queues behind the open one"

stop locate   # the app leaves: the daemon cancels its prompt
wait_for 10 "the withdrawal" has_line agent "^withdrawn $REQ_L$"
wait_for 10 "the queued dialog" has_line agent "^ready $REQ_B "
READY_B=$(line agent "^ready $REQ_B ")
DLG_B=$(find_window '^Location request$')
[[ -n $DLG_B && $DLG_B == "$(field "$READY_B" window)" ]] || fail "no dialog for the queued prompt ($READY_B)"
(($(window_count '^Location request$') == 1)) || fail "the withdrawn dialog is still on screen"
[[ -n $(field "$READY_B" allow-while-using) && -n $(field "$READY_B" allow-once) && -n $(field "$READY_B" deny) ]] ||
    fail "when-in-use dialog buttons: '$READY_B'"
sleep 0.2
shot consent-prompt-when-in-use.png
pass "the app quit: its dialog was withdrawn (Cancel) and the queued three-button dialog followed"

click_rect "$DLG_B" "$(field "$READY_B" deny)"
wait_for 10 "the agent to answer" has_line agent "^answered $REQ_B deny$"
busctl_done() { ! alive busctl; }
wait_for 10 "busctl to return" busctl_done
[[ $(cat "$TMP/busctl.log") == "u 2" ]] || fail "busctl got '$(cat "$TMP/busctl.log" "$TMP/busctl.err")', expected 'u 2'"
pass "Don't Allow answers the standard prompt with denied (status 2)"

# ---- 4b. Precise off ---------------------------------------------------------------
# geoconsentctl asks again (its first prompt was withdrawn, nothing stored); the
# user turns Precise off and allows once: the app gets the approximate location.
# ctl_dialog NAME N: `geoconsentctl locate` started as NAME, until the agent shows
# geoconsentctl's Nth prompt armed; sets REQ, READY (its ready line) and DLG.
ctl_dialog() {
    start "$1" "$BIN/geoconsentctl" --bus "$BUS" locate
    ctl_prompts() { (($(grep -c '^prompt [^ ]* kind=one-time app-id=.*/geoconsentctl ' "$TMP/agent.log") >= $1)); }
    wait_for 20 "geoconsentctl's prompt $2" ctl_prompts "$2"
    REQ=$(awk '{print $2}' <<<"$(line agent '^prompt [^ ]+ kind=one-time app-id=.*/geoconsentctl ')")
    wait_for 10 "its dialog" has_line agent "^ready $REQ "
    READY=$(line agent "^ready $REQ ")
    DLG=$(find_window '^Location request$')
    [[ -n $DLG && $DLG == "$(field "$READY" window)" ]] || fail "no dialog for geoconsentctl's prompt ($READY)"
}
ctl_dialog locate2 2
REQ_P=$REQ READY_P=$READY DLG_P=$DLG
click_rect "$DLG_P" "$(field "$READY_P" precise)"
wait_for 5 "the Precise switch to turn off" has_line agent "^precise $REQ_P off "
sleep 0.3
shot consent-prompt-precise-off.png
# Where Allow Once is now: the longer text may have moved it.
click_rect "$DLG_P" "$(field "$(line agent "^precise $REQ_P off ")" allow-once)"
wait_for 10 "the agent to answer" has_line agent "^answered $REQ_P allow-once-reduced$"
locate2_done() { ! alive locate2; }
wait_for 40 "geoconsentctl's fix" locate2_done
grep -Eq '^ *Authorization: reduced$' "$TMP/locate2.log" ||
    fail "geoconsentctl did not get the approximate location: $(cat "$TMP/locate2.log" "$TMP/locate2.err")"
grep -q 'Altitude' "$TMP/locate2.log" && fail "an approximate fix with an altitude: $(cat "$TMP/locate2.log")"
pass "Precise off, Allow Once: the agent answers allow-once-reduced and the app gets the approximate location"

# ---- 4b'. a request that queues moves no armed button -----------------------------
# An app can queue a request at any moment: the dialog's "1 more request" line
# must not push the armed buttons away from where the user aims. A real
# (XTEST) click where Don't Allow was when it armed lands on it.
ctl_dialog locate_q 3
REQ_Q=$REQ READY_Q=$READY DLG_Q=$DLG
start busctl2 "$BUSCTL" --address="$BUS" --timeout=120 call org.geoconsent.GeoConsent1 /org/geoconsent/GeoConsent1 \
    org.geoconsent.GeoConsent1 RequestOneTimeAuthorization 'a{sv}' 1 app-name s "Queued Maps"
wait_for 20 "busctl's tap to queue" has_line agent '^prompt [^ ]+ kind=one-time app-id=.*busctl queued=1$'
REQ_Q2=$(awk '{print $2}' <<<"$(line agent '^prompt [^ ]+ kind=one-time app-id=.*busctl ')")
sleep 0.5   # laid out with the new line
has_line agent "^moved $REQ_Q$" && fail "the queued request moved the armed buttons"
shot consent-prompt-queued.png
click_rect "$DLG_Q" "$(field "$READY_Q" deny)"
wait_for 10 "the click where Don't Allow was armed" has_line agent "^answered $REQ_Q deny$"
wait_for 10 "the queued dialog" has_line agent "^ready $REQ_Q2 "
click_rect "$(find_window '^Location request$')" "$(field "$(line agent "^ready $REQ_Q2 ")" deny)"
wait_for 10 "the queued prompt's answer" has_line agent "^answered $REQ_Q2 deny$"
busctl2_done() { ! alive busctl2; }
wait_for 10 "busctl to return" busctl2_done
locate_q_done() { ! alive locate_q; }
wait_for 10 "geoconsentctl to give up" locate_q_done
pass "a request that queues behind an open dialog moves none of its armed buttons: the click lands on Don't Allow"

# ---- 4c. the settings window: in use now, live, and the user's decisions -----------
# geoconsentctl watches (approximate: its approval covers it, no prompt); the
# settings window shows it in use now; Ask Next Time forgets it and ends its grant at
# once, so the watch ends and the row goes.
start watch "$BIN/geoconsentctl" --bus "$BUS" watch --accuracy reduced
has_fix() { [[ -s $TMP/watch.log ]] || ! alive watch; }
wait_for 40 "geoconsentctl watch's first fix" has_fix
alive watch || fail "geoconsentctl watch ended: $(cat "$TMP/watch.err")"

# ---- 4c'. the indicator names the app and stops it ------------------------------
# While geoconsentctl receives, the agent's item is Active: a tray host
# (sni_host.py) reads its title and its dbusmenu, and clicks "Stop …": the
# daemon ends the app's grants (EndGrants), the watch ends, the item goes Passive.
wait_for 10 "the indicator to go active" has_line agent '^indicator active 1 '
CTL_APP=$(line agent '^indicator active 1 ' | awk '{print $4}')
[[ $CTL_APP == */geoconsentctl ]] || fail "the indicator names '$CTL_APP', not geoconsentctl"
sni_host read >"$TMP/sni-read.log" 2>&1 || fail "reading the indicator: $(cat "$TMP/sni-read.log")"
grep -qx 'status Active' "$TMP/sni-read.log" || fail "the item is not Active: $(cat "$TMP/sni-read.log")"
grep -qF "title Using your location: $CTL_APP (approximate, since " "$TMP/sni-read.log" ||
    fail "the item's title: $(grep '^title' "$TMP/sni-read.log")"
MENU=$(sed -n 's/^menu [0-9]* enabled=1 //p' "$TMP/sni-read.log")
grep -qxF "Stop $CTL_APP" <<<"$MENU" && grep -qxF "Location Settings…" <<<"$MENU" ||
    fail "the item's menu: $(grep '^menu' "$TMP/sni-read.log")"
close_notices   # the watch's own silent tap was noticed: not over the menu
tray_shot indicator.png
# Location Settings… opens the settings window (the agent's child: stopped here by its PID).
sni_host click "Location Settings…" >>"$TMP/sni-read.log" 2>&1 || fail "clicking Location Settings…: $(cat "$TMP/sni-read.log")"
wait_for 10 "the agent to start the settings window" has_line agent '^settings-started pid=[0-9]+$'
NAMES+=(settings_menu)
PIDS+=("$(line agent '^settings-started pid=' | sed 's/.*pid=//')")
settings_shown() { [[ -n $(find_window '^Location Settings$') ]]; }
wait_for 20 "the settings window the menu opened" settings_shown
stop settings_menu
sni_host click "Stop $CTL_APP" >>"$TMP/sni-read.log" 2>&1 || fail "clicking Stop: $(cat "$TMP/sni-read.log")"
wait_for 10 "the daemon to stop it" has_line agent "^stopped $CTL_APP ok$"
watch_stopped() { ! alive watch; }
wait_for 10 "geoconsentctl watch to end with its grant" watch_stopped
wait_for 10 "the indicator to go passive" has_line_after agent "^stop $CTL_APP$" '^indicator passive$'
sni_host read >"$TMP/sni-read.log" 2>&1 || fail "reading the indicator: $(cat "$TMP/sni-read.log")"
grep -qx 'status Passive' "$TMP/sni-read.log" || fail "the item is not Passive after Stop: $(cat "$TMP/sni-read.log")"
pass "the indicator names $CTL_APP approximate while it receives; Location Settings… opens the settings window; Stop ended the grant (the watch ended) and the item went Passive"
close_notices   # the watch's own silent tap was noticed too
stop watch
# The stored approval stays (Stop ends grants only): the watch starts again silently.
start watch "$BIN/geoconsentctl" --bus "$BUS" watch --accuracy reduced
wait_for 40 "geoconsentctl watch's first fix" has_fix
alive watch || fail "geoconsentctl watch ended: $(cat "$TMP/watch.err")"
start settings "${GUI_ENV[@]}" "$PY" "$DESKTOP/geoconsent-settings" --bus "$BUS"
wait_for 20 "the settings window" has_line settings '^ready window='
# The window opens after the watch's first fix: it says where that came from.
wait_for 10 "geoconsentctl's row, in use now, from GPS" has_line settings '^row [^ ]*/geoconsentctl decision=one-time accuracy=reduced in-use=1 source=gps '
# Where positions come from: the receiver and Wi-Fi (configured, on); root
# switches Wi-Fi off with a click, and on again.
has_line settings '^sources gps,wifi wifi=on$' || fail "the sources line: $(grep '^sources' "$TMP/settings.log" | tail -n 2)"
wait_for 10 "the Wi-Fi switch laid out" has_line settings '^wifi-switch '
click_rect "$(find_window '^Location Settings$')" "$(field "$(line settings '^wifi-switch ')" at)"
wait_for 10 "Wi-Fi switched off by the click" has_line settings '^sources gps,wifi wifi=off$'
[[ $("$BUSCTL" --address="$BUS" get-property org.geoconsent.GeoConsent1 /org/geoconsent/GeoConsent1 \
    org.geoconsent.GeoConsent1 WiFiEnabled) == "b false" ]] || fail "the daemon's WiFiEnabled after the click"
"$BIN/geoconsentctl" --bus "$BUS" wifi on || fail "geoconsentctl wifi on"
wait_for 10 "the window to follow the daemon" has_line_after settings '^sources gps,wifi wifi=off$' '^sources gps,wifi wifi=on$'
pass "the settings window says where positions come from, and root switches Wi-Fi positioning with a click"
# The switching made the window read everything again: its rows are armed anew.
wait_for 10 "the rows armed again" has_line_after settings '^sources gps,wifi wifi=on$' '^row [^ ]*/geoconsentctl '
SET_WIN=$(field "$(line settings '^ready window=')" window)
[[ -n $SET_WIN && $SET_WIN == "$(find_window '^Location Settings$')" ]] || fail "no window 'Location Settings' ($SET_WIN)"
has_line settings "^row $DEMO_SCRIPT decision=one-time accuracy=full in-use=0 " ||
    fail "the demo app's row: $(grep '^row' "$TMP/settings.log" | tail -n 4)"
xdotool mousemove 0 0   # no tooltip in the picture
sleep 0.3
shot_window settings.png "$SET_WIN"
# The notices switch (on by default) keeps the user's setting in their file, which the agent reads at each notice.
has_line settings '^notices on$' || fail "the notices switch is not on by default"
wait_for 10 "the notices switch laid out" has_line settings '^notices-switch '
click_rect "$SET_WIN" "$(field "$(line settings '^notices-switch ')" at)"
wait_for 10 "notices off" has_line settings '^notices off$'
grep -qx 'silent-grants=false' "$TMP/home/.config/geoconsent/desktop.conf" || fail "the setting file: $(cat "$TMP/home/.config/geoconsent/desktop.conf")"
click_rect "$SET_WIN" "$(field "$(line settings '^notices-switch ')" at)"
wait_for 10 "notices on again" has_line_after settings '^notices off$' '^notices on$'
grep -qx 'silent-grants=true' "$TMP/home/.config/geoconsent/desktop.conf" || fail "the setting file: $(cat "$TMP/home/.config/geoconsent/desktop.conf")"
TAPS=$(line settings '^taps ')
[[ $TAPS == "taps unverifiable" || $TAPS == "taps verifiable" ]] || fail "the window did not say whether taps can be told: '$TAPS'"
LAPSED=$(line settings '^lapsed /usr/bin/old-weather ')
[[ $LAPSED == "lapsed /usr/bin/old-weather Not used for 100 days: permission removed · on $(date +%Y-%m-%d)" ]] ||
    fail "the lapsed decision: '$LAPSED'"
has_line settings '^row /usr/bin/old-weather ' && fail "a lapsed record has a row of decisions"
pass "the settings window's notices switch keeps the user's setting (off, on again); this desktop: $TAPS; under Lapsed: ${LAPSED#lapsed }"

# The window decides (SetConsent): While Using for the demo is more than it
# has, so the user's dialog asks first, saying who asked; Never is less, at once.
DEMO_ROW=$(line settings "^row $DEMO_SCRIPT ")
click_rect "$SET_WIN" "$(field "$DEMO_ROW" while-using)"
wait_for 10 "the window to ask" has_line settings "^decide $DEMO_SCRIPT while-using$"
wait_for 20 "the dialog the window asked for" has_line agent "^asked-by [0-9]* [^ ]*geoconsent-settings$"
REQ_S=$(line agent '^asked-by ' | awk '{print $2}')
wait_for 10 "its buttons to arm" has_line agent "^ready $REQ_S "
READY_S=$(line agent "^ready $REQ_S ")
[[ $(line agent "^prompt $REQ_S ") == "prompt $REQ_S kind=when-in-use app-id=$DEMO_SCRIPT "* ]] ||
    fail "the dialog the window asked for: '$(line agent "^prompt $REQ_S ")'"
sleep 0.2
shot consent-prompt-from-settings.png
click_rect "$(field "$READY_S" window)" "$(field "$READY_S" allow-while-using)"
wait_for 20 "the window to hear the answer" has_line settings "^decided $DEMO_SCRIPT while-using status=4$"
wait_for 10 "the demo's row to show it" has_line_after settings "^decided $DEMO_SCRIPT while-using " \
    "^row $DEMO_SCRIPT decision=when-in-use accuracy=full "
# By keyboard: Tab to the demo's Precise, Space turns it off (less: at once).
xdotool windowfocus --sync "$SET_WIN" || fail "xdotool windowfocus"
for _ in $(seq 60); do
    [[ $(line settings '^focus ') == "focus $DEMO_SCRIPT precise" ]] && break
    xdotool key Tab
    sleep 0.05
done
[[ $(line settings '^focus ') == "focus $DEMO_SCRIPT precise" ]] || fail "Tab never reached the demo's Precise: $(line settings '^focus ')"
xdotool key space
wait_for 10 "Precise off, by keyboard" has_line settings "^decided $DEMO_SCRIPT precise-off status=4$"
wait_for 10 "the demo's row to show it" has_line_after settings "^decided $DEMO_SCRIPT precise-off " \
    "^row $DEMO_SCRIPT decision=when-in-use accuracy=reduced "
click_rect "$SET_WIN" "$(field "$(line settings "^row $DEMO_SCRIPT ")" never)"
wait_for 10 "Never, at once" has_line settings "^decided $DEMO_SCRIPT never status=2$"
wait_for 10 "the demo's row to show it" has_line_after settings "^decided $DEMO_SCRIPT never " "^row $DEMO_SCRIPT decision=denied "
pass "the settings window decides: While Using was confirmed in the user's dialog first (which said the window asked), Precise off by keyboard (Tab, Space) and Never at once"

# Ask Next Time for geoconsentctl, in use now: its decision is forgotten and its grant ends.
ROW=$(line settings '^row [^ ]*/geoconsentctl ')
click_rect "$SET_WIN" "$(field "$ROW" ask)"
wait_for 10 "Ask Next Time" has_line settings '^decided [^ ]*/geoconsentctl ask status=0$'
watch_done() { ! alive watch; }
wait_for 10 "geoconsentctl watch to end with its grant" watch_done
grep -q 'authorization ended' "$TMP/watch.err" || fail "the watch did not end with its grant: $(cat "$TMP/watch.err")"
# Rows listed after the reset, none of them geoconsentctl's.
row_gone() {
    awk '/^decided [^ ]*\/geoconsentctl ask /{r=1; next} r && /^row /{n++} r && /^row [^ ]*\/geoconsentctl /{bad=1} END{exit !(n > 0 && !bad)}' \
        "$TMP/settings.log"
}
# (30 s: once, in a clean clone's make test beside the container test, the
# row had not gone after 10 s; why is not known yet: on a failure the
# daemon's log is kept with the others.)
wait_for 30 "the settings window to drop geoconsentctl" row_gone
# The user's own switch: off at once (every app of the user restricted), and
# on again only after the user's dialog said yes (it says the window asked).
wait_for 10 "the user switch laid out" has_line settings '^user-switch '
click_rect "$SET_WIN" "$(field "$(line settings '^user-switch ')" at)"
wait_for 10 "location off for the user's apps" has_line_after settings '^user-location-set off$' '^user-location off$'
[[ $("$BUSCTL" --address="$BUS" call org.geoconsent.GeoConsent1 /org/geoconsent/GeoConsent1 \
    org.geoconsent.GeoConsent1 GetUserLocation 'a{sv}' 0) == "b false" ]] || fail "the daemon's GetUserLocation after the click"
click_rect "$SET_WIN" "$(field "$(line settings '^user-switch ')" at)"
wait_for 20 "the dialog to switch it on" has_line agent '^prompt [0-9]* kind=location-on '
REQ_U=$(line agent '^prompt [0-9]* kind=location-on ' | awk '{print $2}')
wait_for 10 "its buttons to arm" has_line agent "^ready $REQ_U "
READY_U=$(line agent "^ready $REQ_U ")
sleep 0.2
shot consent-prompt-location-on.png
click_rect "$(field "$READY_U" window)" "$(field "$READY_U" allow-once)"
wait_for 20 "location on again" has_line_after settings '^user-location-set on$' '^user-location on$'
pass "the user's own switch: off at once, on again after the user's dialog (Switch On)"
# The list scrolled to its end: the decision that lapsed (nothing is clicked in this window after).
scroll_to_end() { xdotool mousemove --window "$1" 300 450 click --repeat 12 --delay 20 5 || fail "xdotool scroll"; xdotool mousemove 0 0; sleep 0.4; }
scroll_to_end "$SET_WIN"
shot_window settings-lapsed.png "$SET_WIN"
stop settings
pass "the settings window shows geoconsentctl in use now, and Ask Next Time forgets it and ends the grant at once (the watch ended)"

# ---- 4d. taps the desktop can tell ------------------------------------------------
# With a real EWMH window manager (openbox), the agent can say which process
# owns the window in front (_NET_ACTIVE_WINDOW, its owner's PID from the X
# server: XRes). geoconsentctl is allowed once; with the demo's window in
# front, its next tap is no tap on a button in front: the daemon does not keep
# it silent, and the dialog says why. An app in front taps silently. (Xvfb
# has no physical pointer, so presses cannot be seen: in front is the rule here.)
start openbox "${GUI_ENV[@]}" openbox --sm-disable
wm_up() { "$PY" -c 'from Xlib import display; d = display.Display(); r = d.screen().root
raise SystemExit(0 if r.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), 0) else 1)' 2>/dev/null; }
wait_for 10 "openbox to manage the screen" wm_up
ctl_count() { grep -c '^prompt [^ ]* kind=one-time app-id=.*/geoconsentctl ' "$TMP/agent.log"; }
ctl_dialog focus_allow $(($(ctl_count) + 1))
click_rect "$DLG" "$(field "$READY" allow-once)"
wait_for 10 "Allow Once" has_line agent "^answered $REQ allow-once$"
focus_allow_done() { ! alive focus_allow; }
wait_for 40 "geoconsentctl's fix" focus_allow_done
xdotool windowactivate --sync "$DEMO_WIN" || fail "xdotool windowactivate"
ctl_dialog focus_behind $(($(ctl_count) + 1))
wait_for 10 "the agent's focus answer" has_line agent '^focus pid=[0-9]+ focused=no '
has_line agent "^tap-not-verified $REQ behind$" || fail "the dialog was not told why: $(grep "$REQ" "$TMP/agent.log")"
sleep 0.3
shot consent-prompt-not-in-front.png
click_rect "$DLG" "$(field "$READY" deny)"
wait_for 10 "Don't Allow" has_line agent "^answered $REQ deny$"
focus_behind_done() { ! alive focus_behind; }
wait_for 10 "geoconsentctl to give up" focus_behind_done
# Forgotten again, so that step 7 asks in Korean.
"$BIN/geoconsentctl" --bus "$BUS" reset "$CTL_APP" >/dev/null || fail "geoconsentctl reset $CTL_APP"
pass "a tap of an app allowed once, with another app's window in front, gets the prompt, which says why"
# The demo (Never, above) allowed once again, then a second instance taps from its own window, in front: silent.
click_rect "$DEMO_WIN" "$BUTTON"
wait_for 20 "the demo's prompt" has_line agent "^prompt [^ ]+ kind=one-time app-id=$DEMO_SCRIPT "
REQ_F=$(awk '{print $2}' <<<"$(line agent "^prompt [^ ]+ kind=one-time app-id=$DEMO_SCRIPT ")")
wait_for 10 "its dialog" has_line agent "^ready $REQ_F "
click_rect "$(field "$(line agent "^ready $REQ_F ")" window)" "$(field "$(line agent "^ready $REQ_F ")" allow-once)"
wait_for 10 "Allow Once" has_line agent "^answered $REQ_F allow-once$"
PROMPTS=$(grep -c '^prompt ' "$TMP/agent.log")
start demo3 "${GUI_ENV[@]}" "$PY" "$DESKTOP/location-button-demo" --bus "$BUS"
wait_for 20 "the third demo window" has_line demo3 '^ready window='
READY3=$(line demo3 '^ready window=')
click_rect "$(field "$READY3" window)" "$(field "$READY3" button)"
wait_for 40 "its fix" has_line demo3 '^(fix|error) press=1 '
[[ $(line demo3 '^(fix|error) press=1 ') == fix* ]] || fail "the app in front got no fix: $(line demo3 '^(fix|error) press=1 ')"
(($(grep -c '^prompt ' "$TMP/agent.log") == PROMPTS)) || fail "the tap from the window in front prompted"
has_line agent '^focus pid=[0-9]+ focused=yes press=unknown via=x11' || fail "no focus answer 'yes': $(grep '^focus ' "$TMP/agent.log")"
wait_for 10 "the notice" has_line_after agent '^focus pid=[0-9]+ focused=yes ' "^notice $DEMO_SCRIPT .*focus=in-front"
close_notices
stop demo3
stop openbox
pass "a tap from the app's own window in front is silent, and the notice says it was in front"

stop demo
stop agent

# ---- 5. button styles ----------------------------------------------------------
"${GUI_ENV[@]}" "$PY" "$DESKTOP/location-button-demo" --bus "$BUS" --label none --icon none \
    >"$TMP/refuse.log" 2>"$TMP/refuse.err"
st=$?
((st == 2)) && grep -q 'not both\|both none\|together' "$TMP/refuse.err" ||
    fail "--label none --icon none: status $st, $(cat "$TMP/refuse.err")"
STYLES=(
    "--label share-my-current-location --icon arrow-outline --corner-radius 20 --font-size 12 --background #1c1c1e --tint #ffffff"
    "--label send-current-location --icon none --corner-radius 4 --font-size 11 --background #34c759 --tint #000000"
    "--label none --icon arrow-filled --corner-radius 24 --font-size 16 --background #ff3b30 --tint white"
    "--label send-my-current-location --icon arrow-filled --corner-radius 0 --font-size 10 --background #ffffff --tint #007aff"
)
STYLE_SHOTS=()
for i in "${!STYLES[@]}"; do
    read -r -a opts <<<"${STYLES[i]}"
    start "style$i" "${GUI_ENV[@]}" "$PY" "$DESKTOP/location-button-demo" --bus "$BUS" "${opts[@]}"
    wait_for 20 "style $i" has_line "style$i" '^ready window='
    W=$(field "$(line "style$i" '^ready window=')" window)
    B=$(field "$(line "style$i" '^ready window=')" button)
    read -r -a g <<<"$(geometry "$W")"
    IFS=, read -r bx by bw bh <<<"$B"
    sleep 0.3
    "$PY" "$DESKTOP/xvfb-helper" screenshot "$TMP/style$i.png" $((g[0] + bx - 10)) $((g[1] + by - 8)) $((bw + 20)) $((bh + 16)) ||
        fail "screenshot of style $i"
    STYLE_SHOTS+=("$TMP/style$i.png")
    stop "style$i"
done
"$PY" "$DESKTOP/xvfb-helper" montage "$SHOTS/button-styles.png" '#f6f5f4' "${STYLE_SHOTS[@]}" || fail "montage"
pass "the demo refuses a button with neither label nor icon, and renders ${#STYLES[@]} other styles"

# ---- 6. the agent slot ---------------------------------------------------------
# Another program of the same uid registers first (after a daemon restart anyone
# may win that race): the graphical agent waits for the slot instead of exiting,
# and takes it as soon as it is free.
start squatter "$BIN/geoconsentctl" --bus "$BUS" agent --auto deny
wait_for 10 "the other agent to register" has_line squatter 'registered for uid'
start agent2 "${GUI_ENV[@]}" "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
slot_taken() { grep -q 'another consent agent is registered' "$TMP/agent2.err" 2>/dev/null || ! alive agent2; }
wait_for 15 "the agent to find the slot taken" slot_taken
sleep 3   # more than one retry period
alive agent2 || fail "the agent exited while another agent held the slot: $(cat "$TMP/agent2.err")"
has_line agent2 '^registered ' && fail "the agent registered while the slot was taken"
stop squatter
wait_for 10 "the agent to take the free slot" has_line agent2 '^registered '
pass "the agent waits while another agent of its uid holds the slot, and takes it when it is free"
stop agent2

# ---- 7. in the user's language ---------------------------------------------------
# LANG=ko_KR.UTF-8 (LC_ALL empty): the dialog, its buttons and its switch in Korean;
# what the app sent (its reason) as sent. geoconsentctl asks again: its
# approval of step 4d was forgotten.
start agent_ko "${GUI_ENV[@]}" "${SESSION[@]}" LANG=ko_KR.UTF-8 LC_ALL= "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
wait_for 20 "the Korean agent to register" has_line agent_ko '^registered '
start locate3 "$BIN/geoconsentctl" --bus "$BUS" locate --reason "Find cafés near me"
wait_for 20 "its dialog" has_line agent_ko '^ready '
READY_K=$(line agent_ko '^ready ')
REQ_K=$(awk '{print $2}' <<<"$READY_K")
DLG_K=$(find_window '^위치 요청$')
[[ -n $DLG_K && $DLG_K == "$(field "$READY_K" window)" ]] || fail "no window titled 위치 요청 for '$READY_K'"
[[ -n $(field "$READY_K" precise) ]] || fail "no Precise switch in the Korean dialog: '$READY_K'"
# Korean lines break between words, never inside one.
WRAP_K=$(line agent_ko "^wrap $REQ_K ")
[[ $(field "$WRAP_K" inside-words) == 0 && $(field "$WRAP_K" lines) -gt 0 ]] || fail "Korean lines broken inside words: '$WRAP_K'"
sleep 0.3
shot consent-prompt-ko.png
start settings_ko "${GUI_ENV[@]}" LANG=ko_KR.UTF-8 LC_ALL= "$PY" "$DESKTOP/geoconsent-settings" --bus "$BUS"
wait_for 20 "the Korean settings window" has_line settings_ko '^ready window='
SET_K=$(find_window '^위치 설정$')
[[ -n $SET_K ]] || fail "no window titled 위치 설정"
wait_for 10 "its rows" has_line settings_ko '^row '
xdotool mousemove 0 0   # no tooltip in the picture
sleep 0.3
shot_window settings-ko.png "$SET_K"
scroll_to_end "$SET_K"
shot_window settings-lapsed-ko.png "$SET_K"
stop settings_ko
# Answered from the keyboard: Return presses the focused button, Don't Allow.
xdotool windowfocus --sync "$DLG_K" key Return || fail "xdotool key Return"
wait_for 10 "the agent to answer" has_line agent_ko "^answered $REQ_K deny$"
locate3_done() { ! alive locate3; }
wait_for 10 "geoconsentctl to give up" locate3_done
# The notice in Korean: gdbus (an app of its own here) taps for the
# approximate location, the user allows it once, and its next tap is silent.
gdbus_tap() {   # gdbus_tap NAME: a one-time request of gdbus, approximate
    start "$1" gdbus call --address "$BUS" --dest org.geoconsent.GeoConsent1 --object-path /org/geoconsent/GeoConsent1 \
        --timeout 120 --method org.geoconsent.GeoConsent1.RequestOneTimeAuthorization "{'accuracy': <'reduced'>}"
}
gdbus_tap tap_ko1
wait_for 20 "gdbus's Korean dialog" has_line_after agent_ko "^answered $REQ_K " '^ready '
READY_T=$(line agent_ko '^ready ')
click_rect "$(field "$READY_T" window)" "$(field "$READY_T" allow-once)"
wait_for 10 "Allow Once" has_line agent_ko "^answered $(awk '{print $2}' <<<"$READY_T") allow-once$"
tap_ko1_done() { ! alive tap_ko1; }
wait_for 10 "gdbus's first tap" tap_ko1_done
grep -q "(uint32 4,)" "$TMP/tap_ko1.log" || fail "gdbus's first tap: $(cat "$TMP/tap_ko1.log" "$TMP/tap_ko1.err")"
gdbus_tap tap_ko2
wait_for 10 "the Korean notice" has_line agent_ko '^notice [^ ]*/gdbus '
has_line_after agent_ko "^answered $(awk '{print $2}' <<<"$READY_T") " '^prompt ' && fail "gdbus's second tap prompted"
wait_for 10 "dunst to show it" grep -qF "이(가) 대략적인 위치를 한 번 받았습니다'" "$TMP/dunst.log"
sleep 0.3
NOTICE_WIN=$(xdotool search --onlyvisible --class dunst 2>/dev/null | head -n 1)
if [[ -n $NOTICE_WIN ]]; then shot_window notice-ko.png "$NOTICE_WIN" 12; else shot notice-ko.png; fi
close_notices
tap_ko2_done() { ! alive tap_ko2; }
wait_for 10 "gdbus's second tap" tap_ko2_done
grep -q "(uint32 4,)" "$TMP/tap_ko2.log" || fail "gdbus's second tap: $(cat "$TMP/tap_ko2.log" "$TMP/tap_ko2.err")"
# The indicator in Korean: geoconsentctl watches, allowed once in the Korean dialog.
start watch_ko "$BIN/geoconsentctl" --bus "$BUS" watch --accuracy reduced
wait_for 20 "geoconsentctl's Korean dialog" has_line_after agent_ko '^notice [^ ]*/gdbus ' '^ready '
READY_W=$(line agent_ko '^ready ')
click_rect "$(field "$READY_W" window)" "$(field "$READY_W" allow-once)"
wait_for 20 "the Korean indicator to go active" has_line agent_ko '^indicator active 1 '
close_notices
tray_shot indicator-ko.png
sni_host read >"$TMP/sni-read-ko.log" 2>&1 || fail "reading the Korean indicator: $(cat "$TMP/sni-read-ko.log")"
grep -q '^title 위치 사용 중' "$TMP/sni-read-ko.log" || fail "the Korean item's title: $(grep '^title' "$TMP/sni-read-ko.log")"
stop watch_ko
stop agent_ko
pass "with LANG=ko_KR.UTF-8 the dialog, the settings window and the notice are in Korean (위치 요청, 위치 설정, …이(가) 대략적인 위치를 한 번 받았습니다), its lines break between words ($(field "$WRAP_K" lines) lines), and Return on the focused Don't Allow answers deny"

# ---- 7b. German on a dark theme, by keyboard ------------------------------------
# German's three answers do not fit in a row: they stack. On Adwaita's dark
# theme the warning colour is still readable. Esc closes without an answer,
# and Alt+E (the mnemonic of "_Einmal erlauben") answers Allow Once.
start agent_de "${GUI_ENV[@]}" LANG=de_DE.UTF-8 LC_ALL= GTK_THEME=Adwaita:dark "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
wait_for 20 "the German agent to register" has_line agent_de '^registered '
gdbus_ask() {   # gdbus_ask NAME: a when-in-use request of gdbus (an app of its own here)
    start "$1" gdbus call --address "$BUS" --dest org.geoconsent.GeoConsent1 --object-path /org/geoconsent/GeoConsent1 \
        --timeout 120 --method org.geoconsent.GeoConsent1.RequestWhenInUseAuthorization \
        "{'reason': <'Restaurants in der Nähe finden'>, 'app-name': <'Karten'>}"
}
gdbus_ask wiu_de1
wait_for 20 "the German dialog" has_line agent_de '^ready '
READY_D=$(line agent_de '^ready ')
REQ_D=$(awk '{print $2}' <<<"$READY_D")
DLG_D=$(find_window '^Standortanfrage$')
[[ -n $DLG_D && $DLG_D == "$(field "$READY_D" window)" ]] || fail "no window titled Standortanfrage for '$READY_D'"
[[ $(field "$READY_D" layout) == stacked ]] || fail "the German buttons did not stack: '$READY_D'"
read -r _ _ DW_D _ <<<"$(geometry "$DLG_D")"
(( DW_D <= 700 )) || fail "the German dialog is $DW_D px wide"
COLOURS_D=$(line agent_de "^colours $REQ_D ")
readable "$COLOURS_D" || fail "the warning colour on the dark theme: '$COLOURS_D'"
[[ $(field "$(line agent_de "^wrap $REQ_D ")" inside-words) == 0 ]] || fail "German lines: '$(line agent_de "^wrap $REQ_D ")'"
sleep 0.3
shot_window consent-prompt-de-dark.png "$DLG_D"
xdotool windowfocus --sync "$DLG_D" key Escape || fail "xdotool key Escape"
wait_for 10 "Esc to close the dialog" has_line agent_de "^answered $REQ_D dismissed$"
wiu_done() { ! alive wiu_de1; }
wait_for 10 "the request to end" wiu_done
grep -q "(uint32 0,)" "$TMP/wiu_de1.log" || fail "after Esc the request is not determined: $(cat "$TMP/wiu_de1.log")"
gdbus_ask wiu_de2
wait_for 20 "the second German dialog" has_line_after agent_de "^answered $REQ_D " '^ready '
READY_D2=$(line agent_de '^ready ')
REQ_D2=$(awk '{print $2}' <<<"$READY_D2")
xdotool windowfocus --sync "$(field "$READY_D2" window)" key alt+e || fail "xdotool key alt+e"
wait_for 10 "Alt+E to answer" has_line agent_de "^answered $REQ_D2 allow-once$"
stop agent_de
# The settings window in German on the same dark theme.
start settings_de "${GUI_ENV[@]}" LANG=de_DE.UTF-8 LC_ALL= GTK_THEME=Adwaita:dark "$PY" "$DESKTOP/geoconsent-settings" --bus "$BUS"
wait_for 20 "the German settings window" has_line settings_de '^ready window='
wait_for 10 "its rows" has_line settings_de '^row '
SET_D=$(find_window '^Standorteinstellungen$')
[[ -n $SET_D ]] || fail "no window titled Standorteinstellungen"
xdotool mousemove 0 0
sleep 0.3
shot_window settings-de-dark.png "$SET_D"
stop settings_de
pass "in German on a dark theme the dialog is ${DW_D} px wide with its buttons stacked, warnings at $(field "$COLOURS_D" contrast):1; Esc closes it unanswered, Alt+E answers Allow Once"

# ---- 7c. every language in light and dark --------------------------------------
# The standard prompt and the settings window in the three languages, each in
# Adwaita's light and dark theme (the ones the steps above did not take).
shoot_language() {   # shoot_language NAME LOCALE THEME PROMPT-TITLE SETTINGS-TITLE
    local name=$1 locale=$2 theme=$3 ready req
    start "agent_$name" "${GUI_ENV[@]}" LANG="$locale" LC_ALL= GTK_THEME="$theme" "$PY" "$DESKTOP/geoconsent-agent" --bus "$BUS"
    wait_for 20 "the $name agent to register" has_line "agent_$name" '^registered '
    gdbus_ask "ask_$name"
    wait_for 20 "the $name dialog" has_line "agent_$name" '^ready '
    ready=$(line "agent_$name" '^ready ')
    req=$(awk '{print $2}' <<<"$ready")
    [[ $(find_window "^$4\$") == "$(field "$ready" window)" ]] || fail "no window titled $4 for '$ready'"
    readable "$(line "agent_$name" "^colours $req ")" || fail "the warning colour ($name): '$(line "agent_$name" "^colours $req ")'"
    sleep 0.3
    shot_window "consent-prompt-$name.png" "$(field "$ready" window)"
    xdotool windowfocus --sync "$(field "$ready" window)" key Escape || fail "xdotool key Escape"
    wait_for 10 "Esc ($name)" has_line "agent_$name" "^answered $req dismissed$"
    stop "agent_$name"
    start "settings_$name" "${GUI_ENV[@]}" LANG="$locale" LC_ALL= GTK_THEME="$theme" "$PY" "$DESKTOP/geoconsent-settings" --bus "$BUS"
    wait_for 20 "the $name settings window" has_line "settings_$name" '^ready window='
    wait_for 10 "its rows" has_line "settings_$name" '^row '
    xdotool mousemove 0 0
    sleep 0.3
    shot_window "settings-$name.png" "$(find_window "^$5\$")"
    stop "settings_$name"
}
shoot_language en-dark C.UTF-8 Adwaita:dark 'Location request' 'Location Settings'
shoot_language ko-dark ko_KR.UTF-8 Adwaita:dark '위치 요청' '위치 설정'
shoot_language de de_DE.UTF-8 Adwaita 'Standortanfrage' 'Standorteinstellungen'
pass "the prompt and the settings window in English, Korean and German, light and dark (warnings readable in each)"

# ---- 7. the settings window comes back after its bus restarts -------------------
# On a bus of its own (no daemon on it: it says the service cannot be reached):
# the bus goes away and comes back at the same address, and the window
# connects again by itself, as the agent does.
cat >"$TMP/own-bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$TMP/own-bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
CONF
own_bus_up() { [[ -S $TMP/own-bus ]]; }
start ownbus1 dbus-daemon --config-file="$TMP/own-bus.conf" --nofork
wait_for 10 "a bus of its own" own_bus_up
start settings_rb "${GUI_ENV[@]}" "$PY" "$DESKTOP/geoconsent-settings" --bus "unix:path=$TMP/own-bus"
wait_for 20 "the settings window on it" has_line settings_rb '^connected$'
stop ownbus1
rm -f "$TMP/own-bus"
wait_for 10 "the window to see the bus go" has_line settings_rb '^disconnected$'
start ownbus2 dbus-daemon --config-file="$TMP/own-bus.conf" --nofork
wait_for 10 "the bus again" own_bus_up
reconnected() { (($(grep -c '^connected$' "$TMP/settings_rb.log") >= 2)); }
wait_for 15 "the window to connect again" reconnected
alive settings_rb || fail "the settings window exited with the bus: $(cat "$TMP/settings_rb.err")"
stop settings_rb
stop ownbus2
pass "the settings window keeps a connection of its own and connects again after its bus restarts"

say "screenshots in $SHOTS"
say "took $((SECONDS - STARTED)) s"
# The plain closing line test reports are read by: nothing after the counts.
say "$PASSED passed, 0 failed"
