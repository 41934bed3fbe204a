"""One finding, one road (issue 48): a config rule is one folder (rule.toml, rule.py, examples) on
``DDCHECK_RULE_PATH``, and the severity its rule.toml gives is the one `ddcheck rules`, `ddcheck explain`
and every format of `ddcheck config` say; config's SARIF is valid SARIF 2.1.0."""

from __future__ import annotations

import json

import pytest

from test_config import release
from test_config_rules import LAUNCH_YAML
from test_workflow import _errors, sarif_validator  # noqa: F401 - the fixture: the OASIS schema

network = pytest.mark.network

RULE_TOML = '''id = "DD299"
name = "throwaway-eagle-topk"
face = "config"
severity = "warning"
consequence = "PERF"
fix = "change the launch"
flags = ["speculative_eagle_topk"]
summary = "A throwaway rule of a test: EAGLE with topk 2."
what_it_does = "Fires on an EAGLE launch whose topk is 2."
why_bad = "It is not: the test wants a rule that fires."
fix_text = "Use another topk."

[messages]
topk = "EAGLE drafts {topk} candidates per step (a throwaway rule)"

[hints]
topk = "use --speculative-eagle-topk 1"
'''

RULE_PY = '''from ddcheck.rules import LaunchRule


class ThrowawayEagleTopk(LaunchRule):
    stage = ("site",)

    def check(self, facts):
        s = facts.settings
        if s.algorithm == "EAGLE" and s.eagle_topk == 2:
            return [self.finding("topk", topk=s.eagle_topk)]
        return []
'''

LAUNCH = """# sglang: sglang==0.5.10
python -m sglang.launch_server --model-path fixtures/launch/models/llama --speculative-algorithm EAGLE \\
  --speculative-num-steps 3 --speculative-eagle-topk {topk} --speculative-num-draft-tokens 4
"""


def _clear() -> None:
    import ddcheck.rules as registry

    for cached in (registry.all_rules, registry._names, registry._codes, registry._kinds, registry._launch_codes,
                   registry.smoke_rules):
        cached.cache_clear()


def _write_rule(tmp_path):
    folder = tmp_path / "more-rules" / "DD299"
    folder.mkdir(parents=True)
    (folder / "rule.toml").write_text(RULE_TOML)
    (folder / "rule.py").write_text(RULE_PY)
    (folder / "bad.launch").write_text(LAUNCH.format(topk=2))
    (folder / "good.launch").write_text(LAUNCH.format(topk=1))
    return folder


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    folder = _write_rule(tmp_path)
    monkeypatch.setenv("DDCHECK_RULE_PATH", str(tmp_path / "more-rules"))
    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))  # a rule folder is not in config's cache key
    _clear()
    yield folder
    monkeypatch.undo()
    _clear()


def _config(capsys, tmp_path, fmt: str, yaml: str = LAUNCH_YAML) -> tuple[int, str]:
    from ddcheck.cli.config import config_command

    file = tmp_path / "launch.yaml"
    file.write_text(yaml)
    code = config_command([], file=str(file), fmt=fmt, tree=release("0.5.10"), cache=False)
    return code, capsys.readouterr().out


