# procs.sh: shared by scripts/run-stack.sh and desktop/test-desktop.sh (sourced).
# They keep the processes they start in two arrays, NAMES and PIDS, in start order.

# pid_running PID: true while PID exists and is not a zombie (a zombie is dead,
# only not yet reaped; kill -0 would still succeed on it).
pid_running() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && ${st:0:1} != Z ]]
}

# stop_started LABEL TENTHS: SIGTERM everything in PIDS in reverse start order,
# wait up to TENTHS tenths of a second for all to exit, SIGKILL what is left
# (saying so on stderr, prefixed with LABEL), then reap them all.
stop_started() {
    local label=$1 tenths=$2 i pid alive
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill -TERM "${PIDS[i]}" 2>/dev/null
    done
    for _ in $(seq "$tenths"); do
        alive=no
        for pid in "${PIDS[@]}"; do pid_running "$pid" && alive=yes; done
        [[ $alive == no ]] && break
        sleep 0.1
    done
    for i in "${!PIDS[@]}"; do
        if pid_running "${PIDS[i]}"; then
            echo "$label: ${NAMES[i]} (pid ${PIDS[i]}) ignored SIGTERM; killing" >&2
            kill -KILL "${PIDS[i]}" 2>/dev/null
        fi
    done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
}
