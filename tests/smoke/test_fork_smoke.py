"""`ddcheck smoke` on the DDTree forks of ../shared/corpus/ddtree-forks (CPU): cells of
the fork matrix (`ddcheck audit` on the corpus, docs/forks.md) that were harness failures, run as the fork runs them. Each verdict is
explained from the fork's code, file:line, in docs/forks.md (*Smoke on the forks*)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("DDCHECK_FORKS", REPO.parent / "shared" / "corpus" / "ddtree-forks"))
ARCHIVES = {"hz": "HaiyuZhou-sglang-ad7ab160.tar.gz", "rw": "Rancy-Wang-sglang-433c58ed.tar.gz"}

# each test runs a fork's code through the suite's smoke fixture (run_smoke's report), on the worker whose
# smoke server runs the forks' other smoke tests (tests/forks/test_forks.py)
pytestmark = [pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no DDTree fork corpus at {CORPUS}"),
              pytest.mark.slow, pytest.mark.xdist_group("smoke-forks")]
pytest.importorskip("torch")
pytest.importorskip("triton")


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    trees: dict[str, Path] = {}

    def get(name: str) -> str:
        if name not in trees:
            dest = tmp_path_factory.mktemp(name)

            def keep(member, path):  # symlinks out of the tree (.clang-format) are skipped
                return None if member.issym() or member.islnk() else tarfile.data_filter(member, path)

            with tarfile.open(CORPUS / ARCHIVES[name]) as tar:
                tar.extractall(dest, filter=keep)
            trees[name] = dest / "sglang"
        return str(trees[name])

    return get


def test_rancy_wang_fa3_gets_the_verify_input_its_worker_builds(fork, smoke):
    """Was "harness failure in ddtree/eager: ValueError: DDTREE one-pass FlashAttention verify requires
    visibility metadata" (flashattention_backend.py:432-436). The worker passes
    `visibility=visibility[:, :verify_token_num, :verify_token_num] if capability.use_visibility else None`
    (ddtree_worker_v2.py:584-599), with `capability` from `resolve_ddtree_target_backend_capability(
    self.target_worker.model_runner.attn_backend, ...)` (:516-521), which answers use_visibility for a
    backend of a `flashattention_backend` module (ddtree_utils.py:65-71): smoke evaluates that call with the
    backend under test. The backend is built for the DDTREE launch, so `init_cuda_graph_state` makes the
    one-pass buffers (`is_ddtree_target`, flashattention_backend.py:2272-2294). FA3 then lays the batch out
    one query per row (max_seq_len_q = 1, rows = bs * W; its Triton metadata kernels run in the
    interpreter, sglang/kernels/ops/speculative/ddtree.py:505), judged in those terms: right."""
    r = smoke(fork("rw"), backend="fa3", budget=16, num_draft_tokens=8, graph_capture_width="W")
    assert r.exit_code == 0, r.verdict
    assert r.verify_inputs["W=17 C=8"].startswith("DDTreeVerifyInput (sglang/srt/speculative/ddtree_worker_v2.py:584)")
    assert "visibility" not in r.worker_call.get("W=17 C=8", {})  # evaluated from the worker's own call
    eager = next(p for p in r.paths if (p.case, p.path) == ("ddtree", "eager"))
    assert eager.metadata["cu_seqlens_q"][:4] == [0, 1, 2, 3] and eager.metadata["max_seq_len_q"] == 1
    assert "forward_metadata.page_table" in eager.contract_fields
    assert {p.status for p in r.paths} == {"ok"}


def test_haiyuzhou_fa3_graph_capture_crash_is_the_trees_not_the_harness(fork, smoke):
    """Was "harness failure in ddtree/graph: AttributeError: ... 'target_verify_metadata_topk_normal'".
    In tree mode the fork's capture takes the topk > 1 branch for any input with `tree_budget`
    (flashattention_backend.py:314-325), whose buffers `init_cuda_graph_state` makes only when topk > 1
    (:1751); DDTREE forces topk 1 (arg_groups/speculative_hook.py:293-301), and the fork's graph runner
    calls `init_cuda_graph_state(max_bs, max_num_token)` (cuda_graph_runner.py:543) and captures with a
    `DDTreeVerifyInput(tree_budget=...)` (:1335-1343), as smoke does: the launch with graphs fails at
    capture. Eager takes the cascade branch with W from the input (:495-541): right with the mask laid out
    as it reads it (flat, :575-597), not with the [bs, W, max_past + W] mask of the fork's builder
    (ddtree_utils.py:274-283)."""
    r = smoke(fork("hz"), backend="fa3", budget=16, num_draft_tokens=8, graph_capture_width="W")
    assert r.exit_code == 1 and r.verdict.startswith("tree crash:"), r.verdict
    assert "target_verify_metadata_topk_normal" in r.verdict and "flashattention_backend.py:323" in r.verdict
    status = {(p.case, p.path): p.status for p in r.paths}
    assert status[("ddtree", "graph")] == "tree_crash" and status[("ddtree-reference-mask", "eager")] == "ok"
    assert "compile_ddtree_tree" in r.verdict  # the eager path fails only with the fork's own mask layout
    assert status[("control", "eager")] == status[("control", "graph")] == "ok"


def test_rancy_wang_default_smoke_captures_where_its_runner_does(fork, smoke):
    """`ddcheck smoke <fork>`, no options (issue 47). Was exit 1, "capture width": smoke captured the verify
    graphs at C. The fork's runner captures at `captured_req_width = model_runner.decode_num_tokens_per_req(...)`
    (runner/decode_cuda_graph_runner.py:262), budget + 1 for a DDTREE target (model_runner.py:706-717 through
    `resolve_num_tokens_per_req`), and its can_run_graph replays no other width (:520-525). The control at
    W = C = 8 is the same DDTree worker's input (ddtree_worker_v2.py:584), not the DFlash one that happens to
    have width 8 (dflash_worker_v2.py:1613)."""
    r = smoke(fork("rw"))
    assert r.exit_code == 0, r.verdict
    runner = "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"
    assert f"the graph path captured at 17 (the tree's graph runner captures at 17, {runner}:262; it replays no " \
           f"other width, {runner}:524)" in r.verdict
    graph = next(p for p in r.paths if (p.case, p.path) == ("ddtree", "graph"))
    assert graph.status == "ok" and graph.capture_width == 17 and r.probe is None
    assert {k: v.split()[0] for k, v in r.verify_inputs.items()} == {"W=17 C=8": "DDTreeVerifyInput",
                                                                     "W=8 C=8": "DDTreeVerifyInput"}
