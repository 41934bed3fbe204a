"""ddcheck on real DDTree trees: the two public forks in ../shared/corpus/ddtree-forks (unpacked at
test time; skipped only when that folder is absent). Every verdict pinned here is explained from the
fork's code, file:line, in docs/forks.md."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from ddcheck.rules import get_rule
from ddcheck.scan.api import scan
from ddcheck.config.smoke import launch_smoke
from ddcheck.config import check_launch
from ddcheck.scan.settings import Settings
from ddcheck.tree.sources import open_target

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("DDCHECK_FORKS", REPO.parent / "shared" / "corpus" / "ddtree-forks"))
ARCHIVES = {"hz": "HaiyuZhou-sglang-ad7ab160.tar.gz", "dbg": "DB-Guo-sglang-ddtree-dev-514ea1f3.tar.gz",
            "rw": "Rancy-Wang-sglang-433c58ed.tar.gz"}

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no DDTree fork corpus at {CORPUS}")
# The smoke tests of the forks run on one worker of the suite, sharing each fork's smoke server.
SHARED_SMOKE = pytest.mark.xdist_group("smoke-forks")


def _unpack(name: str, dest: Path) -> Path:
    def keep(member, path):  # the archives hold a few symlinks out of the tree (.clang-format): skipped
        return None if member.issym() or member.islnk() else tarfile.data_filter(member, path)

    with tarfile.open(CORPUS / ARCHIVES[name]) as tar:
        tar.extractall(dest, filter=keep)
    return dest / "sglang"


@pytest.fixture(scope="session")
def fork_dir(tmp_path_factory):
    dirs: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in dirs:
            dirs[name] = _unpack(name, tmp_path_factory.mktemp(name))
        return dirs[name]

    return get


@pytest.fixture(scope="session")
def fork(fork_dir):
    trees: dict[str, object] = {}

    def get(name: str):
        if name not in trees:
            trees[name] = open_target(str(fork_dir(name)))
        return trees[name]

    return get


def launch(*flags: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-draft-model-path", "d", *flags]


def ddtree(budget: int, backend: str, graphs: bool, *extra: str) -> list[str]:
    return launch("--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", str(budget),
                  "--speculative-num-draft-tokens", "16", "--attention-backend", backend,
                  *(() if graphs else ("--disable-cuda-graph",)), *extra)


def errors(report) -> set[tuple[str, str]]:
    return {(get_rule(f.rule).name, f.consequence) for f in report.findings if f.severity.value == "error"}


# ------------------------------------------------------------------------------------------ scan


def test_scan_reports_the_hz_triton_width_resolver_as_a_fallback(fork_dir):
    # The backend file alone: the tree's verify inputs are not in the target, so the resolver's
    # `return C` stays a fallback (with the whole tree it is DD001, see below).
    path = fork_dir("hz") / "srt" / "layers" / "attention" / "triton_backend.py"
    fs = scan([str(path)], settings=Settings(), use_cache=False).findings
    assert [(f.rule, f.line, f.function) for f in fs] == [
        ("DD003", 364, "TritonAttnBackend._resolve_target_verify_num_draft_tokens")]
    assert "width resolver" in fs[0].message


def test_scan_judges_the_hz_resolver_by_the_spine_input_its_worker_builds(fork, tmp_path):
    """HZ's Triton resolver (triton_backend.py:358-364) returns W only `if hasattr(spec_info,
    "tree_budget")`. In spine mode (budget <= block - 1) the DDTree worker builds
    `DFlashVerifyInput(draft_token_num=self.max_tree_nodes, ...)` with no tree budget
    (ddtree_worker.py:115-145; `self.max_tree_nodes = self.tree_budget + 1`, :53), and so does the graph
    runner for its capture (cuda_graph_runner.py:1319, `draft_token_num = tree_budget + 1`): that input
    of width budget + 1 reaches `return self.num_draft_tokens`, a layout error the default fix rewrites."""
    result = scan([fork("hz").label], settings=Settings(), use_cache=False)
    f = next(f for f in result.findings if f.path.endswith("triton_backend.py") and f.line == 364)
    assert (f.rule, f.function) == ("DD001", "TritonAttnBackend._resolve_target_verify_num_draft_tokens")
    assert "DFlashVerifyInput" in f.message and f.hint is not None and f.fix_safety.value == "safe"
    # the eager FA3 chain value (flashattention_backend.py:504-509) is bound to `_num_draft` and decided
    # where it is used, for the launch (config): it stays a fallback
    fa3 = {f.line: f.rule for f in result.findings if f.path.endswith("attention/flashattention_backend.py")}
    assert fa3[508] == "DD003" and fa3[541] == "DD003"


def test_scan_rw_fa3_dispatch_else_is_a_fallback(fork):
    """Rancy-Wang's FA3 graph replay, `if self._is_ddtree_verify_spec(spec_info): ... else: <C>`
    (flashattention_backend.py:2906-2960): the test is `getattr(spec_info, "spec_input_type", None) ==
    SpecInputType.DDTREE_VERIFY` (:320-325), and the only inputs the tree builds at another width than C
    are DDTreeVerifyInput (ddtree_worker_v2.py:584, its width from the tree sizes and `tree_budget=`;
    spec_info.py:430), whose `__post_init__` gives it DDTREE_VERIFY: the `else:` is reached by the
    width-C inputs only (EAGLE, DFlash). Its eight reads of C are fallbacks, not errors."""
    result = scan([fork("rw").label], settings=Settings(), use_cache=False)
    rules = {f.line: f.rule for f in result.findings if f.path.endswith("attention/flashattention_backend.py")}
    lines = [n for n in rules if 2915 <= n <= 2955]
    assert len(lines) == 8 and all(rules[n] == "DD003" for n in lines)
    msg = next(f.message for f in result.findings if f.line == 2916 and f.path.endswith("flashattention_backend.py"))
    assert "DDTreeVerifyInput" in msg and "width C" in msg


@pytest.mark.parametrize("name", ["hz", "dbg"])
def test_scan_finds_verify_reached_by_exclusion_and_through_verify_or_draft_extend(fork, name):
    result = scan([fork(name).label], settings=Settings(), use_cache=False)
    by_func = {}
    for f in result.findings:
        by_func.setdefault(f.function, set()).add((f.rule, f.line))
    # `if forward_mode in (EXTEND, DRAFT_EXTEND, DRAFT_EXTEND_V2): ... else:` -> verify.
    assert by_func["FlashMLABackend.forward_extend"] == {("DD001", 429), ("DD001", 444)}
    # forward_mtp is called under `is_target_verify() or is_draft_extend() or ...`, and its
    # `else:` after `is_draft_extend()` is the verify path.
    assert {line for _, line in by_func["AscendAttnBackend.forward_mtp"]} >= {1677, 1678, 1679}


# ---------------------------------------------------------------------------------------- config

HZ = [  # (budget, backend, graphs) -> (W, verify input, error findings); see docs/forks.md
    (16, "triton", False, 17, "DDTreeVerifyInput", set()),
    (16, "triton", True, 17, "DDTreeVerifyInput", {("verify-graph-width", "CRASH")}),
    (3, "triton", False, 4, "DFlashVerifyInput", {("verify-width", "CORRUPT")}),
    (3, "triton", True, 4, "DFlashVerifyInput", {("verify-width", "CORRUPT"), ("verify-graph-width", "CRASH")}),
    (16, "fa3", False, 17, "DDTreeVerifyInput", set()),  # C only where the model has sliding windows: warning
    (16, "fa3", True, 17, "DDTreeVerifyInput", {("verify-width", "CORRUPT"), ("verify-graph-width", "CRASH")}),
    (3, "fa3", False, 4, "DFlashVerifyInput", set()),
    (3, "fa3", True, 4, "DFlashVerifyInput", {("verify-width", "CORRUPT"), ("verify-graph-width", "CRASH")}),
    (16, "flashinfer", False, 17, "DDTreeVerifyInput", set()),
    (16, "flashinfer", True, 17, "DDTreeVerifyInput", {("verify-graph-width", "CRASH")}),
    (3, "flashinfer", False, 4, "DFlashVerifyInput", set()),
    (3, "flashinfer", True, 4, "DFlashVerifyInput", {("verify-graph-width", "CRASH")}),
]


@pytest.mark.parametrize("budget,backend,graphs,W,cls,expected", HZ)
def test_hz_ddtree_launches(fork, budget, backend, graphs, W, cls, expected):
    r = check_launch(ddtree(budget, backend, graphs), tree=fork("hz"))
    s = r.settings
    assert s.resolved_by == "tree" and r.handler == "sglang/srt/arg_groups/speculative_hook.py:53"
    assert not any(f.consequence == "REJECT" for f in r.findings)  # accepted
    assert (s.num_draft_tokens, s.verify_width, s.verify_input) == (16, W, cls)
    assert s.verify_input_at == ("sglang/srt/speculative/ddtree_worker.py:205" if budget == 16
                                 else "sglang/srt/speculative/ddtree_worker.py:142")
    assert errors(r) == expected
    if graphs:
        assert s.capture_width == 16 and s.capture_at == "sglang/srt/model_executor/cuda_graph_runner.py:519"


def test_hz_fa3_without_graphs_is_wrong_only_for_sliding_window_models(fork):
    # Eager chain-mode fa3 takes W from spec_info (flashattention_backend.py:538-542); C is left in the
    # sliding-window helper (:2642), called only `if self.has_swa` (:627), and in the graph paths.
    r = check_launch(ddtree(3, "fa3", False), tree=fork("hz"))
    f = next(f for f in r.findings if f.rule == "DD200")
    assert (f.severity.value, f.consequence) == ("warning", "CORRUPT")
    assert "`self.has_swa`" in f.message
    assert {e.line for e in f.evidence} == {2655, 2687}
    on = check_launch(ddtree(3, "fa3", True), tree=fork("hz"))
    g = next(f for f in on.findings if f.rule == "DD200")
    # graph capture/replay; 2214-2216 is the replay's step bound `max_seq_len_k = seq_lens.max() + C`, a layout
    assert g.severity.value == "error" and {e.line for e in g.evidence} == {1946, 1947, 2211, 2215}


def test_hz_chain_mode_names_the_resolver_test_that_fails(fork):
    r = check_launch(ddtree(3, "triton", False), tree=fork("hz"))
    f = next(f for f in r.findings if f.rule == "DD200")
    assert "through DFlashVerifyInput" in f.message
    ev = f.evidence[0]
    assert (ev.path, ev.line) == ("sglang/srt/layers/attention/triton_backend.py", 364)
    assert "hasattr(spec_info, 'tree_budget')" in ev.text


def test_hz_without_c_says_what_the_tree_read_and_uses_its_fallback(fork):
    r = check_launch(launch("--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "16",
                            "--attention-backend", "triton", "--disable-cuda-graph"), tree=fork("hz"))
    assert r.settings.num_draft_tokens == 16  # speculative_hook.py:338-344, the fork's own default
    needs = [f for f in r.findings if f.rule == "DD214"]
    assert any("draft model's config" in f.message and "--draft-config" in f.hint for f in needs)
    c = next(f for f in r.findings if f.rule == "DD212")
    assert (c.evidence[0].path, c.evidence[0].line) == ("sglang/srt/arg_groups/speculative_hook.py", 344)


def test_hz_draft_config_gives_the_block_size_the_server_will_use(fork, tmp_path):
    # DFlash block 8 with DDTree budget 16: W = 17 and C = 8, the case from the problem statement.
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["X"], "block_size": 8}))
    r = check_launch(launch("--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "16",
                            "--attention-backend", "triton", "--disable-cuda-graph"),
                     tree=fork("hz"), draft_config=str(tmp_path))
    assert (r.settings.num_draft_tokens, r.settings.verify_width) == (8, 17)
    assert not any(f.rule == "DD214" and "draft model" in f.message for f in r.findings)


DBG_DDTREE = launch("--speculative-algorithm", "DFLASH", "--speculative-dflash-enable-ddtree",
                    "--speculative-dflash-block-size", "16", "--speculative-num-draft-tokens", "17",
                    "--attention-backend", "triton")


@pytest.mark.slow
def test_dbg_enable_ddtree_launch_is_accepted_and_verifies_c(fork):
    r = check_launch(DBG_DDTREE, tree=fork("dbg"))
    s = r.settings
    assert s.resolved_by == "tree"
    assert (s.num_draft_tokens, s.verify_width, s.verify_input) == (17, 17, "DFlashVerifyInput")
    assert s.verify_input_at == "sglang/srt/speculative/dflash_worker.py:999"
    assert r.errors == [] and r.exit_code == 0
    assert not any(f.rule == "DD224" for f in r.findings)


def test_dbg_fa3_attends_the_tree_as_a_chain(fork):
    # DFLASH forces topk 1 (speculative_hook.py:163-170); fa3 reads the tree mask only when topk > 1.
    r = check_launch([a if a != "triton" else "fa3" for a in DBG_DDTREE], tree=fork("dbg"))
    assert errors(r) == {("tree-mask", "CORRUPT")}
    ev = next(f for f in r.findings if f.rule == "DD202").evidence[0]
    assert (ev.path, ev.line) == ("sglang/srt/layers/attention/flashattention_backend.py", 571)
    assert "self.topk <= 1" in ev.text


def test_dbg_without_enable_ddtree_is_rejected_where_the_fork_raises(fork):
    argv = [a for a in DBG_DDTREE if a != "--speculative-dflash-enable-ddtree"]
    r = check_launch(argv, tree=fork("dbg"))
    rej = [f for f in r.findings if f.consequence == "REJECT"]
    assert [get_rule(f.rule).name for f in rej] == ["sglang-dflash-block-size"]
    assert (rej[0].evidence[0].path, rej[0].evidence[0].line) == ("sglang/srt/arg_groups/speculative_hook.py", 183)
    assert r.exit_code == 1


@pytest.mark.slow
def test_checkout_package_without_init_is_a_tree(fork_dir, tmp_path):
    src = fork_dir("dbg")
    pkg = tmp_path / "python" / "sglang"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("test", "multimodal", "*.md"))
    (pkg / "__init__.py").unlink()
    r = check_launch(DBG_DDTREE, sglang=str(pkg))
    assert r.settings.resolved_by == "tree" and r.settings.num_draft_tokens == 17


# ----------------------------------------------------------------------------------------- smoke


@SHARED_SMOKE
def test_smoke_uses_the_forks_own_ddtree_verify_input(fork_dir, smoke):
    r = smoke(str(fork_dir("hz")), budget=16, num_draft_tokens=8)
    assert r.verify_inputs["W=17 C=8"].startswith("DDTreeVerifyInput (sglang/srt/speculative/ddtree_worker.py:205)")
    reads = set().union(*(set(v) for k, v in r.harness.reads.items() if "DDTreeVerifyInput" in k))
    assert "tree_budget" in reads  # the fork's resolver dispatches on it (triton_backend.py:362)
    # a real instance: the fork's own dataclass (ddtree_info.py:16) with its __post_init__ run
    assert "DDTreeVerifyInput" in r.verify_input_instances
    # (besides the worker's keywords that need the draft model's logits: child_maps, tree_is_spine)
    assert not [note for note in r.limitations[1:] if "not evaluated here" not in note], r.limitations
    # The width is right (as `ddcheck config` says), but the tree's own mask builder lays the mask out
    # [bs, W, max_past + W] (ddtree_utils.py:274-283) while triton reads it packed per request
    # (triton_backend.py:659-663): wrong attention eagerly, and a crash copying it into the graph
    # buffer (triton_backend.py:416). With ddcheck's packed layout the same paths are right.
    assert r.tree_masks["W=17 C=8"] == "compile_ddtree_tree (sglang/srt/speculative/ddtree_utils.py:251)"
    assert r.exit_code == 1 and r.verdict.startswith("tree mask:"), r.verdict
    assert "triton_backend.py:416" in r.verdict
    ref = {p.path: p for p in r.paths if p.case == "ddtree-reference-mask"}
    assert ref["eager"].status == "ok"
    # The graph, captured at C, keeps max_extend_len = 8 < W = 17 with either mask: it breaks the verify
    # contract (right numbers only within one row block), so it is never `ok` (issue 39); the crash with
    # the tree's mask is still the mask's, and the verdict says both.
    assert ref["graph"].status == "wrong" and ref["graph"].wrong_tokens == 0
    assert [v["field"] for v in ref["graph"].violations] == ["forward_metadata.max_extend_len"]
    assert "graph wrong (graph (forward_metadata.max_extend_len: expected >= 17, got 8" in r.verdict, r.verdict


@SHARED_SMOKE
def test_flashinfer_smoke_runs_the_forks_own_verify_input_layout(fork_dir, smoke):
    """FlashInfer takes the verify layout from the input itself: HaiyuZhou's DDTreeVerifyInput lays out
    qo_indptr stepping by its draft_token_num and KV as seq_lens + draft_token_num
    (ddtree_info.py:87-124): right at W = 17 with C = 8 (CPU: eager; its graph state is CUDA-only)."""
    r = smoke(str(fork_dir("hz")), backend="flashinfer", budget=16, num_draft_tokens=8, seed_case=False)
    assert r.exit_code == 0, r.verdict
    assert "DDTreeVerifyInput" in r.verify_input_instances  # (the W == C control is the fork's chain-mode input)
    reads = set().union(*(set(v) for k, v in r.harness.reads.items() if "DDTreeVerifyInput" in k))
    assert "generate_attn_arg_prefill" in reads
    assert all(p.status == "ok" and len(p.contract_fields) == 3 for p in r.paths)


@SHARED_SMOKE
def test_smoke_chain_mode_agrees_with_config(fork_dir, smoke):
    r = smoke(str(fork_dir("hz")), budget=3, num_draft_tokens=16)
    assert r.verify_inputs["W=4 C=16"].startswith("DFlashVerifyInput (sglang/srt/speculative/ddtree_worker.py:142)")
    assert r.exit_code == 1, r.verdict  # the resolver returns C for DFlashVerifyInput
    assert {p.status for p in r.paths if p.case == "ddtree"} == {"wrong"}


# ------------------------------------------------------------------------------------------- fix


def test_fix_repairs_the_launch_that_was_corrupt(fork_dir, tmp_path, smoke):
    """hz budget 3 on triton was CORRUPT (the resolver returned C for the chain-mode input): after
    `ddcheck fix --unsafe-fixes` config and smoke both find the width per step."""
    from ddcheck.fix.api import fix_targets

    out = tmp_path / "fixed" / "sglang"
    shutil.copytree(fork_dir("hz"), out)

    changed = fix_targets([str(out / "srt" / "layers" / "attention" / "triton_backend.py")], unsafe=True)
    assert [Path(fx.display).name for fx in changed] == ["triton_backend.py"]
    r = check_launch(ddtree(3, "triton", False), sglang=str(out))
    assert errors(r) == set() and r.settings.verify_input == "DFlashVerifyInput"
    s = smoke(str(out), budget=3, num_draft_tokens=16)
    assert s.exit_code == 0, s.verdict


@SHARED_SMOKE
def test_config_smoke_runs_the_launch_at_its_c_and_w(fork, smoke, monkeypatch):
    """`ddcheck config --smoke`: the launch, run from the tree with its worker's verify-input class.
    (launch_smoke's run_smoke answered by the suite's shared worker of each fork: the same report.)"""
    monkeypatch.setattr("ddcheck.smoke.run_smoke", smoke)
    bad = check_launch(ddtree(3, "triton", False), tree=fork("hz"), smoke=launch_smoke)
    f = next(f for f in bad.findings if f.rule == "DD250")
    assert (f.severity.value, f.consequence) == ("error", "CORRUPT")
    assert "DFlashVerifyInput (sglang/srt/speculative/ddtree_worker.py:142)" in f.message
    good = check_launch(DBG_DDTREE, tree=fork("dbg"), smoke=launch_smoke)
    g = next(f for f in good.findings if f.rule == "DD250")
    assert g.severity.value == "info" and "DFlashVerifyInput (sglang/srt/speculative/dflash_worker.py:999)" in g.message
    assert "an instance of DFlashVerifyInput" in g.message  # dflash_info.py run from the fork
    other = check_launch(ddtree(16, "fa3", False), tree=fork("hz"), smoke=launch_smoke)
    o = next(f for f in other.findings if f.rule == "DD250")  # config --smoke runs the launch's fa3 (#30)
    assert (o.severity.value, o.consequence) == ("error", "CORRUPT")
    # the launch runs without CUDA graphs (--disable-cuda-graph): only its eager path is its step (issue 47),
    # where FA3's cascade indexes the mask as packed per request (flashattention_backend.py:575-597) and the
    # fork's builder lays it out [bs, W, max_past + W] (ddtree_utils.py:274-283)
    assert "the tree's fa3 verify path at C=16, W=17" in o.message and "tree mask:" in o.message
    assert "flashattention_backend.py:596" in o.message and "graph" not in o.message.split("tree mask:")[1]


@SHARED_SMOKE
def test_smoke_cli_runs_a_launch(fork_dir, smoke, monkeypatch):
    """`ddcheck smoke TREE --launch CMD` runs at the launch's C and W with its worker's verify input (the
    command's own parsing and launch resolution, in this process; the run is run_smoke's report, from the
    suite's smoke process of that tree)."""
    import subprocess
    import sys

    from typer.testing import CliRunner

    from ddcheck.cli.app import app

    monkeypatch.setattr("ddcheck.smoke.api.run_smoke", lambda target, **kw: smoke(target, **kw))
    launch_cmd = " ".join(ddtree(3, "triton", False))
    out = CliRunner().invoke(app, ["smoke", str(fork_dir("hz")), "--launch", launch_cmd, "--format", "json"])
    assert out.exit_code == 1, out.output
    report = json.loads(out.stdout)
    assert (report["width"], report["num_draft_tokens"]) == (4, 16)
    assert report["verify_inputs"]["W=4 C=16"].startswith("DFlashVerifyInput")
    # W is the launch's, not a --budget's probe: the text says so, whatever the algorithm (not all have a budget)
    from rich.console import Console

    from ddcheck.smoke.report import SmokeReport, render_text

    console = Console(record=True, width=400)
    render_text(SmokeReport.model_validate(report), console)
    text = console.export_text()
    assert report["width_of"] == "launch" and "W = 4 (the launch's verify width), C = 16" in text, text
    assert "budget" not in text.split("\n")[1], text
    bad = subprocess.run([sys.executable, "-m", "ddcheck", "smoke", str(fork_dir("hz")), "--launch", "--model-path m"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--launch" in bad.stderr and "Traceback" not in bad.stderr


def test_rw_step_hands_prefill_to_dflash_whose_verify_site_it_never_reaches(fork):
    """Rancy-Wang's DDTree worker hands extend batches to its DFlash base (ddtree_worker_v2.py:716-717);
    DFlash builds its verify input only past its own extend test (dflash_worker_v2.py:1306, built at
    :1613): the same test on the same batch, so that site is not on the DDTree step. The DDTree input
    (ddtree_worker_v2.py:584, W computed each step) is."""
    from ddcheck.tree.worker import verify_inputs

    facts = verify_inputs(fork("rw"), "DDTREE", {"speculative_algorithm": "DDTREE", "speculative_num_draft_tokens": 8,
                                                 "speculative_ddtree_budget": 16})
    sites = {f"{c.path.rsplit('/', 1)[1]}:{c.line}": c for c in facts.sites}
    assert facts.entry == "sglang/srt/speculative/ddtree_worker_v2.py:707"
    dflash = sites["dflash_worker_v2.py:1613"]
    assert dflash.reached is False and "ddtree_worker_v2.py:716" in dflash.reached_why
    assert sites["ddtree_worker_v2.py:584"].reached is True
    assert [c.cls for c in facts.choices] == ["DDTreeVerifyInput"]
