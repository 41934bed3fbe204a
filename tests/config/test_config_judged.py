"""``ddcheck config``'s 0 is earned (issue 38): the verdict is the tree's own code's, for the launch's
flags and environment, or it is *could not judge* (exit 3) with why and what to install or pass.

* DeepSeek-V3 with an EAGLE draft on 0.5.23 for a B200 (no backend flag): the tree picks
  ``trtllm_mla`` (``arg_groups/model_overrides/deepseek_v2.py:51`` of 0.5.23), whose modules never read
  the tree mask (topk 4): exit 1. Without torch the tree's start-up code cannot run (its model config
  reader needs torch, ``configs/model_config.py:2261``): exit 3, naming torch, never a stand-in's error.
* The same launch naming the models by hub id, read from an on-disk Hugging Face cache offline: the
  same verdict; not in the cache and offline: exit 3 naming ``--model-config``.
* ``fixtures/trees/flag_fork``: a fork whose tree flag sets the worker's verify width
  (``budget_worker.py``: ``draft_token_num=self.budget``, the budget from ``--speculative-tree-budget``),
  and one whose worker caps the width on some steps from an environment variable
  (``capped_worker.py``: ``min(verify_token_num, self.verify_cap)`` under a per-step test, the cap from
  ``os.environ.get("FLAGFORK_VERIFY_CAP", C)``); its triton backend lays out verify with C
  (``triton_backend.py:13-14``); its ``server_args.py`` prints at import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddcheck.rules import get_rule
from ddcheck.base.errors import EXIT_NOT_JUDGED
from ddcheck.config import check_launch
from ddcheck.tree.sources import open_target
from ddcheck.tree.worker import verify_inputs

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "fixtures" / "launch" / "models"
FORK = REPO / "fixtures" / "trees" / "flag_fork" / "sglang"
network = pytest.mark.network


def _folder(root: Path, name: str, source: str) -> str:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((MODELS / source / "config.json").read_text())
    return str(folder)


def _dsv3(model: str, draft: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", model, "--speculative-algorithm", "EAGLE",
            "--speculative-draft-model-path", draft, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
            "--speculative-num-draft-tokens", "8"]


def _hub_cache(root: Path, repo: str, source: str, rev: str = "0123456789abcdef0123456789abcdef01234567") -> Path:
    """``models--org--name/snapshots/<rev>/config.json`` and ``refs/main``, as huggingface_hub lays it out."""
    base = root / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((MODELS / source / "config.json").read_text())
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(rev)
    return root


# ------------------------------------------------------------------------------------------ case 1


@network
def test_dsv3_eagle_on_b200_with_torch_is_judged_by_the_tree(tmp_path):
    pytest.importorskip("torch")
    r = check_launch(_dsv3(_folder(tmp_path, "dsv3", "deepseek_v3"), _folder(tmp_path, "eagle", "llama_eagle")),
                     sglang="sglang==0.5.23", gpu="B200")
    assert r.not_judged == [] and r.settings.resolved_by == "tree"
    assert r.settings.verify_backend == "trtllm_mla" and r.settings.verify_width == 8
    assert {(get_rule(f.rule).name, f.backend) for f in r.errors} == {("tree-mask", "trtllm_mla")} and r.exit_code == 1


@network
def test_dsv3_eagle_without_torch_could_not_be_judged_and_names_torch(tmp_path, wheel):
    wheel("0.5.23")  # downloaded here, so the subprocess only reads it
    argv = _dsv3(_folder(tmp_path, "dsv3", "deepseek_v3"), _folder(tmp_path, "eagle", "llama_eagle"))
    out = subprocess.run([sys.executable, str(REPO / "tests" / "no_torch.py"), "config", "--sglang", "sglang==0.5.23",
                          "--gpu", "B200", "--format", "json", "--", *argv], capture_output=True, text=True)
    assert out.returncode == EXIT_NOT_JUDGED, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["not_judged"] and all("install torch" in x and "ddcheck[smoke]" in x for x in report["not_judged"])
    assert not any("StandInModule" in x or "TypeError" in x for x in report["not_judged"])
    assert report["settings"]["resolved_by"] == "flags" and report["settings"]["verify_width"] is None
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    text = subprocess.run([sys.executable, str(REPO / "tests" / "no_torch.py"), "config", "--sglang",
                           "sglang==0.5.23", "--gpu", "B200", "--", *argv], capture_output=True, text=True)
    assert text.returncode == EXIT_NOT_JUDGED and "could not judge" in text.stdout and "Traceback" not in text.stderr


# ------------------------------------------------------------------------------------------ hub ids


@network
def test_hub_ids_from_the_cache_get_the_folders_verdict(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    cache = tmp_path / "hub"
    _hub_cache(cache, "deepseek-ai/DeepSeek-V3", "deepseek_v3")
    _hub_cache(cache, "org/dsv3-eagle", "llama_eagle")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = check_launch(_dsv3("deepseek-ai/DeepSeek-V3", "org/dsv3-eagle"), sglang="sglang==0.5.23", gpu="B200")
    assert r.not_judged == [] and r.settings.verify_backend == "trtllm_mla"
    assert {(get_rule(f.rule).name, f.backend) for f in r.errors} == {("tree-mask", "trtllm_mla")} and r.exit_code == 1
    assert any("Hugging Face cache" in x and "snapshots" in x for x in r.tree_limitations)


@network
def test_a_hub_id_not_in_the_cache_offline_could_not_be_judged(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = check_launch(_dsv3("deepseek-ai/DeepSeek-V3", _folder(tmp_path, "eagle", "llama_eagle")),
                     sglang="sglang==0.5.23", gpu="B200")
    assert r.exit_code == EXIT_NOT_JUDGED and r.not_judged
    assert any("--model-config" in x for x in r.not_judged)
    assert any("HF_HUB_OFFLINE" in x and "deepseek-ai/DeepSeek-V3" in x for x in r.not_judged)


def test_a_hub_config_is_read_as_data(tmp_path, monkeypatch):
    """``auto_map`` names remote code; it is never imported or run: the config is JSON."""
    from ddcheck.config.hub import hub_config

    cache = _hub_cache(tmp_path / "hub", "org/remote-code", "llama")
    snap = next((cache / "models--org--remote-code" / "snapshots").iterdir())
    (snap / "config.json").write_text(json.dumps({"architectures": ["X"], "auto_map": {"AutoConfig": "evil.Config"}}))
    (snap / "evil.py").write_text("raise SystemExit('remote code ran')\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = hub_config("org/remote-code")
    assert found.data["auto_map"] == {"AutoConfig": "evil.Config"} and found.path.endswith("config.json")
    assert "evil" not in sys.modules
    assert hub_config("m") is None and hub_config(str(tmp_path)) is None  # not hub ids


# ------------------------------------------------------------------------------------------ W from the fork's worker


def _fork_launch(algorithm: str, *extra: str) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", algorithm,
            "--attention-backend", "triton", "--disable-cuda-graph", *extra]


@pytest.fixture(scope="module")
def fork():
    return open_target(str(FORK))


def test_a_fork_flag_sets_the_workers_verify_width(fork):
    r = check_launch(_fork_launch("BUDGETTREE", "--speculative-tree-budget", "32"), tree=fork)
    s = r.settings
    assert (s.verify_width, s.num_draft_tokens, s.verify_input) == (32, 16, "TreeVerifyInput")
    assert s.verify_input_at == "sglang/srt/speculative/budget_worker.py:12" and s.verify_width_expr == "self.budget"
    f = next(f for f in r.errors if f.rule == "DD200")
    assert f.consequence == "CORRUPT" and "W=32" in f.message and f.backend == "triton"
    assert {e.line for e in f.evidence} == {13, 14} and r.exit_code == 1
    ok = check_launch(_fork_launch("BUDGETTREE", "--speculative-tree-budget", "16"), tree=fork)
    assert ok.settings.verify_width == 16 and ok.errors == [] and ok.exit_code == 0


def test_a_worker_cap_from_the_environment_gives_a_range(fork, monkeypatch):
    words = check_launch(["FLAGFORK_VERIFY_CAP=4", *_fork_launch("CAPPEDTREE")], tree=fork)
    s = words.settings
    assert (s.verify_width_min, s.verify_width, s.num_draft_tokens) == (4, 16, 16)
    assert s.verify_width_per_step == "verify_token_num" and s.env == {"FLAGFORK_VERIFY_CAP": "4"}
    f = next(f for f in words.errors if f.rule == "DD200")
    assert "from 4 to 16" in f.message and words.exit_code == 1
    assert check_launch(["env", "FLAGFORK_VERIFY_CAP=4", *_fork_launch("CAPPEDTREE")], tree=fork).exit_code == 1
    uncapped = check_launch(_fork_launch("CAPPEDTREE"), tree=fork)  # the cap defaults to C: every step is C
    assert (uncapped.settings.verify_width_min, uncapped.settings.verify_width) == (16, 16)
    assert uncapped.exit_code == 0 and uncapped.settings.env == {}
    monkeypatch.setenv("FLAGFORK_VERIFY_CAP", "8")  # exported by the deployment script
    exported = check_launch(_fork_launch("CAPPEDTREE"), tree=fork)
    assert exported.settings.verify_width_min == 8 and exported.settings.env == {"FLAGFORK_VERIFY_CAP": "8"}
    assert exported.exit_code == 1


def test_an_end_the_tree_does_not_decide_is_left_unknown(fork):
    """Without the environment the cap's end cannot be evaluated: None, never a guess."""
    (c,) = verify_inputs(fork, "CAPPEDTREE", {"speculative_num_draft_tokens": 16}).choices
    assert (c.width, c.width_min, c.width_max) == (None, None, 16)
    (c,) = verify_inputs(fork, "CAPPEDTREE", {"speculative_num_draft_tokens": 16}, environ={}).choices
    assert (c.width, c.width_min, c.width_max) == (16, 16, 16)


