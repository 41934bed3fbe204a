"""Run many smoke tests (releases x variants x widths) in parallel and write one JSON record.

``python -m ddcheck.smoke.matrix SPEC.json OUT.json [--jobs N]``, where SPEC is a list of
``{"label": ..., "expect": 0|1|2|null, "kwargs": {run_smoke keyword arguments}, "cell": {...}}``
(``cell``, optional, is copied into the run's row). Each run is an
isolated worker process, so N of them share the machine; the record carries the environment
(torch, triton, GPU) and each full report. Exit status 0 when every run met its ``expect``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ddcheck.smoke.api import run_smoke


def environment() -> dict:
    """The Python, torch, triton and numpy versions, and the GPU, that the runs ran with (the Python alone without torch)."""
    try:
        import numpy
        import torch
        import triton
    except ImportError:
        return {"python": platform.python_version()}
    env = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "numpy": numpy.__version__}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["capability"] = list(torch.cuda.get_device_capability(0))
    return env


def run_entry(entry: dict, kept=None) -> dict:
    """One run of a spec (``{"label", "expect", "kwargs", "cell"}``) as a row of the record: its exit code,
    verdict and whole report, and whether it met ``expect`` (``ddcheck audit`` runs its cells with it, a
    target's runs in its kept child: ``kept``, see :func:`ddcheck.smoke.api.run_smoke`)."""
    report = run_smoke(**entry["kwargs"], kept=kept)
    row = {"label": entry["label"], "expect": entry.get("expect"), "exit_code": report.exit_code,
           "verdict": report.verdict, "seconds": report.seconds, "report": report.model_dump(mode="json")}
    row["met"] = entry.get("expect") is None or entry["expect"] == report.exit_code
    if "cell" in entry:  # what the run stands for in a table
        row["cell"] = entry["cell"]
    return row


def run_matrix(spec: list[dict], jobs: int = 4) -> dict:
    t0 = time.perf_counter()

    def one(entry: dict) -> dict:
        row = run_entry(entry)
        print(f"{'ok ' if row['met'] else 'BAD'} exit {row['exit_code']} {row['seconds']:7.1f}s  {entry['label']}",
              flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = list(pool.map(one, spec))
    return {"environment": environment(), "jobs": jobs, "seconds": round(time.perf_counter() - t0, 1),
            "all_met": all(r["met"] for r in runs), "runs": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args(argv)
    record = run_matrix(json.loads(Path(args.spec).read_text()), args.jobs)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{sum(r['met'] for r in record['runs'])}/{len(record['runs'])} met expectations "
          f"in {record['seconds']} s")
    return 0 if record["all_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
