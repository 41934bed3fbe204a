"""Every config check is a rule (rules/DD2xx): its examples are launches, and they are tests here: the
bad launch fires the rule, the good one does not (rules/README.md says how an example is written).

The examples run in this process on the trees tests/config/test_config.py opens (its ``release`` cache, so a
release's flag table and modules are read once for both files): ``sglang==X`` is the release wheel and
``python/sglang`` the DDTree pull-request tree that tests/config/test_config.py builds from 0.5.16
(``build_ddtree_tree``: the DDTREE algorithm, ``--speculative-ddtree-budget`` and the page-size hook of
sgl-project/sglang#29907). `config --smoke` examples (``# options: --smoke``) run the tree's verify path
on the CPU through the Triton interpreter, with ``DDCHECK_SMOKE_ALL=1`` (tests/forks/test_forks.py runs
`config --smoke`'s two verdicts in the default suite).
"""

from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path

import pytest

from ddcheck.base.errors import UsageError
from ddcheck.base.findings import Severity
from ddcheck.config import check_launch
from ddcheck.rules import get_rule, all_rules, launch_example, rules_dir
from test_config import _TREES, ddtree_tree, release  # noqa: F401 - ddtree_tree: the fixture
from test_workflow import sarif_validator  # noqa: F401 - the fixture: the OASIS schema, as scan's SARIF is checked

REPO = Path(__file__).resolve().parents[2]
RULES = sorted(r.id for r in all_rules().values() if r.face == "config")
network = pytest.mark.network
DDTREE_PR = "python/sglang"  # the examples' name for a DDTree fork's package


@pytest.fixture(scope="module")
def trees(request):
    def tree(target: str):
        if target == DDTREE_PR:
            return request.getfixturevalue("ddtree_tree")  # tests/config/test_config.py's, built once a session
        assert target.startswith("sglang=="), target
        return release(target.removeprefix("sglang=="))
    return tree


SMOKE_ALL = os.environ.get("DDCHECK_SMOKE_ALL") == "1"


def example(rule_id: str, name: str, trees, monkeypatch):
    """The report of ``rules/<rule_id>/<name>`` (run from the repository root: paths in a launch are
    relative to it)."""
    target, options, argv = launch_example((rules_dir() / rule_id / name).read_text(encoding="utf-8"))
    smoke = None
    if "--smoke" in options:
        if not SMOKE_ALL:  # ~45 s each on 2 cores; tests/forks/test_forks.py runs config --smoke's bad and good
            pytest.skip("a --smoke example: DDCHECK_SMOKE_ALL=1 runs it (test_forks.py::"
                        "test_config_smoke_runs_the_launch_at_its_c_and_w covers both verdicts)")
        from ddcheck.config.smoke import launch_smoke

        smoke = partial(launch_smoke, device="cpu")
    monkeypatch.chdir(REPO)
    return check_launch(argv, tree=trees(target), smoke=smoke), argv


@network
@pytest.mark.parametrize("rule_id", RULES)
def test_bad_launch_fires_its_rule(rule_id, trees, monkeypatch):
    from ddcheck.config.report import locate

    rule = all_rules()[rule_id]
    report, argv = example(rule_id, "bad.launch", trees, monkeypatch)
    fired = [f for f in report.findings if f.rule == rule_id]
    if not fired and rule.superseded_by and report.settings.resolved_by == "tree":
        # a rule of ddcheck's tables: the tree's own start-up code ran and its rule reports it
        fired = [f for f in report.findings if get_rule(f.rule).name == rule.superseded_by]
        assert fired, [(get_rule(f.rule).name, f.message) for f in report.findings]
        return
    assert fired, [(get_rule(f.rule).name, f.message) for f in report.findings]
    f = fired[0]
    assert f.consequence in rule.consequences
    # the rule's severity, or the one its [levels] give the case
    assert f.severity.value in {rule.severity.value, *rule.levels.values()}
    # (for a rule about flags the launch passed) where the launch set it: located at that argument
    locate(report, argv, None)
    given = [flag for flag in rule.flags if "--" + flag.replace("_", "-") in argv]
    assert bool(f.set_at) == bool(given) and all(w.split()[0].split("=")[0] in argv for w in f.set_at)
    assert f.argument == (f.set_at[0] if f.set_at else None)


