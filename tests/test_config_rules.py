"""Every config check is a rule (rules/DD2xx): its examples are launches, and they are tests here: the
bad launch fires the rule, the good one does not (rules/README.md says how an example is written).

The examples run in this process on the trees tests/test_config.py opens (its ``release`` cache, so a
release's flag table and modules are read once for both files): ``sglang==X`` is the release wheel and
``python/sglang`` the DDTree pull-request tree that tests/test_config.py builds from 0.5.16
(``build_ddtree_tree``: the DDTREE algorithm, ``--speculative-ddtree-budget`` and the page-size hook of
sgl-project/sglang#29907). `config --smoke` examples (``# options: --smoke``) run the tree's verify path
on the CPU through the Triton interpreter.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from ddcheck.launch import check_launch
from ddcheck.rules import all_rules, launch_example, rules_dir
from test_config import _TREES, build_ddtree_tree, release

REPO = Path(__file__).resolve().parents[1]
RULES = sorted(r.id for r in all_rules().values() if r.face == "config")
network = pytest.mark.network
DDTREE_PR = "python/sglang"  # the examples' name for a DDTree fork's package


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    def tree(target: str):
        if target == DDTREE_PR:
            if DDTREE_PR not in _TREES:
                from ddcheck.target.sources import open_target

                _TREES[DDTREE_PR] = open_target(str(build_ddtree_tree(tmp_path_factory.mktemp("ddtree-pr"))))
            return _TREES[DDTREE_PR]
        assert target.startswith("sglang=="), target
        return release(target.removeprefix("sglang=="))
    return tree


def example(rule_id: str, name: str, trees, monkeypatch):
    """The report of ``rules/<rule_id>/<name>`` (run from the repository root: paths in a launch are
    relative to it)."""
    target, options, argv = launch_example((rules_dir() / rule_id / name).read_text(encoding="utf-8"))
    smoke = None
    if "--smoke" in options:
        from ddcheck.config_smoke import launch_smoke

        smoke = partial(launch_smoke, device="cpu")
    monkeypatch.chdir(REPO)
    return check_launch(argv, tree=trees(target), smoke=smoke), argv


@network
@pytest.mark.parametrize("rule_id", RULES)
def test_bad_launch_fires_its_rule(rule_id, trees, monkeypatch):
    from ddcheck.launch.report import locate

    rule = all_rules()[rule_id]
    report, argv = example(rule_id, "bad.launch", trees, monkeypatch)
    fired = [f for f in report.findings if f.rule == rule_id]
    assert fired, [(f.id, f.message) for f in report.findings]
    f = fired[0]
    assert f.id == rule.name and f.consequence.value in rule.consequences
    if rule.consequences == ["CORRUPT"] or rule.severity.value == "info":  # one level, the rule's
        assert f.level == rule.severity.value
    # where the tree decided it, and (for a rule about flags the launch passed) where the launch set it
    assert f.decided_at == (str(f.evidence[0]) if f.evidence else None)
    locate(report, argv, None)
    given = [flag for flag in rule.flags if "--" + flag.replace("_", "-") in argv]
    assert bool(f.set_at) == bool(given) and all(w.split()[0].split("=")[0] in argv for w in f.set_at)


@network
@pytest.mark.parametrize("rule_id", RULES)
def test_good_launch_does_not_fire_it(rule_id, trees, monkeypatch):
    report, _ = example(rule_id, "good.launch", trees, monkeypatch)
    assert not [f for f in report.findings if f.rule == rule_id], [(f.id, f.message) for f in report.findings]
    assert all(f.rule is not None for f in report.findings), "every finding of config has a rule"