# ------------------------------------------------------------------------------------------ the tree's output


def test_the_trees_prints_are_its_own_field_and_json_parses():
    out = subprocess.run([sys.executable, "-m", "ddcheck", "config", "--sglang", str(FORK), "--format", "json", "--",
                          *_fork_launch("BUDGETTREE", "--speculative-tree-budget", "32")],
                         capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["tree_stdout"] == "flag-fork: loading server args\n"
    assert report["tree_stderr"] == "flag-fork: banner on stderr\n"
    assert "flag-fork" not in out.stderr


# ------------------------------------------------------------------------------------------ the launch's step
# fixtures/trees/flag_fork: sited_worker.py builds its input at two sites, the flag --speculative-tree-eager
# picks one (:18); step_worker.py caps W by FLAGFORK_STEP_CAP through a try and min/max in its own methods;
# opaque_worker.py reads W from a file at start-up.


def _sites(report):
    return {site.at.rsplit("/", 1)[1]: site for site in report.settings.verify_sites}


def test_only_the_site_the_launch_reaches_is_judged(fork):
    tree_path = check_launch(_fork_launch("SITEDTREE", "--speculative-tree-budget", "16"), tree=fork)
    sites = _sites(tree_path)
    assert sites["sited_worker.py:15"].reached is False and "self.eager" in sites["sited_worker.py:15"].why
    assert sites["sited_worker.py:28"].reached is True and sites["sited_worker.py:28"].width == 17
    assert sites["sited_worker.py:28"].width_from == "self.num_nodes set at sglang/srt/speculative/sited_worker.py:25"
    assert tree_path.settings.verify_width == 17 and tree_path.exit_code == 1
    assert any(f.rule == "DD200" and "W=17" in f.message for f in tree_path.errors)
    eager = check_launch(_fork_launch("SITEDTREE", "--speculative-tree-budget", "16", "--speculative-tree-eager"),
                         tree=fork)
    sites = _sites(eager)
    assert sites["sited_worker.py:15"].reached is True and sites["sited_worker.py:28"].reached is False
    assert eager.settings.verify_width == 16 and eager.errors == [] and eager.exit_code == 0


def test_a_step_cap_from_the_environment_through_the_workers_methods():
    fork = open_target(str(FORK))
    capped = check_launch(["FLAGFORK_STEP_CAP=4", *_fork_launch("STEPTREE")], tree=fork)
    assert (capped.settings.verify_width, capped.settings.num_draft_tokens) == (4, 16) and capped.exit_code == 1
    unset = check_launch(_fork_launch("STEPTREE"), tree=fork)  # int("") raises: the handler returns C
    assert unset.settings.verify_width == 16 and unset.exit_code == 0 and not unset.not_judged
    wide = check_launch(["FLAGFORK_STEP_CAP=64", *_fork_launch("STEPTREE")], tree=fork)  # clamped to C
    assert wide.settings.verify_width == 16 and wide.exit_code == 0


def test_a_width_no_reading_can_give_is_not_judged_at_its_site(fork):
    r = check_launch(_fork_launch("OPAQUETREE"), tree=fork)
    assert r.exit_code == 3 and r.settings.verify_width is None
    assert any("sglang/srt/speculative/opaque_worker.py:16" in n and "self.tree_nodes" in n for n in r.not_judged)
