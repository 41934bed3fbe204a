"""A read of C judged by the verify inputs the tree builds (issue 40), and what fix writes scanning clean
(issue 39). Fixtures: fixtures/analysis/inputs_tree (a tree drafter whose small budget builds a
ChainVerifyInput of width budget + 1 with no tree budget, tree_worker.py) and dispatch_tree (the tree's
only input of another width carries its budget); the release: sglang==0.5.10, fixed."""

from __future__ import annotations

import difflib
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from ddcheck.fix import api as fixer
from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings

from test_analysis import FIXTURES, expected

INPUTS_TREE = FIXTURES / "inputs_tree"
DISPATCH_TREE = FIXTURES / "dispatch_tree"


def findings(target, level: str = "info"):
    result = scan([str(target)], settings=Settings(fail_on=level), use_cache=False)
    assert result.errors == []
    return result.findings


@pytest.mark.parametrize("tree", [INPUTS_TREE, DISPATCH_TREE], ids=["inputs_tree", "dispatch_tree"])
def test_each_shape_gets_the_rule_its_inputs_decide(tree):
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(tree / "sglang"))
    assert got == expected(sorted(tree.rglob("*.py")))


def test_a_resolver_reached_by_an_input_of_another_width_names_it_and_is_fixed(tmp_path):
    fs = [f for f in findings(INPUTS_TREE / "sglang") if f.rule == "DD001"]
    assert fs and all("ChainVerifyInput" in f.message and "tree_worker.py" in f.message for f in fs)
    assert all(f.fix is not None and f.fix_safety.value == "safe" for f in fs)  # the default fix rewrites them
    out = tmp_path / "sglang"
    shutil.copytree(INPUTS_TREE / "sglang", out)
    fixer.fix_targets([str(out)])
    text = (out / "srt/layers/attention/resolver_backend.py").read_text()
    assert 'getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens' in text
    # what fix wrote is reached by no verify input (each carries draft_token_num): nothing left, at any level
    assert findings(out) == []


def test_the_same_resolver_is_a_fallback_where_only_width_c_inputs_reach_it():
    f = next(f for f in findings(DISPATCH_TREE / "sglang") if f.function == "DispatchBackend._resolve_width")
    assert f.rule == "DD003" and "width resolver" in f.message


def test_without_the_tree_a_backend_alone_keeps_todays_verdicts():
    # no verify input in the target: nothing to judge by, the resolver stays a fallback as before
    one = INPUTS_TREE / "sglang" / "srt" / "layers" / "attention" / "resolver_backend.py"
    rules = {f.line: f.rule for f in findings(one)}
    assert rules.get(23) == "DD003"


def _written_lines(before: list[str], after: list[str]) -> set[int]:
    """1-based lines of ``after`` that the fix added or changed."""
    out: set[int] = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
    return out


@pytest.mark.network
def test_what_fix_writes_on_a_release_scans_clean_at_every_level(wheel, tmp_path):
    """Issue 39's repro: `ddcheck fix sglang==0.5.10 --out DIR`, then `ddcheck scan --fail-on info
    DIR/sglang/srt/layers/attention` reported 31 DD003 on lines the fix wrote. Every verify input 0.5.10
    defines carries `draft_token_num` (a required field), so `getattr(spec_info, "draft_token_num", None)
    or C` is taken by none, nor is a threaded helper's `verify_width or C` that every verify caller hands
    that width: no finding on a line the fix wrote, scanning the folder alone or the whole tree."""
    out = tmp_path / "fixed"
    fixer.fix_tree(str(wheel("0.5.10")), out)
    archive = zipfile.ZipFile(wheel("0.5.10"))
    for target in (out / "sglang" / "srt" / "layers" / "attention", out / "sglang"):
        fs = findings(target)
        on_written = []
        for f in fs:
            rel = f.relpath if f.relpath.startswith("sglang/") else \
                str(Path(f.path).resolve().relative_to(out.resolve()))
            after = (out / rel).read_text().splitlines()
            before = archive.read(rel).decode().splitlines()
            if f.line in _written_lines(before, after):
                on_written.append((rel, f.line, f.rule))
        assert on_written == []
        assert not any(f.rule == "DD003" for f in fs)