@network
@pytest.mark.parametrize("rule_id", RULES)
def test_good_launch_does_not_fire_it(rule_id, trees, monkeypatch):
    report, _ = example(rule_id, "good.launch", trees, monkeypatch)
    rule = all_rules()[rule_id]
    # none of its findings; a rule above info may say "right" at info (DD250: the verify path run is right)
    fired = [f for f in report.findings if f.rule == rule_id and (f.severity.value != "info" or rule.severity.value == "info")]
    assert not fired, [(get_rule(f.rule).name, f.severity.value, f.message) for f in report.findings]
    assert all(f.rule is not None for f in report.findings), "every finding of config has a rule"


# ---------------------------------------------------------------------------------------------
# one set of outputs, selection and suppressions
# ---------------------------------------------------------------------------------------------

# EAGLE topk 2 on torch_native, whose modules never read the custom mask (DD202, 0.5.10's
# torch_native_backend.py), and 0.5.10's start-up code resets max running requests (DD232, info)
LLAMA = REPO / "fixtures" / "launch" / "models" / "llama"  # a local model folder: the tree's start-up reads it
LAUNCH_YAML = f"""\
model-path: {LLAMA}
speculative-algorithm: EAGLE
speculative-num-steps: 3
speculative-eagle-topk: 2
speculative-num-draft-tokens: 4
attention-backend: torch_native
"""
NEWER = REPO / "fixtures" / "trees" / "newer_ddtree" / "sglang"
# on the minimal DDTree tree: fa3 lays out verify at C (the fixture's flashattention_backend.py), W = 4,
# C = 16 (DD200); its handler warns that max_running_requests is reset (DD213, info)
NEWER_LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", str(LLAMA), "--speculative-algorithm", "DDTREE",
                "--speculative-ddtree-budget", "3", "--speculative-num-draft-tokens", "16", "--disable-cuda-graph"]


def config(capsys, tmp_path, *options, yaml=None, argv=(), tree=None, fmt="text", smoke=None):
    """``ddcheck config`` (the command's body, in this process) on the launch file ``yaml`` against
    0.5.10, or on ``argv`` against ``tree``: (exit code, stdout)."""
    from ddcheck.cli.config import config_command

    file = None
    if yaml is not None:
        file = tmp_path / "launch.yaml"
        file.write_text(yaml)
        tree = release("0.5.10")
    opts = {"select": [], "ignore": [], "suppress": [], "fail_on": None}
    for name, value in options:
        if name == "fail_on":
            opts[name] = value
        else:
            opts[name].append(value)
    code = config_command(list(argv), file=str(file) if file else None, fmt=fmt, smoke=smoke, tree=tree, **opts)
    return code, capsys.readouterr().out


def newer(capsys, tmp_path, *options, backend="fa3", fmt="text", smoke=None):
    from ddcheck.tree.sources import open_target

    if "newer" not in _TREES:
        _TREES["newer"] = open_target(str(NEWER))
    return config(capsys, tmp_path, *options, argv=NEWER_LAUNCH + ["--attention-backend", backend],
                  tree=_TREES["newer"], fmt=fmt, smoke=smoke)


FLAG_FORK = REPO / "fixtures" / "trees" / "flag_fork" / "sglang"
# fixtures/trees/flag_fork: the tree flag makes the worker verify W = 32 (budget_worker.py:12) on a triton
# backend laid out with C = 16 (DD200); C set by the tree's start-up code (DD212, info); fully judged
FLAG_LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", str(LLAMA), "--speculative-algorithm",
               "BUDGETTREE", "--speculative-tree-budget", "32", "--disable-cuda-graph", "--attention-backend", "triton"]


def flagfork(capsys, tmp_path, *options, fmt="text"):
    from ddcheck.tree.sources import open_target

    if "flag_fork" not in _TREES:
        _TREES["flag_fork"] = open_target(str(FLAG_FORK))
    return config(capsys, tmp_path, *options, argv=FLAG_LAUNCH, tree=_TREES["flag_fork"], fmt=fmt)


def smoke_once():
    """`config --smoke`'s run, made once per launch (C, W, backend) and handed back after: the exit code
    is decided from the same real finding each time."""
    from ddcheck.config.smoke import launch_smoke

    made: dict = {}

    def smoke(s, tree):
        key = (tree.label, s.verify_width, s.num_draft_tokens, s.verify_backend)
        if key not in made:
            made[key] = launch_smoke(s, tree, device="cpu")
        import copy

        return copy.deepcopy(made[key])
    return smoke


