#!/usr/bin/env bash
# gen-link-order.sh: regenerate link/hot-functions.order, the symbol order the
# release link (Makefile RELEASE_FLAGS, ld.lld --symbol-ordering-file) lays out
# first in .text.
#
# Why: the kernel maps a binary's text in 64 KiB (or whole-folio) chunks around
# each page it executes, so code run at start-up and per request, when scattered
# over a 5.7 MB static Swift binary, makes most of it resident. Laid out together,
# the functions the daemon actually runs fit in a few hundred KiB
# (docs/performance.md, idle RSS).
#
# How: build the release, run `geoconsent-bench` with the daemon under
# `valgrind --tool=callgrind`, and keep every function of the geoconsentd
# binary that executed at least once: first those of start-up, then those of
# taps, fixes, fan-out, churn and shutdown. A stale list is harmless: symbols
# that no longer exist are ignored, new ones are laid out after the listed ones.
#
# The benchmark runs without CAP_SYS_PTRACE (setpriv), so the daemon reads /proc
# itself instead of starting the identity helper: the helper is started as
# /proc/self/exe, which under valgrind is valgrind's own tool and will not run.
# The functions of that path (the helper's client, the re-execution) come from
# the previous list: what it holds and this profile did not see is kept, after
# the start-up functions.
set -euo pipefail
# The toolchain lives in /opt/swift on our machines (as in the Makefile).
[[ -x /opt/swift/usr/bin/swift ]] && PATH=/opt/swift/usr/bin:$PATH
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
command -v valgrind >/dev/null || { echo "gen-link-order: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
make -s release
BIN=$(swift build -c release --static-swift-stdlib --show-bin-path)
TMP=$(mktemp -d /tmp/geoconsent-order.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/daemon" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --demangle=no --callgrind-out-file=$TMP/callgrind.out.%p "$BIN/geoconsentd" "\$@"
WRAP
chmod +x "$TMP/daemon"
# Two runs: start-up alone (what an idle daemon has touched), then the quick
# benchmark (taps, fixes, fan-out, churn). Start-up functions come first, so the
# pages an idle daemon keeps are as few as possible.
mkdir "$TMP/startup" "$TMP/all"
for run in startup all; do
    OUT=$TMP/$run
    sed "s|$TMP/callgrind|$OUT/callgrind|" "$TMP/daemon" > "$TMP/daemon-$run"
    chmod +x "$TMP/daemon-$run"
    if [[ $run == startup ]]; then only=startup; else only=; fi
    # No sessions of other uids (BENCH_SCALING_SESSIONS empty): without
    # CAP_SYS_PTRACE the daemon cannot identify them.
    BENCH_SCALING_SESSIONS= BENCH_ONLY=$only BENCH_DAEMON="$TMP/daemon-$run" setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace \
        "$BIN/geoconsent-bench" --quick --json "$TMP/bench.json" \
        >"$TMP/bench-$run.log" 2>&1 || { cat "$TMP/bench-$run.log" >&2; exit 1; }
done
python3 - "$TMP/startup" "$TMP/all" link/hot-functions.order > "$TMP/order" <<'PY'
import glob, re, sys

def executed(folder):
    """Functions of the geoconsentd binary that ran in the callgrind outputs in folder."""
    # callgrind names objects and functions once as "ob=(N) name" / "fn=(N) name"
    # (also in "cob="/"cfn=" lines) and later by number alone.
    hot = set()
    for path in glob.glob(folder + "/callgrind.out.*"):
        obs, fns, current = {}, {}, None
        for line in open(path, errors="replace"):
            m = re.match(r"^(ob|fn|cfn|cob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if not m:
                continue
            kind, key, name = m.groups()
            if kind in ("ob", "cob"):
                if name:
                    obs[key] = name
                if kind == "ob":
                    current = obs.get(key)
            else:
                if name:
                    fns[key] = name
                if kind == "fn" and current and current.endswith("/geoconsentd") and not fns[key].startswith(("0x", "(")):
                    # "name'2" is callgrind's name for a recursion level of name.
                    hot.add(re.sub(r"'[0-9]+$", "", fns[key]))
    return hot

startup = executed(sys.argv[1])
later = executed(sys.argv[2]) - startup
if not startup or not later:
    sys.exit("gen-link-order: no functions found (did callgrind run?)")
seen = startup | later
kept = [f for f in open(sys.argv[3]).read().split("\n") if f and f not in seen]
print("\n".join(sorted(startup) + kept + sorted(later)))
PY
# Replaced only when the profile worked: a failed run leaves the committed list alone.
mv "$TMP/order" link/hot-functions.order
echo "gen-link-order: $(wc -l < link/hot-functions.order) functions in link/hot-functions.order"
