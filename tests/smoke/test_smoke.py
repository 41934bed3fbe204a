"""`ddcheck smoke`: the real Triton verify path of real SGLang releases, on CPU (Triton interpreter).

The runs go through the ``smoke`` fixture (tests/conftest.py): ``run_smoke``'s own report, from one
process per tree for all of that tree's calls (tests/smoke_server.py); the tests of ``run_smoke``
itself, its fresh worker process per call, call it directly. Either way TRITON_INTERPRET=1 precedes
triton's import there, so this test process needs torch and triton only to know they are there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

if os.environ.get("CI"):
    # CI installs the smoke extra: a missing package there is a failure, not a skip.
    import msgspec  # noqa: F401
    import torch  # noqa: F401
    import triton  # noqa: F401
pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("msgspec")  # verify_mask.py (0.5.17+) imports it

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from smoke_fixes import hand_fix  # noqa: E402
from test_workflow import _errors, sarif_validator  # noqa: E402,F401 - the fixture: the OASIS schema

from ddcheck.smoke import run_smoke, smoke_main  # noqa: E402
from ddcheck.smoke.loader import BACKEND_RELPATH  # noqa: E402
from ddcheck.tree.sources import open_target  # noqa: E402

# The proof's releases (tests/smoke_matrix.py; every release: bench/smoke_releases.py). The default run
# takes those in the CI sample (tests/conftest.py CI_RELEASES); the rest are the release matrix, run by
# `python -m pytest -m matrix` (each run 15-25 s on 2 cores).
# (Loaded under its own name: tests/ is on sys.path, and smoke_matrix is a common name.)
_spec = importlib.util.spec_from_file_location("proof_matrix", Path(__file__).resolve().parents[1] / "smoke_matrix.py")
proof_matrix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proof_matrix)
# One worker of the suite runs this file: its calls on a release share that release's smoke process.
pytestmark = pytest.mark.xdist_group("smoke-triton")
BUGGY = proof_matrix.BUGGY
GOOD = proof_matrix.GOOD


def backend_text(version: str) -> str:
    return open_target(f"sglang=={version}").read_text(BACKEND_RELPATH)


def statuses(report) -> dict[str, str]:
    return {f"{p.case}/{p.path}": p.status for p in report.paths}


# --------------------------------------------------------------------------- the proof, on CPU


@pytest.mark.network
@pytest.mark.parametrize("version", BUGGY)
def test_unfixed_buggy_release_is_caught(version, smoke):
    r = smoke(f"sglang=={version}")
    assert r.exit_code == 1, r.verdict
    # no drafter of a release builds W = 17: --budget's probe, the release's own EagleVerifyInput carrying W
    assert r.probe and "probe" in r.probe and r.verify_input_instances == ["EagleVerifyInput"]
    # from 0.5.16 the graph runner captures at C and replays no other width (can_run_graph,
    # decode_cuda_graph_runner.py:524): W = 17 runs eagerly and its graph path is not the launch's
    gated = r.graph_capture["W=17 C=8"]["gate_at"]
    assert bool(gated) == (version == "0.5.16") or version not in ("0.5.5", "0.5.16"), gated
    graph = {} if gated else {"ddtree/graph": "wrong"}
    assert statuses(r) == {"ddtree/eager": "wrong", **graph, "control/eager": "ok", "control/graph": "ok"}
    eager = next(p for p in r.paths if p.case == "ddtree" and p.path == "eager")
    # The bug's fingerprint: rows laid out with C = 8, and rows past bs * C never written.
    assert eager.metadata["qo_indptr"] == [0, 8, 16, 24]
    assert eager.metadata["max_extend_len"] == 8
    assert eager.unwritten_tokens == eager.tokens - 3 * 8
    assert r.harness.stand_ins_called == []


@pytest.mark.network
@pytest.mark.parametrize("version", GOOD)
def test_later_releases_pass_unfixed(version, smoke):
    """Right on every path at W, graphs captured at W included. These releases' graph runner captures at C
    and its can_run_graph refuses a batch whose input carries another width (0.5.23
    decode_cuda_graph_runner.py:359 and :867): by default (issue 47: the launch's step) W = 17 runs eagerly,
    exit 0, and the report names both lines. A graph captured at C (--graph-capture-width C) keeps
    max_extend_len = C = 8 < W: the path breaks the verify contract (right only within one row block),
    so it is the capture width, exit 1, never `ok` (issue 39)."""
    default = smoke(f"sglang=={version}")
    assert default.exit_code == 0, default.verdict
    assert [p.path for p in default.paths if p.case == "ddtree"] == ["eager"]
    gate = default.graph_capture["W=17 C=8"]
    assert gate["runner_width"] == 8 and gate["gate_at"] and gate["width"] is None
    assert any(gate["at"] in x and gate["gate_at"] in x and "runs eagerly" in x for x in default.limitations)
    r = smoke(f"sglang=={version}", graph_capture_width="C")
    assert r.exit_code == 1 and r.verdict.startswith("capture width"), r.verdict
    assert "overridden by --graph-capture-width C" in r.verdict
    assert statuses(r)["ddtree/eager"] == statuses(r)["ddtree-capture-at-W/graph"] == "ok"
    eager = next(p for p in r.paths if p.case == "ddtree" and p.path == "eager")
    assert eager.metadata["qo_indptr"] == [0, 17, 34, 51] and eager.metadata["max_extend_len"] == 17
    assert eager.max_abs_err < 1e-3


@pytest.mark.network
@pytest.mark.parametrize("version", BUGGY)
def test_ddcheck_fix_output_passes(version, smoke):
    """The fixed backend is right at W on every path when graphs are captured at W. Captured at C (what
    SGLang's runner does) the graph keeps max_extend_len = C = 8 < W = 17: the kernel's numbers come out
    right only because W fits the same row block of 64, so the path breaks the verify contract and is
    never `ok`: the capture width, exit 1, as for FA3 (issue 39: smoke agrees with itself)."""
    fixer = pytest.importorskip("ddcheck.fix.api")
    fixed = fixer.fixed_file_text(f"sglang=={version}", BACKEND_RELPATH)
    r = smoke(f"sglang=={version}", backend_source=fixed, graph_capture_width="W")
    assert r.exit_code == 0, r.verdict
    at_c = smoke(f"sglang=={version}", backend_source=fixed, graph_capture_width="C")
    assert at_c.exit_code == 1 and at_c.verdict.startswith("capture width"), at_c.verdict
    assert all(p.status != "ok" for p in at_c.paths if p.violations)
    graph = next(p for p in at_c.paths if p.case == "ddtree" and p.path == "graph")
    assert graph.status == "wrong" and graph.wrong_tokens == 0 and graph.metadata["max_extend_len"] == 8
    assert "by luck" in at_c.verdict and statuses(at_c)["ddtree/eager"] == "ok"


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.10", "0.5.16"])  # old and new CUDA-graph entry points
def test_hand_fixed_copy_passes_through_backend_file(version, tmp_path, smoke):
    path = tmp_path / "triton_backend.py"
    path.write_text(hand_fix(backend_text(version)))
    r = smoke(f"sglang=={version}", backend_file=str(path), graph_capture_width="W")
    assert r.exit_code == 0, r.verdict
    assert r.backend == str(path)


@pytest.mark.network
@pytest.mark.cases
@pytest.mark.parametrize("version,site,still_wrong", [
    ("0.5.10", "eager", "ddtree/graph"),
    ("0.5.10", "replay", "ddtree/eager"),
    ("0.5.16", "capture", "ddtree/eager"),
])
def test_fix_of_a_single_verify_site_is_still_caught(version, site, still_wrong, smoke):
    r = smoke(f"sglang=={version}", backend_source=hand_fix(backend_text(version), (site,)))
    assert r.exit_code == 1, r.verdict
    assert statuses(r)[still_wrong] == "wrong"


@pytest.mark.network
def test_w_below_c_unfixed_writes_past_the_batch_and_fixed_passes(smoke):
    """Budget 4 (W = 5 < C = 8), the width of every spine-mode step, by default: 0.5.10's triton verify
    lays out C rows per request (qo_indptr [0, 8, 16, 24]), so the kernel writes 3 x 8 - 3 x 5 = 9 rows
    past the batch's output; after `ddcheck fix` every path is right and nothing is written past it."""
    r = smoke("sglang==0.5.10", budget=4)
    assert r.exit_code == 1, r.verdict
    assert statuses(r) == {"ddtree/eager": "wrong", "ddtree/graph": "wrong",
                           "control/eager": "ok", "control/graph": "ok"}
    eager = next(p for p in r.paths if p.case == "ddtree" and p.path == "eager")
    assert eager.metadata["qo_indptr"] == [0, 8, 16, 24]
    (past,) = eager.out_of_bounds
    assert past["rows"] == 9 and past["batch_rows"] == 15 and "triton_backend.py" in past["where"]
    assert "past the 15 of" in r.verdict and "3 x 5 = 15 tokens" in r.verdict
    assert all(not p.out_of_bounds for p in r.paths if p.case == "control")
    fixer = pytest.importorskip("ddcheck.fix.api")
    fixed = smoke("sglang==0.5.10", budget=4, backend_source=fixer.fixed_file_text("sglang==0.5.10",
                                                                                   BACKEND_RELPATH))
    assert fixed.exit_code == 0, fixed.verdict
    assert all(p.status == "ok" and not p.out_of_bounds for p in fixed.paths)


@pytest.mark.network
def test_seed_budget_7_is_the_control_and_passes_unfixed(smoke):
    r = smoke("sglang==0.5.10", budget=7)  # W = 7 + 1 = C = 8
    assert r.exit_code == 0, r.verdict
    assert {p.case for p in r.paths} == {"control"}


@pytest.mark.network
def test_seed_case_runs_when_c_is_not_8(smoke):
    """The seed case runs at any C: at C = 4 the backend is right at W = 17 where its graph is captured
    at W (a graph captured at C = 4 is the capture width, exit 1, tested below)."""
    r = smoke("sglang==0.5.18", budget=16, num_draft_tokens=4, graph_capture_width="W")
    assert r.exit_code == 0, r.verdict
    assert statuses(r)["seed/eager"] == statuses(r)["seed/graph"] == "ok"


@pytest.mark.network
def test_graph_capture_at_c_cannot_cover_w_past_the_row_block(smoke):
    # CPU row block is 64: W = 72 needs two row blocks, a graph captured at C = 8 launches one.
    r = smoke("sglang==0.5.18", budget=71, graph_capture_width="C")
    assert r.exit_code == 1
    s = statuses(r)
    assert s["ddtree/eager"] == "ok" and s["ddtree/graph"] == "wrong" and s["ddtree-capture-at-W/graph"] == "ok"
    graph = next(p for p in r.paths if p.case == "ddtree" and p.path == "graph")
    assert graph.wrong_tokens == 0 and graph.unwritten_tokens == 3 * (72 - 64)
    assert r.verdict.startswith("capture width") and "not a bug of the backend" in r.verdict
    assert "capture the target-verify graphs at the verify width W = budget + 1 = 72" in r.verdict
    assert any("capture at W" in note for note in r.limitations)
    assert r.config_facts["cuda_graph_capture_at_C_covers_W"] is False
    assert smoke("sglang==0.5.18", budget=71, graph_capture_width="W").exit_code == 0


@pytest.mark.network
def test_fixed_backend_judged_by_the_contract_captured_at_c_is_the_capture_width_at_w_below_c(smoke):
    """FA3 (0.5.10) after the default `ddcheck fix`, at budget 4 (W = 5 < C = 8): eager is right; a graph
    captured at C keeps cu_seqlens_q stepping by C (the capture's layout, never refilled at replay), and the
    same graph captured at W is right. The verdict names the capture width, not the backend."""
    from ddcheck.contract import backends

    fixer = pytest.importorskip("ddcheck.fix.api")
    fixed = fixer.fixed_file_text("sglang==0.5.10", backends.get("fa3").relpath)
    r = smoke("sglang==0.5.10", backend="fa3", backend_source=fixed, budget=4, seed_case=False)
    assert r.exit_code == 1, r.verdict
    s = statuses(r)
    assert s["ddtree/eager"] == "ok" and s["ddtree/graph"] == "wrong" and s["ddtree-capture-at-W/graph"] == "ok"
    assert r.verdict.startswith("capture width") and "not a bug of the backend" in r.verdict
    assert "cu_seqlens_q" in r.verdict and "W = budget + 1 = 5" in r.verdict and "bug:" not in r.verdict
    assert r.config_facts["capture_width_is_the_cause"] is True
    w = smoke("sglang==0.5.10", backend="fa3", backend_source=fixed, budget=4, seed_case=False,
                  graph_capture_width="W")
    assert w.exit_code == 0, w.verdict


# --------------------------------------------------------------------------- honest failures


def test_a_bad_target_is_a_usage_error(tmp_path):
    assert run_smoke(str(tmp_path / "missing")).exit_code == 2
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "x.py").write_text("x = 1\n")
    r = run_smoke(str(tmp_path / "pkg"))
    assert r.exit_code == 2 and "no sglang package" in r.verdict


def test_w_below_c_is_not_refused():
    # W = 4 < C = 8 runs like any width: only the missing target fails it
    r = run_smoke("does-not-matter", budget=3)
    assert r.exit_code == 2 and "refusing" not in r.verdict and "does-not-matter" in r.verdict, r.verdict


def test_batch_spare_rows_count_writes_past_the_batch_and_are_put_back():
    import torch

    from ddcheck.smoke.batch import Shape, make_batch

    plain = make_batch(5, [11, 37, 70], Shape(), "cpu", 0)
    b = make_batch(5, [11, 37, 70], Shape(), "cpu", 0, pad_rows=9, pad_mask=40)
    assert torch.equal(plain.q, b.q) and torch.equal(plain.custom_mask, b.custom_mask)  # padding draws nothing
    assert b.q.shape[0] == b.out_cache_loc.numel() == 15 and b.pads["q"][0].shape[0] == 24
    assert b.pad_writes() == {}
    store, n = b.pads["q"]
    store[n:n + 4] = 1.0  # as a kernel laid out with C would write rows 15..18
    b.pads["custom_mask"][0][b.custom_mask.numel() + 3] = True
    assert b.pad_writes() == {"q": 4, "custom_mask": 1}
    assert b.pad_writes() == {}  # put back


def _report(width, paths):
    from ddcheck.smoke.report import PathResult, SmokeReport

    r = SmokeReport(target="t", backend="b", attention_backend="fa3", device="cpu", dtype="float32",
                    budget=width - 1, width=width, num_draft_tokens=8, prefix_lens=[11, 37, 70])
    r.paths = [PathResult(case=case, path=path, width=w, num_draft_tokens=8, status=status, tokens=3 * w,
                          violations=viol, out_of_bounds=oob) for case, path, w, status, viol, oob in paths]
    return r


def test_verdict_names_the_capture_width_only_when_the_graph_captured_at_w_is_right():
    from ddcheck.smoke.api import _verdict

    kept = [{"field": "forward_metadata.cu_seqlens_q", "term": "query_offsets", "expected": [0, 5], "got": [0, 8]}]
    ok = ("control", "eager", 8, "ok", [], []), ("control", "graph", 8, "ok", [], [])
    for diag, words in (("ok", "capture width:"), ("wrong", "bug:")):
        r = _report(5, [("ddtree", "eager", 5, "ok", [], []), ("ddtree", "graph", 5, "wrong", kept, []),
                        ("ddtree-capture-at-W", "graph", 5, diag, [], []), *ok])
        _verdict(r)
        assert r.exit_code == 1 and r.verdict.startswith(words), r.verdict
        assert ("not a bug of the backend" in r.verdict) == (diag == "ok")
        assert ("W = budget + 1 = 5" in r.verdict) == (diag == "ok")
    # the backend wrong eagerly: a bug, whatever the graph path captured at W does
    r = _report(5, [("ddtree", "eager", 5, "wrong", kept, []), ("ddtree", "graph", 5, "wrong", kept, []),
                    ("ddtree-capture-at-W", "graph", 5, "ok", [], []), *ok])
    _verdict(r)
    assert r.verdict.startswith("bug:"), r.verdict


def test_verdict_on_a_write_past_the_batch():
    from ddcheck.smoke.api import _verdict

    past = [{"buffer": "the tensor allocated at x.py:1 in f", "rows": 9, "batch_rows": 15, "where": "x.py:1 in f"}]
    ok = ("control", "eager", 8, "ok", [], []), ("control", "graph", 8, "ok", [], [])
    r = _report(5, [("ddtree", "eager", 5, "wrong", [], past), ("ddtree", "graph", 5, "ok", [], []), *ok])
    _verdict(r)
    assert r.exit_code == 1 and r.verdict.startswith("bug:"), r.verdict
    assert "wrote 9 row(s) past the 15 of the tensor allocated at x.py:1" in r.verdict
    assert "past the verify batch of 3 x 5 = 15 tokens" in r.verdict
    # the same write at the W == C control: no verdict on W != C
    r = _report(5, [("ddtree", "eager", 5, "ok", [], []), ("control", "eager", 8, "wrong", [], past)])
    _verdict(r)
    assert r.exit_code == 3 and r.verdict.startswith("control wrong"), r.verdict


def test_a_harness_failure_after_a_stopped_start_up_names_the_call():
    # 0.5.23 triton on an H200 with a huggingface_hub its transformers refuses: the tree's server-args
    # setter stopped, the runtime context was never published, and the path then failed reading it.
    from ddcheck.smoke.api import _verdict

    crash = ("RuntimeError: parallel name 'attn_dcp_rank' has not been written in this process "
             "(at sglang/srt/runtime_context.py:392 in _read)")
    r = _report(17, [("ddtree", "eager", 17, "crash", [], []), ("control", "eager", 8, "ok", [], [])])
    r.paths[0].error = crash
    r.harness.stopped = {
        "sglang.srt.server_args.set_global_server_args_for_scheduler":
            "TypeError: expected string or bytes-like object, got 'StandInMeta'",
        "sglang.srt.configs.afmoe": "ImportError: huggingface-hub>=1.5.0,<2.0 is required\nTry: pip install"}
    _verdict(r)
    assert r.exit_code == 3 and r.verdict.startswith(f"harness failure in ddtree/eager: {crash}; the tree's start-up")
    assert "set_global_server_args_for_scheduler: TypeError" in r.verdict and "afmoe" not in r.verdict
    assert "dependencies" in r.not_judged[0]["to_judge"]
    r.harness.stopped.pop("sglang.srt.server_args.set_global_server_args_for_scheduler")
    r.exit_code, r.verdict, r.not_judged = 3, "", []
    _verdict(r)  # nothing of the start-up stopped: the failure alone
    assert r.verdict == f"harness failure in ddtree/eager: {crash}"


def test_padded_allocations_report_the_rows_written_past_them():
    import torch

    from ddcheck.smoke.batch import Shape, make_batch
    from ddcheck.smoke.harness import poisoned_allocations, written_past

    b = make_batch(5, [11, 37, 70], Shape(), "cpu", 0, pad_rows=9)
    made: list = []
    with poisoned_allocations(9, made):
        o = torch.empty_like(b.q)
        right = torch.empty_like(b.q)
    assert o.shape == b.q.shape and torch.isnan(o).all()
    o.fill_(0.0)
    right.fill_(0.0)
    assert written_past(b, made) == []
    full = made[0][0]
    full[15:24] = 0.0  # 9 rows past 3 x 5: a layout of 8 rows per request
    (past,) = written_past(b, made)
    assert past["rows"] == 9 and past["batch_rows"] == 15 and "allocated at" in past["buffer"]


@pytest.mark.network
def test_crash_in_the_backend_is_3_never_1(smoke):
    text = backend_text("0.5.10").replace(
        '        """Init auxiliary variables for triton attention backend."""\n',
        '        """Init auxiliary variables for triton attention backend."""\n        raise RuntimeError("boom")\n', 1)
    r = smoke("sglang==0.5.10", backend_source=text)
    assert r.exit_code == 3  # could not judge
    assert "boom" in r.verdict and "triton_backend.py" in r.verdict and r.not_judged[0]["why"] == r.verdict
    assert smoke("sglang==0.5.10", backend_source="def broken(:\n").exit_code == 3


@pytest.mark.network
def test_what_the_tree_lacks_is_a_limitation_of_the_verdict_not_a_harness_failure(smoke):
    # A backend that calls a module the tree does not have: the call is recorded with its line, the run
    # goes on, and the verdict (0.5.10's triton bug) says the call is not covered.
    text = backend_text("0.5.10").replace(
        "        super().__init__()\n",
        "        super().__init__()\n        from sglang.srt.brand_new import needed_now\n        needed_now(self)\n", 1)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "needed_now(self)" in s)
    r = smoke("sglang==0.5.10", backend_source=text, seed_case=False)
    assert r.exit_code == 1 and r.loader == "tree", r.verdict
    call = f"sglang.srt.brand_new.needed_now at sglang/srt/layers/attention/triton_backend.py:{line}"
    assert r.harness.stand_ins_called == [call]
    assert any(call in note and "does not cover" in note for note in r.limitations)


