#!/usr/bin/env bash
# po-check.sh [OUTDIR]: checks the translations (po/) and compiles them.
#
# For each language in po/LINGUAS: `msgfmt --check` (format strings, plural
# forms, the header), no untranslated or fuzzy message, and every string the
# programs mark for translation today (extracted afresh with xgettext) is in
# the catalog (msgcmp). The catalogs are compiled to
# OUTDIR/LANG/LC_MESSAGES/geoconsent.mo (default .build/locale, where the
# checkout's desktop programs and geoconsentctl find them). `make test` runs it;
# `make install-agent` installs what it compiled.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-.build/locale}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The sources whose strings are translated: the desktop programs (xgettext
# reads Python) and geoconsentctl (its tr("...") literals; xgettext has no
# Swift reader). PO_UPDATE=1 also writes the template to po/geoconsent.pot.
xgettext --language=Python --keyword=_ --keyword=ngettext:1,2 --from-code=UTF-8 \
    --add-comments=TRANSLATORS -o "$tmp/python.pot" desktop/geoconsent_desktop/*.py
python3 scripts/extract-swift-strings.py "$tmp/swift.pot" Sources/geoconsentctl/*.swift
msgcat --use-first -o "$tmp/geoconsent.pot" "$tmp/python.pot" "$tmp/swift.pot"
if [[ ${PO_UPDATE:-} == 1 ]]; then cp "$tmp/geoconsent.pot" po/geoconsent.pot; fi
status=0
for lang in $(cat po/LINGUAS); do
    mkdir -p "$out/$lang/LC_MESSAGES"
    if ! stats=$(LC_ALL=C msgfmt --check --statistics -o "$out/$lang/LC_MESSAGES/geoconsent.mo" "po/$lang.po" 2>&1); then
        echo "po-check: $lang: $stats" >&2; status=1; continue
    fi
    if [[ $stats == *untranslated* || $stats == *fuzzy* ]]; then
        echo "po-check: $lang is not complete: $stats" >&2; status=1
    fi
    if ! missing=$(LC_ALL=C msgcmp "po/$lang.po" "$tmp/geoconsent.pot" 2>&1); then
        echo "po-check: $lang lacks strings the programs use (regenerate po/geoconsent.pot and translate):" >&2
        echo "$missing" >&2; status=1
    fi
    echo "po-check: $lang: $stats"
done
exit $status
