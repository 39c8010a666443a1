# shellcheck shell=bash
# `expect DESCRIPTION eval '...'` defers the expansion on purpose:
# shellcheck disable=SC2016
# desktop-e2e.sh: a person's desktop, end to end, in the booted container
# (docs/geoclue.md; README "Desktop"). Sourced by test-units.sh after the
# packages geoconsent, geoconsent-agent and geoconsent-geoclue are installed.
#
#   - A user (alice) logs in through PAM and logind with a graphical session
#     on Xvfb (seat0, type x11), as a display manager would start it.
#   - Her user manager runs the agent the way the package arranges it: the XDG
#     autostart entry, turned into a unit by systemd's generator, started with
#     xdg-desktop-autostart.target (what a systemd-managed session starts).
#   - Unmodified Firefox ESR, started in her session, opens a local page that
#     calls watchPosition; Firefox asks the system bus's GeoClue, which is the
#     facade.
#   - The dialog appears; Allow Once is clicked with XTEST, with Precise on,
#     then in a second Firefox with Precise off: the page shows the replayed
#     track's fixes, precise, then the grid cell.
#   - SetLockedHint (as a screen locker sets it) pauses them; clearing it brings the prompt back
#     (the way back of a one-time grant, docs/geoclue.md) and fixes resume.
#   - Closing Firefox ends the grant (the journal says so).
#   - The agent registers again after a restart of the daemon, and of the bus.
#   - No GPS fix (the feeder stopped), Wi-Fi positioning configured, and a
#     NetworkManager (python-dbusmock's template) on the system bus with two
#     access points: a third Firefox, allowed once, gets the position of the
#     test's geolocate server (tests/wifi) through the facade.
#   - Screenshots of the dialog go to .build/e2e-screenshots.

E2E_USER=alice
E2E_DISPLAY=:99
E2E_HOME=/home/$E2E_USER
E2E_DIR=$E2E_HOME/e2e
# Taken inside the container (its /tmp), copied out at the end (the checkout
# is read-only in there).
E2E_SHOTS=$REPO/.build/e2e-screenshots
E2E_SHOTS_IN=/tmp/e2e-shots
E2E_AGENT_UNIT=app-org.geoconsent.Agent@autostart.service
# The Wi-Fi phase: the geolocate server's files (world-readable: the helper's
# dynamic user reads the CA), the test's bus policy that lets root's dbusmock
# be NetworkManager (as NetworkManager's own policy would), the daemon's
# config, and the access points (globally administered BSSIDs, NetworkManager
# strengths in percent: -40 and -60 dBm).
E2E_WIFI_DIR=/run/geoconsent-test-e2e-wifi
E2E_NM_POLICY=/etc/dbus-1/system.d/geoconsent-test-networkmanager.conf
E2E_WIFI_CONF=/etc/geoconsent/conf.d/test-e2e-wifi.conf
E2E_APS=("00:25:9c:11:22:33 80" "00:25:9c:11:22:44 60")

# as_alice CMD...: in her user manager's environment (systemctl --user, journal).
as_alice() {
    ct_exec runuser -u "$E2E_USER" -- env XDG_RUNTIME_DIR="/run/user/$E2E_UID" \
        DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$E2E_UID/bus" "$@"
}
agent_log() { ct_exec journalctl --no-pager -o cat _UID="$E2E_UID" _SYSTEMD_USER_UNIT="$E2E_AGENT_UNIT" 2>/dev/null; }
# fixes N: the page's GEO lines of Firefox run N ("GEO N LAT LON ACCURACY"),
# from Firefox's standard output.
fixes() { ct_exec cat "$E2E_DIR/firefox$1.log" 2>/dev/null | grep "^GEO $1 "; }
# click WINDOW X,Y,W,H: a real (XTEST) click in the middle of that rectangle.
# The pointer leaves for the screen's corner first: `mousemove --sync` to
# where it already is (a dialog's button where the last one's was) waits 15 s
# for a motion that never comes.
e2e_click() {
    local x y w h
    IFS=, read -r x y w h <<<"$2"
    ct_exec env DISPLAY=$E2E_DISPLAY xdotool mousemove 0 0 \
        mousemove --sync --window "$1" $((x + w / 2)) $((y + h / 2)) click 1
}
e2e_shot() { ct_exec env DISPLAY=$E2E_DISPLAY NO_AT_BRIDGE=1 GDK_BACKEND=x11 /usr/bin/python3 "$REPO/desktop/xvfb-helper" screenshot "$E2E_SHOTS_IN/$1"; }
# The agent's log from its Nth dialog on ("shown ID", said once per dialog; a
# dialog says "ready" again whenever its buttons moved and armed anew, and the
# daemon's request ids count from 1 again after it restarts).
agent_log_from() { agent_log | awk -v n="$1" '/^shown / { r++ } r >= n'; }
# The Nth dialog's newest "ready ID window=W ..." line.
ready_line() { agent_log_from "$1" | awk '/^shown / { r++ } r == 1 && /^ready / { line = $0 } END { if (line != "") print line }'; }
e2e_field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

