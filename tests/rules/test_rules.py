"""Every rule's bad example is flagged exactly where it says (`# expect: ID`), its good example not at all.

The examples live next to the rule definitions in rules/<ID>/ and double as its documentation.
"""

from __future__ import annotations

import re
from dataclasses import replace
from collections import Counter

import pytest

from ddcheck.scan.api import scan
from ddcheck.rules import all_rules, rules_dir
from ddcheck.scan.settings import Settings

EXPECT = re.compile(r"#\s*expect:\s*(?P<ids>(?:DD\d{3}\s*)+)")
RULES = sorted(r.id for r in all_rules().values() if r.face == "scan")  # config rules: tests/config/test_config_rules.py


def expected(path):
    out = Counter()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            for rid in m.group("ids").split():
                out[(n, rid)] += 1
    return out


@pytest.mark.parametrize("rule_id", RULES)
def test_bad_example_is_flagged_exactly(rule_id):
    path = rules_dir() / rule_id / "bad.py"
    want = expected(path)
    assert any(rid == rule_id for _, rid in want), "a bad example must expect its own rule"
    got = Counter((f.line, f.rule) for f in scan([str(path)], settings=Settings()).findings)
    assert got == want


@pytest.mark.parametrize("rule_id", RULES)
def test_good_example_is_clean_for_its_rule(rule_id):
    path = rules_dir() / rule_id / "good.py"
    result = scan([str(path)], settings=Settings())
    assert result.errors == []
    assert [f for f in result.findings if f.rule == rule_id] == []


@pytest.mark.parametrize("rule_id", RULES)
def test_rule_doc_has_every_section(rule_id):
    rule = all_rules()[rule_id]
    doc = rule.doc()
    parts = re.split(r"^## ", doc, flags=re.M)
    bodies = {p.split("\n", 1)[0]: p.split("\n", 1)[1] for p in parts[1:]}
    assert set(bodies) >= {"What it does", "Why is this bad?", "Example"} and any(k.startswith("Fix") for k in bodies)
    assert all(len(body.strip()) > 10 for body in bodies.values()), "every section says something"
    # the examples in the doc are the example files, and the doc says whose output "Use instead" is
    assert (rules_dir() / rule_id / "bad.py").read_text().rstrip() in bodies["Example"]
    assert (rules_dir() / rule_id / "good.py").read_text().rstrip() in bodies["Example"]
    assert ("what `ddcheck fix" in doc) == rule.good_is_fix


MARK = re.compile(r"[ \t]*# expect:[^\r\n]*")


@pytest.mark.parametrize("rule_id", RULES)
def test_good_example_is_what_fix_makes_of_the_bad_one(rule_id, tmp_path):
    """The documentation's "Use instead" is the fixer's own output, byte for byte."""
    import shutil

    from ddcheck.fix.api import fix_targets

    rule = all_rules()[rule_id]
    if not rule.good_is_fix:
        assert len(rule.good_differs) > 20, "a rule whose good example is not the fix says why"
        return
    path = tmp_path / "example.py"
    shutil.copy(rules_dir() / rule_id / "bad.py", path)
    fix_targets([str(path)], unsafe=True)
    assert MARK.sub("", path.read_text()) == (rules_dir() / rule_id / "good.py").read_text()


def test_a_findings_severity_and_words_are_its_rules(monkeypatch):
    """The rule definition owns severity, message and hint: the analysis asks it (change rule.toml, the
    findings follow)."""
    paths = [str(rules_dir() / r / "bad.py") for r in RULES]
    findings = scan(paths, settings=Settings(), use_cache=False).findings
    assert {f.rule for f in findings} == set(RULES)
    assert all(f.severity == all_rules()[f.rule].severity for f in findings)
    from ddcheck.base.findings import Severity

    def reworded(rule, **changes):
        return replace(rule, messages={k: "M " + v for k, v in rule.messages.items()},
                       hints={k: "H " + v for k, v in rule.hints.items()}, **changes)

    promoted = {**all_rules(), "DD002": reworded(all_rules()["DD002"], severity=Severity.error),
                "DD100": reworded(all_rules()["DD100"])}
    monkeypatch.setattr("ddcheck.rules.all_rules", lambda: promoted)
    again = scan([str(rules_dir() / r / "bad.py") for r in ("DD002", "DD100")], settings=Settings(),
                 use_cache=False).findings
    dd002 = [f for f in again if f.rule == "DD002"]
    assert dd002 and {f.severity for f in dd002} == {Severity.error}
    assert all(f.message.startswith("M ") and f.hint.startswith("H ") for f in dd002)
    assert [f.message[:2] for f in again if f.rule == "DD100"] == ["M "] * 2


# The facts the analysis (engine.py, planning.py, suppressions.py) fills the rules' templates with.
FACTS = {"symbol", "what", "buffer_line", "value", "replacement", "c_expr", "function", "calls", "parameter",
         "callers", "name", "sized", "flag", "args", "rules"}


