#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2016  # expect ... eval '...': expanded by the check
# test-units.sh: geoconsent under a real systemd, the way a distribution runs
# it. `make test` runs it after the Swift tests and the package build.
#
#   tests/systemd/test-units.sh --bin RELEASE_DIR [--deb DEB_DIR]
#
# For each variant it boots a throwaway container (container.sh: systemd 252
# from this machine's own Debian, an overlay root in memory), installs
# geoconsent in it, and runs checks.sh against the real units:
#
#   make-install  `make install PREFIX=/usr DESTDIR= BINDIR_SRC=RELEASE_DIR
#                 LOCKDOWN=1` inside the booted container, then README
#                 "Install"'s post-install block and the gpsd lockdown's, taken
#                 from README.md and run as they are.
#                 The release binaries are the ones `make release` (and so the
#                 package) built: building again inside would take minutes
#                 and test nothing more; the install step itself is the real
#                 `make install`.
#   deb           `apt install ./geoconsent_*.deb` from DEB_DIR (`make deb`),
#                 whose maintainer scripts do the post-install steps. Alone it
#                 must leave gpsd shared, as Debian ships it (and the daemon
#                 still gets a fix from it); then
#                 geoconsent-gpsd-lockdown_*_all.deb from the same directory,
#                 the administrator's choice, moves gpsd into the namespace
#                 and the checks run. After them, geoconsent-geoclue_*_all.deb
#                 (the GeoClue2 facade: replaces geoclue-2.0, the daemon owns
#                 the name, activation by a GeoClue call, purge); then `apt
#                 purge` of the lockdown gives gpsd back to the machine, and
#                 of geoconsent must leave nothing of ours but the system user.
#
# RELEASE_DIR also provides nmea-replay, which feeds gpsd the bundled track.
# Needs root (CI runs as root); elsewhere it says so and exits 0. Whatever
# happens, it leaves no mount, cgroup, process or file behind, and checks that
# it did not. Ends with "systemd: N passed, M failed"; exits 1 on a failure.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: $0 --bin RELEASE_DIR [--deb DEB_DIR]" >&2; exit 2; }

# ---- outside: set up, run the rest in a private mount namespace, check ----

