#!/usr/bin/env bash
# run-stack.sh BIN_DIR: run the whole geoconsent stack privately, for `make run`.
#
#   private dbus-daemon (tests/dbus/test-bus.conf, socket in a temp dir)
#   gpsd on free loopback ports, fed NMEA over UDP by
#   nmea-replay --loop --now, replaying data/track.nmea (a drive around Berlin)
#   geoconsentd --bus ADDR --gpsd 127.0.0.1:PORT --config CONF (idle-exit = 0) --state-dir TMP/state
#
# GEOCONSENT_CONFIG=FILE: its lines are added to CONF (for example a
# [sources] section: docs/dbus-api.md "Sources").
#
# GEOCONSENT_STATE=FILE: copied as the state dir's `consents` before the daemon
# starts (docs/state-format.md), for tests that need stored records (the
# desktop test's lapsed decision).
#
# GEOCONSENT_GEOCLUE=1: the daemon also serves GeoClue2 (CONF gets
# [geoclue] serve = true, as `make install GEOCLUE=1` does), and the script
# prints a where-am-i command (geoclue-2-demo) that uses the private bus as
# its system bus.
#
# BIN_DIR holds the built geoconsentd, geoconsentctl and nmea-replay (e.g.
# .build/release). Nothing on the machine is touched: no fixed ports, no
# system or session bus, nothing exported. Ctrl-C (or SIGTERM, or any exit)
# stops exactly the processes this script started and removes the temp dir.
# If one of them dies, the script says which (with its log) and exits 1.
set -uo pipefail

