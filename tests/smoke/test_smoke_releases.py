"""`ddcheck smoke` on releases the other tests do not cover: the tree's own code runs, and the verdict
agrees with `ddcheck scan` (1 exactly where the scan reports DD001 on that backend's file).

A sample (the oldest release of the range and the newest); `bench/smoke_releases.py` runs every
release and backend (0.5.6.post2's FA3, in this sample until the suite had to fit in 15 minutes,
among them) and prints the matrix into docs/smoke-releases.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from smoke_releases import scan_counts  # noqa: E402

from ddcheck.contract import backends  # noqa: E402

# The worker that runs test_smoke_backends.py's calls runs these: 0.5.23's FA3 run is one of its calls,
# made once (the smoke fixture's server remembers a release's run by its arguments).
pytestmark = pytest.mark.xdist_group("smoke-backends")

# Each of these ended in a harness failure while smoke re-implemented sglang's runtime (issue 31's table).
SAMPLE = [("0.4.10.post2", "flashinfer"), ("0.5.23", "fa3")]


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("release,backend", SAMPLE)
def test_the_trees_own_code_runs_and_agrees_with_scan(release, backend, smoke):
    r = smoke(f"sglang=={release}", backend=backend, seed_case=False)
    assert r.exit_code in (0, 1), r.verdict
    assert r.loader == "tree"
    dd001 = scan_counts(release).get(backends.get(backend).relpath, 0)
    assert r.exit_code == (1 if dd001 else 0), (dd001, r.verdict)
    # what ran is the tree's: its ServerArgs module and the backend module, from the tree's files
    assert backends.get(backend).relpath in r.harness.files
    assert "sglang/srt/server_args.py" in r.harness.files


@pytest.mark.network
@pytest.mark.parametrize("release", ["0.4.3.post4", "0.4.6.post5"])
def test_a_release_before_0_4_10_is_judged_by_its_own_code(release, smoke):
    """0.4.3 to 0.4.8 import ``default_cache_dir`` from ``triton.runtime.cache`` in ``sglang/srt/utils.py``
    (0.4.6.post5 line 80), which this Triton lacks: the import gets a recorded stand-in, utils runs on
    (tree/lacking.py). 0.4.3 keeps ``forward_metadata`` as a tuple (``triton_backend.py:194``), read by the
    names its own source gives each position. Both then read 1, as the scan's DD001 on
    ``seq_mask_len = self.num_draft_tokens * (seq_lens + self.num_draft_tokens)`` says."""
    r = smoke(f"sglang=={release}", backend="triton", seed_case=False)
    assert not [m for m in r.harness.stopped if m == "sglang.srt.utils"], r.harness.stopped
    assert r.exit_code == 1 == min(1, scan_counts(release).get(backends.get("triton").relpath, 0)), r.verdict
    named = [x for x in r.limitations if "forward_metadata is a tuple" in x]
    assert bool(named) == (release == "0.4.3.post4"), r.limitations
    if named:
        assert "triton_backend.py:194: attn_logits, max_extend_len, kv_indptr, kv_indices, qo_indptr" in named[0]