def _cases_named_in(function_names: set[str]) -> set[str]:
    """Hint cases the engine names: ``("case", {facts})`` in those of its functions."""
    import ast

    import ddcheck.analysis.engine as engine
    import ddcheck.analysis.planning as planning

    def named(e):  # "case", or "a" if ... else "b"
        return {e.value} if isinstance(e, ast.Constant) else named(e.body) | named(e.orelse) \
            if isinstance(e, ast.IfExp) else set()

    tree = ast.Module(body=[s for m in (engine, planning) for s in ast.parse(open(m.__file__, encoding="utf-8").read()).body],
                      type_ignores=[])
    return {c for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in function_names
            for t in ast.walk(f) if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[1], ast.Dict)
            for c in named(t.elts[0])}


def _cases_named_by_code(path: str) -> tuple[set[str], set[str]]:
    """The cases a rule's rule.py names: (``self.claim("case", ...)``, ``self.no_fix("case", ...)``)."""
    import ast

    calls = [n for n in ast.walk(ast.parse(open(path, encoding="utf-8").read())) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.args and isinstance(n.args[0], ast.Constant)]
    return ({c.args[0].value for c in calls if c.func.attr == "claim"},
            {c.args[0].value for c in calls if c.func.attr == "no_fix"})


def test_every_case_the_analysis_names_has_the_rules_words():
    """Each rule has a message and a hint for every case its findings can be in, and its templates ask
    only for facts the analysis gives."""
    import string

    rules = all_rules()
    for rule in rules.values():
        if rule.face != "scan":  # a config rule's facts are its own check's (tests/config/test_config_rules.py)
            continue
        for template in [*rule.messages.values(), *rule.hints.values()]:
            assert {f for _, f, _, _ in string.Formatter().parse(template) if f} <= FACTS, (rule.id, template)
    general = _cases_named_in({"to_width"})  # any read of C, by how its fix to W goes
    startup = _cases_named_in({"_largest_width", "_judge"})  # DD002 at a size fixed at start-up
    refills = {"refill_offsets", "refill_entries", "refill_by_hand"}  # reads of a buffer: DD001 only
    assert {"per_step", *refills} <= general and startup
    # the cases a rule's own code names: those it claims reads in are its [what]'s, its hints its [hints]'
    own = {r: _cases_named_by_code(rules[r].code) for r in RULES if rules[r].code}
    assert {"DD001", "DD002", "DD003"} <= set(own)
    for r, (claims, hints) in own.items():
        assert claims <= set(rules[r].what) and hints <= set(rules[r].hints), r
    assert set(rules["DD001"].hints) == general
    assert set(rules["DD002"].hints) == (general - refills) | startup
    assert set(rules["DD003"].hints) == {"per_step"} | own["DD003"][1] == {"fallback", "per_step"}
    # config rules have no templates: their checks' messages are the facts (rules/README.md)
    assert {r: set(rules[r].messages) for r in rules if rules[r].face == "scan"} == {
        "DD001": {"read", "buffer"}, "DD002": {"read", "sized"}, "DD003": {"read"},
        "DD100": {"no_rule_id", "no_reason", "unknown_rule"}, "DD101": {"unused"}}


def _what_cases_named() -> set[tuple[str, str]]:
    """(rule id, case) of each ``judged(KIND, "case", ...)`` / ``said(KIND, "case", ...)`` in the analysis,
    and of each ``self.claim("case", ...)`` in a rule's code."""
    import ast

    import ddcheck.analysis.callers as callers
    import ddcheck.analysis.classes as classes
    import ddcheck.analysis.engine as engine
    import ddcheck.analysis.hazards as hazards
    import ddcheck.analysis.planning as planning

    from ddcheck.rules import scan_codes

    rule_of_kind = {kind: code.id for code in scan_codes() for kind in code.kinds}
    # the cases a rule's code claims reads in are its own
    out = {(r.id, case) for r in all_rules().values() if r.code for case in _cases_named_by_code(r.code)[0]}
    for module in (engine, hazards, planning, callers, classes):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ("judged", "said") \
                    and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
                kind = call.args[0].id.lower() if isinstance(call.args[0], ast.Name) else ""
                # a kind known only when it runs (``worst.kind``): the case is every rule's
                for rule_id in [rule_of_kind[kind]] if kind in rule_of_kind else rule_of_kind.values():
                    out.add((rule_id, call.args[1].value))
    return out


def test_rules_own_the_words_of_what_a_read_of_c_does():
    """Every ``[what]`` case the analysis names is in its kind's rule, every case a rule has is named
    (no dead words), and each template asks only for facts the analysis gives."""
    import string

    rules = all_rules()
    named = _what_cases_named()
    have = {(r.id, case) for r in rules.values() for case in r.what}
    assert named and named == have, (named - have, have - named)
    facts = {"symbol", "what", "buffer_line", "value", "name", "parameter", "where", "function", "made"}
    for r in rules.values():
        for template in r.what.values():
            assert {f for _, f, _, _ in string.Formatter().parse(template) if f} <= facts, (r.id, template)