usage() { echo "usage: $0 BIN_DIR   (e.g. .build/release)" >&2; exit 2; }
(($# == 1)) || usage
[[ -d $1 ]] || { echo "run-stack: no such directory: $1" >&2; exit 2; }
BIN=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "run-stack: $*" >&2; exit 1; }

for exe in geoconsentd nmea-replay; do
    [[ -x $BIN/$exe ]] || die "$BIN/$exe not found (build first: swift build -c release)"
done
[[ -x $BIN/geoconsentctl ]] || echo "run-stack: warning: $BIN/geoconsentctl not found" >&2
DBUS_DAEMON=$(command -v dbus-daemon) || die "dbus-daemon not found (scripts/deps.sh)"
GPSD=$(command -v gpsd || { [[ -x /usr/sbin/gpsd ]] && echo /usr/sbin/gpsd; }) || die "gpsd not found (scripts/deps.sh)"
command -v python3 >/dev/null || die "python3 not found (scripts/deps.sh)"
BUSCTL=$(command -v busctl || true)

TMP=$(mktemp -d /tmp/geoconsent-run.XXXXXX) || die "mktemp failed"

# name -> pid of everything we start, in start order.
NAMES=()
PIDS=()
CLEANED=no

# shellcheck source=procs.sh
source "$ROOT/scripts/procs.sh"

cleanup() {
    [[ $CLEANED == yes ]] && return
    CLEANED=yes
    trap '' INT TERM HUP
    # Reverse start order (daemon first, bus last); up to 3 s, then SIGKILL.
    stop_started run-stack 30
    rm -rf "$TMP"
    echo "run-stack: stopped ${NAMES[*]:-nothing}; removed $TMP" >&2
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# start NAME LOG CMD...: run CMD in the background, stdin /dev/null, stdout and
# stderr to LOG, and remember its pid.
start() {
    local name=$1 log=$2
    shift 2
    "$@" </dev/null >"$log" 2>&1 &
    NAMES+=("$name")
    PIDS+=($!)
}

# forget PID: drop a child we have already reaped, so cleanup never signals
# a pid that may since belong to someone else.
forget() {
    local i
    for i in "${!PIDS[@]}"; do
        if [[ ${PIDS[i]} == "$1" ]]; then
            unset 'PIDS[i]' 'NAMES[i]'
        fi
    done
    PIDS=("${PIDS[@]}")
    NAMES=("${NAMES[@]}")
}

show_log() {
    echo "---- $1 ----" >&2
    tail -n 40 "$1" >&2 2>/dev/null
    echo "----" >&2
}

# Two loopback ports, each free for both TCP and UDP (the kernel picks, we
# check the other protocol); some other process may hold any fixed port.
read -r GPSD_PORT NMEA_PORT < <(python3 - <<'EOF'
import socket
ports = []
while len(ports) < 2:
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("127.0.0.1", 0))
    p = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        u.close()
        t.close()
    if p not in ports:
        ports.append(p)
print(*ports)
EOF
)
[[ -n ${NMEA_PORT:-} ]] || die "could not pick free ports"

# 1. Private bus; its first stdout line is the address.
"$DBUS_DAEMON" --config-file="$ROOT/tests/dbus/test-bus.conf" --nofork --print-address=1 \
    --address="unix:dir=$TMP" </dev/null >"$TMP/bus.address" 2>"$TMP/dbus-daemon.log" &
NAMES+=(dbus-daemon)
PIDS+=($!)
BUS=
for _ in $(seq 100); do
    BUS=$(head -n 1 "$TMP/bus.address" 2>/dev/null)
    [[ -n $BUS ]] && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.05
done
[[ $BUS == unix:* ]] || { show_log "$TMP/dbus-daemon.log"; die "dbus-daemon did not start"; }

# 2. gpsd, reading NMEA datagrams on NMEA_PORT, serving JSON on GPSD_PORT.
start gpsd "$TMP/gpsd.log" "$GPSD" -N -n -b -S "$GPSD_PORT" "udp://127.0.0.1:$NMEA_PORT"
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$GPSD_PORT") 2>/dev/null && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { show_log "$TMP/gpsd.log"; die "gpsd exited"; }
    sleep 0.05
done

# 3. The receiver: the Berlin track, forever, stamped with the current time.
start nmea-replay "$TMP/nmea-replay.log" \
    "$BIN/nmea-replay" --loop --now --quiet "127.0.0.1:$NMEA_PORT" "$ROOT/data/track.nmea"

# 4. The daemon, with the defaults but for idle exit (nothing would start it
#    again on this bus: there is no activation here) and a throwaway state dir.
printf '[daemon]\nidle-exit = 0\n' >"$TMP/geoconsent.conf"
GEOCLUE=no
WHERE_AM_I=/usr/libexec/geoclue-2.0/demos/where-am-i
if [[ ${GEOCONSENT_GEOCLUE:-0} == 1 ]]; then
    GEOCLUE=yes
    printf '[geoclue]\nserve = true\n' >>"$TMP/geoconsent.conf"
    [[ -x $WHERE_AM_I ]] || echo "run-stack: warning: $WHERE_AM_I not found (apt-get install geoclue-2-demo)" >&2
fi
if [[ -n ${GEOCONSENT_CONFIG:-} ]]; then
    cat "$GEOCONSENT_CONFIG" >>"$TMP/geoconsent.conf" || { echo "run-stack: cannot read $GEOCONSENT_CONFIG" >&2; exit 1; }
fi
mkdir -m 0700 "$TMP/state"
if [[ -n ${GEOCONSENT_STATE:-} ]]; then
    install -m 0600 "$GEOCONSENT_STATE" "$TMP/state/consents" || { echo "run-stack: cannot read $GEOCONSENT_STATE" >&2; exit 1; }
fi
start geoconsentd "$TMP/geoconsentd.log" \
    "$BIN/geoconsentd" --bus "$BUS" --gpsd "127.0.0.1:$GPSD_PORT" \
    --config "$TMP/geoconsent.conf" --state-dir "$TMP/state"
DAEMON_PID=${PIDS[-1]}

# owns NAME: true when NAME has an owner on the private bus.
owns() {
    "$BUSCTL" --address="$BUS" call org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus NameHasOwner s "$1" 2>/dev/null | grep -q true
}

# Ready when it owns its name (and GeoClue's, if asked) on the bus (up to 10 s).
owned=no
deadline=$((SECONDS + 10))
while ((SECONDS < deadline)); do
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
        wait "$DAEMON_PID"
        st=$?
        forget "$DAEMON_PID"
        echo "run-stack: ERROR: geoconsentd exited (status $st) before owning org.geoconsent.GeoConsent1" >&2
        show_log "$TMP/geoconsentd.log"
        exit 1
    fi
    if [[ -n $BUSCTL ]] && owns org.geoconsent.GeoConsent1 && { [[ $GEOCLUE == no ]] || owns org.freedesktop.GeoClue2; }; then
        owned=yes
        break
    fi
    [[ -z $BUSCTL ]] && { sleep 1; break; }
    sleep 0.02
done
if [[ $owned == no && -n $BUSCTL ]]; then
    echo "run-stack: warning: geoconsentd (pid $DAEMON_PID) runs but does not own" \
         "org.geoconsent.GeoConsent1$([[ $GEOCLUE == yes ]] && echo ' and org.freedesktop.GeoClue2') after 10 s;" \
         "see $TMP/geoconsentd.log" >&2
fi

# 5. A consent agent for your uid, so `geoconsentctl locate` works at once. It
# answers every prompt "allow-once" (a demo, not a user's choice); set
# GEOCONSENT_AGENT=none to answer prompts yourself with `geoconsentctl agent`.
AGENT_LINE="none (run: $BIN/geoconsentctl --bus '$BUS' agent)"
if [[ ${GEOCONSENT_AGENT:-auto} != none && -x $BIN/geoconsentctl ]]; then
    start agent "$TMP/agent.log" "$BIN/geoconsentctl" --bus "$BUS" agent --auto allow-once
    AGENT_LINE="pid ${PIDS[-1]}, answers allow-once (GEOCONSENT_AGENT=none to answer yourself)"
    for _ in $(seq 100); do
        grep -q "registered" "$TMP/agent.log" 2>/dev/null && break
        kill -0 "${PIDS[-1]}" 2>/dev/null || { show_log "$TMP/agent.log"; die "the consent agent exited"; }
        sleep 0.05
    done
fi

GEOCLUE_LINES=
if [[ $GEOCLUE == yes ]]; then
    GEOCLUE_LINES="

GeoClue2 is served too (GEOCONSENT_GEOCLUE=1); an unmodified GeoClue client,
with the private bus as its system bus:
  DBUS_SYSTEM_BUS_ADDRESS='$BUS' $WHERE_AM_I -t 10 -a 8"
fi

cat <<EOF

geoconsent stack is running (temp dir $TMP)
  bus      $BUS
  gpsd     127.0.0.1:$GPSD_PORT (NMEA in: udp 127.0.0.1:$NMEA_PORT, data/track.nmea looping)
  daemon   pid $DAEMON_PID, log $TMP/geoconsentd.log$([[ $GEOCLUE == yes ]] && echo ', serving org.freedesktop.GeoClue2 too')
  agent    $AGENT_LINE
  pids     $(for i in "${!PIDS[@]}"; do printf '%s=%s ' "${NAMES[i]}" "${PIDS[i]}"; done)

Try, in another terminal:
  $BIN/geoconsentctl --bus '$BUS' status
  $BIN/geoconsentctl --bus '$BUS' locate
  busctl --address='$BUS' introspect org.geoconsent.GeoConsent1 /org/geoconsent/GeoConsent1
  tail -f $TMP/geoconsentd.log$GEOCLUE_LINES

The bus is private and nothing was exported: your DBUS_SESSION_BUS_ADDRESS is
untouched, so give the address explicitly (--bus / --address) as above.
Ctrl-C stops everything and removes $TMP.
EOF

# Wait until we are signalled (the traps exit, and cleanup runs) or one of
# our processes dies (then say which, and stop the rest).
while true; do
    died=
    wait -n -p died "${PIDS[@]}"
    st=$?
    [[ -z $died ]] && continue   # interrupted without a child exiting
    for i in "${!PIDS[@]}"; do
        if [[ ${PIDS[i]} == "$died" ]]; then
            echo "run-stack: ERROR: ${NAMES[i]} (pid $died) exited with status $st" >&2
            show_log "$TMP/${NAMES[i]}.log"
        fi
    done
    forget "$died"
    exit 1
done
