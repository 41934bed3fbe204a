#!/usr/bin/env python3
"""How long `ddcheck config` takes on a launch, as a user runs it:

    python bench/config_time.py [--releases 0.5.10 0.5.23] [--file fixtures/launch/eagle_ok.yaml] [--repeat 3]

Each run is `ddcheck config --sglang sglang==X --file FILE --format json` (a fresh interpreter, the
tree's own start-up code run from its files), timed from start to exit; wheels are downloaded before
the clock starts. Prints the machine's cores and load and, per release, the exit code and the shortest
and longest wall time and the CPU time (user + system) of the shortest run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(release: str, file: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "config", "--sglang", f"sglang=={release}", "--file",
                           str(file), "--format", "json"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=["0.5.10", "0.5.23"])
    ap.add_argument("--file", type=Path, default=REPO / "fixtures" / "launch" / "eagle_ok.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from ddcheck.target.sources import download_wheel

    for r in args.releases:
        download_wheel(r)
    print(f"`python bench/config_time.py --releases {' '.join(args.releases)} --repeat {args.repeat}`: "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| release | exit | wall time, s (shortest - longest) | CPU time, s (shortest run) |\n|---|---|---|---|")
    for r in args.releases:
        runs = sorted((run(r, args.file) for _ in range(args.repeat)), key=lambda x: x[0])
        print(f"| {r} | {runs[0][2]} | {runs[0][0]:.1f} - {runs[-1][0]:.1f} | {runs[0][1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