@network
def test_a_config_rule_is_one_folder_with_one_severity_everywhere(throwaway, capsys, tmp_path, sarif_validator):
    import os
    import subprocess
    import sys

    def ddcheck(*args):  # its own process: what a user runs, whatever this process has loaded and cached
        return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})

    listed = ddcheck("rules")
    row = next((line for line in listed.stdout.splitlines() if "DD299" in line), None)
    assert row is not None, listed.stdout + listed.stderr
    assert "throwaway-eagle-topk" in row and "warning" in row and "error" not in row
    page = ddcheck("explain", "DD299")
    assert page.returncode == 0 and page.stdout.startswith("# DD299 throwaway-eagle-topk (warning)"), page.stderr

    code, text = _config(capsys, tmp_path, "text")
    line = next(x for x in text.splitlines() if " DD299 " in x)
    assert line.startswith(f"{tmp_path / 'launch.yaml'}:4:1: DD299 [warning] PERF: EAGLE drafts 2 candidates per step"), line
    assert "      hint: use --speculative-eagle-topk 1" in text.splitlines()
    assert code == 1  # DD202 (error) fires on this launch too

    code, out = _config(capsys, tmp_path, "json")
    doc = json.loads(out)
    mine = [f for f in doc["findings"] if f["rule"] == "DD299"]
    assert [(f["severity"], f["consequence"], f["path"], f["line"]) for f in mine] == \
        [("warning", "PERF", str(tmp_path / "launch.yaml"), 4)]
    assert doc["exit_code"] == code == 1 and "release" in doc and "settings" in doc

    code, out = _config(capsys, tmp_path, "sarif")
    sarif = json.loads(out)
    assert _errors(sarif_validator, sarif) == []
    result = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "DD299")
    rule = next(r for r in sarif["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "DD299")
    assert result["level"] == rule["defaultConfiguration"]["level"] == "warning"
    assert sarif["runs"][0]["invocations"][0]["exitCode"] == 1
    assert sarif["runs"][0]["invocations"][0]["executionSuccessful"] is True  # judged whole: errors, not a failure

    code, out = _config(capsys, tmp_path, "github")
    assert any(a.startswith("::warning file=") and "title=DD299::" in a for a in out.splitlines()), out

    # its severity decides the exit code as the rule says: only DD299 selected, a warning passes fail-on error
    from ddcheck.cli.config import config_command

    file = tmp_path / "launch.yaml"
    assert config_command([], file=str(file), tree=release("0.5.10"), cache=False, select=["DD299"]) == 0
    capsys.readouterr()


@network
def test_config_sarif_of_an_argument_validates(capsys, monkeypatch, sarif_validator):
    """A finding located at a launch argument (no file): a logical location, valid SARIF, no path parsed."""
    from ddcheck.cli.config import config_command

    argv = ["python", "-m", "sglang.launch_server", "--model-path", "fixtures/launch/models/llama",
            "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
            "--speculative-num-draft-tokens", "4", "--attention-backend", "torch_native"]
    monkeypatch.chdir(__import__("pathlib").Path(__file__).resolve().parents[2])  # the launch's model path
    code = config_command(argv, fmt="sarif", tree=release("0.5.10"))
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and _errors(sarif_validator, doc) == []
    mask = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == "DD202")
    assert mask["locations"] == [{"logicalLocations": [{"name": "--attention-backend torch_native",
                                                        "kind": "parameter"}]}]
    assert mask["properties"]["consequence"] == "CORRUPT" and mask["properties"]["evidence"]
    code = config_command(argv, fmt="text", tree=release("0.5.10"))
    text = capsys.readouterr().out
    assert "--attention-backend torch_native: DD202 [error] CORRUPT: tree verify (topk=2)" in text
    assert "      at sglang/srt/layers/attention/torch_native_backend.py:1  no custom_mask reference" in text


@network
def test_the_kept_config_child_judges_by_the_callers_rule_path(tmp_path, capsys, monkeypatch):
    """config's child process is kept for the process's next launch (the Python API, a test session): a
    launch whose environment names more rule folders is judged by them too, not by the rules the child
    read for an earlier caller."""
    monkeypatch.delenv("DDCHECK_RULE_PATH", raising=False)
    monkeypatch.setenv("DDCHECK_CACHE", str(tmp_path / "cache"))
    _clear()
    try:
        _, before = _config(capsys, tmp_path, "text")  # the child is started (or asked) without DD299
        assert " DD299 " not in before
        _write_rule(tmp_path)
        monkeypatch.setenv("DDCHECK_RULE_PATH", str(tmp_path / "more-rules"))
        _clear()
        _, after = _config(capsys, tmp_path, "text")
        assert any(" DD299 [warning] " in line for line in after.splitlines()), after
    finally:
        monkeypatch.undo()
        _clear()


SMOKE_TOML = '''id = "DD399"
name = "throwaway-smoke-eager"
face = "smoke"
severity = "warning"
consequence = "PERF"
fix = "none"
summary = "A throwaway rule of a test: a smoke run whose W != C case ran eagerly only."
what_it_does = "Fires on a smoke run with no graph path at W != C."
why_bad = "It is not: the test wants a smoke rule that fires."
fix_text = "None."

[messages]
eager = "the {backend} verify path ran at W={W} eagerly only (a throwaway rule)"
'''

SMOKE_PY = '''from ddcheck.rules import SmokeRule


class ThrowawaySmokeEager(SmokeRule):
    def check(self, report):
        if any(p.case == "ddtree" and p.path == "graph" for p in report.paths):
            return []
        return [self.finding("eager", report.backend, backend=report.attention_backend, W=report.width)]
'''


def test_a_smoke_rule_is_one_folder_with_one_severity_everywhere(tmp_path, monkeypatch, capsys, sarif_validator):
    """A smoke rule (face = "smoke") added by one folder: listed and explained with its severity, and its
    findings in smoke's SARIF (valid) and GitHub annotations at that severity, the run's exit code kept.
    The run is a report made here (what run_smoke returns): the road is under test, not the harness."""
    import os
    import subprocess
    import sys

    from ddcheck.smoke.api import smoke_main
    from ddcheck.smoke.report import PathResult, SmokeReport

    folder = tmp_path / "more-rules" / "DD399"
    folder.mkdir(parents=True)
    (folder / "rule.toml").write_text(SMOKE_TOML)
    (folder / "rule.py").write_text(SMOKE_PY)
    (folder / "bad.smoke").write_text("sglang==0.5.23\n")
    (folder / "good.smoke").write_text("sglang==0.5.10\n")
    monkeypatch.setenv("DDCHECK_RULE_PATH", str(tmp_path / "more-rules"))
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    listed = subprocess.run([sys.executable, "-m", "ddcheck", "rules"], capture_output=True, text=True, env=env, timeout=120)
    row = next((line for line in listed.stdout.splitlines() if "DD399" in line), None)
    assert row is not None and "warning" in row and "error" not in row, listed.stdout + listed.stderr
    page = subprocess.run([sys.executable, "-m", "ddcheck", "explain", "DD399"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert page.stdout.startswith("# DD399 throwaway-smoke-eager (warning)") and "ddcheck smoke sglang==0.5.23" in page.stdout

    _clear()
    try:
        report = SmokeReport(target="sglang==0.5.23", backend="sglang==0.5.23!sglang/srt/layers/attention/triton_backend.py",
                             device="cpu", dtype="float32", budget=16, width=17, num_draft_tokens=8, exit_code=0,
                             verdict="every path correct", paths=[PathResult(case="ddtree", path="eager", width=17,
                                                                             num_draft_tokens=8, status="ok")])
        monkeypatch.setattr("ddcheck.smoke.api.run_smoke", lambda *a, **k: report.model_copy(deep=True))
        assert smoke_main("sglang==0.5.23", fmt="sarif") == 0  # a warning: the run's exit code is the verdict's
        sarif = json.loads(capsys.readouterr().out)
        assert _errors(sarif_validator, sarif) == []
        (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "DD399"]
        rule = next(r for r in sarif["runs"][0]["tool"]["driver"]["rules"] if r["id"] == "DD399")
        assert result["level"] == rule["defaultConfiguration"]["level"] == "warning"
        assert "ran at W=17 eagerly only" in result["message"]["text"]
        assert smoke_main("sglang==0.5.23", fmt="github") == 0
        out = capsys.readouterr().out
        assert out.startswith("::warning file=sglang==0.5.23!sglang/srt/layers/attention/triton_backend.py,title=DD399::"), out
        assert smoke_main("sglang==0.5.23", fmt="json") == 0
        assert "DD399" not in capsys.readouterr().out  # smoke's own report: unchanged by its rules
        # a run that could not be judged: 3 in every format, no DD300 finding (it judges only a run whose
        # controls were right), and stderr says why
        report.exit_code, report.verdict = 3, "harness failure: torch is not installed"
        assert smoke_main("sglang==0.5.23", fmt="sarif") == 3
        said = capsys.readouterr()
        run = json.loads(said.out)["runs"][0]
        assert run["invocations"][0]["exitCode"] == 3 and not [r for r in run["results"] if r["ruleId"] == "DD300"]
        assert "exit 3: harness failure: torch is not installed" in said.err
        # SARIF's own words for it: the run did not complete its analysis, and a notification says why
        assert run["invocations"][0]["executionSuccessful"] is False
        assert [n["message"]["text"] for n in run["invocations"][0]["toolExecutionNotifications"]] == \
            ["not judged: harness failure: torch is not installed"]
        assert _errors(sarif_validator, json.loads(said.out)) == []
        report.not_judged = [{"what": "triton verify path at W = 17, C = 8", "why": "it crashed",
                              "to_judge": "a run that does not fail"}]
        assert smoke_main("sglang==0.5.23", fmt="github") == 3
        assert "::warning title=ddcheck not judged::triton verify path at W = 17, C = 8: it crashed; " \
               "to judge it: a run that does not fail" in capsys.readouterr().out.splitlines()
    finally:
        monkeypatch.undo()
        _clear()
