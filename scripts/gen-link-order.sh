#!/usr/bin/env bash
# gen-link-order.sh: regenerate link/hot-functions.order, the symbol order the
# release link (Makefile RELEASE_FLAGS, ld.lld --symbol-ordering-file) lays out
# first in .text.
#
# Why: the kernel maps a binary's text in 64 KiB (or whole-folio) chunks around
# each page it executes, so code run at start-up and per request, when scattered
# over a 5.7 MB static Swift binary, makes most of it resident. Laid out together,
# the functions the daemon actually runs fit in a few hundred KiB (README
# "Performance", idle RSS).
#
# How: build the release, run `geoconsent-bench --quick` with the daemon under
# `valgrind --tool=callgrind`, and keep every function of the geoconsentd
# binary that executed at least once (start-up, taps, fixes, fan-out, churn,
# shutdown). A stale list is harmless: symbols that no longer exist are
# ignored, new ones are laid out after the listed ones.
set -euo pipefail
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
BENCH_DAEMON="$TMP/daemon" "$BIN/geoconsent-bench" --quick --json "$TMP/bench.json" >"$TMP/bench.log" 2>&1 ||
    { cat "$TMP/bench.log" >&2; exit 1; }
python3 - "$TMP"/callgrind.out.* > link/hot-functions.order <<'PY'
import re, sys
# callgrind names objects and functions once as "ob=(N) name" / "fn=(N) name"
# (also in "cob="/"cfn=" lines) and later by number alone.
obs, fns, hot, current = {}, {}, set(), None
for path in sys.argv[1:]:
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
                hot.add(fns[key])
print("\n".join(sorted(hot)))
PY
echo "gen-link-order: $(wc -l < link/hot-functions.order) functions in link/hot-functions.order"