# answer_prompt N PRECISE: waits for the agent's Nth dialog, turns Precise off
# unless PRECISE is on, clicks Allow Once; the agent's answer word is printed.
answer_prompt() {
    local n=$1 precise=$2 line id win
    wait_for 30 eval "[[ -n \$(ready_line $n) ]]" || { echo "no dialog $n"; return 1; }
    line=$(ready_line "$n")
    id=$(awk '{print $2}' <<<"$line")
    win=$(e2e_field "$line" window)
    [[ $n == 1 ]] && e2e_shot desktop-e2e-prompt.png
    if [[ $precise == off ]]; then
        e2e_click "$win" "$(e2e_field "$line" precise)"
        wait_for 5 eval "agent_log_from $n | grep -q '^precise $id off '" || { echo "the switch did not turn"; return 1; }
        e2e_shot desktop-e2e-prompt-precise-off.png
        # Where the buttons are now: the longer text may have moved them.
        line=$(agent_log_from "$n" | grep "^precise $id off " | tail -n 1)
    fi
    e2e_click "$win" "$(e2e_field "$line" allow-once)"
    wait_for 10 eval "agent_log_from $n | grep -q '^answered $id '" || { echo "no answer"; return 1; }
    agent_log_from "$n" | sed -n "s/^answered $id //p"
}

