"""Run one smoke test in a fresh interpreter, a child process of its own (:mod:`ddcheck.base.children`).

Why a subprocess: Triton decides at *import* whether its own ``tl`` helpers are interpreted, so
``TRITON_INTERPRET=1`` must be set before anything imports triton; each release's kernels stay
out of the caller's process; and a hard crash (a segfault from an out-of-bounds launch) ends this
process, which the parent reports as a harness failure (exit 3, not judged), never as "bug found"; a CUDA fault, which
ends the process's CUDA context, ends it with the paths run so far, and the parent runs the rest in a new one.
"""

from __future__ import annotations

import os

from ddcheck.base.children import serve


def _answer(kwargs: dict) -> dict:
    if kwargs.get("device", "cpu") == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from ddcheck.smoke.api import run_smoke

    return {"report": run_smoke(isolate=False, restartable=True, **kwargs).model_dump(mode="json")}


def main() -> None:
    serve(_answer)


if __name__ == "__main__":
    main()
