#!/usr/bin/env python3
"""`ddcheck fix` on large files: wall time of `ddcheck fix --diff FILE` for generated sources.

Cases (each holds one backend class whose verify path needs the fix, from fixtures/analysis/guards.py):
  literal    the backend next to a 1 MB list literal
  big-code   the backend among ~20 MB of ordinary functions
  many-fixes 200 copies of the backend (every copy is fixed)
Usage: python bench/bench_fix.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKEND = (ROOT / "fixtures" / "analysis" / "guards.py").read_text()


def cases() -> dict[str, str]:
    literal = "DATA = [" + ", ".join(str(i) for i in range(200_000)) + "]\n"
    filler = "".join(f"def helper_{i}(x, y):\n    z = x * {i} + y\n    return [z, z + 1, z + 2]\n\n\n"
                     for i in range(280_000))
    many = "\n\n".join(BACKEND.replace("class ", f"class C{i}_") for i in range(200))
    return {"literal": BACKEND + "\n" + literal, "big-code": filler + BACKEND, "many-fixes": many}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in cases().items():
            path = Path(tmp) / f"{name}.py"
            path.write_text(text)
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "ddcheck", "fix", "--diff", str(path)],
                                   capture_output=True, text=True)
                times.append(time.perf_counter() - t)
                if "+++" not in r.stdout:
                    print(f"{name}: no diff produced (exit {r.returncode}): {r.stderr[-300:]}")
                    return 1
            print(f"  {name:<11} {len(text) / 1e6:6.1f} MB  fix --diff {statistics.median(times):7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
