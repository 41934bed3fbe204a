#!/usr/bin/env python3
"""What `--check-syntax` costs: `ddcheck scan --no-cache DIR` with and without it, on a large tree.

    python bench/parse_cost.py [DIR] [--runs 3]

DIR defaults to the installed torch package (thousands of Python files, most with no verify code, so
the plain scan parses almost none of them and `--check-syntax` parses every one). Prints the tree's
Python files and MiB, the machine's cores and load, and the shortest wall time of each over --runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "scan", "--no-cache", "--format", "json", *args],
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"ddcheck scan exited {proc.returncode}: {proc.stderr.strip()}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.dir is None:
        import importlib.util

        args.dir = str(Path(importlib.util.find_spec("torch").origin).parent)
    files = [p for p in Path(args.dir).rglob("*.py") if p.is_file()]
    mib = sum(p.stat().st_size for p in files) / 2**20
    plain = min(timed([args.dir]) for _ in range(args.runs))
    full = min(timed(["--check-syntax", args.dir]) for _ in range(args.runs))
    print(f"`python bench/parse_cost.py {args.dir} --runs {args.runs}`: {len(files)} files, {mib:.0f} MiB of "
          f"source; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"scan {plain:.1f} s, with --check-syntax {full:.1f} s: parsing every file costs {full - plain:.1f} s")


if __name__ == "__main__":
    main()
