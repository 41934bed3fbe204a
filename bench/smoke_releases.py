#!/usr/bin/env python3
"""`ddcheck smoke` on every release: does the tree's own code run, and does the verdict agree with scan?

    python bench/smoke_releases.py [--releases 0.4.10.post2 0.5.23 ...] [--backends fa3 triton ...]
                                   [--jobs 2] [--doc docs/smoke-releases.md [--merge]]

For each release (default: the last post-release of each from 0.4.3 to 0.5.23 on PyPI) and each
backend of `ddcheck.contract.backends` that can run here and whose file is in the release, it runs
`ddcheck smoke sglang==X --backend B` (budget 16, C = 8, CPU) and prints one row: the exit code,
what `ddcheck scan` says of that backend's file (its DD001 count; the verdict agrees when it is 1
exactly where the scan reports DD001), and the tree functions the run stood in for (they need a
module that cannot be imported here). With --doc, the table replaces the one between the markers
in that file (with --merge, only the rows of the releases run are replaced); --trees reads unpacked
releases from a folder (a machine without PyPI).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from docpage import write_between

RELEASES = ("0.4.3.post4", "0.4.4.post4", "0.4.5.post3", "0.4.6.post5", "0.4.7.post1", "0.4.8.post1",
            "0.4.9.post6", "0.4.10.post2", "0.5.1.post3", "0.5.2", "0.5.3.post3", "0.5.4.post3", "0.5.5.post3", "0.5.6.post2",
            "0.5.7", "0.5.8.post1", "0.5.9", "0.5.10.post1", "0.5.11", "0.5.12.post1", "0.5.13.post1", "0.5.14",
            "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
BEGIN, END = "<!-- smoke-releases:begin -->", "<!-- smoke-releases:end -->"


def scan_counts(release: str, target: str | None = None) -> dict[str, int]:
    """DD001 findings per backend file of a release (relpath from ``sglang/`` -> count)."""
    from ddcheck.scan.api import scan
    from ddcheck.scan.settings import Settings

    counts: dict[str, int] = {}
    for f in scan([target or f"sglang=={release}"], settings=Settings()).findings:
        if f.rule == "DD001":
            rel = f.path.split("!", 1)[-1].replace("\\", "/")
            rel = rel[rel.find("sglang/"):] if "sglang/" in rel else rel
            counts[rel] = counts.get(rel, 0) + 1
    return counts


def cell(release: str, backend, target: str | None = None) -> dict:
    from ddcheck.smoke.api import run_smoke

    r = run_smoke(target or f"sglang=={release}", backend=backend.name, seed_case=False)
    return {"release": release, "backend": backend.name, "exit": r.exit_code, "verdict": r.verdict,
            "stood_in": [line.removeprefix("stand-in for ").split(" ")[0] for line in r.limitations
                         if line.startswith("stand-in for ")]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", nargs="*", default=list(RELEASES))
    ap.add_argument("--backends", nargs="*", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--doc", type=Path, default=None)
    ap.add_argument("--merge", action="store_true",
                    help="with --doc: keep the table's rows of releases not run, in release order")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON too")
    ap.add_argument("--trees", type=Path, default=None,
                    help="a folder holding each release's unpacked files as TREES/VERSION/sglang/... "
                         "(a machine without PyPI); by default sglang==VERSION is downloaded")
    args = ap.parse_args(argv)

    from ddcheck.contract import backends
    from ddcheck.tree.sources import open_target

    wanted = [backends.get(n) for n in args.backends] if args.backends else \
        [b for b in backends.BACKENDS.values() if b.runs]
    rows, cells, counts = [], [], {}
    for release in args.releases:
        target = str(args.trees / release) if args.trees else None
        tree = open_target(target or f"sglang=={release}")
        counts[release] = scan_counts(release, target)
        cells += [(release, b, target) for b in wanted if tree.module_file(b.module) is not None]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each run is its own process
        for row in pool.map(lambda c: cell(*c), cells):
            row["scan_dd001"] = counts[row["release"]].get(backends.get(row["backend"]).relpath, 0)
            row["agrees"] = row["exit"] == (1 if row["scan_dd001"] else 0)
            rows.append(row)
            print(f"{row['release']:14} {row['backend']:11} exit {row['exit']} "
                  f"DD001 {row['scan_dd001']:3} {'agrees' if row['agrees'] else 'DISAGREES'}  "
                  f"{row['verdict'][:90]}", flush=True)
    table = render(rows)
    print(table)
    if args.doc and args.merge:
        table = merged(args.doc.read_text(encoding="utf-8"), table, set(args.releases))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.doc:
        write_between(args.doc, BEGIN, END, table)
    return 0 if all(r["exit"] in (0, 1) and r["agrees"] for r in rows) else 1


def merged(doc: str, table: str, releases: set[str]) -> str:
    """The doc's table with the rows of ``releases`` replaced by ``table``'s, in ``RELEASES`` order (a
    release not listed there after them, as run)."""
    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| release ")]

    old = doc.split(BEGIN, 1)[1].split(END, 1)[0] if BEGIN in doc else ""
    rows = [r for r in body(old) if r.split(" | ")[0][2:] not in releases] + body(table)
    order = {v: i for i, v in enumerate(RELEASES)}
    rows.sort(key=lambda r: order.get(r.split(" | ")[0][2:], len(order)))  # stable: backends as they were
    return "\n".join(table.splitlines()[:2] + rows)


def render(rows: list[dict]) -> str:
    out = ["| release | backend | exit | scan DD001 | agrees | verdict | stood in for |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = r["verdict"].split(":")[0] if r["exit"] != 2 else r["verdict"][:120]
        stood = ", ".join(f"`{n.rsplit('.', 1)[-1]}`" for n in r.get("stood_in", ())) or "-"
        out.append(f"| {r['release']} | {r['backend']} | {r['exit']} | {r['scan_dd001']} | "
                   f"{'yes' if r['agrees'] else '**no**'} | {verdict} | {stood} |".replace("\n", " "))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
