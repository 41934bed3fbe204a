"""``ddcheck smoke``: run a target tree's own verify path of one attention backend (triton, fa3,
flashinfer, trtllm_mha or trtllm_mla; :data:`ddcheck.contract.backends.BACKENDS` says which run here and why the
others do not) at W != C, and judge it: every backend's metadata by the verify contract, Triton's
attention output also against a reference.

Public API: :func:`run_smoke` (returns a :class:`SmokeReport` with ``exit_code`` and ``to_json()``)
and :func:`smoke_main` (prints and returns the exit code). torch and triton are imported lazily,
so ``import ddcheck.smoke`` works without them.
"""

from ddcheck.smoke.api import run_smoke, smoke_main
from ddcheck.smoke.loader import HarnessError
from ddcheck.smoke.report import PathResult, SmokeReport

__all__ = ["run_smoke", "smoke_main", "SmokeReport", "PathResult", "HarnessError"]