THROWAWAY = {
    "rule.toml": '''id = "DD009"
name = "fixed-width-in-log"
severity = "info"
fix = "none"
summary = "The verify path logs the start-up width C as the step's width."
what_it_does = "Finds C written into a log line on the target-verify path."
why_bad = "The step verified W tokens per request, not C: the log says the wrong width."
fix_text = "Log the verify input's width."
good_is_fix = false
good_differs = "the log line reads the verify input's width, which no fix writes"

[what]
logged = "written to a log line on the verify path, where the step verified W tokens per request"

[messages]
read = "`{symbol}` is the start-up width C, {what}."

[hints]
log_width = "Log the verify input's width instead of `{symbol}`."
''',
    "rule.py": '''from ddcheck.rules import ScanRule


class FixedWidthInLog(ScanRule):
    def judge(self, read):
        if read.kind == "harmless" and read.what == "log message":
            return self.claim("logged", kind="fallback")
        return None

    def hint(self, report):
        return self.no_fix("log_width", symbol=report.symbol)
''',
    "bad.py": '''import logging

logger = logging.getLogger(__name__)


class ToyVerifyBackend:
    def __init__(self, model_runner):
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens

    def init_forward_metadata(self, forward_batch):
        spec_info = forward_batch.spec_info
        if forward_batch.forward_mode.is_target_verify():
            logger.debug("verify: %d tokens per request", self.num_draft_tokens)  # expect: DD009
            self.metadata = spec_info.custom_mask
''',
}
THROWAWAY["good.py"] = THROWAWAY["bad.py"].replace("self.num_draft_tokens)  # expect: DD009", "spec_info.draft_token_num)")


def test_a_new_rule_is_its_folder_and_nothing_else(tmp_path):
    """Adding a scan rule touches only its folder: a throwaway rule (its words, its code, its examples) in a
    folder of ``DDCHECK_RULE_PATH`` is listed by `ddcheck rules`, explained by `ddcheck explain`, and
    fires on its bad example, judged by its own code and said in its own words; not on its good one."""
    import json
    import os
    import subprocess
    import sys

    folder = tmp_path / "more-rules" / "DD009"
    folder.mkdir(parents=True)
    for name, text in THROWAWAY.items():
        (folder / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "DDCHECK_CACHE": str(tmp_path / "cache"), "NO_COLOR": "1", "COLUMNS": "200"}

    def ddcheck(*args, rule_path=True):
        e = {**env, "DDCHECK_RULE_PATH": str(tmp_path / "more-rules")} if rule_path else env
        return subprocess.run([sys.executable, "-m", "ddcheck", *args], capture_output=True, text=True, env=e,
                              timeout=300)

    listed = ddcheck("rules")
    assert listed.returncode == 0 and "DD009" in listed.stdout and "fixed-width-in-log" in listed.stdout
    assert "DD009" not in ddcheck("rules", rule_path=False).stdout  # the rule is its folder, nothing else
    explained = ddcheck("explain", "DD009")
    assert explained.returncode == 0, explained.stderr
    assert "The verify path logs the start-up width C" in explained.stdout
    assert 'logger.debug("verify: %d tokens per request", self.num_draft_tokens)' in explained.stdout

    bad = ddcheck("scan", "--format", "json", "--fail-on", "info", str(folder / "bad.py"))
    findings = json.loads(bad.stdout)["findings"]
    assert bad.returncode == 1
    assert Counter((f["line"], f["rule"]) for f in findings) == expected(folder / "bad.py")
    (f,) = findings
    assert f["severity"] == "info" and f["message"].startswith("`self.num_draft_tokens` is the start-up width C, "
                                                              "written to a log line")
    assert f["hint"] == "Log the verify input's width instead of `self.num_draft_tokens`."
    # every face of the scan says it with the rule's severity (info), as `rules` lists it: text, SARIF (its
    # rule and its result), GitHub annotations
    row = next(line for line in listed.stdout.splitlines() if "DD009" in line)
    assert [c.strip() for c in row.split("│")][3] == "info"
    text = ddcheck("scan", "--fail-on", "info", str(folder / "bad.py"))
    assert text.returncode == 1 and any("DD009" in line and "info" in line for line in text.stdout.splitlines())
    sarif = json.loads(ddcheck("scan", "--format", "sarif", "--fail-on", "info", str(folder / "bad.py")).stdout)
    (result,) = sarif["runs"][0]["results"]
    described = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert result["ruleId"] == "DD009" and result["level"] == "note"
    assert described["DD009"]["defaultConfiguration"]["level"] == "note"
    github = ddcheck("scan", "--format", "github", "--fail-on", "info", str(folder / "bad.py")).stdout
    assert github.startswith("::notice file=") and "DD009" in github
    good = ddcheck("scan", "--format", "json", "--fail-on", "info", str(folder / "good.py"))
    assert good.returncode == 0 and json.loads(good.stdout)["findings"] == []
    # without the folder the same line is a harmless log line: no rule of the shipped ones reports it
    assert json.loads(ddcheck("scan", "--format", "json", str(folder / "bad.py"), rule_path=False).stdout)["findings"] == []
