#!/usr/bin/env bash
# The closing line of `make test`'s XCTest part, from the xUnit file that
# `swift test --parallel --xunit-output FILE` writes (a parallel run prints no
# "Executed N tests" line): "xctest: N passed, M failed", and the failed tests.
# Exits 1 when a test failed or the file holds no test.
set -euo pipefail
python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
failed = [f'{c.get("classname")}.{c.get("name")}' for c in cases if c.find("failure") is not None]
for name in failed:
    print(f"xctest: FAILED {name}")
print(f"xctest: {len(cases) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed or not cases else 0)
PY
