#!/usr/bin/env python3
"""Prints the rows of a bench.json that have a target as a Markdown table:
the current-figures table at the top of docs/performance.md is made with it
(`python3 scripts/bench-table.py bench.json`), so that no figure there is copied
by hand. Rows without a target (floors, references, parts) stay in bench.json."""
import json
import sys


def fmt(x, unit):
    if x is None:
        return ""
    if abs(x) >= 100:
        s = f"{x:,.0f}".replace(",", " ")
    elif abs(x) >= 10:
        s = f"{x:.1f}"
    else:
        s = f"{x:.2f}"
    return f"{s} {unit}".strip()


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench.json"
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    print(f"Run of {data.get('date', '?')}{' (--quick)' if data.get('quick') else ''}: "
          "every row with a target; *ratio* is value ÷ floor.\n")
    print("| section | figure | value | floor | ratio | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in data["rows"]:
        verdict = r.get("verdict") or ""
        if not verdict:
            continue
        floor = ""
        if r.get("floor") is not None:
            floor = f"{fmt(r['floor'], r['unit'])} ({r.get('floor_name', '')})"
        ratio = f"{r['ratio']:.2f}×" if r.get("ratio") is not None else ""
        print(f"| {r['section']} | {r['figure'].strip()} | {fmt(r['value'], r['unit'])} | {floor} | {ratio} | {verdict} |")


if __name__ == "__main__":
    main()
