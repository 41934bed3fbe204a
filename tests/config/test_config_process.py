"""``ddcheck config`` runs the tree's start-up code in its own process, and keeps its judged results
(issue 41): a repeat is answered from the cache without starting the worker; a change to the argv, the
environment, a model config the run read, or the tree's content misses; a could-not-judge is never kept.

``fixtures/trees/flag_fork`` (tests/config/test_config_judged.py): its ``server_args.py`` prints at import,
and its BUDGETTREE launch with ``--speculative-tree-budget 16`` is judged (exit 0)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from ddcheck.base.errors import UsageError
from ddcheck.config import check_launch, kept, child
from ddcheck.tree.sources import open_target

REPO = Path(__file__).resolve().parents[2]
FORK = REPO / "fixtures" / "trees" / "flag_fork" / "sglang"
MODELS = REPO / "fixtures" / "launch" / "models"


def _launch(*extra: str, model: str = "m") -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", model, "--speculative-algorithm", "BUDGETTREE",
            "--attention-backend", "triton", "--disable-cuda-graph", "--speculative-tree-budget", "16", *extra]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A result cache of this test's own, and the worker runs counted."""
    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    runs = []
    real = child.judge_in_child

    def counted(tree, req):
        runs.append(req["argv"])
        return real(tree, req)

    monkeypatch.setattr(child, "judge_in_child", counted)
    return runs


@pytest.fixture
def fork_copy(tmp_path):
    """flag_fork copied, its server_args.py made to write the pid of the process that imports it."""
    root = tmp_path / "fork"
    shutil.copytree(FORK.parent, root)
    args = root / "sglang" / "srt" / "server_args.py"
    probe = tmp_path / "imported-by"
    args.write_text(f"import os as _os\nopen({str(probe)!r}, 'a').write(f'{{_os.getpid()}}\\n')\n" + args.read_text())
    return root / "sglang", probe


def test_the_trees_start_up_code_does_not_run_in_this_process(fork_copy, cache):
    tree, probe = fork_copy
    modules, environ, meta_path = set(sys.modules), dict(os.environ), list(sys.meta_path)
    root = logging.getLogger()
    handlers, level, profile = list(root.handlers), root.level, sys.getprofile()
    r = check_launch(_launch(), tree=open_target(str(tree)), cache=False)
    assert r.exit_code == 0 and r.settings.resolved_by == "tree", (r.not_judged, r.findings)
    assert r.tree_stdout  # the tree's print at import came back as its output
    pids = {int(x) for x in probe.read_text().split()}
    assert pids and os.getpid() not in pids  # imported, but in the worker
    assert not [m for m in set(sys.modules) - modules if m == "sglang" or m.startswith("sglang.")]
    assert "torch" not in set(sys.modules) - modules
    assert dict(os.environ) == environ and list(sys.meta_path) == meta_path
    assert (list(root.handlers), root.level, sys.getprofile()) == (handlers, level, profile)


def test_a_tree_opened_again_is_imported_once_and_a_changed_one_again(fork_copy):
    """The child names a tree by its content: the same folder opened again by the caller is the session it
    keeps (the tree's start-up modules imported once), a folder whose files changed is another tree."""
    tree, probe = fork_copy
    for _ in range(2):
        r = check_launch(_launch(), tree=open_target(str(tree)), cache=False)
        assert r.exit_code == 0, (r.not_judged, r.findings)
    assert len(probe.read_text().split()) == 1
    with open(tree / "srt" / "server_args.py", "a") as fh:
        fh.write("\n# changed\n")
    assert check_launch(_launch(), tree=open_target(str(tree)), cache=False).exit_code == 0
    assert len(probe.read_text().split()) == 2


def test_a_repeat_is_answered_from_the_cache_and_a_change_misses(tmp_path, fork_copy, cache, monkeypatch):
    tree_dir, _ = fork_copy
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((MODELS / "llama" / "config.json").read_text())
    argv = _launch()

    def check(a=argv):  # the model's config given as --model-config: read in the worker
        return check_launch(a, tree=open_target(str(tree_dir)), model_config=str(model))

    first = check()
    assert first.exit_code == 0 and len(cache) == 1, (first.not_judged, first.findings)
    assert str(model / "config.json") in kept.Judged.model_validate_json(
        next((tmp_path / "cache" / "config").glob("*.json")).read_bytes()).reads  # the manifest names it
    again = check()
    assert len(cache) == 1  # the worker was not asked
    assert again.model_dump_json() == first.model_dump_json()

    check(argv + ["--max-running-requests", "8"])  # the argv
    assert len(cache) == 2
    monkeypatch.setenv("DDCHECK_TEST_SOMETHING", "1")  # the environment
    check()
    assert len(cache) == 3
    check()
    assert len(cache) == 3
    data = json.loads((model / "config.json").read_text())  # a model config the run read
    data["num_hidden_layers"] = 31
    (model / "config.json").write_text(json.dumps(data))
    check()
    assert len(cache) == 4
    with open(tree_dir / "srt" / "server_args.py", "a") as fh:  # the tree's content
        fh.write("\n# changed\n")
    check()
    assert len(cache) == 5
    check(argv)
    assert len(cache) == 5
    check_launch(argv, tree=open_target(str(tree_dir)), model_config=str(model), cache=False)  # --no-cache: run, whatever is kept
    assert len(cache) == 6


def test_a_could_not_judge_is_never_kept(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(child, "CHILD", ["-c", "import sys; sys.exit(5)"])  # a worker that dies at once
    child.close_child()
    try:
        tree = open_target(str(FORK))
        r = check_launch(_launch(), tree=tree)
        assert r.exit_code == 3 and "exit status 5" in r.not_judged[0], r.not_judged
        check_launch(_launch(), tree=tree)
    finally:
        child.close_child()
    assert len(cache) == 2 and not list((tmp_path / "cache").glob("config/*.json"))


def test_a_usage_error_in_the_worker_is_one(cache, tmp_path):
    with pytest.raises(UsageError, match="not a readable JSON model config"):
        check_launch(_launch(), tree=open_target(str(FORK)), draft_config=str(tmp_path / "nowhere"))


def test_the_worker_leaves_no_folder_behind(tmp_path):
    # The worker ends by os._exit, so its tree copy lives in the parent's folder, removed with the worker.
    import subprocess

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "DDCHECK_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "ddcheck", "config", "--no-cache", "--sglang", str(FORK), "--",
                           *_launch(model=str(MODELS / "llama"))], capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(tmp.iterdir()) == []
