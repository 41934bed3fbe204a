"""`ddcheck smoke --backend`: backends other than Triton, run from real release wheels on CPU and
judged by the verify contract. Verdicts established by reading the releases:

* FA3's target-verify metadata (topk <= 1) is laid out with C = ``self.speculative_num_draft_tokens``
  in 0.5.10 (flashattention_backend.py:288-298, ``cu_seqlens_q = arange(0, bs*C+1, C)``,
  ``cache_seqlens = seq_lens + C``) and still in 0.5.23 (flashattention_backend.py:1060-1069): exit 1.
* After ``ddcheck fix --unsafe-fixes`` the eager path is right; the graph path still reads
  ``cu_seqlens_q`` from a buffer laid out once with ``arange(step=C)`` at graph-state set-up and
  never refilled at replay (0.5.10 init_cuda_graph_state; 0.5.23 _bind_metadata_buffers:2829), which
  ddcheck reports without a fix.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("CI"):
    import torch  # noqa: F401
    import triton  # noqa: F401
pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("msgspec")

from typer.testing import CliRunner  # noqa: E402

from ddcheck import backends  # noqa: E402
from ddcheck.cli import app  # noqa: E402
from ddcheck.smoke import run_smoke  # noqa: E402

FA3_RELEASES = ["0.5.10", "0.5.16", "0.5.23"]


def path(report, case, name):
    return next(p for p in report.paths if p.case == case and p.path == name)


@pytest.mark.network
@pytest.mark.parametrize("version", FA3_RELEASES)
def test_fa3_unfixed_breaks_the_contract_at_w_not_c(version):
    r = run_smoke(f"sglang=={version}", backend="fa3", seed_case=False)
    assert r.exit_code == 1, r.verdict
    assert r.kernels is None and r.attention_backend == "fa3"
    for case in ("control",):
        for name in ("eager", "graph"):
            p = path(r, case, name)
            assert p.status == "ok" and p.violations == [] and len(p.contract_fields) >= 5, (case, name, p)
    eager = path(r, "ddtree", "eager")
    got = {v["field"].removeprefix("forward_metadata."): v["got"] for v in eager.violations}
    assert got["cu_seqlens_q"] == [0, 8, 16, 24] and got["max_seq_len_q"] == 8
    assert got["cache_seqlens_int32"] == [11 + 8, 37 + 8, 70 + 8]
    assert "cu_seqlens_q" in r.verdict and r.harness.stand_ins_called == []


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.10", "0.5.23"])
def test_fa3_after_ddcheck_fix_eager_is_right_graph_buffer_remains(version):
    from ddcheck.fixer import fixed_file_text

    fixed = fixed_file_text(f"sglang=={version}", backends.get("fa3").relpath, unsafe=True)
    r = run_smoke(f"sglang=={version}", backend="fa3", backend_source=fixed, seed_case=False)
    assert path(r, "ddtree", "eager").status == "ok", r.verdict
    graph = path(r, "ddtree", "graph")
    assert graph.status == "wrong" and "forward_metadata.cu_seqlens_q" in [v["field"] for v in graph.violations]


def test_list_backends_names_each_and_says_why_not():
    result = CliRunner().invoke(app, ["smoke", "--list-backends"])
    assert result.exit_code == 0
    for b in backends.BACKENDS.values():
        assert b.name in result.output
    assert "does not run here" in result.output and "flashinfer_backend.py" in result.output


def test_a_backend_that_cannot_run_is_exit_2_with_its_reason(tmp_path):
    r = run_smoke(str(tmp_path), backend="flashinfer")
    assert r.exit_code == 2 and "flashinfer" in r.verdict and "cannot run" in r.verdict
    r = run_smoke(str(tmp_path), backend="nope")
    assert r.exit_code == 2 and "unknown backend" in r.verdict
