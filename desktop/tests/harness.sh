# harness.sh: the process and log helpers of the desktop tests
# (desktop/test-desktop.sh, desktop/tests/test-focus.sh), sourced after
# scripts/procs.sh. The test keeps its processes in NAMES and PIDS (start
# order), their output in $TMP/NAME.log and $TMP/NAME.err, and defines `fail`.

# start NAME CMD...: in the background, stdout to NAME.log, stderr to NAME.err.
start() {
    local name=$1
    shift
    "$@" </dev/null >"$TMP/$name.log" 2>"$TMP/$name.err" &
    NAMES+=("$name")
    PIDS+=($!)
}
pid_of() {
    local i
    for i in "${!NAMES[@]}"; do [[ ${NAMES[i]} == "$1" ]] && echo "${PIDS[i]}"; done | tail -n 1
}
# alive NAME: the process started as NAME exists and is not a zombie.
alive() { local pid; pid=$(pid_of "$1"); [[ -n $pid ]] && pid_running "$pid"; }

# wait_for SECONDS WHAT CMD...: poll CMD every 0.1 s until it succeeds.
wait_for() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@"; do
        ((SECONDS < deadline)) || fail "timed out after ${limit} s waiting for $what"
        sleep 0.1
    done
}
# has_line NAME REGEX: NAME's stdout has a line matching REGEX.
has_line() { grep -Eq -- "$2" "$TMP/$1.log" 2>/dev/null; }
line() { grep -E -- "$2" "$TMP/$1.log" 2>/dev/null | tail -n 1; }
# field LINE KEY: the value of KEY=VALUE in LINE.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