def _line(text: str, key: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(key + ":"))


@network
def test_config_sarif_is_valid_and_points_at_the_launch_file(capsys, tmp_path, sarif_validator):
    import json

    from test_workflow import _errors

    code, out = config(capsys, tmp_path, yaml=LAUNCH_YAML, fmt="sarif")
    doc = json.loads(out)
    assert code == 1 and _errors(sarif_validator, doc) == []
    results = {r["ruleId"]: r for r in doc["runs"][0]["results"]}
    assert {"DD202", "DD232"} <= set(results)
    mask = results["DD202"]["locations"][0]["physicalLocation"]
    assert mask["artifactLocation"]["uri"].endswith("launch.yaml")  # where the launch set the backend
    assert mask["region"] == {"startLine": _line(LAUNCH_YAML, "attention-backend")}
    # where the tree decided it: the finding's evidence
    assert "torch_native_backend.py" in results["DD202"]["properties"]["evidence"][0]["path"]
    # a rule the launch set no flag of: where the tree decided it (0.5.10's server_args.py, in the wheel)
    reset = results["DD232"]["locations"][0]["physicalLocation"]
    assert reset["artifactLocation"]["uri"].endswith("sglang/srt/server_args.py") and reset["region"]["startLine"] > 1
    assert {"DD202", "DD232", "DD001"} <= {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]}


@network
def test_config_github_annotations(capsys, tmp_path):
    code, out = config(capsys, tmp_path, yaml=LAUNCH_YAML, fmt="github")
    line = _line(LAUNCH_YAML, "attention-backend")
    assert code == 1
    assert any(a.startswith("::error file=") and f"launch.yaml,line={line}," in a and "title=DD202::" in a
               for a in out.splitlines()), out
    assert any(a.startswith("::notice file=") and "title=DD232::" in a for a in out.splitlines()), out
    # a finding in the wheel is named as the user named the release, not by ddcheck's cache (issue 49)
    reset = next(a for a in out.splitlines() if "title=DD232::" in a)
    assert reset.startswith("::notice file=sglang==0.5.10!sglang/srt/server_args.py,"), reset


@network
def test_a_launch_file_suppression_with_a_reason(capsys, tmp_path):
    import json

    ok = LAUNCH_YAML.replace("attention-backend: torch_native",
                             "attention-backend: torch_native  # ddcheck: ignore[DD202] our draft is a chain")
    code, out = config(capsys, tmp_path, yaml=ok, fmt="json")
    assert code == 0 and "DD202" not in {f["rule"] for f in json.loads(out)["findings"]}
    # without a reason it suppresses nothing and is DD100; a rule that did not fire is DD101
    bare = LAUNCH_YAML + "# ddcheck: ignore[DD202]\n# ddcheck: ignore[DD231] page size is 1 here\n"
    code, out = config(capsys, tmp_path, yaml=bare, fmt="json")
    found = {f["rule"]: f for f in json.loads(out)["findings"]}
    assert code == 1 and {"DD202", "DD100", "DD101"} <= set(found)
    assert found["DD100"]["severity"] == "warning" and found["DD100"]["path"].endswith("launch.yaml")
    assert (found["DD100"]["line"], found["DD101"]["line"]) == (7, 8)
    assert config(capsys, tmp_path, ("ignore", "DD202"), yaml=bare)[0] == 0
    assert config(capsys, tmp_path, ("ignore", "DD202"), ("fail_on", Severity.warning), yaml=bare)[0] == 1