check_desktop_e2e() {
    VARIANT=desktop
    local session sid n before after word
    ct_exec mkdir -p "$E2E_SHOTS_IN"
    # ---- the user, her display and her login session
    ct_exec useradd --create-home --shell /bin/bash "$E2E_USER" || { fail "useradd $E2E_USER"; return; }
    E2E_UID=$(ct_exec id -u "$E2E_USER")
    ct_exec systemd-run --quiet --unit=e2e-xvfb Xvfb "$E2E_DISPLAY" -screen 0 1024x768x24 -nolisten tcp -ac
    expect "Xvfb runs on $E2E_DISPLAY" wait_for 10 ct_exec test -S "/tmp/.X11-unix/X${E2E_DISPLAY#:}"
    ct_exec install -d -o "$E2E_USER" -g "$E2E_USER" "$E2E_DIR" "$E2E_DIR/profile"
    ct_sh "cat >$E2E_DIR/profile/user.js" <<'EOF'
user_pref("geo.provider.use_geoclue", true);
user_pref("geo.provider.use_gpsd", false);
user_pref("geo.provider.network.url", "");
user_pref("geo.prompt.testing", true);
user_pref("geo.prompt.testing.allow", true);
user_pref("browser.dom.window.dump.enabled", true);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("browser.aboutwelcome.enabled", false);
EOF
    # The page: each fix of watchPosition as one line on Firefox's stdout.
    ct_sh "cat >$E2E_DIR/page.html" <<'EOF'
<!doctype html><meta charset="utf-8"><title>Where am I</title>
<p id="out">waiting</p>
<script>
const run = new URLSearchParams(location.search).get("run");
navigator.geolocation.watchPosition(p => {
  const c = p.coords;
  dump(`GEO ${run} ${c.latitude} ${c.longitude} ${c.accuracy}\n`);
  document.getElementById("out").textContent = `${c.latitude}, ${c.longitude} ±${c.accuracy} m`;
}, e => dump(`GEOERROR ${run} ${e.code} ${e.message}\n`), {enableHighAccuracy: true});
</script>
EOF
    # Her session's program, as a display manager's session script: Firefox
    # three times (each started when the test says go), in the session's scope.
    ct_sh "cat >$E2E_DIR/session.sh" <<EOF
#!/bin/sh
for run in 1 2 3; do
    while [ ! -e $E2E_DIR/go\$run ]; do sleep 0.2; done
    firefox-esr --no-remote --profile $E2E_DIR/profile "file://$E2E_DIR/page.html?run=\$run" >$E2E_DIR/firefox\$run.log 2>&1 &
    echo \$! >$E2E_DIR/firefox\$run.pid
    wait
done
exec sleep infinity
EOF
    ct_exec chown -R "$E2E_USER:$E2E_USER" "$E2E_DIR"
    ct_exec systemd-run --quiet --unit=e2e-session -p PAMName=login -p User="$E2E_USER" \
        -E XDG_SEAT=seat0 -E XDG_SESSION_TYPE=x11 -E XDG_SESSION_CLASS=user -E DISPLAY="$E2E_DISPLAY" \
        -E HOME="$E2E_HOME" /bin/sh "$E2E_DIR/session.sh"
    graphical() { [[ $(ct_exec loginctl show-user "$E2E_USER" -p Display --value 2>/dev/null) != "" ]]; }
    expect "$E2E_USER logged in through PAM: logind gives her a graphical session on seat0" wait_for 15 graphical
    sid=$(ct_exec loginctl show-user "$E2E_USER" -p Display --value)
    info "session $sid: $(ct_exec loginctl show-session "$sid" -p Type -p Seat -p Class -p Active | tr '\n' ' ')"
    expect "her user manager runs" wait_for 15 eval '[[ $(unit_prop user@$E2E_UID.service ActiveState) == active ]]'

    # ---- the agent, started with the session
    # What a desktop's session manager does under systemd (GNOME's
    # gnome-session-x11@.target, Plasma's plasma-workspace.target): a target of
    # its own that binds graphical-session.target and wants
    # xdg-desktop-autostart.target (which refuses a manual start).
    ct_sh "mkdir -p /etc/systemd/user && cat >/etc/systemd/user/e2e-desktop.target" <<'EOF'
[Unit]
Description=The test's desktop session (a session manager's target)
BindsTo=graphical-session.target
After=graphical-session-pre.target
Wants=xdg-desktop-autostart.target
EOF
    as_alice systemctl --user set-environment DISPLAY="$E2E_DISPLAY" NO_AT_BRIDGE=1 GDK_BACKEND=x11
    as_alice systemctl --user daemon-reload
    as_alice systemctl --user start e2e-desktop.target
    if ! wait_for 20 eval 'agent_log | grep -q "^registered uid=$E2E_UID "'; then
        fail "the agent started with the session (the autostart entry's unit) and registered for uid $E2E_UID:"$'\n'"$(
            as_alice systemctl --user status --no-pager xdg-desktop-autostart.target "$E2E_AGENT_UNIT" 2>&1 | tail -n 30
            ct_exec journalctl --no-pager -o short _UID="$E2E_UID" | tail -n 30)"
        return
    fi
    pass "the agent started with the session (the autostart entry's unit) and registered for uid $E2E_UID"

    # ---- Firefox, Allow Once with Precise on
    ct_exec touch "$E2E_DIR/go1"
    word=$(answer_prompt 1 on) && pass "Firefox's page asked; the dialog came, Allow Once was clicked: $word" ||
        fail "the first prompt: $word"
    # Named as a person knows it: Debian's entry for Firefox, whose program it is;
    # an installed program, so its unproven path is no warning (docs/dbus-api.md).
    expect "the dialog named the app 'Firefox ESR' by /usr/share/applications/firefox-esr.desktop, an installed program: $(
            agent_log | grep -m 1 '^named ' | cut -d' ' -f3-); $(agent_log | grep -m 1 '^identity ' | cut -d' ' -f3-)" \
        eval 'agent_log | grep -m 1 "^named " | grep -q " entry=/usr/share/applications/firefox-esr.desktop name=Firefox ESR$" &&
              agent_log | grep -m 1 "^identity " | grep -q " kind=executable proven=0 installed=1$"'
    expect "the page shows the track's fixes, precise" wait_for 30 eval '
        fixes 1 | awk "{ if (\$5 < 100) ok++ } END { exit !(ok >= 2) }"'
    info "$(fixes 1 | tail -n 1)"

    # ---- the lock pauses them; back, the user is asked again and they resume.
    # As a screen locker does it: SetLockedHint on her own session, as her.
    local spath
    spath=$(ct_exec busctl --system call org.freedesktop.login1 /org/freedesktop/login1 \
        org.freedesktop.login1.Manager GetSession s "$sid" | sed -n 's/^o "\(.*\)"$/\1/p')
    locked_hint() {
        as_alice busctl --system call org.freedesktop.login1 "$spath" org.freedesktop.login1.Session SetLockedHint b "$1"
    }
    locked_hint true || fail "SetLockedHint true on $spath as $E2E_USER"
    sleep 3
    before=$(fixes 1 | wc -l)
    sleep 3
    after=$(fixes 1 | wc -l)
    expect "locked: no fix reaches the page ($before, then $after)" test "$before" -gt 0 -a "$before" = "$after"
    locked_hint false || fail "SetLockedHint false on $spath as $E2E_USER"
    word=$(answer_prompt 2 on) && pass "back from the lock, the user is asked again: $word" ||
        fail "the prompt after the lock: $word"
    expect "and the fixes resume without a new Start" wait_for 30 eval '(( $(fixes 1 | wc -l) > after + 1 ))'

    # ---- closing Firefox ends the grant
    ct_exec kill "$(ct_exec cat "$E2E_DIR/firefox1.pid")"
    expect "closing Firefox ends its grant (the journal says why)" wait_for 15 eval '
        ct_exec journalctl --no-pager -o cat -u geoconsentd.service | grep -q "grant ended: uid $E2E_UID, executable, session .*, the app left the bus: app \"/usr/lib/firefox-esr/firefox-esr\""'

    # ---- a second Firefox, Precise off
    ct_exec touch "$E2E_DIR/go2"
    word=$(answer_prompt 3 off) && pass "a new Firefox is asked again; Precise off, Allow Once: $word" ||
        fail "the prompt with Precise off: $word"
    [[ $word == allow-once-reduced ]] || fail "the agent answered '$word', not allow-once-reduced"
    expect "the page shows the approximate location (a grid cell of a few km)" wait_for 30 eval '
        fixes 2 | awk "{ if (\$5 >= 3530) ok++; else bad++ } END { exit !(ok >= 1 && !bad) }"'
    info "$(fixes 2 | tail -n 1)"
    ct_exec kill "$(ct_exec cat "$E2E_DIR/firefox2.pid")"

    # ---- the agent comes back when the daemon or the bus restarts
    registrations() { agent_log | grep -c "^registered uid=$E2E_UID "; }
    n=$(registrations)
    ct_exec systemctl restart geoconsentd.service
    expect "after a restart of the daemon the agent registered again" wait_for 20 eval '(( $(registrations) > n ))'
    n=$(registrations)
    ct_exec systemctl restart dbus.service
    if wait_for 30 eval '(( $(registrations) > n ))'; then
        pass "after a restart of the system bus the agent connected and registered again"
    else
        fail "after a restart of the system bus the agent connected and registered again:"$'\n'"$(agent_log | tail -n 8)"
    fi
    e2e_wifi
    as_alice systemctl --user stop e2e-desktop.target
    ct_exec systemctl stop e2e-session.service e2e-xvfb.service
    ct_exec loginctl terminate-user "$E2E_USER" 2>/dev/null
    mkdir -p "$E2E_SHOTS"
    local f
    for f in $(ct_exec ls "$E2E_SHOTS_IN"); do ct_exec cat "$E2E_SHOTS_IN/$f" >"$E2E_SHOTS/$f"; done
    info "screenshots in $E2E_SHOTS: $(cd "$E2E_SHOTS" 2>/dev/null && echo *.png)"
    VARIANT=deb
}