if [[ ${1:-} != --inside ]]; then
    BIN='' DEB_DIR=''
    while (($#)); do
        case $1 in
            --bin) BIN=${2:-}; shift 2 || usage ;;
            --deb) DEB_DIR=${2:-}; shift 2 || usage ;;
            *) usage ;;
        esac
    done
    [[ -n $BIN ]] || usage
    if ((EUID != 0)); then
        echo "systemd: skipped: booting a container needs root (CI runs as root)"
        exit 0
    fi
    bash "$HERE/../../scripts/deps.sh" --container --desktop || exit 1
    BIN=$(cd "$BIN" && pwd) || exit 1
    for exe in geoconsentd geoconsentctl nmea-replay; do
        [[ -x $BIN/$exe ]] || { echo "systemd: no $BIN/$exe (make release)" >&2; exit 1; }
    done
    DEB=
    if [[ -n $DEB_DIR ]]; then
        debs=("$DEB_DIR"/geoconsent_*_"$(dpkg --print-architecture)".deb)
        if ((${#debs[@]} != 1)) || [[ ! -f ${debs[0]} ]]; then
            echo "systemd: want exactly one geoconsent_*.deb in $DEB_DIR (make deb): ${debs[*]}" >&2
            exit 1
        fi
        DEB=$(cd "$(dirname "${debs[0]}")" && pwd)/$(basename "${debs[0]}")
    fi

    RUN_ID=$$
    RESULT=$(mktemp /tmp/geoconsent-systemd-result.XXXXXX)
    t0=$SECONDS
    # unshare: every mount the test makes dies with its namespace. timeout:
    # a hang ends in SIGTERM, which still runs the inner cleanup. A signal to
    # this script is passed on the same way, and we wait for that cleanup.
    timeout --kill-after=30 900 unshare --mount --propagation private -- \
        bash "$HERE/test-units.sh" --inside "$RUN_ID" "$RESULT" "$BIN" "$DEB" &
    inner=$!
    trap 'kill -TERM $inner 2>/dev/null' INT TERM HUP
    while wait "$inner"; rc=$?; kill -0 "$inner" 2>/dev/null; do :; done
    trap - INT TERM HUP
    read -r passed failed <"$RESULT" 2>/dev/null || { passed=0; failed=1; }
    rm -f "$RESULT"
    ((rc == 0 || failed > 0)) || { echo "FAIL the container test ended with status $rc"; failed=$((failed + 1)); }

    # Seen from the machine: nothing of the containers is left.
    leftovers() {
        for d in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
            compgen -G "$d/geoconsent-ct-*-$RUN_ID" || true
        done
        compgen -G "/tmp/geoconsent-ct-$RUN_ID.*" || true
        grep -F "geoconsent-ct-$RUN_ID" /proc/self/mountinfo || true
        pgrep -a -f "geoconsent-ct-$RUN_ID" || true
    }
    left=$(leftovers)
    if [[ -z $left ]]; then
        echo "ok   no mount, cgroup, process or file of the containers is left"
        passed=$((passed + 1))
    else
        echo "FAIL left behind:"$'\n'"$left"
        failed=$((failed + 1))
        # The inner part died without cleaning up (SIGKILL): do it from here.
        # Its mounts went with its namespace once the processes in our
        # cgroups are gone; what is left are empty directories.
        for cg in $(for d in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
                        compgen -G "$d/geoconsent-ct-*-$RUN_ID"; done); do
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)
                [[ -z $pids ]] && break
                # shellcheck disable=SC2086  # one pid per word
                kill -KILL $pids 2>/dev/null; sleep 0.2
            done
            find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
        done
        for dir in $(compgen -G "/tmp/geoconsent-ct-$RUN_ID.*"); do
            if [[ -d $dir ]]; then rmdir "$dir"; else rm -f "$dir"; fi
        done
        left=$(leftovers)
        [[ -z $left ]] && echo "     removed it" || echo "FAIL could not remove:"$'\n'"$left"
    fi
    echo "systemd: container test took $((SECONDS - t0)) s"
    echo "systemd: $passed passed, $failed failed"
    ((failed == 0))
    exit
fi

# ---- inside the private mount namespace ----

RUN_ID=$2 RESULT=$3 BIN=$4 DEB=$5
FEEDER=$BIN/nmea-replay
CT_TAG=$RUN_ID
source "$HERE/container.sh"
source "$HERE/checks.sh"
source "$HERE/desktop-e2e.sh"
# The checkout (scripts, track, Makefile), the binaries and the package.
CT_BINDS=("$REPO")
[[ $BIN/ == "$REPO"/* ]] || CT_BINDS+=("$BIN")
[[ -z $DEB || $DEB == "$REPO"/* ]] || CT_BINDS+=("$(dirname "$DEB")")

finish() {
    trap '' INT TERM HUP
    ct_teardown
    echo "$PASSED $FAILED" >"$RESULT"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# README "Install": the sh block after "After installing", run as it is.
readme_post_install() {
    awk '/^After installing/ { found = 1 }
         found && /^```sh/ { inside = 1; next }
         inside && /^```/ { exit }
         inside { print }' "$REPO/README.md"
}

# README "Install": the sh block after "After installing the lockdown"
# (make install LOCKDOWN=1), run as it is after the one above.
readme_lockdown_post_install() {
    awk '/^After installing the lockdown/ { found = 1 }
         found && /^```sh/ { inside = 1; next }
         inside && /^```/ { exit }
         inside { print }' "$REPO/README.md"
}

# boot_for VARIANT: boot a fresh container and prepare gpsd's device, as an
# admin would (/etc/default/gpsd): a UDP source on gpsd's loopback (inside
# its namespace under the lockdown).
boot_for() {
    VARIANT=$1
    if ! ct_boot "$1-$RUN_ID"; then
        fail "the container did not boot"
        return 1
    fi
    info "booted to '$(ct_exec systemctl is-system-running)' in $CT_BOOT_MS ms" \
        "($(ct_exec systemd-analyze 2>/dev/null | head -1))"
    ct_exec sed -i "s|^DEVICES=.*|DEVICES=\"udp://127.0.0.1:$FEED_PORT\"|" /etc/default/gpsd
}

# What a step printed, only when it failed.
run_logged() {
    local what=$1 out; shift
    if out=$("$@" 2>&1); then pass "$what"; else fail "$what:"$'\n'"$out"; return 1; fi
}

variant_make_install() {
    boot_for make-install || return
    local block lockdown
    block=$(readme_post_install)
    lockdown=$(readme_lockdown_post_install)
    run_logged "make install PREFIX=/usr DESTDIR= LOCKDOWN=1 (release binaries)" \
        ct_exec make -s -C "$REPO" install PREFIX=/usr DESTDIR= BINDIR_SRC="$BIN" LOCKDOWN=1 || { ct_teardown; return; }
    if [[ -z $block ]]; then
        fail "README.md has no post-install block after 'After installing'"
    else
        # -x: the failing step is named in the output; on a failure the units
        # that failed and the journal's last lines follow it.
        run_logged "README \"Install\"'s post-install steps" ct_exec bash -e -x -c "$block" ||
            info "$(ct_exec systemctl --no-pager --failed 2>&1; ct_exec journalctl -b --no-pager -n 40 2>&1)"
    fi
    if [[ -z $lockdown ]]; then
        fail "README.md has no post-install block after 'After installing the lockdown'"
    else
        run_logged "README \"Install\"'s post-install steps of the gpsd lockdown" ct_exec bash -e -x -c "$lockdown" ||
            info "$(ct_exec systemctl --no-pager --failed 2>&1; ct_exec journalctl -b --no-pager -n 40 \
                -u gpsd.socket -u gpsd.service -u geoconsentd.service 2>&1)"
    fi
    run_checks
    ct_teardown
    expect "the container is gone without a trace" test -z "$(ct_leftovers)"
}

variant_deb() {
    boot_for deb || return
    run_logged "apt install ./$(basename "$DEB")" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y "$DEB" || { ct_teardown; return; }
    expect "/etc/geoconsent/geoconsent.conf is a conffile" \
        eval 'ct_exec dpkg-query -W -f="\${Conffiles}" geoconsent | grep -q "^ */etc/geoconsent/geoconsent.conf "'
    check_gpsd_shared
    check_lockdown_package || { ct_teardown; return; }
    run_checks
    check_agent_package
    check_geoclue_package
    purge_agent_package
    check_reinstall
    check_purge
    ct_teardown
    expect "the container is gone without a trace" test -z "$(ct_leftovers)"
}

# The gpsd lockdown's package (docs/gpsd-lockdown.md), the administrator's
# choice, installed while gpsd and the daemon run on the machine's network
# (check_gpsd_shared): its postinst restarts the daemon and gpsd's socket
# into one private namespace at once (gpsd itself starts there on the next
# connection), with gpsd's port closed outside and the shared-memory segment
# the shared gpsd left there removed. The daemon is then stopped, so
# that run_checks finds it as after a fresh installation (not running before
# the first call).
check_lockdown_package() {
    local ldeb pid gpsd files ns nd ng n1
    ldeb=$(compgen -G "$(dirname "$DEB")/geoconsent-gpsd-lockdown_*_all.deb" | head -n 1)
    [[ -n $ldeb ]] || { fail "no geoconsent-gpsd-lockdown_*_all.deb beside $DEB (make deb)"; return 1; }
    # The daemon and gpsd run before (gpsd since the fix above).
    ct_exec timeout 20 geoconsentctl status >/dev/null 2>&1
    tcp_open 127.0.0.1 2947
    pid=$(daemon_pid); gpsd=$(unit_prop gpsd.service MainPID)
    run_logged "apt install ./$(basename "$ldeb")" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y "$ldeb" || return 1
    files=$(ct_exec dpkg-query -L geoconsent-gpsd-lockdown | grep '\.conf$' | sort | xargs)
    expect "it installed gpsd's two drop-ins and the daemon's ($files)" test "$files" = \
        "/lib/systemd/system/geoconsentd.service.d/gpsd-lockdown.conf /lib/systemd/system/gpsd.service.d/geoconsent.conf /lib/systemd/system/gpsd.socket.d/geoconsent.conf"
    expect "its postinst started the running daemon again (pid $pid before)" \
        eval '[[ $pid != 0 && $(unit_prop geoconsentd.service ActiveState) == active && $(daemon_pid) != "$pid" ]]'
    expect "stopped gpsd.service, which ran (pid $gpsd before), and started gpsd.socket again" \
        eval '[[ $gpsd != 0 && $(unit_prop gpsd.service MainPID) != "$gpsd" && $(unit_prop gpsd.socket ActiveState) == active ]]'
    # gpsd.service (disabled, as Debian ships it) starts on a connection: the daemon's, as it would.
    tcp_open_in "$(daemon_pid)" 127.0.0.1 2947
    wait_for 10 eval '[[ $(unit_prop gpsd.service ActiveState) == active ]]' || info "gpsd.service did not start"
    for ns in net ipc; do
        n1=$(ct_exec readlink "/proc/1/ns/$ns")
        nd=$(ct_exec readlink "/proc/$(daemon_pid)/ns/$ns"); ng=$(ct_exec readlink "/proc/$(unit_prop gpsd.service MainPID)/ns/$ns")
        expect "the daemon and gpsd share one $ns namespace ($nd), not the machine's ($n1)$(
                [[ $nd == "$ng" ]] || echo "; gpsd is in ${ng:-none}")" \
            test -n "$nd" -a "$nd" = "$ng" -a "$nd" != "$n1"
    done
    expect "outside, 127.0.0.1:2947 is closed at once" eval '! tcp_open 127.0.0.1 2947'
    expect "and the GPSD shared-memory segment gpsd had left outside, with its last fixes, is gone" \
        eval '! ct_exec cat /proc/sysvipc/shm | shm_has_gpsd'
    ct_exec systemctl stop geoconsentd.service
}

# The GeoClue2 facade's package beside it (docs/geoclue.md, "Switching over"):
# it replaces geoclue-2.0, the running daemon starts again with --geoclue and
# owns org.freedesktop.GeoClue2, a GeoClue client's first call (as nobody)
# starts the daemon through the bus, and purging the package lets go of the
# name. Purged here, so that check_purge sees geoconsent alone.
check_geoclue_package() {
    local gdeb out
    gdeb=$(compgen -G "$(dirname "$DEB")/geoconsent-geoclue_*_all.deb" | head -n 1)
    [[ -n $gdeb ]] || { fail "no geoconsent-geoclue_*_all.deb beside $DEB (make deb)"; return; }
    ct_exec timeout 20 geoconsentctl status >/dev/null 2>&1   # the daemon runs before
    run_logged "apt install ./$(basename "$gdeb")" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y "$gdeb" || return
    expect "geoclue-2.0 is replaced (Conflicts/Replaces)" \
        eval '! ct_exec dpkg-query -W -f="\${db:Status-Abbrev}" geoclue-2.0 2>/dev/null | grep -q "^ii"'
    expect "the running daemon started again and owns org.freedesktop.GeoClue2" wait_for 10 \
        eval 'test "$(ct_exec busctl --system status org.freedesktop.GeoClue2 2>/dev/null | sed -n "s/^PID=//p")" = "$(daemon_pid)"'
    ct_exec systemctl stop geoconsentd.service
    out=$(as_nobody timeout 20 busctl --system call org.freedesktop.GeoClue2 /org/freedesktop/GeoClue2/Manager \
        org.freedesktop.GeoClue2.Manager GetClient 2>&1)
    expect "GetClient as nobody started the daemon through the bus: $out" \
        eval '[[ $out == "o \"/org/freedesktop/GeoClue2/Client/"* && $(unit_prop geoconsentd.service ActiveState) == active ]]'
    # A person's desktop, end to end, on these packages (desktop-e2e.sh).
    check_desktop_e2e
    run_logged "apt purge geoconsent-geoclue" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y geoconsent-geoclue
    expect "after the purge the daemon runs without org.freedesktop.GeoClue2" wait_for 10 \
        eval '! ct_exec busctl --system status org.freedesktop.GeoClue2 >/dev/null 2>&1 && ct_exec timeout 10 geoconsentctl status >/dev/null'
}

# The graphical consent agent's package (desktop/, README "Desktop"): it
# installs beside the daemon, its XDG autostart entry is what a desktop
# session starts (systemd's own generator turns it into a unit of
# xdg-desktop-autostart.target that runs the installed program), the program
# runs with Debian's python3 and its GTK packages, and a purge leaves nothing.
check_agent_package() {
    local adeb gen unit
    adeb=$(compgen -G "$(dirname "$DEB")/geoconsent-agent_*_all.deb" | head -n 1)
    [[ -n $adeb ]] || { fail "no geoconsent-agent_*_all.deb beside $DEB (make deb)"; return; }
    run_logged "apt install ./$(basename "$adeb")" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y "$adeb" || return
    expect "the agent, its autostart entry, .desktop file, icon, man page and Korean and German catalogs are installed" \
        ct_exec test -x /usr/bin/geoconsent-agent -a -f /etc/xdg/autostart/org.geoconsent.Agent.desktop \
            -a -f /usr/share/applications/org.geoconsent.Agent.desktop \
            -a -f /usr/share/icons/hicolor/scalable/apps/org.geoconsent.Agent.svg \
            -a -f /usr/share/man/man1/geoconsent-agent.1.gz -a -x /usr/bin/geoconsent-settings \
            -a -f /usr/share/applications/org.geoconsent.Settings.desktop \
            -a -f /usr/share/locale/ko/LC_MESSAGES/geoconsent.mo -a -f /usr/share/locale/de/LC_MESSAGES/geoconsent.mo
    expect "the installed agent runs (--help) with the packages it depends on" \
        eval 'ct_exec geoconsent-agent --help | grep -q "consent agent" && ct_exec geoconsent-settings --help | grep -q "location settings"'
    gen=$(ct_exec sh -c 'ls /usr/lib/systemd/user-generators/systemd-xdg-autostart-generator \
        /lib/systemd/user-generators/systemd-xdg-autostart-generator 2>/dev/null | head -n 1')
    if [[ -n $gen ]]; then
        ct_exec sh -c 'rm -rf /run/geoconsent-gen && mkdir /run/geoconsent-gen'
        ct_exec env XDG_CONFIG_DIRS=/etc/xdg "$gen" /run/geoconsent-gen /run/geoconsent-gen /run/geoconsent-gen
        unit=$(ct_exec sh -c 'cat /run/geoconsent-gen/app-org.geoconsent.Agent@autostart.service 2>/dev/null')
        expect "systemd's autostart generator makes a unit of the session that runs it: ${unit:-none}" \
            eval '[[ $unit == *"ExecStart=:/usr/bin/geoconsent-agent"* || $unit == *"ExecStart=/usr/bin/geoconsent-agent"* ]] &&
                  ct_exec test -L /run/geoconsent-gen/xdg-desktop-autostart.target.wants/app-org.geoconsent.Agent@autostart.service'
        ct_exec rm -rf /run/geoconsent-gen
    else
        fail "no systemd-xdg-autostart-generator in the container"
    fi
}

purge_agent_package() {
    run_logged "apt purge geoconsent-agent" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y geoconsent-agent
    expect "after the purge no file of the agent is left" \
        eval '! ct_exec test -e /usr/bin/geoconsent-agent -o -e /etc/xdg/autostart/org.geoconsent.Agent.desktop'
}

# An upgrade (here: the same version again) restarts a running daemon
# (try-restart) and leaves gpsd alone: it stays in the namespace it is in.
check_reinstall() {
    local pid gpsd
    pid=$(daemon_pid); gpsd=$(unit_prop gpsd.service MainPID)
    [[ $pid != 0 ]] || info "the daemon was not running before the reinstall"
    run_logged "apt install --reinstall ./$(basename "$DEB")" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y --reinstall "$DEB"
    expect "the upgrade restarted the running daemon" \
        eval '[[ $(unit_prop geoconsentd.service ActiveState) == active && $(daemon_pid) != "$pid" ]]'
    expect "and left gpsd running where it was" test "$(unit_prop gpsd.service MainPID)" = "$gpsd"
    expect "the daemon answers after the upgrade" eval 'ct_exec timeout 10 geoconsentctl status >/dev/null'
}

# apt purge of geoconsent-gpsd-lockdown: its drop-ins are gone and its
# postrm restarted what ran, so gpsd is back on the machine's loopback and in
# its namespaces, and so is the daemon that ran. Then apt purge of
# geoconsent: every file of the package, the state and the config are gone,
# the Wi-Fi helper's socket unit is stopped and its socket file removed;
# the system user stays (Debian keeps system users); gpsd stays on the
# machine's loopback.
check_purge() {
    local files left state ns n1 ng nd
    # The test's own feeder unit is not the package's: it goes first.
    ct_exec systemctl stop geoconsent-test-feeder.service
    ct_exec rm -rf /etc/systemd/system/geoconsent-test-feeder.service "$FEEDER_DIR"
    ct_exec timeout 20 geoconsentctl status >/dev/null 2>&1   # the daemon runs before
    files=$(ct_exec dpkg-query -L geoconsent-gpsd-lockdown)
    run_logged "apt purge geoconsent-gpsd-lockdown" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y geoconsent-gpsd-lockdown
    left=$(ct_sh 'while read -r f; do [[ -d $f || ! -e $f && ! -L $f ]] || echo "$f"; done' <<<"$files")
    expect "no file of the lockdown package is left${left:+: $left}" test -z "$left"
    expect "gpsd is back on the machine's 127.0.0.1:2947" wait_for 5 tcp_open 127.0.0.1 2947
    for ns in net ipc; do
        n1=$(ct_exec readlink "/proc/1/ns/$ns")
        nd=$(ct_exec readlink "/proc/$(daemon_pid)/ns/$ns"); ng=$(ct_exec readlink "/proc/$(unit_prop gpsd.service MainPID)/ns/$ns")
        expect "gpsd and the daemon, started again, are in the machine's $ns namespace ($n1)$(
                [[ $ng == "$n1" && $nd == "$n1" ]] || echo "; gpsd is in ${ng:-none}, the daemon in ${nd:-none}")" \
            test -n "$n1" -a "$ng" = "$n1" -a "$nd" = "$n1"
    done
    files=$(ct_exec dpkg-query -L geoconsent)
    run_logged "apt purge geoconsent" \
        ct_exec env DEBIAN_FRONTEND=noninteractive timeout 300 apt-get purge -y geoconsent
    left=$(ct_sh 'while read -r f; do [[ -d $f || ! -e $f && ! -L $f ]] || echo "$f"; done' <<<"$files")
    expect "no file of the package is left${left:+: $left}" test -z "$left"
    state=$(unit_prop geoconsent-wifi.socket LoadState)/$(unit_prop geoconsent-wifi.socket ActiveState)
    expect "the Wi-Fi helper's socket unit is stopped and gone ($state), and $WIFI_SOCK with it (RemoveOnStop=)" \
        eval '[[ $state == not-found/inactive ]] && ! ct_exec test -e "$WIFI_SOCK"'
    expect "/var/lib/geoconsent (state) and /etc/geoconsent (config) are gone" \
        eval '! ct_exec test -e /var/lib/geoconsent && ! ct_exec test -e /etc/geoconsent'
    # Anything named after us that the container wrote, besides the user's
    # lines in the account files (which have other names).
    left=$(cd "$CT_DIR/upper" && find . -iname '*geoconsent*' ! -path './run/*' ! -path './tmp/*' | sed 's|^\.||')
    expect "nothing named geoconsent is left on the container's disk${left:+: $left}" test -z "$left"
    if ct_exec getent passwd geoconsent >/dev/null; then
        info "the system user geoconsent stays after purge, as Debian keeps system users"
    fi
    expect "gpsd is still on the machine's 127.0.0.1:2947" wait_for 5 tcp_open 127.0.0.1 2947
}

# CT_VARIANTS (default: both) picks the variants, for a quicker run by hand.
[[ " ${CT_VARIANTS:-make-install deb} " == *" make-install "* ]] && variant_make_install
[[ -n $DEB && " ${CT_VARIANTS:-make-install deb} " == *" deb "* ]] && variant_deb
((FAILED == 0))
