# shellcheck shell=bash
# CT_BOOT_MS and CT_ROOT are read by the caller:
# shellcheck disable=SC2034
# container.sh: boot a throwaway systemd in a container whose root is an
# overlay over this machine's own /, run commands in it, and remove every
# trace of it afterwards. Sourced by tests/systemd/test-units.sh; bash only.
#
# Why this shape (each point was needed on Debian 12 with systemd 252, where
# the machine itself has no systemd as PID 1):
#   - The caller runs in a private mount namespace (`unshare --mount
#     --propagation private`): every mount made here dies with it, even if the
#     script is killed.
#   - The root is an overlay with lowerdir=/ and its upper and work dirs on a
#     tmpfs: the container sees the installed Debian system (systemd, dbus,
#     gpsd, the toolchain, this checkout) and nothing it writes reaches the disk.
#     `-D / --volatile=overlay` is refused by nspawn, and `--volatile=yes`
#     boots with an empty /etc and writes to the real disk.
#   - /run gets a tmpfs of its own (nspawn keeps its state there), and the
#     overlay a fresh /etc/machine-id (nspawn refuses the host's).
#   - nspawn runs in a cgroup of ours in both the unified and the name=systemd
#     hierarchy (this machine has the hybrid layout; a pure v2 one has one
#     tree), so that everything the
#     container's systemd creates lies below it and can be removed (deepest
#     first); SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 gives the container a pure
#     cgroup v2 tree, which BPF (IPAddressDeny=) needs.
#   - --register=no --keep-unit: there is no host systemd to register with
#     ("Failed to open system bus" otherwise). --system-call-filter=bpf: without
#     bpf(2) the container's BPF firewall is off and IPAddressDeny= is silently
#     not enforced. --private-network: the container's 127.0.0.1 is its own.
#   - Units that only slow the boot (timers, postgresql, getty) are masked,
#     and a Docker image's /usr/sbin/policy-rc.d is removed (see ct_boot).
#
# Commands run in the container with `ct_exec` (nsenter into every namespace
# of the container's PID 1): such a process is in none of the container's
# units, which is exactly what "another local process" means in the checks.
#
# API (all state in CT_* variables; one container at a time; set CT_BINDS
# before ct_boot):
#   ct_boot NAME        boot (NAME names its cgroup; CT_TAG, if set, its
#                       directory under /tmp); sets CT_ROOT (the overlay), CT_LEADER (PID 1's
#                       host pid), CT_BOOT_MS; returns non-zero on failure
#   ct_reboot           power off and boot again on the same overlay
#   ct_exec CMD...      run CMD inside (stdin inherited)
#   ct_sh 'SCRIPT'      run a bash script inside
#   ct_teardown         stop the container, unmount, remove cgroups and files;
#                       safe to call twice and after a failed ct_boot
#   ct_leftovers        print what of the last container is still there (nothing = clean)

# The cgroup hierarchies a process must leave to be ours alone: the unified
# and the name=systemd one on a hybrid layout (this machine's), the single
# tree on a pure cgroup v2 one.
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    CT_HIERARCHIES=(/sys/fs/cgroup)
else
    CT_HIERARCHIES=(/sys/fs/cgroup/unified /sys/fs/cgroup/systemd)
fi
# Masked in the container: enabled in this image, useless for a unit test, slow.
CT_MASK=(postgresql.service e2scrub_reap.service e2scrub_all.timer apt-daily.timer
         apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer man-db.timer
         systemd-timesyncd.service getty@tty1.service console-getty.service
         systemd-pstore.service)

# Host directories the container must see as they are, at the same path,
# read-only: the overlay shows most of /, but nspawn puts a tmpfs on /tmp
# (a checkout there would vanish), and a bind shows later changes too.
CT_BINDS=()

CT_DIR=
CT_ROOT=
CT_CGROUP=
CT_NSPAWN_PID=
CT_LEADER=
CT_LOG=
CT_BOOT_MS=
CT_RUN_MOUNTED=
CT_MACHINE=

ct_log() { echo "container: $*" >&2; }

# Monotonic milliseconds (bash has no clock of its own that fine).
ct_now_ms() { local t=${EPOCHREALTIME/./}; echo $(( t / 1000 )); }

