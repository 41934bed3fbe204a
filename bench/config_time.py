#!/usr/bin/env python3
"""How long `ddcheck config` takes on a launch, as a user runs it: the first check, a repeat, and another
launch on the same release:

    python bench/config_time.py [--releases 0.5.10 0.5.23] [--repeat 5] [--file launch.yaml]

Each run is `ddcheck config --sglang sglang==X --format json -- LAUNCH` in a fresh interpreter, timed from
start to exit. LAUNCH is an EAGLE launch with local model folders (fixtures/launch/models: a judged
launch, so its result is kept), or `--file FILE`. Per release and round, in a result cache of its own
(the downloaded wheels shared, fetched before the clock starts):
  first    the launch, nothing kept yet: the tree's flag table, scan and start-up all made
  repeat   the same launch again: answered from the result cache
  another  the launch with one more flag (--max-running-requests 8): the tree's flag table and scan
           kept, the start-up run again
Prints the machine's cores and load, and per release the exit code and the shortest - longest wall
time of each (and the median), and the CPU time (user + system) of the shortest.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "fixtures" / "launch" / "models"
LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", str(MODELS / "llama"), "--speculative-algorithm",
          "EAGLE", "--speculative-draft-model-path", str(MODELS / "llama_eagle"), "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def run(release: str, launch: list[str], cache: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "config", "--sglang", f"sglang=={release}", "--format",
                           "json", *launch], capture_output=True, text=True,
                          env={**os.environ, "DDCHECK_CACHE": str(cache)})
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode == 2:
        raise SystemExit(f"ddcheck config failed: {proc.stderr.strip()}")
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", nargs="+", default=["0.5.10", "0.5.23"])
    ap.add_argument("--file", type=Path, help="a launch YAML instead of the EAGLE launch")
    ap.add_argument("--repeat", type=int, default=5)  # the median of 5 (issue 49)
    args = ap.parse_args()

    from ddcheck.tree.sources import cache_dir, download_wheel

    for r in args.releases:
        download_wheel(r)
    launch = ["--file", str(args.file)] if args.file else ["--", *LAUNCH]
    print(f"`python bench/config_time.py --releases {' '.join(args.releases)} --repeat {args.repeat}"
          f"{' --file ' + str(args.file) if args.file else ''}`: {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start\n")
    print("| release | exit | first, s | repeat, s | another launch, s | CPU time of first / repeat, s |\n"
          "|---|---|---|---|---|---|")
    for r in args.releases:
        firsts, repeats, others = [], [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="ddcheck-bench-") as tmp:
                cache = Path(tmp)
                (cache / "wheels").symlink_to(cache_dir() / "wheels")
                firsts.append(run(r, launch, cache))
                repeats.append(run(r, launch, cache))
                others.append(run(r, launch + (["--"] if args.file else []) + ["--max-running-requests", "8"], cache))

        def span(xs):
            xs = sorted(xs)
            return f"{xs[0][0]:.2f} - {xs[-1][0]:.2f} (median {xs[len(xs) // 2][0]:.2f})"
        print(f"| {r} | {firsts[0][2]} | {span(firsts)} | {span(repeats)} | {span(others)} | "
              f"{min(firsts)[1]:.1f} / {min(repeats)[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
