"""The verify-path model on hand-written fixtures (fixtures/analysis), and bad input."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

from ddcheck.scan.api import scan
from ddcheck.scan.settings import Settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "analysis"
EXPECT = re.compile(r"#\s*expect:\s*(?P<ids>(?:DD\d{3}\s*)+)")


def expected(paths):
    out = Counter()
    for path in paths:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = EXPECT.search(line)
            for rid in (m.group("ids").split() if m else []):
                out[(path.name, n, rid)] += 1
    return out


def findings(target):
    result = scan([str(target)], settings=Settings())
    assert result.errors == []
    return result.findings


@pytest.mark.parametrize("name", ["guards.py", "dataflow.py", "helpers.py", "edges.py", "buffers.py", "forks.py",
                                  "threading.py"])
def test_fixture_findings_match_expectations(name):
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(FIXTURES / name))
    assert got == expected([FIXTURES / name])


def test_cross_module_helper_receiving_c_is_reported_at_the_call():
    pkg = FIXTURES / "crossmod"
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(pkg))
    assert got == expected(sorted(pkg.rglob("*.py")))
    f = findings(pkg)[0]
    assert "build_mask_indptr" in f.message and "verify_mask.py" in f.message


def test_mixin_helpers_in_another_module_are_reached_through_the_class_bases():
    pkg = FIXTURES / "mixins"
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(pkg))
    assert got == expected(sorted(pkg.rglob("*.py")))
    edits = {(e.kind, e.path) for f in findings(pkg) for e in f.fix.edits}
    assert edits == {("bind", ""), ("replace", ""), ("add_parameter", ""), ("add_keyword", "pkg/backend.py")}


MODES_HANDED = FIXTURES / "modes_handed"


def test_calls_handing_a_non_verify_mode_or_from_test_code_need_no_w():
    """fixtures/analysis/modes_handed: the only call that reaches `_precompute_verify`'s dispatcher is on
    another object and hands it ForwardMode.DECODE; `_apply` is also driven by test code."""
    fs = findings(MODES_HANDED)
    assert Counter((Path(f.path).name, f.line, f.rule) for f in fs) == expected(sorted(MODES_HANDED.rglob("*.py")))
    dead = next(f for f in fs if f.function == "PrecomputeMixin._precompute_verify")
    assert dead.fix_safety == "unsafe" and [e.kind for e in dead.fix.edits] == ["bind", "replace", "add_parameter"]
    assert "No call in the tree reaches this verify path today" in dead.hint and "pkg/backend.py:26" in dead.hint
    applied = next(f for f in fs if f.function == "PrecomputeMixin._apply")
    assert applied.fix_safety == "safe"
    assert {(e.kind, e.path, e.line) for e in applied.fix.edits if e.kind.startswith("add_")} == {
        ("add_parameter", "", 24), ("add_keyword", "pkg/backend.py", 14)}


@pytest.mark.parametrize("call, function", [
    ("backend._apply(seq_lens, mode)", "PrecomputeMixin._apply"),  # a mode it was handed: could not get W
    ("backend._precompute(2, seq_lens, ForwardMode.TARGET_VERIFY)", "PrecomputeMixin._precompute_verify"),
])
def test_a_serving_call_on_another_object_that_may_verify_keeps_the_helper_unfixed(tmp_path, call, function):
    import shutil

    tree = tmp_path / "modes_handed"
    shutil.copytree(MODES_HANDED, tree)
    (tree / "pkg" / "runner.py").write_text(
        f"from .backend import ForwardMode\n\n\ndef step(backend, seq_lens, mode):\n    {call}\n")
    f = next(f for f in findings(tree) if f.function == function)
    assert f.fix is None and "No verify input is in scope" in f.hint


def test_single_file_resolves_its_helper_module_on_disk():
    # pre-commit passes only the changed file; the helper module is found next to it.
    got = [(Path(f.path).name, f.line) for f in findings(FIXTURES / "crossmod" / "pkg" / "backend.py")]
    assert got == [("backend.py", 13)]


def test_helper_without_verify_input_gets_w_threaded_from_its_verify_caller():
    fs = [f for f in findings(FIXTURES / "helpers.py") if f.function == "HelperBackend._fill_verify"]
    assert fs and all(f.replacement == "(verify_width or self.num_draft_tokens)" for f in fs)
    threaded = {(e.kind, e.line, e.text) for f in fs for e in f.fix.edits if e.kind.startswith("add_")}
    assert threaded == {("add_parameter", 25, ", verify_width=None"),
                        ("add_keyword", 23, ', verify_width=getattr(spec_info, "draft_token_num", None)')}


@pytest.mark.parametrize("function", ["Backend._orphan", "Overridden._rows"])
def test_helper_whose_verify_caller_has_no_verify_input_or_that_is_overridden_has_no_automatic_fix(function):
    fs = [f for f in findings(FIXTURES / "threading.py") if f.function == function]
    assert fs and all(f.replacement is None and "No verify input is in scope" in f.hint for f in fs)


def test_ternary_guard_is_fixed_inline():
    f = next(f for f in findings(FIXTURES / "guards.py") if f.function == "GuardsBackend.ternary")
    assert f.replacement == '(getattr(spec_info, "draft_token_num", None) or self.num_draft_tokens)'
    # no statement to bind W before: one edit, the read itself replaced by the expression
    assert [(e.kind, e.line, e.column, e.end_column, e.text) for e in f.fix.edits] == \
        [("replace", f.line, f.column, f.end_column, f.replacement)]


def test_newer_width_api_is_used_when_the_tree_has_it(tmp_path):
    spec = tmp_path / "sglang" / "srt" / "speculative"
    spec.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (spec / "spec_info.py").write_text("class SpecInput:\n    num_tokens_per_req: int = -1\n")
    att = tmp_path / "sglang" / "srt" / "layers"
    att.mkdir(parents=True)
    (att / "backend.py").write_text((FIXTURES / "guards.py").read_text())
    f = next(f for f in scan([str(tmp_path)], settings=Settings()).findings if f.function == "GuardsBackend.compound_and")
    assert f.replacement == ("(spec_info.num_tokens_per_req if spec_info is not None and "
                             "spec_info.num_tokens_per_req > 0 else self.num_draft_tokens)")


def test_bad_input_is_reported_and_the_scan_goes_on(tmp_path):
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")
    (tmp_path / "broken.py").write_text("def f(:\n    x.speculative_num_draft_tokens if is_target_verify()\n")
    os.symlink(tmp_path / "missing.py", tmp_path / "dangling.py")
    good = tmp_path / "backend.py"
    good.write_text((FIXTURES / "guards.py").read_text())
    result = scan([str(tmp_path)], settings=Settings())
    errors = {Path(e.path).name: e.message for e in result.errors}
    assert errors["latin1.py"].startswith("not UTF-8")
    assert errors["broken.py"].startswith("does not parse")
    assert errors["dangling.py"].startswith("cannot be read")
    assert any(Path(f.path).name == "backend.py" for f in result.findings)


def test_explicit_file_with_syntax_error_is_reported_even_without_candidates(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f(:\n")
    result = scan([str(bad)], settings=Settings())
    assert result.errors and "does not parse" in result.errors[0].message


def test_non_ascii_columns_are_characters(tmp_path):
    src = (FIXTURES / "guards.py").read_text().replace(
        "            self.max_extend_len = self.num_draft_tokens  # expect: DD001",
        "            self.max_extend_len = (\"é\", self.num_draft_tokens)  # expect: DD001")
    p = tmp_path / "b.py"
    p.write_text(src)
    f = next(f for f in scan([str(p)], settings=Settings()).findings if f.function == "GuardsBackend.compound_and")
    line = src.splitlines()[f.line - 1]
    assert line[f.column:f.end_column] == "self.num_draft_tokens"


def test_checkout_layout_resolves_absolute_imports(tmp_path):
    # A git checkout of sglang keeps the package under python/.
    pkg = tmp_path / "python" / "pkg"
    pkg.mkdir(parents=True)
    for f in (FIXTURES / "crossmod" / "pkg").iterdir():
        (pkg / f.name).write_text(f.read_text().replace("from .verify_mask import", "from pkg.verify_mask import"))
    got = [(Path(f.path).name, f.line, f.rule) for f in scan([str(tmp_path)], settings=Settings()).findings]
    assert got == [("backend.py", 13, "DD001")]


FORWARD_MODE_SOURCE = "sglang/srt/model_executor/forward_batch_info.py"


@pytest.mark.parametrize("version", ["0.5.5", "0.5.16", "0.5.23"])
def test_forward_mode_parsed_alone_is_the_class_the_whole_module_gives(wheel, version):
    """The mode table reads only ForwardMode (ddcheck/tree/modes.py parse_class): cut from the
    module's text at the next line of code at column 0, it must be node for node, line for line, the
    class a parse of the whole ~100 KB module holds."""
    import ast
    import zipfile

    from ddcheck.tree.modes import ModeTable, parse_class

    with zipfile.ZipFile(wheel(version)) as zf:
        text = zf.read(FORWARD_MODE_SOURCE).decode()
    alone = parse_class(text, "ForwardMode")
    whole = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == "ForwardMode")
    assert alone is not None
    assert ast.dump(alone, include_attributes=True) == ast.dump(whole, include_attributes=True)
    assert ModeTable.from_class(alone, "").covers["is_target_verify"] is True


@pytest.mark.parametrize("text", [
    'X = """\nclass ForwardMode:\n    pass\n"""\nclass ForwardMode:\n    def is_a(self):\n        return True\n',
    'class ForwardMode:\n    doc = """\ncolumn 0 inside a string\n"""\n',
    'class ForwardMode(\nIntEnum):\n    A = 1\n',
    '@unique\nclass ForwardMode:\n    A = 1\n',
    'class ForwardMode:\r\n    A = 1\r\n',
    'class Other:\n    pass\n',
], ids=["named twice", "string past the cut", "bracket past the cut", "decorated", "CR line ends", "absent"])
def test_forward_mode_not_cut_alone_where_its_lines_are_not_the_class_alone(text):
    """Then the module is parsed whole, as before (None from parse_class)."""
    from ddcheck.tree.modes import parse_class

    assert parse_class(text, "ForwardMode") is None


def test_forward_mode_parsed_alone_keeps_line_numbers_and_stops_at_column_zero_code():
    from ddcheck.tree.modes import parse_class

    text = ('import enum\n\n\nclass ForwardMode(enum.IntEnum):\n    A = 1\n\n    # indented comment\n'
            '# a comment at column 0\n    def is_a(self):\n        return self == ForwardMode.A\n\n\ndef after():\n    pass\n')
    node = parse_class(text, "ForwardMode")
    assert (node.lineno, node.end_lineno) == (4, 10)
    assert [type(s).__name__ for s in node.body] == ["Assign", "FunctionDef"]


def test_scan_and_config_read_the_trees_one_forward_mode_table(tmp_path):
    """One table per tree, read by the tree model: the scan's engine and config's launch get the same
    object, and a fork's own predicate is in it (here one that holds in TARGET_VERIFY)."""
    from ddcheck.analysis.chunk import ChunkAnalysis
    from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
    from ddcheck.tree.modules import TreeModules
    from ddcheck.tree.sources import open_target

    f = tmp_path / FORWARD_MODE_SOURCE
    f.parent.mkdir(parents=True)
    f.write_text("import enum\n\n\nclass ForwardMode(enum.IntEnum):\n    TARGET_VERIFY = 1\n    EXTEND = 2\n\n"
                 "    def is_fork_verify(self):\n        return self == ForwardMode.TARGET_VERIFY\n")
    tree = open_target(str(tmp_path))
    table = TreeModules.of(tree).mode_table()
    assert table.covers == {"is_fork_verify": True} and table.source.endswith("forward_batch_info.py")
    assert ChunkAnalysis(tree, DEFAULT_VOCABULARY).engine.modes.table is table