ct_boot() {
    local name=$1
    CT_DIR=$(mktemp -d "/tmp/geoconsent-ct-${CT_TAG:-$$}.XXXXXX") || return 1
    CT_LOG=$CT_DIR.console.log
    mount -t tmpfs -o mode=0755,size=2g "ct-$name" "$CT_DIR" || return 1
    mkdir "$CT_DIR/upper" "$CT_DIR/work" "$CT_DIR/root" "$CT_DIR/run"
    mount -t overlay "ct-$name" -o "lowerdir=/,upperdir=$CT_DIR/upper,workdir=$CT_DIR/work" "$CT_DIR/root" || return 1
    CT_ROOT=$CT_DIR/root
    # nspawn's own state (/run/systemd/nspawn) stays in this namespace.
    mount -t tmpfs -o mode=0755 "ct-$name-run" /run || return 1
    CT_RUN_MOUNTED=yes

    systemd-id128 new >"$CT_ROOT/etc/machine-id"
    # An image made by `docker build` has a policy-rc.d that forbids maintainer
    # scripts to start or stop services (deb-systemd-invoke obeys it); a booted
    # machine has none.
    rm -f "$CT_ROOT/usr/sbin/policy-rc.d"
    local unit
    for unit in "${CT_MASK[@]}"; do ln -sfn /dev/null "$CT_ROOT/etc/systemd/system/$unit"; done

    CT_CGROUP=geoconsent-ct-$name
    CT_MACHINE=gc-$name
    local h
    for h in "${CT_HIERARCHIES[@]}"; do mkdir "$h/$CT_CGROUP" || return 1; done
    ct_start
}

# ct_start: start systemd on the prepared overlay and wait until it has booted.
ct_start() {
    local h cgroups=() b binds=()
    for h in "${CT_HIERARCHIES[@]}"; do cgroups+=("$h/$CT_CGROUP"); done
    for b in "${CT_BINDS[@]}"; do binds+=("--bind-ro=$b"); done
    local t0; t0=$(ct_now_ms)
    # The wrapper moves itself into our cgroups, then becomes nspawn: in a
    # session of its own (a Ctrl-C reaches us, and we shut it down in order),
    # and told to power off if we die without doing so (--pdeathsig).
    # shellcheck disable=SC2016  # the wrapper's own script
    SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 setsid bash -c '
        n=$1; shift
        for ((i = 0; i < n; i++)); do echo $$ >"$1/cgroup.procs" || exit 1; shift; done
        exec "$@"' ct-wrap "${#cgroups[@]}" "${cgroups[@]}" \
        setpriv --pdeathsig SIGTERM systemd-nspawn -D "$CT_ROOT" --machine="$CT_MACHINE" --register=no --keep-unit --boot \
            --console=read-only --link-journal=no --resolv-conf=off --timezone=off \
            --system-call-filter=bpf --private-network "${binds[@]}" \
        </dev/null >>"$CT_LOG" 2>&1 &
    CT_NSPAWN_PID=$!

    # PID 1 of the container: the descendant of nspawn whose comm is systemd.
    local i pid
    for ((i = 0; i < 200; i++)); do
        pid=$(ct_find_leader "$CT_NSPAWN_PID")
        [[ -n $pid ]] && break
        kill -0 "$CT_NSPAWN_PID" 2>/dev/null || { ct_log "nspawn exited:"; cat "$CT_LOG" >&2; return 1; }
        sleep 0.05
    done
    [[ -n $pid ]] || { ct_log "no systemd in the container after 10 s"; return 1; }
    CT_LEADER=$pid

    # Until its manager socket exists, systemctl cannot connect, and until
    # /run/systemd/system exists it says "offline" (sd_booted): ask again.
    local state
    for ((i = 0; i < 200; i++)); do
        state=$(timeout 120 nsenter -t "$CT_LEADER" -a systemctl is-system-running --wait 2>&1)
        [[ $state == *"Failed to connect"* || $state == offline ]] || break
        sleep 0.02
    done
    CT_BOOT_MS=$(( $(ct_now_ms) - t0 ))
    case $state in
        running) ;;
        degraded) ct_log "booted degraded; failed units:"; ct_exec systemctl --failed --no-legend >&2 ;;
        *) ct_log "boot did not finish: '$state'"; tail -40 "$CT_LOG" >&2; return 1 ;;
    esac
}

