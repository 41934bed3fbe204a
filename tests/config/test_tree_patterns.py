"""The launch checks on how newer DDTree trees are put together, whatever their names and lines:
fixtures/trees/newer_ddtree is a minimal tree written for these tests (see its README)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from ddcheck.config import check_launch
from ddcheck.config.inputs import input_value, reading_input
from ddcheck.tree.sources import open_target
from ddcheck.tree.evaluate import UNKNOWN, Evaluator, World
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.worker import capture_width, verify_inputs

TREE = Path(__file__).resolve().parents[2] / "fixtures" / "trees" / "newer_ddtree" / "sglang"


@pytest.fixture(scope="module")
def tree():
    return open_target(str(TREE))


def launch(budget: int, backend: str, *extra: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "DDTREE",
            "--speculative-ddtree-budget", str(budget), "--speculative-num-draft-tokens", "16",
            "--attention-backend", backend, *extra]


def line_of(relpath: str, text: str) -> int:
    lines = (TREE / relpath).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_handler_runs_with_the_values_post_init_fills_first(tree):
    r = check_launch(launch(16, "triton"), tree=tree)
    # the tree's handler ran (through a module whose class derives from msgspec.Struct, frozen=True)
    assert r.settings.resolved_by == "tree" and r.tree_note is None
    assert "sglang-rejects" not in r.names(None)  # device and page_size were filled as __post_init__ does
    bad = check_launch(launch(16, "triton", "--device", "cpu"), tree=tree)
    f = next(f for f in bad.findings if f.rule == "DD210")
    assert f.evidence[0].path.endswith("arg_groups/speculative_hook.py")
    assert f.evidence[0].line == line_of("srt/arg_groups/speculative_hook.py", 'raise ValueError("DDTREE runs on CUDA')


def test_worker_alias_and_width_computed_each_step(tree):
    values = {"speculative_ddtree_budget": 16, "speculative_num_draft_tokens": 16, "speculative_ddtree_pad": False}
    facts = verify_inputs(tree, "DDTREE", values)
    assert facts.worker == "DDTreeWorkerV2"  # DDTreeWorker = DDTreeWorkerV2 followed to the class
    (c,) = facts.choices
    assert (c.cls, c.width, c.width_expr, c.input_type) == ("DDTreeVerifyInput", None, "verify_token_num",
                                                             "DDTREE_VERIFY")
    (padded,) = verify_inputs(tree, "DDTREE", {**values, "speculative_ddtree_pad": True}).choices
    assert (padded.width, padded.width_expr) == (17, "self.tree_budget + 1")


def test_capture_width_through_model_runner_helper_and_algorithm(tree):
    values = {"speculative_ddtree_budget": 16, "speculative_num_draft_tokens": 16, "speculative_eagle_topk": None}
    width, at = capture_width(tree, "DDTREE", values)
    assert width == 17  # budget + 1: ModelRunner -> resolve_num_tokens_per_req -> get_server_args()
    assert at == "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:" + str(
        line_of("srt/model_executor/runner/decode_cuda_graph_runner.py", "self.captured_req_width ="))
    assert capture_width(tree, "EAGLE", values)[0] == 16  # other algorithms capture at C
    assert capture_width(tree, "DDTREE", {**values, "speculative_ddtree_budget": 3})[0] == 4


def test_evaluator_follows_tree_functions(tree):
    world = World(TreeModules.of(tree), "DDTREE")
    ev = Evaluator({}, world=world, module="sglang.srt.speculative.spec_utils")

    def value(src: str):
        return ev(ast.parse(src, mode="eval").body)

    assert value("resolve_buckets(budget=16)") == [17]
    assert value("resolve_buckets(budget=16, configured=[8, 12, 40])") == [8, 12, 17]  # > widest dropped
    assert value("max(resolve_buckets(budget=7))") == 8
    assert value("resolve_buckets(budget=-2)") is not None  # raises in the tree: unknown, never a number
    assert not isinstance(value("resolve_buckets(budget=-2)"), list)


def test_per_step_width_is_checked_even_when_its_bound_equals_c(tree):
    r = check_launch(launch(15, "fa3"), tree=tree)  # W <= 16 = C, but a smaller tree verifies fewer
    f = next(f for f in r.findings if f.rule == "DD200")
    assert f.severity.value == "error" and "computed each step" in f.message and "verify_token_num" in f.message
    assert "--speculative-ddtree-budget" not in f.hint  # no budget pins a width the worker computes
    assert r.settings.verify_width_per_step == "verify_token_num"


def test_resolver_decided_by_spec_input_type_through_a_helper(tree):
    r = check_launch(launch(16, "triton"), tree=tree)
    assert r.exit_code == 0 and not r.names("error") and not r.names("warning"), [f.message for f in r.findings]
    # graphs captured at budget + 1 and replayed only at that width; W is computed each step from 1 up to a
    # bound the worker's code does not give (max of the step's tree sizes), and this backend's verify path
    # is right at any W, so the launch is judged without it (issue 38: never a table's bound)
    assert (r.settings.capture_width, r.settings.verify_width_min, r.settings.verify_width) == (17, 1, None)
    assert r.not_judged == []
    # the test itself, decided for the verify input's own type
    test = ast.parse("self._is_tree_input(spec_info)", mode="eval").body
    fn = ast.parse((TREE / "srt/layers/attention/triton_backend.py").read_text())
    helpers = {n.name: n for n in ast.walk(fn) if isinstance(n, ast.FunctionDef)}

    def decide(cls, fields, kind):
        return reading_input(Evaluator({}), input_value(cls, fields, kind), helpers).test(test)

    assert decide("DDTreeVerifyInput", {"draft_token_num"}, "DDTREE_VERIFY") is True
    assert decide("EagleVerifyInput", {"draft_token_num"}, "EAGLE_VERIFY") is False
    assert decide("X", set(), None) is UNKNOWN  # type unknown: undecided


def test_smoke_builds_a_real_instance_of_a_tree_class():
    torch = pytest.importorskip("torch")
    from ddcheck.smoke.inputs import tree_verify_input
    from ddcheck.smoke.loader import Trace

    class Base:
        def __init__(self, spec_input_type):
            self.spec_input_type = spec_input_type

    @dataclasses.dataclass
    class TreeInput(Base):
        draft_token: object
        draft_token_num: int
        tree_budget: int
        custom_mask: object = None

        def __post_init__(self):
            super().__init__(spec_input_type="TREE")

        def width(self):
            return self.draft_token_num

    trace = Trace()
    mask = torch.ones(3, dtype=torch.bool)
    obj = tree_verify_input(TreeInput, 17, mask, trace, "spec_info (TreeInput)")
    assert isinstance(obj, TreeInput) and obj.spec_input_type == "TREE" and obj.width() == 17
    assert (obj.tree_budget, obj.draft_token, obj.custom_mask is mask) == (16, None, True)
    assert {"spec_input_type", "width", "draft_token_num"} <= trace.reads["spec_info (TreeInput)"]
    assert not hasattr(obj, "num_tokens_per_req") and "num_tokens_per_req" in trace.missing["spec_info (TreeInput)"]


def test_evaluator_never_skips_a_change_it_cannot_follow():
    def run(src: str) -> dict:
        ev = Evaluator({})
        env: dict = {}
        ev.run(ast.parse(src).body, env)
        return env

    assert run("x = [1]\nx.append(2)")["x"] == [1, 2]
    assert run("x = 1\nx += 2")["x"] == 3
    from ddcheck.tree.evaluate import UNKNOWN

    assert run("x = [1]\nfor i in y:\n    x.append(i)")["x"] is UNKNOWN  # a loop: any number of times
    assert run("x = [1]\nx[0] = 5")["x"] is UNKNOWN
    assert run("x = 1\nwith f():\n    x = 2")["x"] == 2  # a with's body runs, once
    assert run("x = 1\ntry:\n    x = int('')\nexcept ValueError:\n    x = 3")["x"] == 3  # the tree's own raise
    assert run("x = 1\ntry:\n    x = int('4')\nexcept ValueError:\n    x = 3")["x"] == 4
    assert run("x = 1\ntry:\n    x = g()\nexcept E:\n    x = 3")["x"] is UNKNOWN
    assert run("x = [3, 1]\nx.sort()")["x"] is UNKNOWN  # not modelled: unknown, never stale


def test_start_up_width_that_resolves_to_w_for_this_launch(tree):
    """flashinfer here rebinds its start-up width through resolve_num_tokens_per_req (budget + 1 for
    DDTREE targets): scan reports it as C in general, the launch knows it is W when every step is W."""
    padded = check_launch(launch(16, "flashinfer", "--speculative-ddtree-pad"), tree=tree)
    assert (padded.settings.verify_width, padded.settings.verify_width_per_step) == (17, None)
    assert "verify-width" not in padded.names(None) and padded.exit_code == 0
    per_step = check_launch(launch(16, "flashinfer"), tree=tree)
    f = next(f for f in per_step.findings if f.rule == "DD200")
    assert f.severity.value == "error" and "fixed at start-up (17 for this launch)" in f.message
    fixed_c = check_launch(launch(16, "fa3", "--speculative-ddtree-pad"), tree=tree)  # fa3 keeps C = 16
    g = next(f for f in fixed_c.findings if f.rule == "DD200")
    assert "W=17" in g.message and "--speculative-ddtree-budget 15" in g.hint


def test_graph_runner_that_replays_only_its_captured_width(tree, tmp_path):
    """A per-step W replays the graph only when the step is as wide as the capture (can_run checks
    it; narrower steps run eagerly); without that check, a narrower step replays a wrong-sized graph."""
    from ddcheck.tree.worker import graph_capture

    runner = "srt/model_executor/runner/decode_cuda_graph_runner.py"
    values = {"speculative_ddtree_budget": 16, "speculative_num_draft_tokens": 16}
    cap = graph_capture(tree, "DDTREE", values, {"draft_token_num", "tree_budget", "custom_mask"})
    assert cap.gate_at == f"sglang/{runner}:{line_of(runner, 'spec_info.draft_token_num != self.captured')}"
    assert graph_capture(tree, "DDTREE", values, {"custom_mask"}).gate_at == ""  # the input lacks the field
    assert graph_capture(tree, "DDTREE", values, None).gate_at == ""  # the input is not known
    assert "verify-graph-width" not in check_launch(launch(16, "triton"), tree=tree).names(None)

    import shutil

    copy = tmp_path / "sglang"
    shutil.copytree(TREE, copy)
    path = copy / runner
    text = path.read_text()
    path.write_text(text[: text.index("    def can_run_graph")])  # no width check left
    r = check_launch(launch(16, "triton"), tree=open_target(str(copy)))
    g = next(f for f in r.findings if f.rule == "DD201")
    assert g.severity.value == "error" and g.consequence == "CRASH" and "narrower step" in g.message
    fixed = check_launch(launch(16, "triton", "--speculative-ddtree-pad"), tree=open_target(str(copy)))
    assert "verify-graph-width" not in fixed.names(None)  # every step is as wide as the capture


def test_graph_only_start_up_width_equal_to_the_capture(tree):
    """trtllm_mha here lays out its graph capture with a start-up width that resolves to budget + 1,
    the width the runner captures with, and the runner replays only that width: right, though scan
    reports the capture line in general (the width is C for other algorithms)."""
    from ddcheck.scan.api import scan
    from ddcheck.scan.settings import Settings

    res = scan([str(TREE / "srt/layers/attention/trtllm_mha_backend.py")], settings=Settings(), use_cache=False)
    capture_line = line_of("srt/layers/attention/trtllm_mha_backend.py", "self.graph_qo_indptr =")
    assert {f.line for f in res.findings if f.rule == "DD001"} == {capture_line}
    r = check_launch(launch(16, "trtllm_mha"), tree=tree)
    assert "verify-width" not in r.names(None) and r.exit_code == 0, [f.message for f in r.findings]
    off = check_launch(launch(16, "trtllm_mha", "--disable-cuda-graph"), tree=tree)
    assert "verify-width" not in off.names(None)  # the capture path is not taken at all


def test_tree_mask_builder_called_with_the_batch(monkeypatch):
    """The tree's mask builder is called with arguments made, by name, from the harness's batch."""
    torch = pytest.importorskip("torch")
    import sys
    import types

    from ddcheck.smoke.batch import Shape, make_batch
    from ddcheck.smoke.treemask import TreeMaskUnavailable, build_tree_mask

    def compile_tree(root_token_ids, visibility, past_lengths, tree_budget, device, dtype=None, _out=None):
        rows = [torch.cat([torch.ones(tree_budget + 1, int(p), dtype=torch.bool), visibility[b]], 1).flatten()
                for b, p in enumerate(past_lengths.tolist())]
        return root_token_ids, torch.cat(rows).to(dtype or torch.bool)

    def needs_logits(draft_logits, visibility):
        return visibility

    mod = types.ModuleType("ddcheck_fixture_masks")
    mod.compile_tree, mod.needs_logits = compile_tree, needs_logits
    monkeypatch.setitem(sys.modules, "ddcheck_fixture_masks", mod)
    batch = make_batch(5, [3, 7], Shape(), "cpu", 0)
    mask = build_tree_mask("ddcheck_fixture_masks", "compile_tree", 1, {"dtype": "torch.bfloat16"}, batch, "cpu")
    assert mask.dtype == torch.bfloat16 and torch.equal(mask.bool(), batch.custom_mask)
    with pytest.raises(TreeMaskUnavailable, match="draft_logits"):
        build_tree_mask("ddcheck_fixture_masks", "needs_logits", None, {}, batch, "cpu")
    with pytest.raises(TreeMaskUnavailable, match="does not load"):
        build_tree_mask("ddcheck_no_such_module", "f", None, {}, batch, "cpu")


def test_config_judges_with_the_trees_settings_and_suppressions(tmp_path):
    """config runs the scan as `ddcheck scan` does: a read of C suppressed with a reason, or a rule the
    checkout's [tool.ddcheck] ignores, does not drive a verdict."""
    import shutil

    copy = tmp_path / "checkout" / "python" / "sglang"
    shutil.copytree(TREE, copy)
    fa3 = copy / "srt/layers/attention/flashattention_backend.py"
    assert "verify-width" in check_launch(launch(16, "fa3"), tree=open_target(str(copy))).names("error")
    text = fa3.read_text()
    fa3.write_text("\n".join(line + "  # ddcheck: ignore[DD001] this backend never serves tree drafters"
                             if "self.speculative_num_draft_tokens" in line and "server_args" not in line else line
                             for line in text.split("\n")))
    quiet = check_launch(launch(16, "fa3"), tree=open_target(str(copy)))
    assert "verify-width" not in quiet.names(None), [f.message for f in quiet.findings]
    fa3.write_text(text)
    (tmp_path / "checkout" / "pyproject.toml").write_text('[tool.ddcheck]\nignore = ["DD001"]\n')
    ignored = check_launch(launch(16, "fa3"), tree=open_target(str(copy)))
    assert "verify-width" not in ignored.names(None)


