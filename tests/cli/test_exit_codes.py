"""The one exit-code contract (issue 39), on every command but guard: 0 judged and right, 1 findings,
2 a usage error or a named target that cannot be obtained, 3 could not judge (findings win over 3);
stated in every --help and carried in every JSON document. Dry runs work on any target and write
nothing; a copy the fix never wrote is not left behind.

"Without torch" is a subprocess whose PYTHONPATH puts first a ``torch`` and a ``triton`` package that
raise ModuleNotFoundError on import, as a machine without them does (the smoke worker inherits it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "analysis"
TREE = REPO / "fixtures" / "trees" / "newer_ddtree"  # a DDTree-shaped tree with a Triton backend
# W = budget + 1 = 16 = C on the fixture: config finds no error, so only the smoke decides the code
LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "DDTREE",
          "--speculative-ddtree-budget", "15", "--speculative-num-draft-tokens", "16", "--attention-backend", "triton"]


def ddcheck(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 300):
    return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd or REPO)


@pytest.fixture
def no_torch(tmp_path) -> dict:
    """The environment of a machine where torch and triton cannot be imported."""
    blocked = tmp_path / "no-torch"
    for name in ("torch", "triton"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    return {"PYTHONPATH": str(blocked)}


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr and "internal error" not in stderr, stderr
    return lines[0]


# --------------------------------------------------------------------------- 2: a target that cannot be obtained


def test_a_folder_without_python_files_is_2_on_scan_and_fix(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text("no code here\n")
    for args in (["scan"], ["scan", "--format", "json"], ["fix"], ["fix", "--check"], ["fix", "--diff"]):
        r = ddcheck(*args, str(docs))
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "no Python files" in one_line(r.stderr) and r.stdout == "", args
    out = tmp_path / "out"
    r = ddcheck("fix", str(docs), "--out", str(out))
    assert r.returncode == 2 and "no Python files" in one_line(r.stderr)
    assert not out.exists()  # the copy it made is taken away again


@pytest.mark.network
def test_an_unknown_version_is_2_with_one_line_on_every_command(tmp_path):
    out = tmp_path / "out"
    for args in (["scan", "sglang==9.9.9"], ["scan", "--format", "sarif", "sglang==9.9.9"],
                 ["fix", "--check", "sglang==9.9.9"], ["fix", "sglang==9.9.9", "--out", str(out)],
                 ["smoke", "sglang==9.9.9"], ["config", "--sglang", "sglang==9.9.9", "--", *LAUNCH]):
        r = ddcheck(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        line = one_line(r.stderr)
        assert line.count("sglang==9.9.9") == 1 and "no such release" in line, line
    assert not out.exists()


# --------------------------------------------------------------------------- the code in the JSON


def test_scan_json_and_sarif_carry_the_exit_code(tmp_path):
    bad = tmp_path / "backend.py"
    bad.write_text((FIXTURES / "guards.py").read_text())
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    for path, code in ((bad, 1), (clean, 0)):
        r = ddcheck("scan", "--no-cache", "--format", "json", str(path))
        assert r.returncode == code and json.loads(r.stdout)["exit_code"] == code
        r = ddcheck("scan", "--no-cache", "--format", "sarif", str(path))
        assert r.returncode == code and json.loads(r.stdout)["runs"][0]["invocations"][0]["exitCode"] == code
    # --fail-on/--ignore decide what counts as a finding; the code in the JSON follows them
    r = ddcheck("scan", "--no-cache", "--format", "json", "--ignore", "DD001", "--ignore", "DD002", str(bad))
    assert r.returncode == json.loads(r.stdout)["exit_code"]


def test_every_help_states_the_contract():
    from typer.testing import CliRunner

    from ddcheck.cli.app import app

    for command in ("scan", "fix", "smoke", "config"):
        out = " ".join(CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output.split())
        assert "Exit codes: 0" in out and " 2 usage error" in out, command
        assert " 3 " in out or "never exits 3" in out, command
    top = " ".join(CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output.split())
    assert "3 could not judge" in top and "findings win over 3" in top


# --------------------------------------------------------------------------- 3: could not judge


def test_config_smoke_without_torch_is_3_and_says_what_would_judge_it(no_torch):
    r = ddcheck("config", "--smoke", "--format", "json", "--sglang", str(TREE), "--", *LAUNCH, env=no_torch)
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 3 and not [f for f in doc["findings"] if f["severity"] == "error"]
    # without torch neither the tree's start-up code (issue 38: config fails closed) nor the smoke can run
    assert any("torch is not installed" in x and "ddcheck[smoke]" in x for x in doc["not_judged"]), doc["not_judged"]
    assert any(x.startswith("launch-smoke: not run") for x in doc["not_judged"]), doc["not_judged"]
    text = ddcheck("config", "--smoke", "--sglang", str(TREE), "--", *LAUNCH, env=no_torch)
    assert text.returncode == 3 and "not judged" in text.stdout and "launch-smoke" in text.stdout
    plain = json.loads(ddcheck("config", "--format", "json", "--sglang", str(TREE), "--", *LAUNCH, env=no_torch).stdout)
    assert plain["exit_code"] == 3 and not any("launch-smoke" in x for x in plain["not_judged"])  # no smoke asked for


@pytest.mark.slow
def test_config_errors_win_over_a_smoke_that_could_not_run():
    """fixtures/trees/flag_fork: its tree flag makes the worker verify W = 32 (budget_worker.py:12) on a
    triton backend that lays verify out with C = 16 (triton_backend.py:13-14): an error. The smoke cannot
    run that fixture (it has no ForwardMode): not judged. Findings win: exit 1, and not_judged says so."""
    fork = REPO / "fixtures" / "trees" / "flag_fork" / "sglang"
    launch = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "BUDGETTREE",
              "--speculative-tree-budget", "32", "--attention-backend", "triton", "--disable-cuda-graph"]
    r = ddcheck("config", "--smoke", "--format", "json", "--sglang", str(fork), "--", *launch)
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"] == 1
    assert any(x.startswith("launch-smoke: could not run") for x in doc["not_judged"]), doc["not_judged"]
    assert [f["rule"] for f in doc["findings"] if f["severity"] == "error"] == ["DD200"]


def test_smoke_without_torch_is_3_not_a_harness_2(no_torch):
    r = ddcheck("smoke", str(TREE), "--format", "json", env=no_torch)
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"] == 3
    (unjudged,) = doc["not_judged"]
    assert "torch is not installed" in unjudged["why"] and "ddcheck[smoke]" in unjudged["to_judge"]
    text = ddcheck("smoke", str(TREE), env=no_torch)
    assert text.returncode == 3 and "not judged: triton verify path at W = 17, C = 8" in text.stdout
    assert "pip install 'ddcheck[smoke]'" in text.stdout  # rich markup does not eat the extra's name


def test_smoke_usage_is_2_in_one_line(tmp_path):
    r = ddcheck("smoke", str(tmp_path / "missing"))
    assert r.returncode == 2 and "missing" in one_line(r.stderr) and r.stdout == ""
    r = ddcheck("smoke", str(TREE), "--backend", "nope")
    assert r.returncode == 2 and "unknown backend" in one_line(r.stderr)


def test_fix_verify_without_torch_is_3_could_not_run(tmp_path, no_torch):
    out = tmp_path / "fixed"
    r = ddcheck("fix", str(TREE), "--out", str(out), "--verify", env=no_torch)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "could not run" in r.stderr and "does not pass" not in r.stderr + r.stdout
    assert (out / "sglang" / "srt" / "layers" / "attention" / "triton_backend.py").is_file()  # the fix was kept


# --------------------------------------------------------------------------- dry runs write nothing


@pytest.mark.network
def test_dry_runs_work_on_a_wheel_and_write_nothing(tmp_path, wheel):
    wheel("0.5.10")  # downloaded once, then read from the cache as sglang==0.5.10
    check = ddcheck("fix", "--check", "sglang==0.5.10")
    assert check.returncode == 1 and "would fix" in check.stdout and "read-only" not in check.stderr
    out = tmp_path / "out"  # a wheel's dry run with --out (each run fixes the whole wheel: one of them)
    diff = ddcheck("fix", "--diff", "sglang==0.5.10", "--out", str(out))
    assert diff.returncode == 0 and "+++ b/sglang/srt/layers/attention/triton_backend.py" in diff.stdout
    assert not out.exists(), diff.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    for flag, code in (("--check", 1), ("--diff", 0)):
        r = ddcheck("fix", flag, str(REPO / "fixtures" / "demo"), "--out", str(empty))
        assert r.returncode == code and list(empty.iterdir()) == []


def test_a_fix_that_fails_midway_leaves_no_copy(tmp_path, monkeypatch):
    """An internal error after the copy (here, in the planning) takes the unpatched copy away; a folder
    that was there empty is left empty, one with files of its own (--force) keeps only them."""
    from rich.console import Console

    from ddcheck.fix import api as fixer
    from ddcheck.fix import command
    from ddcheck.scan.settings import Settings

    def broken(*args, **kwargs):
        raise RuntimeError("planning failed")

    monkeypatch.setattr(command, "plan", broken)
    quiet = Console(file=open(os.devnull, "w"))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("mine\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for out, force in ((tmp_path / "new", False), (empty, False), (busy, True)):
        with pytest.raises(RuntimeError, match="planning failed"):
            fixer.fix_main([str(TREE)], settings=Settings(), diff=False, check=False, unsafe=False, out_dir=out,
                           installed=False, exit_non_zero_on_fix=False, verify=False, console=quiet, err=quiet,
                           force=force)
    assert not (tmp_path / "new").exists() and list(empty.iterdir()) == []
    assert [p.name for p in busy.rglob("*") if p.is_file()] == ["mine.txt"]


def test_fix_diff_of_a_latin1_file_shows_its_text(tmp_path):
    src = (FIXTURES / "guards.py").read_text().replace(
        '"""Ways the target-verify branch is spelled."""', '# -*- coding: latin-1 -*-\n"""Caf\xe9 guards."""', 1)
    path = tmp_path / "backend.py"
    path.write_bytes(src.encode("latin-1"))
    diff = ddcheck("fix", "--diff", str(path))
    assert diff.returncode == 0 and "internal error" not in diff.stderr, diff.stderr
    assert "+++ b/backend.py" in diff.stdout and "(ddcheck fix)" in diff.stdout
    check = ddcheck("fix", "--check", str(path))
    assert check.returncode == 1 and "would fix" in check.stdout
    assert path.read_bytes() == src.encode("latin-1")  # neither wrote


# --------------------------------------------------------------------------- text in a pipe


def test_text_in_a_pipe_is_not_wrapped():
    """A smoke report's violation list and a table row stay on one line in a pipe, whatever COLUMNS says."""
    code = ("from ddcheck.smoke.report import PathResult, SmokeReport, render_text\n"
            "v = {'field': 'forward_metadata.qo_indptr', 'term': 'query offsets', 'expected': [0, 17, 34, 51],"
            " 'got': [0, 8, 16, 24]}\n"
            "p = PathResult(case='ddtree', path='eager', width=17, num_draft_tokens=8, status='wrong',"
            " violations=[v], contract_fields=['forward_metadata.qo_indptr'])\n"
            "r = SmokeReport(target='t' * 60, backend='b' * 60, device='cpu', dtype='float32', budget=16, width=17,"
            " num_draft_tokens=8, paths=[p], exit_code=1, verdict='bug: ' + 'x ' * 80 + 'end')\n"
            "render_text(r)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "COLUMNS": "40"})
    lines = r.stdout.splitlines()
    assert any("expected [0, 17, 34, 51], got [0, 8, 16, 24]" in ln for ln in lines), r.stdout
    assert any(ln.startswith("exit 1: bug:") and ln.endswith("end") for ln in lines), r.stdout
    assert any("ddtree" in ln and "1 of 1 fields wrong" in ln for ln in lines), r.stdout
    rules = ddcheck("rules", env={"COLUMNS": "30"})
    assert any("DD001" in ln and "fixed-width-verify-layout" in ln for ln in rules.stdout.splitlines())


def test_no_such_release_is_remembered_a_while_not_asked_again(tmp_path, monkeypatch):
    """The index said "no such release": the next ask within ABSENT_FOR_S answers at once (no pip run)."""
    import subprocess as sp

    from ddcheck.tree import sources

    calls = []

    def pip(cmd, **kw):
        calls.append(cmd)
        return sp.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for sglang==9.9.8")

    monkeypatch.setattr(sp, "run", pip)
    for _ in range(3):
        with pytest.raises(sources.TargetError, match="no such release"):
            sources.download_wheel("9.9.8", tmp_path)
    assert len(calls) == 2  # the two attempts of the first ask only
    old = time.time() - sources.ABSENT_FOR_S - 1
    os.utime(tmp_path / ".absent-9.9.8", (old, old))
    with pytest.raises(sources.TargetError):
        sources.download_wheel("9.9.8", tmp_path)
    assert len(calls) == 4  # stale: the index is asked again
