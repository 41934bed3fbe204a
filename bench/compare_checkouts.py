#!/usr/bin/env python3
"""One of bench_scan's three figures for two or more ddcheck checkouts, run in turns in the same minutes.

This machine's speed drifts by 10-25 % within minutes, so comparing two commits from separate bench
runs says little; here each turn runs the case once per checkout (PYTHONPATH set to it, in a scratch
directory so no other ddcheck is found first, each checkout with a result cache of its own), and the
median and minimum wall of each checkout are printed, with the median of the turns' ratios to the
first checkout. Cases, as bench_scan.py runs them:
  cold      `python -m ddcheck scan --no-cache --format json TREE`
  repeat    `python -m ddcheck scan --format json TREE` on the unchanged tree, its result cached
  one-file  `python -m ddcheck scan FILE` (text report, to a pipe, as the pre-commit hook runs it) on
            one backend file, edited before each run
Usage: python bench/compare_checkouts.py CHECKOUT [CHECKOUT ...] [--case cold] [--runs 21] [--version 0.5.23]
(a checkout of an older commit: `git worktree add /tmp/old <commit>`)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import ENV, changed_file, edited, once, tree_for  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--version", default="0.5.23")
    ap.add_argument("--case", choices=("cold", "repeat", "one-file"), default="cold")
    args = ap.parse_args()
    tree = tree_for(args.version)
    roots = [c.resolve() for c in args.checkouts]
    for root in roots:
        if not (root / "ddcheck" / "__init__.py").is_file():
            print(f"{root}: not a ddcheck checkout", file=sys.stderr)
            return 2
    scan = [sys.executable, "-m", "ddcheck", "scan"]
    changed = changed_file(tree)
    cmd = {"cold": [*scan, "--format", "json", "--no-cache", str(tree)], "repeat": [*scan, "--format", "json", str(tree)],
           "one-file": [*scan, str(changed)]}[args.case]
    times: dict[Path, list[float]] = {r: [] for r in roots}
    with tempfile.TemporaryDirectory() as scratch, edited(changed) as edit:
        def run(n: int, root: Path) -> float:
            if args.case == "one-file":
                edit()
            env = {**ENV, "PYTHONPATH": str(root), "DDCHECK_CACHE": f"{scratch}/cache{n}"}
            return once(cmd, cwd=scratch, env=env)

        for n, root in enumerate(roots):  # bytecode written, page cache warm, result cached
            run(n, root)
        for _ in range(args.runs):
            for n, root in enumerate(roots):
                times[root].append(run(n, root))
    first = times[roots[0]]
    print(f"sglang {args.version}, {args.case} scan, {args.runs} turns; python {sys.version.split()[0]}")
    for root in roots:
        ratio = statistics.median(b / a for a, b in zip(first, times[root]))
        print(f"  {str(root):40s} median {statistics.median(times[root]):.3f} s  min {min(times[root]):.3f} s  "
              f"x{ratio:.2f} of the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
