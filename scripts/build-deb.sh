#!/usr/bin/env bash
# build-deb.sh OUTDIR: `make deb`. Builds the Debian package from debian/ with
# `dpkg-buildpackage -us -uc -b` and checks it with lintian.
#
# Everything it makes (.deb, the -dbgsym .ddeb, .buildinfo, .changes) goes to
# OUTDIR instead of the checkout's parent directory, so a build leaves nothing
# outside the checkout. lintian then checks the .changes (and so the .deb):
# any error, or any warning that debian/*lintian-overrides does not explain,
# fails the build. debian/ is left as it was. Prints the .deb's path as its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
(($# == 1)) || { echo "usage: $0 OUTDIR" >&2; exit 2; }

bash scripts/deps.sh --package
out=$(mkdir -p "$1" && cd "$1" && pwd)
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
changes=$out/geoconsent_${version}_$arch.changes
rm -f "$out"/geoconsent_* "$out"/geoconsent-dbgsym_* "$out"/geoconsent-geoclue_* "$out"/geoconsent-agent_* \
    "$out"/geoconsent-gpsd-lockdown_*
# The build's staging tree and bookkeeping under debian/ go when we are done,
# whatever happened (`debian/rules clean` keeps .build: see there).
trap 'debian/rules clean >/dev/null 2>&1 || true' EXIT

# -us -uc: nothing to sign with. The build runs debian/rules, which runs
# `make release` and `make install` (with SKIP_DEPS=1).
GEOCONSENT_DEB_DIR=$out dpkg-buildpackage -us -uc -b \
    --buildinfo-option="-u$out" --buildinfo-file="$out/geoconsent_${version}_$arch.buildinfo" \
    --changes-option="-u$out" --changes-file="$changes"

echo "build-deb: lintian $changes"
lintian --fail-on error,warning --display-info "$changes"
echo "$out/geoconsent_${version}_$arch.deb"