# e2e_wifi: the third Firefox with no GPS fix gets the Wi-Fi position
# (docs/dbus-api.md, "Sources"): the feeder stopped (gpsd runs, with no fix),
# gps-wait 1 s, wifi-url the test's geolocate server on the container's
# loopback, and dbusmock's NetworkManager on the system bus with a Wi-Fi device
# and two access points seen now. Everything is undone at the end.
e2e_wifi() {
    local dir=$E2E_WIFI_DIR port dev ap bssid strength i=0 n word verdict
    nm_call() { ct_exec busctl --system call org.freedesktop.NetworkManager "$@"; }
    ct_sh "rm -rf $dir && mkdir -m 0755 $dir"
    ct_exec systemd-run --quiet --unit=e2e-geolocate /usr/bin/python3 "$REPO/tests/wifi/geolocate-server.py" "$dir"
    if ! wait_for 30 ct_exec test -s "$dir/port"; then
        fail "the geolocate server did not start: $(ct_exec journalctl -u e2e-geolocate --no-pager -o cat | tail -5)"
        e2e_wifi_cleanup
        return
    fi
    port=$(ct_exec cat "$dir/port")
    ct_exec chmod 0644 "$dir/ca.pem"
    # NetworkManager: the system bus lets nobody own its name but by a policy.
    ct_sh "cat >$E2E_NM_POLICY" <<'EOF'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy user="root">
    <allow own="org.freedesktop.NetworkManager"/>
  </policy>
  <policy context="default">
    <allow send_destination="org.freedesktop.NetworkManager"/>
  </policy>
</busconfig>
EOF
    ct_exec systemctl reload dbus.service
    ct_exec systemd-run --quiet --unit=e2e-networkmanager \
        /usr/bin/python3 -m dbusmock --system --template networkmanager -l "$dir/nm-calls.log"
    if ! wait_for 15 eval 'ct_exec busctl --system status org.freedesktop.NetworkManager >/dev/null 2>&1'; then
        fail "dbusmock's NetworkManager did not come up on the system bus: $(ct_exec journalctl -u e2e-networkmanager --no-pager -o cat | tail -5)"
        e2e_wifi_cleanup
        return
    fi
    dev=$(nm_call /org/freedesktop org.freedesktop.DBus.Mock AddWiFiDevice ssi wlan0dev wlan0 100 | sed -n 's/^s "\(.*\)"$/\1/p')
    for ap in "${E2E_APS[@]}"; do
        read -r bssid strength <<<"$ap"
        i=$((i + 1))
        ap=$(nm_call /org/freedesktop org.freedesktop.DBus.Mock AddAccessPoint ssssuuuyu \
            "$dev" "ap$i" "e2e-net-$i" "$bssid" 2 2412 54000 "$strength" 0 | sed -n 's/^s "\(.*\)"$/\1/p')
        # Seen now, on the boot clock (/proc/uptime), as after a scan: the
        # template says 1, which the daemon leaves out as too old.
        nm_call "$ap" org.freedesktop.DBus.Mock UpdateProperties 'sa{sv}' \
            org.freedesktop.NetworkManager.AccessPoint 1 LastSeen i "$(ct_exec cut -d. -f1 /proc/uptime)"
    done
    expect "dbusmock's NetworkManager on the system bus lists two access points on $dev" eval \
        '[[ $(nm_call "$dev" org.freedesktop.NetworkManager.Device.Wireless GetAllAccessPoints 2>&1) == "ao 2 "* ]]'
    # No fix: gpsd runs, its device says nothing.
    ct_exec systemctl stop geoconsent-test-feeder.service
    ct_sh "printf '[sources]\ngps-wait = 1\nwifi-url = https://127.0.0.1:$port/v1/geolocate\nwifi-ca-file = $dir/ca.pem\n' \
        >$E2E_WIFI_CONF"
    n=$(registrations)
    ct_exec systemctl restart geoconsentd.service
    wifi_on() {
        ct_exec timeout 10 geoconsentctl --json status | ct_exec /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(not ("wifi" in d["sources"] and d["wifi_enabled"]))'
    }
    expect "the daemon, restarted with wifi-url, has Wi-Fi among its sources, switched on; the agent registered again" \
        wait_for 20 eval '(( $(registrations) > n )) && wifi_on'
    ct_exec touch "$E2E_DIR/go3"
    if word=$(answer_prompt 4 on) && [[ $word == allow-once ]]; then
        pass "no GPS fix: a third Firefox is asked; Allow Once: $word"
    else
        fail "the prompt of the Wi-Fi run: $word"
    fi
    expect "the page shows the geolocate server's position, from the Wi-Fi access points (52.5163, 13.3777, ±50 m)" \
        wait_for 30 eval 'fixes 3 | awk "{ if (\$3 == 52.5163 && \$4 == 13.3777 && \$5 == 50) ok++; else bad++ } END { exit !(ok >= 1 && !bad) }"'
    info "$(fixes 3 | tail -n 1)$(ct_exec grep -m 1 '^GEOERROR' "$E2E_DIR/firefox3.log" 2>/dev/null | sed 's/^/; /')"
    verdict=$(ct_exec /usr/bin/python3 -c '
import json, sys
want = sorted([{"macAddress": b, "signalStrength": int(s) - 120} for b, s in (a.split() for a in sys.argv[2:])],
              key=lambda a: a["macAddress"])
reqs = [json.loads(line) for line in open(sys.argv[1])]
ok = [r for r in reqs if r["method"] == "POST" and r["path"] == "/v1/geolocate" and
      sorted(({k: a[k] for k in ("macAddress", "signalStrength")} for a in r["body"]["wifiAccessPoints"]),
             key=lambda a: a["macAddress"]) == want and r["body"]["considerIp"] is False]
print("%d of %d requests: POST /v1/geolocate with both access points" % (len(ok), len(reqs)))
' "$dir/requests.jsonl" "${E2E_APS[@]}" 2>&1)
    expect "the server was asked with both access points' BSSIDs and signals ($verdict)" \
        eval '[[ $verdict =~ ^[1-9][0-9]*\ of ]]'
    expect "the daemon read them from NetworkManager (GetAllAccessPoints in dbusmock's log)" \
        ct_exec grep -q GetAllAccessPoints "$dir/nm-calls.log"
    ct_exec kill "$(ct_exec cat "$E2E_DIR/firefox3.pid")"
    e2e_wifi_cleanup
}

# Undoes e2e_wifi: the config, NetworkManager and its policy, the server; the
# daemon restarted on its own config, the feeder replaying again.
e2e_wifi_cleanup() {
    ct_exec rm -f "$E2E_WIFI_CONF"
    ct_exec systemctl stop e2e-networkmanager.service e2e-geolocate.service 2>/dev/null
    ct_exec rm -f "$E2E_NM_POLICY"
    ct_exec systemctl reload dbus.service
    ct_exec rm -rf "$E2E_WIFI_DIR"
    ct_exec systemctl restart geoconsentd.service
    ct_exec systemctl start geoconsent-test-feeder.service
    expect "the Wi-Fi phase left nothing: no test policy, config, NetworkManager or server; the feeder replays again" eval \
        '! ct_exec test -e "$E2E_NM_POLICY" -o -e "$E2E_WIFI_CONF" -o -e "$E2E_WIFI_DIR" &&
         ! ct_exec busctl --system status org.freedesktop.NetworkManager >/dev/null 2>&1 &&
         [[ $(unit_prop e2e-networkmanager.service ActiveState)/$(unit_prop e2e-geolocate.service ActiveState) == inactive/inactive &&
            $(unit_prop geoconsent-test-feeder.service ActiveState) == active ]]'
}
