#!/usr/bin/env python3
"""How long one `ddcheck smoke sglang==X` takes, as a user runs it, and what it answered:

    python bench/smoke_time.py [--releases 0.5.10 0.5.16 0.5.23] [--backend triton] [--device cpu]
                               [--repeat 3] [--doc docs/smoke.md]

Each run is the console command (a fresh interpreter, the smoke child process, the tree's load, every path),
timed from start to exit; wheels are downloaded before the clock starts. Prints the versions of torch,
triton and numpy that ran, the machine's cores and load, and a table: release, exit code, the
verdict's first words, the shortest and longest wall time of the repeats, and the CPU time (user +
system, the command and its worker) of the shortest, which a busy machine inflates much less. With --doc, the table
replaces the one between the markers in that file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from docpage import write_between

BEGIN, END = "<!-- smoke-time:begin -->", "<!-- smoke-time:end -->"


def run(release: str, backend: str, device: str) -> tuple[float, float, dict]:
    """(wall s, CPU s of the command and its children, the JSON report)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "smoke", f"sglang=={release}", "--backend", backend,
                           "--device", device, "--format", "json"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    try:
        return seconds, cpu, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return seconds, cpu, {"exit_code": proc.returncode, "verdict": (proc.stderr or proc.stdout).strip()[:80]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=["0.5.10", "0.5.16", "0.5.23"])
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--doc", type=Path)
    args = ap.parse_args()

    from ddcheck.tree.sources import download_wheel

    for r in args.releases:  # not timed: a user's second run finds the wheel cached
        download_wheel(r)
    versions = ", ".join(f"{m} {metadata.version(m)}" for m in ("torch", "triton", "numpy"))
    lines = [f"`python bench/smoke_time.py --releases {' '.join(args.releases)} --backend {args.backend} "
             f"--device {args.device} --repeat {args.repeat}`: {versions}; {os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.1f} at the start.", "",
             "| release | exit | verdict | wall time, s (shortest - longest) | CPU time, s (shortest run) |",
             "|---|---|---|---|---|"]
    for r in args.releases:
        runs = sorted((run(r, args.backend, args.device) for _ in range(args.repeat)), key=lambda x: x[0])
        report = runs[-1][2]
        verdict = " ".join(str(report.get("verdict", "")).split()[:6])
        lines.append(f"| {r} | {report.get('exit_code')} | {verdict} ... | {runs[0][0]:.1f} - {runs[-1][0]:.1f} "
                     f"| {runs[0][1]:.1f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    print("\n" + text)
    if args.doc:
        write_between(args.doc, BEGIN, END, text)


if __name__ == "__main__":
    main()
