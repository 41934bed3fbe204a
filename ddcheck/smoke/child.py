"""Run one smoke test in a fresh interpreter: ``python -m ddcheck.smoke.child OUT.json < args.json``.

Why a subprocess: Triton decides at *import* whether its own ``tl`` helpers are interpreted, so
``TRITON_INTERPRET=1`` must be set before anything imports triton; each release's kernels stay
out of the caller's process; and a hard crash (a segfault from an out-of-bounds launch) ends this
process, which the parent reports as a harness failure (exit 3, not judged), never as "bug found"; a CUDA fault, which
ends the process's CUDA context, ends it with the paths run so far, and the parent runs the rest in a new one.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    out_path = sys.argv[1]
    kwargs = json.loads(sys.stdin.read())
    if kwargs.get("device", "cpu") == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from ddcheck.smoke.api import run_smoke

    report = run_smoke(isolate=False, restartable=True, **kwargs)
    with open(out_path, "w", encoding="utf-8") as fh:
        fh.write(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