@pytest.mark.network
def test_wrong_control_is_3_not_1(smoke):
    # Break attention for every width: the control fails, so no verdict on W != C is possible.
    text = backend_text("0.5.10").replace("            layer.scaling,\n", "            layer.scaling * 0.5,\n")
    r = smoke("sglang==0.5.10", backend_source=text)
    assert r.exit_code == 3 and r.verdict.startswith("control wrong")


# --------------------------------------------------------------------------- output


@pytest.mark.network
def test_json_output_has_per_path_metadata(capsys, monkeypatch, smoke):
    import ddcheck.smoke.api

    monkeypatch.setattr(ddcheck.smoke.api, "run_smoke", smoke)  # the run test_unfixed_buggy_release_is_caught made
    code = smoke_main("sglang==0.5.10", fmt="json")
    data = json.loads(capsys.readouterr().out)
    assert code == data["exit_code"] == 1
    eager = next(p for p in data["paths"] if p["case"] == "ddtree" and p["path"] == "eager")
    assert set(eager["metadata"]) >= {"qo_indptr", "mask_indptr", "max_extend_len"}
    assert eager["metadata"]["mask_indptr"][1] == 8 * (11 + 8)  # C * (prefix + C): the bug's layout
    assert {"wrong_tokens", "unwritten_tokens", "max_abs_err"} <= set(eager)
    assert "sglang/srt/layers/attention/triton_backend.py" in data["harness"]["files"]


