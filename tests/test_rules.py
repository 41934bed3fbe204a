"""Every rule's bad example is flagged exactly where it says (`# expect: ID`), its good example not at all.

The examples live next to the rule definitions in rules/<ID>/ and double as its documentation.
"""

from __future__ import annotations

import re
from dataclasses import replace
from collections import Counter

import pytest

from ddcheck.api import scan
from ddcheck.rules import all_rules, rules_dir
from ddcheck.settings import Settings

EXPECT = re.compile(r"#\s*expect:\s*(?P<ids>(?:DD\d{3}\s*)+)")
RULES = sorted(all_rules())


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

    from ddcheck.fixer import fix_targets

    rule = all_rules()[rule_id]
    if not rule.good_is_fix:
        assert len(rule.good_differs) > 20, "a rule whose good example is not the fix says why"
        return
    path = tmp_path / "example.py"
    shutil.copy(rules_dir() / rule_id / "bad.py", path)
    fix_targets([str(path)], unsafe=True)
    assert MARK.sub("", path.read_text()) == (rules_dir() / rule_id / "good.py").read_text()


def test_a_findings_severity_is_its_rules(monkeypatch):
    """The rule definition owns severity: the engine asks it (change rule.toml, the findings follow)."""
    paths = [str(rules_dir() / r / "bad.py") for r in RULES]
    findings = scan(paths, settings=Settings(), use_cache=False).findings
    assert {f.rule for f in findings} == set(RULES)
    assert all(f.severity == all_rules()[f.rule].severity for f in findings)
    from ddcheck.findings import Severity

    promoted = {**all_rules(), "DD002": replace(all_rules()["DD002"], severity=Severity.error)}
    monkeypatch.setattr("ddcheck.rules.all_rules", lambda: promoted)
    again = scan([str(rules_dir() / "DD002" / "bad.py")], settings=Settings(), use_cache=False).findings
    assert again and {f.severity for f in again if f.rule == "DD002"} == {Severity.error}
