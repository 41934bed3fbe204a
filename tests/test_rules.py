"""Every rule's bad example is flagged exactly where it says (`# expect: ID`), its good example not at all.

The examples live next to the rule definitions in rules/<ID>/ and double as its documentation.
"""

from __future__ import annotations

import re
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
    doc = all_rules()[rule_id].doc()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "Use instead:", "## Fix"):
        assert heading in doc