BACKEND_READING_C = (
    "class B:\n"
    "    def __init__(self, server_args):\n"
    "        self.n = server_args.speculative_num_draft_tokens\n\n"
    "    def lens(self, seq_lens):\n"
    "        return seq_lens + self.n\n"
)


@pytest.mark.parametrize("verify, analysed", [
    ("    # the target_verify path calls lens()\n", False),
    ("    def f(self, mode):\n        if mode.is_target_verify():\n            return self.lens(0)\n", True),
    ("    x = 1  # target_verify: a comment after code still counts, to be safe\n", True),
], ids=["comment line only", "code", "comment after code"])
def test_triage_counts_verify_markers_in_code_not_on_comment_lines(verify, analysed):
    """A comment neither tests for verify nor names a function: a file whose only mention of verify
    is on comment lines starts no verify path of its own (ddcheck/analysis/triage.py)."""
    from ddcheck.analysis.triage import needs_analysis
    from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY

    assert needs_analysis((BACKEND_READING_C + verify).encode(), DEFAULT_VOCABULARY) is analysed


def test_triage_reads_lines_ended_by_carriage_returns_alone():
    """Python ends a line at \\r too: a comment first line must not hide the rest of the file."""
    from ddcheck.analysis.triage import needs_analysis
    from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY

    source = "# a backend\n" + BACKEND_READING_C + \
        "    def f(self, mode):\n        if mode.is_target_verify():\n            return self.lens(0)\n"
    assert needs_analysis(source.encode(), DEFAULT_VOCABULARY)
    assert needs_analysis(source.replace("\n", "\r").encode(), DEFAULT_VOCABULARY)


def test_a_drafter_that_builds_its_verify_input_at_c_lays_out_its_own_step_with_w():
    """NGRAM's shape: the worker builds ``batch.spec_info`` with ``draft_token_num=C`` itself, so W is C
    wherever it lays out that step; not so where a class of the tree derives from it and builds the input
    again (it may build another width), nor where it builds another width on some branch."""
    pkg = FIXTURES / "producers"
    got = Counter((Path(f.path).name, f.line, f.rule) for f in findings(pkg))
    # LookupWorker's four C reads carry no expectation: the pass finds them, and they are its own W
    assert got == expected(sorted(pkg.rglob("*.py"))) and sum(got.values()) == 2
