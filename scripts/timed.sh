#!/usr/bin/env bash
# Runs a command and then says how long it took: "make test: LABEL took N s"
# (docs/development.md "Tests" lists what each part of `make test` costs).
set -uo pipefail
label=$1; shift
start=$SECONDS
"$@"
status=$?
echo "make test: $label took $((SECONDS - start)) s$([[ $status -eq 0 ]] || echo ", failed ($status)")"
exit $status
