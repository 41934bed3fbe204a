"""`ddcheck smoke --backend`: backends other than Triton, run from real release wheels on CPU and
judged by the verify contract. Verdicts established by reading the releases:

* FA3's target-verify metadata (topk <= 1) is laid out with C = ``self.speculative_num_draft_tokens``
  in 0.5.10 (flashattention_backend.py:288-298, ``cu_seqlens_q = arange(0, bs*C+1, C)``,
  ``cache_seqlens = seq_lens + C``) and still in 0.5.23 (flashattention_backend.py:1060-1069): exit 1.
* After ``ddcheck fix --unsafe-fixes`` every path is right when CUDA graphs are captured at W (as DDTree
  trees' runners do): the eager metadata uses W, and 0.5.16+'s ``cu_seqlens_q`` graph buffer, laid out
  once with ``arange(step=C)`` (0.5.23 init_cuda_graph_state; read at _bind_metadata_buffers:2829), is
  refilled stepping by W where it is read. Captured at C, ``max_seq_len_q`` stays C in the graph
  (a scalar baked at capture): the capture width, which no backend edit repairs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

if os.environ.get("CI"):
    import torch  # noqa: F401
    import triton  # noqa: F401
pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("msgspec")

from typer.testing import CliRunner  # noqa: E402

from ddcheck.contract import backends  # noqa: E402
from ddcheck.cli.app import app  # noqa: E402
from ddcheck.smoke import run_smoke  # noqa: E402

FA3_RELEASES = ["0.5.10", "0.5.16", "0.5.23"]
# One worker of the suite runs this file: its calls on a release share that release's smoke server.
pytestmark = pytest.mark.xdist_group("smoke-backends")


def path(report, case, name):
    return next(p for p in report.paths if p.case == case and p.path == name)





def only_what_cannot_run_here(r) -> bool:
    """The run was the tree's own code: every stand-in it called belongs to a package that cannot be
    imported on this machine (flashinfer, sgl_kernel), or is a tree function the report names as stood
    in for (it needs a module that stopped while imported here: 0.5.23's JIT kernel loader, reached
    from trtllm_mla_backend.py:251), or a value derived from such a module's names; none to ddcheck's
    models of sglang."""
    packages = {m.split(".")[0] for m in r.harness.stand_in_modules}
    stood_in = [line.removeprefix("stand-in for ").split(" ")[0] for line in r.limitations
                if line.startswith("stand-in for ")]
    stopped = [m for m in r.harness.stopped if m.startswith("sglang.")]

    def explained(call: str) -> bool:
        name = call.split(" at ")[0].lstrip("(")
        if not name.startswith("sglang."):
            return name.split(".")[0] in packages
        return any(name.startswith(s) for s in stood_in) or any(name.startswith(m + ".") for m in stopped)

    return r.loader == "tree" and all(explained(call) for call in r.harness.stand_ins_called)

@pytest.mark.network
@pytest.mark.parametrize("version", FA3_RELEASES)
def test_fa3_unfixed_breaks_the_contract_at_w_not_c(version, smoke):
    r = smoke(f"sglang=={version}", backend="fa3", seed_case=False)
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
    assert "cu_seqlens_q" in r.verdict and only_what_cannot_run_here(r)


@pytest.mark.network
def test_fa3_where_the_model_runners_module_stops_here(smoke):
    """0.4.10.post2's model runner module calls ``torch._C._cpu._is_amx_tile_supported`` at import
    (model_runner.py, through utils.py:217), which torch 2.13 lacks: the runner handed to FA3 is then read
    from ModelRunner's source. It declares ``attention_chunk_size`` (model_runner.py:203, the model config's:
    None for a Llama), so FA3's ``hasattr`` probe (flashattention_backend.py:337-341) finds None and no
    local-attention batch is made (was a stand-in: a harness failure at :150); its target-verify metadata
    is laid out with C (:438-454): exit 1. The report names the module that stopped and what would run it."""
    r = smoke("sglang==0.4.10.post2", backend="fa3", seed_case=False)
    assert r.exit_code == 1, r.verdict
    got = {v["field"].removeprefix("forward_metadata."): v["got"] for v in path(r, "ddtree", "eager").violations}
    assert got["cu_seqlens_q"] == [0, 8, 16, 24] and path(r, "control", "eager").status == "ok"
    entry = r.harness.from_source.get("model_runner")
    stopped = [m for m in r.harness.stopped if m.endswith(".model_runner")]
    assert bool(entry) == bool(stopped)  # read from its source exactly where its module stopped
    if entry:
        assert entry["class"] == "ModelRunner" and entry["module"] in stopped and entry["to_run"]
        assert any(entry["module"] in line and entry["to_run"] in line for line in r.limitations)


@pytest.mark.network
@pytest.mark.parametrize("version", FA3_RELEASES)
def test_fa3_after_ddcheck_fix_is_right_when_graphs_capture_at_w(version, smoke):
    from ddcheck.fix.api import fixed_file_text

    fixed = fixed_file_text(f"sglang=={version}", backends.get("fa3").relpath, unsafe=True)
    assert "refilled stepping by this step's width" in fixed or version == "0.5.10"  # 0.5.10 has no such buffer
    r = smoke(f"sglang=={version}", backend="fa3", backend_source=fixed, seed_case=False, graph_capture_width="W")
    assert r.exit_code == 0, r.verdict
    assert all(p.violations == [] for p in r.paths)


@pytest.mark.network
def test_fa3_fixed_but_captured_at_c_is_the_capture_width(smoke):
    """max_seq_len_q is a scalar baked into the graph at capture: no backend edit can repair it."""
    from ddcheck.fix.api import fixed_file_text

    fixed = fixed_file_text("sglang==0.5.23", backends.get("fa3").relpath, unsafe=True)
    r = smoke("sglang==0.5.23", backend="fa3", backend_source=fixed, seed_case=False, graph_capture_width="C")
    assert r.exit_code == 1 and r.verdict.startswith("capture width"), r.verdict
    assert path(r, "ddtree", "eager").status == "ok"
    assert path(r, "ddtree-capture-at-W", "graph").status == "ok"


@pytest.mark.network
@pytest.mark.parametrize("version, eager", [("0.5.10", "wrong"), ("0.5.16", "ok"), ("0.5.23", "ok")])
def test_trtllm_mha_unfixed_and_fixed(version, eager, smoke):
    """TRT-LLM MHA, built on a real FlashInferAttnBackend with inert flashinfer wrappers. 0.5.10 lays
    verify out with C (trtllm_mha_backend.py:625-649); from 0.5.16 eager takes the width per step
    from the batch (`input_ids.shape[0] // batch_size`, 0.5.16 trtllm_mha_backend.py:828) while the
    graph path still reads C-laid-out buffers when a graph captured at C replays W (from 0.5.16 the runner's
    can_run_graph refuses that replay: the launch runs W eagerly; captured at C on purpose here): exit 1.
    After `ddcheck fix` with graphs captured at W: 0."""
    from ddcheck.fix.api import fixed_file_text

    r = smoke(f"sglang=={version}", backend="trtllm_mha", seed_case=False, graph_capture_width="C")
    assert r.exit_code == 1, r.verdict
    assert path(r, "ddtree", "eager").status == eager and path(r, "ddtree", "graph").status == "wrong"
    assert "forward_metadata.cu_seqlens_q" in [v["field"] for v in path(r, "ddtree", "graph").violations]
    assert only_what_cannot_run_here(r)
    fixed = fixed_file_text(f"sglang=={version}", backends.get("trtllm_mha").relpath, unsafe=True)
    r = smoke(f"sglang=={version}", backend="trtllm_mha", backend_source=fixed, seed_case=False,
                  graph_capture_width="W")
    assert r.exit_code == 0, r.verdict


def test_list_backends_names_each_and_says_why_not():
    result = CliRunner().invoke(app, ["smoke", "--list-backends"])
    assert result.exit_code == 0
    for b in backends.BACKENDS.values():
        assert b.name in result.output
    assert "does not run here" in result.output and "flashinfer_mla_backend.py" in result.output


def test_smoke_without_a_target_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "smoke"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "a target is required" in proc.stderr and "Traceback" not in proc.stderr


def test_a_backend_that_cannot_run_is_exit_3_with_its_reason(tmp_path):
    r = run_smoke(str(tmp_path), backend="flashmla")
    assert r.exit_code == 3 and "flashmla" in r.verdict and "cannot run" in r.verdict  # could not judge
    r = run_smoke(str(tmp_path), backend="nope")
    assert r.exit_code == 2 and "unknown backend" in r.verdict


@pytest.mark.network
@pytest.mark.parametrize("version", FA3_RELEASES)
def test_flashinfer_plans_the_verify_layout_at_w(version, smoke):
    """FlashInfer's verify layout is computed by the verify input's own method (the tree's real
    EagleVerifyInput here: spec_info.generate_attn_arg_prefill, 0.5.10 flashinfer_backend.py:1448, which
    reads self.draft_token_num) and handed to the wrapper's plan (begin_forward, :1493): right at W in
    every release. Its graph state is allocated on "cuda" (:526): on a CPU only the eager path runs."""
    r = smoke(f"sglang=={version}", backend="flashinfer", seed_case=False)
    assert r.exit_code == 0, r.verdict
    assert {(p.case, p.path) for p in r.paths} == {("ddtree", "eager"), ("control", "eager")}
    assert all(p.status == "ok" and len(p.contract_fields) == 3 for p in r.paths)
    assert r.verify_input_instances == ["EagleVerifyInput"] and only_what_cannot_run_here(r)
    assert any("graph path does not run on a CPU" in note for note in r.limitations)


@pytest.mark.network
def test_flashinfer_planned_with_c_breaks_the_contract(smoke):
    """The same backend handing the wrapper query offsets laid out with C = 8 (what a backend built for
    C would do): exit 1 at W = 17, the W == C control still right."""
    from ddcheck.tree.sources import open_target

    relpath = backends.get("flashinfer").relpath
    source = open_target("sglang==0.5.10").find(relpath).read_bytes().decode()
    call = "wrapper_paged.begin_forward(\n            qo_indptr,\n"
    assert call in source
    source = source.replace(call, "wrapper_paged.begin_forward(\n"
                                  "            torch.arange(0, 8 * len(qo_indptr), 8, dtype=qo_indptr.dtype),\n")
    r = smoke("sglang==0.5.10", backend="flashinfer", backend_source=source, seed_case=False)
    assert r.exit_code == 1, r.verdict
    assert path(r, "control", "eager").status == "ok"
    (v,) = path(r, "ddtree", "eager").violations
    assert v["field"] == "forward_metadata.prefill_wrappers.0.planned.qo_indptr" and v["got"] == [0, 8, 16, 24]


@pytest.mark.network
@pytest.mark.parametrize("version", FA3_RELEASES)
def test_trtllm_mla_unfixed_and_fixed(version, smoke):
    """TRT-LLM MLA on its real FlashInferMLAAttnBackend base (inert wrappers), judged at page size 1. Its
    eager verify metadata adds C: ``seq_lens = seq_lens + self.num_draft_tokens`` (0.5.10
    trtllm_mla_backend.py:636-638), so the KV lengths and the block table's rows are short by W - C:
    exit 1; after `ddcheck fix`: 0. The graph path allocates on "cuda" (flashinfer_mla_backend.py:349):
    GPU only (docs/smoke-matrix-h200.json). 0.5.23's base pins host buffers when built
    (flashinfer_mla_backend.py:328): on a CPU the pinning is dropped."""
    from ddcheck.fix.api import fixed_file_text

    r = smoke(f"sglang=={version}", backend="trtllm_mla", seed_case=False)
    assert r.exit_code == 1, r.verdict
    assert path(r, "control", "eager").status == "ok"
    got = {v["field"]: v["got"] for v in path(r, "ddtree", "eager").violations}
    # requests kept inside its 64-page block at page size 1 (backends.py, max_request_len)
    assert all(p + r.width <= 64 for p in r.prefix_lens) and len(set(r.prefix_lens)) == len(r.prefix_lens)
    assert got["forward_decode_metadata.seq_lens_k"] == [p + 8 for p in r.prefix_lens]
    assert "forward_decode_metadata.block_kv_indices" in got and only_what_cannot_run_here(r)
    fixed = fixed_file_text(f"sglang=={version}", backends.get("trtllm_mla").relpath, unsafe=True)
    r = smoke(f"sglang=={version}", backend="trtllm_mla", backend_source=fixed, seed_case=False)
    assert r.exit_code == 0, r.verdict
