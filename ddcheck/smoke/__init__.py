"""``ddcheck smoke``: run a target's own Triton verify path at W != C and judge its output.

Public API: :func:`run_smoke` (returns a :class:`SmokeReport` with ``exit_code`` and ``to_json()``)
and :func:`smoke_main` (prints and returns the exit code). torch and triton are imported lazily,
so ``import ddcheck.smoke`` works without them.
"""

from ddcheck.smoke.api import run_smoke, smoke_main
from ddcheck.smoke.loader import HarnessError
from ddcheck.smoke.report import PathResult, SmokeReport

__all__ = ["run_smoke", "smoke_main", "SmokeReport", "PathResult", "HarnessError"]
