"""`ddcheck smoke` runs the launch's step by default (issue 47): the graph path captures at the width the
tree's CUDA-graph runner captures target verify at, and the backend is handed the tree's own verify-input
class, built at the site the launch's worker reaches.

The trees are 0.5.16 made DDTree-capable at test time as the open DDTree PR does it
(tests/config/test_config.py's ``build_ddtree_tree``), with the worker of fixtures/trees/step_ddtree and the Triton
backend as ``ddcheck fix`` leaves it, patched here to dispatch on its verify input's class name.
"""

from __future__ import annotations

import io
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STEP = REPO / "fixtures" / "trees" / "step_ddtree"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ddcheck.smoke.report import PathResult, SmokeReport  # noqa: E402


# --------------------------------------------------------------------------- without running a tree


def _found(**capture):
    from ddcheck.smoke.inputs import TreeInput

    return TreeInput(cls="X", capture=capture)


def _blank(width=17, c=8, mode="tree"):
    return SmokeReport(target="t", backend="b", device="cpu", dtype="float32", budget=width - 1, width=width,
                       num_draft_tokens=c, graph_capture_width=mode)


def test_the_capture_width_is_the_runners_unless_overridden():
    from ddcheck.smoke.api import _capture_width

    runner = {"width": 17, "at": "r.py:262", "gate_at": "r.py:524", "source": "runner"}
    r = _blank()
    assert _capture_width(r, _found(**runner), "ddtree", 17, 8, "tree") == 17
    assert r.graph_capture["W=17 C=8"] == {"width": 17, "runner_width": 17, "at": "r.py:262", "gate_at": "r.py:524",
                                           "source": "runner"}
    assert _capture_width(r, _found(**runner), "ddtree", 17, 8, "C") == 8
    assert r.graph_capture["W=17 C=8"]["source"] == "override"
    assert _capture_width(r, _found(**runner), "ddtree", 17, 8, "W") == 17
    # a runner that gives no width: C, and the report says so
    r = _blank()
    assert _capture_width(r, _found(width=None, at="", gate_at=""), "ddtree", 17, 8, "tree") == 8
    assert r.graph_capture["W=17 C=8"]["source"] == "none" and any("no target-verify capture width" in x
                                                                    for x in r.limitations)
    # a launch without CUDA graphs (config's facts): no graph path is its step
    assert _capture_width(r, _found(off="disabled", source="launch"), "ddtree", 17, 8, "tree") is None
    assert r.graph_capture["W=17 C=8"]["source"] == "off"


def test_a_runner_that_replays_only_its_own_width_runs_another_eagerly():
    """Captured at 8 with a gate that refuses other widths: a batch of W = 17 never replays a graph, so the
    graph path is not the launch's (None: not run), and the report says why with both lines."""
    from ddcheck.smoke.api import _capture_width

    r = _blank()
    assert _capture_width(r, _found(width=8, at="r.py:262", gate_at="r.py:524"), "ddtree", 17, 8, "tree") is None
    assert r.graph_capture["W=17 C=8"]["width"] is None
    assert any("r.py:262" in x and "r.py:524" in x and "runs eagerly" in x for x in r.limitations)
    # overridden, it runs where asked
    assert _capture_width(r, _found(width=8, at="r.py:262", gate_at="r.py:524"), "ddtree", 17, 8, "C") == 8


@dataclass
class _Input:
    """A verify-input class of a tree, as the tests need one."""

    draft_token_num: int
    positions: object
    custom_mask: object = None
    allow_cuda_graph: bool = True
    tree_is_spine: bool = False


def test_the_input_is_the_trees_class_from_the_workers_keywords_and_the_batchs_tensors():
    """Evaluated keywords win; one the worker passes that could not be evaluated is the batch's own value by
    its name; one the worker does not pass keeps the class's default; the worker's allow_cuda_graph=False and
    custom_mask=None are kept."""
    import torch

    from ddcheck.smoke.inputs import tree_verify_input
    from ddcheck.smoke.loader import Trace

    batch = {"positions": lambda: torch.arange(6), "tree_is_spine": lambda: True}
    mask = torch.ones(3, dtype=torch.bool)
    obj = tree_verify_input(_Input, 17, mask, Trace(), "spec_info", {"allow_cuda_graph": False, "custom_mask": None},
                            batch, frozenset({"positions"}))
    assert type(obj).__name__ == "_Input" and isinstance(obj, _Input)
    assert obj.draft_token_num == 17 and obj.positions.tolist() == list(range(6))
    assert obj.allow_cuda_graph is False and obj.custom_mask is None
    assert obj.tree_is_spine is False  # not passed by the worker: the class's default, not the batch's
    # a worker that passes no mask of its own: the batch's, as the class's prepare step would lay it out
    assert tree_verify_input(_Input, 17, mask, Trace(), "spec_info", {}, batch).custom_mask is mask