def test_width_fixed_at_start_up_is_not_per_step():
    """Only a width computed in the step (a local of the method) counts as per step; one read from the
    worker's own attributes is fixed at start-up even when ddcheck cannot evaluate it."""
    from ddcheck.tree.worker import _computed_in_step

    def expr(src):
        return ast.parse(src, mode="eval").body

    assert _computed_in_step(expr("verify_token_num"))
    assert _computed_in_step(expr("max(1, raw_width)"))
    assert not _computed_in_step(expr("int(self.block_size)"))
    assert not _computed_in_step(expr("self.tree_budget + 1"))


def test_a_verify_input_built_through_the_classs_factory_with_the_width_by_position():
    """0.4.3-0.4.8's EAGLE worker: ``EagleVerifyInput.create(..., num_draft_tokens)``, a classmethod that
    returns ``cls(..., num_verify_tokens, spec_steps)`` positionally (fixtures/trees/factory_eagle); the
    tests on the way to it are the worker's own (a branch false for the launch builds no input of it)."""
    factory = TREE.parents[1] / "factory_eagle" / "sglang"
    facts = verify_inputs(open_target(str(factory)), "EAGLE", {
        "speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 8, "speculative_eagle_topk": 4,
        "speculative_num_steps": 3})
    assert facts.worker == "EAGLEWorker" and len(facts.choices) == 1, facts.note
    (choice,) = facts.choices
    line = next(i for i, text in enumerate((factory / "srt/speculative/eagle_worker.py").read_text().splitlines(), 1)
                if text.endswith("return EagleVerifyInput.create("))  # not the branch of topk > 8
    assert (choice.cls, choice.width, choice.width_expr, choice.line) == \
        ("EagleVerifyInput", 8, "self.server_args.speculative_num_draft_tokens", line)
    assert choice.kwargs == ["draft_token_num", "spec_steps"]  # the fields the worker hands through the factory
