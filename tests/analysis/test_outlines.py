"""A module's outline (ddcheck/analysis/module.py: its classes' bases, imports, methods by name)
answers what threading W into a helper asks of the tree's other modules - does a class there derive
from the helper's, through any number of modules? - without parsing them. Forked workers hand each
other the outlines of what they parsed; the answers must be the ones parsing gives."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddcheck.analysis.chunk import ChunkAnalysis
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
from ddcheck.tree.sources import open_target

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "analysis"


def _package(root: Path, override: bool) -> Path:
    """``Backend._verify_layout`` (threading.py) reads C on the verify path; ``Leaf`` derives from
    it through ``Mid``, two modules away, and overrides the helper when ``override``; ``Other``
    defines a helper of that name in an unrelated class."""
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(FIXTURES / "threading.py", pkg / "backend.py")
    (pkg / "mid.py").write_text("from .backend import Backend\n\n\nclass Mid(Backend):\n    pass\n")
    body = "    def _verify_layout(self, seq_lens):\n        return seq_lens\n" if override else "    pass\n"
    (pkg / "leaf.py").write_text(f"from .mid import Mid as Base\n\n\nclass Leaf(Base):\n{body}")
    (pkg / "other.py").write_text("class Other:\n    def _verify_layout(self, seq_lens):\n        self._verify_layout(seq_lens)\n")
    return pkg


def _layout_fix(analysis: ChunkAnalysis):
    tree = analysis.tree
    analysis.add(next(i for i, f in enumerate(tree.files) if f.relpath.endswith("backend.py")))
    result = analysis.finish()
    [finding] = [f for f in result.findings if f.function == "Backend._verify_layout"]
    return finding.fix


def _outlined(pkg: Path) -> ChunkAnalysis:
    """An analysis handed, as a worker is, the outlines of modules another process parsed."""
    tree = open_target(str(pkg))
    elsewhere, shared = ChunkAnalysis(tree, DEFAULT_VOCABULARY), []
    elsewhere.share = shared.append
    for module in ("pkg.mid", "pkg.leaf", "pkg.other"):
        elsewhere.load(module)
    here = ChunkAnalysis(tree, DEFAULT_VOCABULARY)
    here.outlines.update((o.relpath, o) for o in shared)
    assert set(here.outlines) == {"pkg/mid.py", "pkg/leaf.py", "pkg/other.py"}
    return here


def test_an_override_two_modules_down_stops_threading_w_in_one_process_and_from_outlines(tmp_path):
    pkg = _package(tmp_path, override=True)
    assert _layout_fix(ChunkAnalysis(open_target(str(pkg)), DEFAULT_VOCABULARY)) is None
    here = _outlined(pkg)
    assert _layout_fix(here) is None
    assert not {"pkg.mid", "pkg.leaf", "pkg.other"} & set(here.models)  # known from the outlines alone


def test_classes_that_do_not_derive_are_not_parsed_and_do_not_stop_the_fix(tmp_path):
    pkg = _package(tmp_path, override=False)
    single = ChunkAnalysis(open_target(str(pkg)), DEFAULT_VOCABULARY)
    here = _outlined(pkg)
    fix = _layout_fix(here)
    assert fix is not None and fix == _layout_fix(single)
    # `Other` calls and defines the name but does not derive from Backend; `Leaf` derives but
    # neither defines nor calls it: none of the three modules had to be parsed.
    assert not {"pkg.mid", "pkg.leaf", "pkg.other"} & set(here.models)


def test_each_module_parsed_is_shared_once_as_it_is_parsed(tmp_path):
    tree = open_target(str(_package(tmp_path, override=True)))
    analysis, shared = ChunkAnalysis(tree, DEFAULT_VOCABULARY), []
    analysis.share = shared.append
    analysis.load("pkg.leaf")
    analysis.load("pkg.missing")  # not in the tree: nothing to outline
    assert [o.relpath for o in shared] == ["pkg/leaf.py"]
    assert shared[0].class_bases == {"Leaf": ("Base",)}
    assert shared[0].imports == {"Base": ("pkg.mid", "Mid")}
    assert shared[0].methods == {"_verify_layout": ["Leaf"]}
    analysis.load("pkg.leaf")
    assert len(shared) == 1
    analysis.load("pkg.mid")
    assert [o.relpath for o in shared] == ["pkg/leaf.py", "pkg/mid.py"]


def test_an_outline_sent_while_a_worker_analyses_is_taken_in_before_parsing_for_it(tmp_path):
    """A worker that needs a module's outline first takes in what the others sent meanwhile (a worker
    shares each outline as it parses the module): it parses the module only when none came."""
    tree = open_target(str(_package(tmp_path, override=True)))
    elsewhere, shared = ChunkAnalysis(tree, DEFAULT_VOCABULARY), []
    elsewhere.share = shared.append
    elsewhere.load("pkg.leaf")
    here, asked = ChunkAnalysis(tree, DEFAULT_VOCABULARY), []

    def catch_up():
        asked.append(1)
        here.outlines.update((o.relpath, o) for o in shared)

    here.catch_up = catch_up
    assert here.outline_of("pkg.leaf") == shared[0] and asked and "pkg.leaf" not in here.models
    assert here.outline_of("pkg.mid").relpath == "pkg/mid.py" and "pkg.mid" in here.models  # none came: parsed


def test_prepared_findings_load_what_threading_w_reads_and_change_no_finding(tmp_path):
    """A worker loads a helper's callers between candidates (ChunkAnalysis.prepare_findings), so
    that its findings() at the end has nothing left to parse; what it finds is what it finds without."""
    pkg = _package(tmp_path, override=False)
    (pkg / "caller.py").write_text(
        "from .mid import Mid\n\n\nclass Caller(Mid):\n    def init_forward_metadata(self, forward_batch):\n"
        "        if forward_batch.forward_mode.is_target_verify():\n"
        "            self._verify_layout(forward_batch.seq_lens)\n")
    tree = open_target(str(pkg))
    backend = next(i for i, f in enumerate(tree.files) if f.relpath.endswith("backend.py"))
    plain = ChunkAnalysis(tree, DEFAULT_VOCABULARY)
    plain.add(backend)
    expected = plain.finish().findings
    prepared = ChunkAnalysis(tree, DEFAULT_VOCABULARY)
    prepared.add(backend)
    assert "pkg.caller" not in prepared.models
    prepared.prepare_findings()
    loaded = set(prepared.models)
    assert "pkg.caller" in loaded  # a subclass that calls the helper: its call must hand W in
    found = prepared.finish().findings
    assert set(prepared.models) == loaded  # findings() parsed nothing more
    assert [(f.line, f.message, f.fix) for f in found] == [(f.line, f.message, f.fix) for f in expected]
    [fix] = [f.fix for f in found if f.function == "Backend._verify_layout"]
    assert any(e.path == "pkg/caller.py" for e in fix.edits)  # the subclass's call is among the edits


def test_callers_on_other_objects_are_parsed_smallest_first_until_one_settles_it(tmp_path):
    """``_verify_layout`` takes no forward mode: any call of it on another object means W cannot be
    threaded in. The smallest such caller is parsed and settles it; the larger one is never parsed,
    and the finding is the one a tree without it gets."""
    def layout_fix(pkg: Path, parsed: set[str]):
        analysis = ChunkAnalysis(open_target(str(pkg)), DEFAULT_VOCABULARY)
        fix = _layout_fix(analysis)
        parsed.update(m for m, model in analysis.models.items() if model is not None)
        return fix

    alone, both = tmp_path / "a", tmp_path / "b"
    alone.mkdir(), both.mkdir()
    for root in (alone, both):
        _package(root, override=False)
        (root / "pkg" / "small.py").write_text("def step(backend, lens):\n    backend._verify_layout(lens)\n")
    padding = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(300))
    (both / "pkg" / "large.py").write_text(f"def run(b, lens):\n    b._verify_layout(lens)\n{padding}")
    parsed_alone, parsed_both = set(), set()
    assert layout_fix(alone / "pkg", parsed_alone) is None
    assert layout_fix(both / "pkg", parsed_both) is None
    assert "pkg.small" in parsed_both and "pkg.large" not in parsed_both
    assert parsed_both == parsed_alone