def test_select_ignore_fail_on_and_suppress_change_the_exit_code_as_for_scan(capsys, tmp_path):
    import json

    assert flagfork(capsys, tmp_path)[0] == 1
    assert flagfork(capsys, tmp_path, ("ignore", "DD200"))[0] == 0
    assert flagfork(capsys, tmp_path, ("ignore", "verify-width"))[0] == 0  # by name too
    assert flagfork(capsys, tmp_path, ("ignore", "DD200"), ("fail_on", Severity.info))[0] == 1  # DD212 is info
    assert flagfork(capsys, tmp_path, ("select", "sglang-num-draft-tokens"))[0] == 0
    code, out = flagfork(capsys, tmp_path, ("select", "DD200"), fmt="json")
    assert code == 1 and [f["rule"] for f in json.loads(out)["findings"]] == ["DD200"]
    # the command line's suppression, by id or name; without a reason it is DD100
    assert flagfork(capsys, tmp_path, ("suppress", "verify-width:fixed in our build"))[0] == 0
    code, out = flagfork(capsys, tmp_path, ("suppress", "DD200"), fmt="github")
    assert code == 1 and "title=DD100::" in out and "title=DD200::" in out
    code, out = flagfork(capsys, tmp_path, ("suppress", "DD201:graphs are off"), ("fail_on", Severity.warning),
                         fmt="json")
    assert code == 1 and "DD101" in {f["rule"] for f in json.loads(out)["findings"]}
    # a launch whose W the tree's worker leaves open at its upper end (newer_ddtree) is not judged: ignoring
    # its one error leaves a 3, never a 0
    assert newer(capsys, tmp_path)[0] == 1 and newer(capsys, tmp_path, ("ignore", "DD200"))[0] == 3
    with pytest.raises(UsageError, match="unknown rule"):
        newer(capsys, tmp_path, ("ignore", "DD999"))


def test_nothing_turns_a_could_not_judge_into_a_0(capsys, tmp_path):
    """`config --smoke` whose smoke cannot run (the fixture tree has no ForwardMode for the harness) is
    a could-not-judge: exit 3, and ignoring, suppressing or selecting it away does not make it a 0."""
    import json

    from ddcheck.base.errors import EXIT_NOT_JUDGED

    smoke = smoke_once()
    code, out = newer(capsys, tmp_path, backend="triton", fmt="json", smoke=smoke)
    doc = json.loads(out)
    # not a finding: the launch is not judged by it, and says why
    assert not [f for f in doc["findings"] if f["rule"] == "DD250"]
    assert any(why.startswith("launch-smoke: not run") for why in doc["not_judged"]), doc["not_judged"]
    assert code == EXIT_NOT_JUDGED
    for opts in ((("ignore", "DD250"),), (("suppress", "DD250:known"),), (("select", "DD200"),),
                 (("fail_on", Severity.error),)):
        assert newer(capsys, tmp_path, *opts, backend="triton", smoke=smoke)[0] == EXIT_NOT_JUDGED, opts
    assert newer(capsys, tmp_path, smoke=smoke)[0] == 1  # findings win (fa3: DD200)


def test_every_config_rule_owns_its_check():
    """A config rule is its folder: its rule.py's LaunchRule decides it (no list of checks in config), and
    each case it says is a case of its [messages]."""
    import ast

    from ddcheck.rules import LaunchRule, StartupGuard, launch_rule, launch_rules

    stages = ("parse", "algorithm", "startup", "tree_run", "site", "tree_failed", "smoke")
    asked = {code.id for stage in stages for code in launch_rules(stage)}
    assert asked == set(RULES)
    for rule_id in RULES:
        rule = all_rules()[rule_id]
        code = (rules_dir() / rule_id / "rule.py").read_text(encoding="utf-8")
        cases = {c.args[0].value for c in ast.walk(ast.parse(code)) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Attribute) and c.func.attr == "finding" and c.args
                 and isinstance(c.args[0], ast.Constant)}
        guard = isinstance(launch_rule(rule_id), StartupGuard)  # the release's own guard: StartupGuard.check says it
        if guard:
            cases |= {"refused"}
        assert (guard or "self.finding(" in code) and cases <= set(rule.messages), (rule_id, cases)
    assert not (REPO / "ddcheck" / "config" / "checks.py").exists()
    assert LaunchRule.__module__ == "ddcheck.rules"


def test_rules_lists_and_explain_prints_the_config_rules():
    from typer.testing import CliRunner

    from ddcheck.cli.app import app

    listed = CliRunner().invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and all(rid in listed.output for rid in ["DD001", *RULES])
    page = CliRunner().invoke(app, ["explain", "verify-width"])  # by the check's name, as by id
    assert page.exit_code == 0 and page.output.startswith("# DD200 verify-width (error)")
    bad = (rules_dir() / "DD200" / "bad.launch").read_text(encoding="utf-8")
    assert "\nddcheck config --sglang python/sglang -- python -m sglang.launch_server" in page.output
    assert all(word in page.output for word in launch_example(bad)[2])