def test_a_path_without_the_trees_class_is_not_judged_never_a_bug():
    from ddcheck.smoke.api import _verdict

    r = _blank(5)
    r.paths = [PathResult(case="ddtree", path="eager", width=5, num_draft_tokens=8, status="not_judged",
                          error="the tree's X (w.py:3) does not build for this batch: ValueError: no logits"),
               PathResult(case="ddtree", path="graph", width=5, num_draft_tokens=8, status="wrong", tokens=15),
               PathResult(case="control", path="eager", width=8, num_draft_tokens=8, status="ok")]
    _verdict(r)
    assert r.exit_code == 3 and r.verdict.startswith("not judged: ddtree/eager"), r.verdict
    assert "bug" not in r.verdict and r.not_judged


def test_the_text_report_labels_a_probe_and_where_the_capture_width_comes_from():
    from rich.console import Console

    from ddcheck.smoke.report import render_text

    r = _blank(mode="W")
    r.probe = "W = budget + 1 = 17 is --budget's probe"
    r.graph_capture["W=17 C=8"] = {"width": 17, "runner_width": 8, "at": "r.py:359", "gate_at": "",
                                   "source": "override"}
    out = io.StringIO()
    render_text(r, Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    assert "probe: W = budget + 1 = 17 is --budget's probe" in text
    assert "graph W=17 C=8: captured at 17: the tree's graph runner captures at 8 (r.py:359)" in text
    assert "overridden (--graph-capture-width W)" in text
    assert '"probe": "W = budget + 1 = 17' in r.to_json()


def test_config_hands_smoke_the_launchs_graph_facts():
    from ddcheck.config.smoke import launch_capture
    from ddcheck.config.speculative import SpecSettings

    s = SpecSettings(release="x", cuda_graph=True, capture_width=17, capture_at="r.py:262", replay_gate_at="r.py:524")
    assert launch_capture(s) == {"width": 17, "at": "r.py:262", "gate_at": "r.py:524"}
    assert "off" in launch_capture(SpecSettings(release="x", cuda_graph=False))


# --------------------------------------------------------------------------- the trees, run (CPU)

pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = pytest.mark.xdist_group("smoke-step")


def _tree(dest: Path, worker: str, capture_at_w: bool) -> str:
    from test_config import build_ddtree_tree

    root = build_ddtree_tree(dest, capture_at_w=capture_at_w)
    shutil.copy(STEP / worker, root / "srt" / "speculative" / "ddtree_worker.py")
    return str(root)


def _by_class_name() -> str:
    """0.5.16's Triton backend as `ddcheck fix` leaves it (W from the verify input), made to take W only from
    an input whose class is the DDTree one, and C from any other, as backends that dispatch on the class do."""
    from ddcheck.fix.api import fixed_file_text
    from ddcheck.smoke.loader import BACKEND_RELPATH

    text = fixed_file_text("sglang==0.5.16", BACKEND_RELPATH)
    read = "spec_info.num_tokens_per_req if spec_info is not None and spec_info.num_tokens_per_req > 0 else"
    assert text.count(read) == 3, "the fixed backend no longer reads W this way"
    return text.replace(read, 'spec_info.num_tokens_per_req if type(spec_info).__name__ == "DDTreeVerifyInput" else')


@pytest.fixture(scope="module")
def backend_source():
    return _by_class_name()


@pytest.fixture(scope="module")
def at_w(tmp_path_factory, backend_source, smoke):
    """The tree whose runner captures verify graphs at budget + 1, smoked with no options."""
    tree = _tree(tmp_path_factory.mktemp("step-w"), "ddtree_worker.py", capture_at_w=True)
    return tree, smoke(tree, backend_source=backend_source, seed_case=False)


RUNNER = "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"


@pytest.mark.network
def test_a_runner_that_captures_at_budget_plus_one_is_smokes_default(at_w):
    _, r = at_w
    assert r.exit_code == 0, r.verdict
    assert r.graph_capture_width == "tree" and r.probe is None
    assert r.graph_capture["W=17 C=8"]["source"] == "runner"
    graph = next(p for p in r.paths if (p.case, p.path) == ("ddtree", "graph"))
    assert graph.status == "ok" and graph.capture_width == 17
    # where the width comes from: the line of the runner build_ddtree_tree patched in (after 0.5.16's :262), and
    # 0.5.16's replay gate (can_run_graph compares spec_info.num_tokens_per_req with the captured width: :524,
    # three lines down after the patch)
    assert (f"the graph path captured at 17 (the tree's graph runner captures at 17, {RUNNER}:265; it replays no "
            f"other width, {RUNNER}:527)") in r.verdict


@pytest.mark.network
def test_a_backend_that_dispatches_on_the_inputs_class_name_gets_the_trees_class(at_w):
    """The worker passes `positions=batch.positions`, which ddcheck cannot evaluate: the input is still the
    tree's class, built with the batch's own positions (its __post_init__ checks them), so the backend takes
    W from it. A stand-in without the class would have sent it to C (qo_indptr stepping by 8: a false bug)."""
    _, r = at_w
    assert r.verify_inputs["W=17 C=8"] == "DDTreeVerifyInput (sglang/srt/speculative/ddtree_worker.py:30)"
    assert r.verify_input_instances == ["DDTreeVerifyInput"]
    assert "positions" in r.worker_call["W=17 C=8"]  # not evaluated: the batch's positions were given
    eager = next(p for p in r.paths if (p.case, p.path) == ("ddtree", "eager"))
    assert eager.metadata["qo_indptr"] == [0, 17, 34, 51] and eager.status == "ok"


@pytest.mark.network
def test_graph_capture_width_c_is_an_override_the_report_names(at_w, backend_source, smoke):
    tree, _ = at_w
    r = smoke(tree, backend_source=backend_source, seed_case=False, graph_capture_width="C")
    assert r.exit_code == 1 and r.verdict.startswith("capture width:"), r.verdict
    assert (f"captured at C = 8 (overridden by --graph-capture-width C; the tree's graph runner captures at 17, "
            f"{RUNNER}:265") in r.verdict
    assert r.graph_capture["W=17 C=8"]["source"] == "override"


@pytest.mark.network
def test_a_runner_that_captures_at_c_and_replays_only_that_width_verifies_w_eagerly(tmp_path, backend_source, smoke):
    """0.5.16's runner captures at C (:262) and its can_run_graph refuses a batch whose input carries another
    width (:524): the launch verifies W = 17 eagerly, so the graph path captured at C is not its step. The
    same graph path, overridden to capture at C, is the capture width (exit 1)."""
    tree = _tree(tmp_path, "ddtree_worker.py", capture_at_w=False)
    r = smoke(tree, backend_source=backend_source, seed_case=False)
    assert r.exit_code == 0, r.verdict
    assert [p.path for p in r.paths if p.case == "ddtree"] == ["eager"]
    assert r.graph_capture["W=17 C=8"] == {"width": None, "runner_width": 8, "at": f"{RUNNER}:262",
                                           "gate_at": f"{RUNNER}:524", "source": "runner"}
    assert any(f"{RUNNER}:262" in x and f"{RUNNER}:524" in x and "runs eagerly" in x for x in r.limitations)
    at_c = smoke(tree, backend_source=backend_source, seed_case=False, graph_capture_width="C")
    assert at_c.exit_code == 1 and at_c.verdict.startswith("capture width:"), at_c.verdict


@pytest.mark.network
def test_an_input_the_tree_cannot_build_here_is_not_judged(tmp_path, backend_source, smoke):
    """The input needs the draft's logits, which ddcheck has no value of: no class of the tree reaches the
    backend, so nothing is judged (exit 3), where a class-less stand-in would have said "bug"."""
    tree = _tree(tmp_path, "ddtree_worker_logits.py", capture_at_w=True)
    r = smoke(tree, backend_source=backend_source, seed_case=False)
    assert r.exit_code == 3 and r.verdict.startswith("not judged: "), r.verdict
    assert "DDTreeVerifyInput" in r.verdict and "draft's logits" in r.verdict
    assert {p.status for p in r.paths} == {"not_judged"} and r.not_judged


@pytest.mark.network
def test_config_smoke_runs_the_trees_start_up_once(at_w, backend_source, smoke):
    """The launch as `ddcheck config` resolved it (the tree's start-up ran there) is what the tree's ServerArgs
    holds in the smoke run: its __post_init__ does not run again, and the capture width is config's."""
    from ddcheck.config.smoke import launch_capture
    from ddcheck.config import check_launch
    from ddcheck.config.api import _jsonable

    tree, _ = at_w
    model = str(REPO / "fixtures" / "launch" / "models" / "llama")  # a local config.json: the start-up reads it
    argv = ["python", "-m", "sglang.launch_server", "--model-path", model, "--max-running-requests", "32",
            "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", model,
            "--speculative-num-draft-tokens", "8", "--speculative-ddtree-budget", "16", "--attention-backend", "triton"]
    s = check_launch(argv, sglang=tree).settings
    assert (s.verify_width, s.capture_width) == (17, 17), s
    values = {k: v for k, v in s.values.items() if _jsonable(v)}
    r = smoke(tree, backend_source=backend_source, seed_case=False, budget=16, launch=values,
              capture=launch_capture(s))
    assert r.exit_code == 0, r.verdict
    assert "ServerArgs.__post_init__" not in r.harness.started
    assert any("not run a second time" in x for x in r.limitations)
    assert r.graph_capture["W=17 C=8"]["source"] == "launch"