# ct_find_leader PID: the pid of the first descendant of PID named systemd.
ct_find_leader() {
    local queue=("$1") p c comm
    while ((${#queue[@]})); do
        p=${queue[0]}; queue=("${queue[@]:1}")
        # shellcheck disable=SC2013  # children: pids separated by spaces
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
            comm=$(cat /proc/"$c"/comm 2>/dev/null)
            [[ $comm == systemd ]] && { echo "$c"; return; }
            queue+=("$c")
        done
    done
}

# A clean environment, as a root login in the container would have: nothing of
# the caller's (toolchain, pyenv) leaks in.
CT_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb)
ct_exec() { nsenter -t "$CT_LEADER" -a -- "${CT_ENV[@]}" "$@"; }
ct_sh() { nsenter -t "$CT_LEADER" -a -- "${CT_ENV[@]}" bash -c "$1"; }

# ct_poweroff: shut the container down (the overlay stays, for ct_start).
ct_poweroff() {
    local i h
    if [[ -n $CT_NSPAWN_PID ]] && kill -0 "$CT_NSPAWN_PID" 2>/dev/null; then
        # SIGTERM makes nspawn power the container off cleanly (SIGRTMIN+3 to its init).
        kill -TERM "$CT_NSPAWN_PID" 2>/dev/null
        for ((i = 0; i < 100; i++)); do kill -0 "$CT_NSPAWN_PID" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$CT_NSPAWN_PID" 2>/dev/null && { ct_log "nspawn still up after 10 s: SIGKILL"; kill -KILL "$CT_NSPAWN_PID"; }
        wait "$CT_NSPAWN_PID" 2>/dev/null
    fi
    CT_NSPAWN_PID=
    CT_LEADER=
    if [[ -n $CT_CGROUP ]]; then
        for h in "${CT_HIERARCHIES[@]}"; do ct_kill_cgroup "$h/$CT_CGROUP"; done
        # What the container's systemd made below ours.
        for h in "${CT_HIERARCHIES[@]}"; do
            [[ -d $h/$CT_CGROUP ]] && find "$h/$CT_CGROUP" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
        done
    fi
}

# ct_reboot: power off and boot again on the same overlay, as a machine would.
ct_reboot() { ct_poweroff; ct_start; }

ct_teardown() {
    ct_poweroff
    if [[ -n $CT_CGROUP ]]; then
        local h
        for h in "${CT_HIERARCHIES[@]}"; do ct_rmdir_tree "$h/$CT_CGROUP"; done
    fi
    if [[ -n $CT_DIR ]]; then
        [[ $CT_RUN_MOUNTED == yes ]] && umount -l /run && CT_RUN_MOUNTED=
        # Deepest first: whatever the container left mounted inside the overlay.
        local m
        while read -r m; do umount -l "$m" 2>/dev/null; done < <(
            awk -v d="$CT_DIR" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
        rmdir "$CT_DIR" 2>/dev/null || rm -rf --one-file-system "$CT_DIR"
        rm -f "$CT_LOG"
    fi
}

# ct_kill_cgroup DIR: SIGKILL whatever is still in DIR or below (nothing after a
# clean poweroff), and wait until it is gone.
ct_kill_cgroup() {
    local dir=$1 i pids
    [[ -d $dir ]] || return 0
    for ((i = 0; i < 50; i++)); do
        pids=$(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null)
        [[ -z $pids ]] && return 0
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null
        sleep 0.1
    done
    ct_log "processes left in $dir: $pids"
}

ct_rmdir_tree() {
    [[ -d $1 ]] || return 0
    find "$1" -depth -type d -exec rmdir {} + 2>/dev/null
    [[ ! -d $1 ]] || ct_log "could not remove cgroup $1"
}

ct_leftovers() {
    local h
    for h in "${CT_HIERARCHIES[@]}"; do
        [[ -n $CT_CGROUP && -d $h/$CT_CGROUP ]] && echo "cgroup $h/$CT_CGROUP"
    done
    [[ -n $CT_DIR && -e $CT_DIR ]] && echo "directory $CT_DIR"
    [[ -n $CT_DIR ]] && grep -F " $CT_DIR" /proc/self/mountinfo | awk '{ print "mount " $5 }'
    return 0
}