def test_text_output_says_exit_and_verdict(capsys):
    # a target that cannot be obtained is a usage error: one line on stderr, no report (issue 39)
    assert smoke_main("does-not-matter", budget=3) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("ddcheck: does-not-matter") and "no such file" in out.err


@pytest.mark.network
def test_installed_target_with_only_the_verify_path_files(tmp_path, monkeypatch):
    # What a GPU machine gets: no sglang install, only verify_path_files() of a release on the path.
    from ddcheck.smoke.loader import verify_path_files

    for f in verify_path_files(open_target("sglang==0.5.10")):
        out = tmp_path / f.relpath
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(f.read_bytes())
    (tmp_path / "sglang" / "__init__.py").write_text("raise ImportError('sglang must not be imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    r = run_smoke("installed")
    assert r.exit_code == 1, r.verdict


# --------------------------------------------------------------------------- the suite's shared worker


def _same_report(a, b) -> bool:
    """Equal but for the seconds each run took (the tree's copy is removed with its run either way)."""
    def strip(r):
        d = r.model_dump(mode="json")
        d.pop("seconds")
        for p in d["paths"]:
            p.pop("seconds", None)
        return d

    return strip(a) == strip(b)


@pytest.mark.network
def test_the_shared_worker_gives_run_smokes_own_report(smoke):
    """The smoke fixture's server (tests/smoke_server.py) answers with the report run_smoke's fresh worker
    gives, after the server has run other calls on the same tree (the 0.5.10 tests above)."""
    smoke.served("sglang==0.5.10", budget=4, seed_case=False)
    served = smoke.served("sglang==0.5.10", budget=7)
    assert served.exit_code == 0 and served.paths, served.verdict
    assert _same_report(served, run_smoke("sglang==0.5.10", budget=7))


@pytest.mark.network
def test_a_run_that_ends_its_process_is_judged_by_run_smoke(smoke):
    """A segfault (here: reading address 0 once the backend module has loaded) ends the tree's process in
    the server (the suite's own, this file's worker's); the call runs again in run_smoke's own worker,
    which it ends too: exit 3 (not judged), as without the server. The next call on that tree gets a new
    process."""
    server = smoke.served.__self__
    before = len(server.fallbacks)
    crash = backend_text("0.5.10") + "\nimport ctypes\nctypes.string_at(0)\n"
    r = server.run("sglang==0.5.10", backend_source=crash, seed_case=False)
    assert len(server.fallbacks) == before + 1 and r.exit_code == 3, r.verdict
    assert "smoke child process ended (exit status" in r.verdict, r.verdict
    assert server.run("sglang==0.5.10", budget=7).exit_code == 0 and len(server.fallbacks) == before + 1


@pytest.mark.network
def test_a_device_fault_ends_its_process_and_the_paths_after_it_run_in_a_new_one():
    # A CUDA kernel's fault (device-side assert) leaves the process's context unusable: the faulted path
    # is judged as it failed, where it was launched, and each path after it runs in a fresh worker. The
    # fault is raised by the backend at W != C only, as a kernel indexed with C would on a GPU.
    fault = ('        if forward_batch.forward_mode.is_target_verify() and forward_batch.spec_info.draft_token_num '
             '!= self.num_draft_tokens:\n            raise RuntimeError("CUDA error: device-side assert triggered\\n'
             'CUDA kernel errors might be asynchronously reported at some other API call")\n')
    text = backend_text("0.5.10")
    head = "    def init_forward_metadata(self, forward_batch: ForwardBatch):\n"
    at = text.index(head) + len(head)
    at = text.index('"""', text.index('"""', at) + 3) + 4  # after its docstring
    r = run_smoke("sglang==0.5.10", backend_source=text[:at] + fault + text[at:], seed_case=False)
    assert r.device_faults == ["ddtree/eager"], r.verdict
    # the graph path (capture and replay, no init_forward_metadata) ran in the next process: 0.5.10's bug
    assert statuses(r) == {"ddtree/eager": "crash", "ddtree/graph": "wrong", "control/eager": "ok",
                           "control/graph": "ok"}
    eager = r.paths[0]
    assert eager.error.startswith("RuntimeError: CUDA error: device-side assert triggered (at ")
    assert "asynchronously" not in eager.error and "triton_backend.py" in eager.error
    assert r.exit_code == 3 and r.verdict.startswith("harness failure in ddtree/eager")
    assert any("faulted on the device" in note for note in r.limitations) and not r.restart


# --------------------------------------------------------------------------- smoke's rules (one road)


def _example_kwargs(rule, which: str) -> tuple[str, dict]:
    """A smoke rule's example (bad.smoke / good.smoke) as the smoke fixture's call: the target, then
    ``--option value`` pairs as run_smoke's keywords."""
    from ddcheck.rules import smoke_example

    words = smoke_example(rule.bad_example if which == "bad" else rule.good_example)
    target, rest = words[0], words[1:]
    kwargs = {rest[i].removeprefix("--").replace("-", "_"): rest[i + 1] for i in range(0, len(rest), 2)}
    return target, {k: int(v) if v.isdigit() else v for k, v in kwargs.items()}


@pytest.mark.network
def test_every_smoke_rules_bad_example_fires_it_and_its_good_one_does_not(smoke):
    """Each smoke rule's examples are smoke runs (rules/DD3xx/bad.smoke, good.smoke; Fixit's examples
    are the tests): the bad run's report gives the rule's findings, at the backend's file, with the
    rule's severity; the good run's none. The runs are the ones the tests above ask, so they are shared."""
    from ddcheck.rules import all_rules, smoke_rules
    from ddcheck.smoke.api import smoke_findings

    rules = [r for r in all_rules().values() if r.face == "smoke"]
    assert rules and [c.id for c in smoke_rules()] == sorted(r.id for r in rules)
    for rule in rules:
        target, kwargs = _example_kwargs(rule, "bad")
        bad = smoke(target, **kwargs)
        found = [f for f in smoke_findings(bad) if f.rule == rule.id]
        assert bad.exit_code == 1 and found, (rule.id, bad.verdict)
        assert {f.severity for f in found} == {rule.severity} and {f.path for f in found} == {bad.backend}
        target, kwargs = _example_kwargs(rule, "good")
        good = smoke(target, **kwargs)
        assert good.exit_code == 0 and not [f for f in smoke_findings(good) if f.rule == rule.id], good.verdict


@pytest.mark.network
def test_smoke_sarif_and_github_say_the_runs_findings(smoke, monkeypatch, capsys, sarif_validator):
    """`ddcheck smoke --format sarif|github`: the one road's formats (ddcheck.diagnostics.formats) over the
    smoke rules' findings; the SARIF validates against the schema, its location is the backend's file
    as a whole; the exit code is the run's. 0.5.10's Triton at W = 17: its eager path's qo_indptr breaks
    the contract and its numbers are wrong (test_unfixed_buggy_release_is_caught)."""
    monkeypatch.setattr("ddcheck.smoke.api.run_smoke", lambda target, backend_file=None, **kw: smoke(target, **kw))
    assert smoke_main("sglang==0.5.10", fmt="sarif") == 1
    doc = json.loads(capsys.readouterr().out)
    assert _errors(sarif_validator, doc) == []
    results = doc["runs"][0]["results"]
    assert results and {r["ruleId"] for r in results} == {"DD300"} and {r["level"] for r in results} == {"error"}
    where = results[0]["locations"][0]["physicalLocation"]
    assert "region" not in where and where["artifactLocation"]["uri"].endswith("triton_backend.py")
    assert any("qo_indptr" in r["message"]["text"] and "eager" in r["message"]["text"] for r in results)
    assert smoke_main("sglang==0.5.10", fmt="github") == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("::error file=") and "title=DD300::" in line for line in lines)
    assert smoke_main("sglang==0.5.23", fmt="sarif") == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["results"] == []
