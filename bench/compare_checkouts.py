#!/usr/bin/env python3
"""The cold whole-tree scan of two or more ddcheck checkouts, run in turns in the same minutes.

This machine's speed drifts by 10-25 % within minutes, so comparing two commits from separate bench
runs says little; here each turn runs `python -m ddcheck scan --no-cache --format json TREE` once
per checkout (PYTHONPATH set to it, in a scratch directory so no other ddcheck is found first), and
the median and minimum wall of each checkout are printed, with the median of the turns' ratios to
the first checkout.
Usage: python bench/compare_checkouts.py CHECKOUT [CHECKOUT ...] [--runs 21] [--version 0.5.23]
(a checkout of an older commit: `git worktree add /tmp/old <commit>`)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import ENV, once, tree_for  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--version", default="0.5.23")
    args = ap.parse_args()
    tree = tree_for(args.version)
    roots = [c.resolve() for c in args.checkouts]
    for root in roots:
        if not (root / "ddcheck" / "__init__.py").is_file():
            print(f"{root}: not a ddcheck checkout", file=sys.stderr)
            return 2
    cmd = [sys.executable, "-m", "ddcheck", "scan", "--no-cache", "--format", "json", str(tree)]
    times: dict[Path, list[float]] = {r: [] for r in roots}
    with tempfile.TemporaryDirectory() as scratch:
        def run(root: Path) -> float:
            return once(cmd, cwd=scratch, env={**ENV, "PYTHONPATH": str(root)})

        for root in roots:  # bytecode written, page cache warm
            run(root)
        for _ in range(args.runs):
            for root in roots:
                times[root].append(run(root))
    first = times[roots[0]]
    print(f"sglang {args.version}, cold scan, {args.runs} turns; python {sys.version.split()[0]}")
    for root in roots:
        ratio = statistics.median(b / a for a, b in zip(first, times[root]))
        print(f"  {str(root):40s} median {statistics.median(times[root]):.3f} s  min {min(times[root]):.3f} s  "
              f"x{ratio:.2f} of the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
