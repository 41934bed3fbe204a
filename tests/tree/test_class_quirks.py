"""One class/method resolver (ddcheck/tree/hierarchy.py) for scan, config and smoke (issue 42).

fixtures/trees/class_quirks is a small sglang-shaped tree whose backends reach a helper of upstream's
class only through a quirk forks write: ``class VerifyBackend(VerifyBackend)`` (the imported class
extended under its own name), a base that is an alias of an alias (``Backend = LegacyVerifyBackend``,
itself ``= VerifyBackend``), and a helper of the second base (the first, a mixin, lacks it); its
verify input is ``class EagleVerifyInput(EagleVerifyInput)``, built by the alias ``TreeVerifyInput``.
The scan's finding, config's method and smoke's verify-input fields come from the same answer.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ddcheck.analysis.chunk import ChunkAnalysis
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
from ddcheck.scan.api import scan
from ddcheck.tree.hierarchy import Hierarchy, Outline, outline
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.parse import parse_source
from ddcheck.tree.sources import open_target
from ddcheck.tree.worker import class_fields

REPO = Path(__file__).resolve().parents[2]
TREE = REPO / "fixtures" / "trees" / "class_quirks"
ATTENTION = "sglang.srt.layers.attention"
BASE = "sglang/srt/layers/attention/base_backend.py"
# (module, class, the method its verify branch calls): each reaches upstream's helper through one quirk
CALLS = [(f"{ATTENTION}.fork_backend", "VerifyBackend", "extend_len"),      # class X(X)
         (f"{ATTENTION}.alias_backend", "AliasBackend", "padded_seq_lens"),  # base: an alias of an alias
         (f"{ATTENTION}.mixin_backend", "MixinBackend", "query_len")]        # the second base's


def line_of(relpath: str, text: str) -> int:
    lines = (TREE / relpath).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def tree():
    return open_target(str(TREE))


def test_scan_reaches_the_helper_through_each_quirk():
    result = scan([str(TREE)])
    found = {(f.path.split("class_quirks/")[1], f.line, f.function) for f in result.findings}
    assert found == {(BASE, line_of(BASE, f"def {name}(") + 1, f"VerifyBackend.{name}") for _, _, name in CALLS}


@pytest.mark.parametrize("module, cls, name", CALLS)
def test_scan_and_config_resolve_the_call_alike(tree, module, cls, name):
    """The scan's engine and config's evaluator (TreeModules.method) name the same function."""
    chunk = ChunkAnalysis(tree, DEFAULT_VOCABULARY)
    model, func = chunk.engine.classes.method_of(chunk.load(module), cls, name)
    mods = TreeModules.of(tree)
    fn, owner = mods.method(cls, module, name)
    assert (model.source.relpath, func.qualname, func.node.lineno) == (BASE, f"VerifyBackend.{name}", fn.lineno)
    assert mods.module(owner)[0] == BASE


@pytest.mark.parametrize("name", ["EagleVerifyInput", "TreeVerifyInput"])
def test_smoke_reads_the_verify_inputs_fields_through_the_quirks(tree, name):
    """smoke's fields of the verify input (``class_fields``) follow ``class X(X)`` and the alias to the
    base's fields, over the classes the scan's resolver orders alike."""
    module = "sglang.srt.speculative.fork_info"
    mods = TreeModules.of(tree)
    fields, rel, line = class_fields(mods, name, module)
    assert fields == ["custom_mask", "draft_token_num", "tree_budget"]
    assert (rel, line) == ("sglang/srt/speculative/fork_info.py",
                           line_of("sglang/srt/speculative/fork_info.py", "class EagleVerifyInput("))
    chunk = ChunkAnalysis(tree, DEFAULT_VOCABULARY)
    ref = chunk.engine.classes.hierarchy.find(name, module)
    assert [(c.relpath, c.name) for c in chunk.engine.classes.hierarchy.mro(ref)] == \
        [(r, node.name) for r, node, _ in mods.class_chain(name, module)] == \
        [("sglang/srt/speculative/fork_info.py", "EagleVerifyInput"),
         ("sglang/srt/speculative/eagle_info.py", "EagleVerifyInput"),
         ("sglang/srt/speculative/spec_info.py", "SpecInput")]


def outlines(**sources: str) -> Hierarchy:
    """A resolver over modules written here (module name -> source)."""
    made = {m: outline(m.replace(".", "/") + ".py", m, parse_source(s.encode(), m)) for m, s in sources.items()}
    return Hierarchy(made.get)


def test_bases_are_ordered_as_python_orders_them():
    h = outlines(m="class A:\n def f(self): pass\nclass B(A): pass\nclass C(A):\n def f(self): pass\n"
                   "class D(B, C): pass\n")
    mro = [c.name for c in h.mro(h.find("D", "m"))]
    assert mro == ["D", "B", "C", "A"]  # C3: C before A, where depth first would give A's f
    assert h.method(h.find("D", "m"), "f").name == "C"


def test_a_class_named_as_its_base_derives_from_the_base_it_imported():
    h = outlines(**{"p.base": "class X:\n def f(self): pass\n",
                    "p.fork": "from .base import X\nclass X(X):\n def g(self): pass\n"})
    ref = h.find("X", "p.fork")
    assert [(c.module, c.name) for c in h.mro(ref)] == [("p.fork", "X"), ("p.base", "X")]
    assert h.method(ref, "f").module == "p.base" and h.method(ref, "g").module == "p.fork"


def test_aliases_imports_inside_functions_and_modules_imported_whole():
    h = outlines(**{"p.a": "class W2: pass\nW = W2\n",
                    "p.b": "import p.a as pa\nclass S(pa.W): pass\n"
                           "def make():\n    from p.a import W2 as Late\n    return Late()\n"})
    assert h.find("W", "p.a") == h.find("W2", "p.a")
    assert [c.name for c in h.mro(h.find("S", "p.b"))] == ["S", "W2"]
    assert h.find("Late", "p.b").name == "W2"  # an import inside a function is seen where nothing else binds


def test_cycles_and_inconsistent_orders_end():
    h = outlines(m="class A(B): pass\nclass B(A): pass\nclass X: pass\nclass Y(X): pass\nclass Z(X, Y): pass\n")
    assert {c.name for c in h.mro(h.find("A", "m"))} == {"A", "B"}
    assert [c.name for c in h.mro(h.find("Z", "m"))] == ["Z", "X", "Y"]  # Python refuses it; an order still


def test_outlines_travel_between_processes():
    o = outline("m.py", "m", parse_source(b"from x import Y\nclass A(Y):\n def f(self): pass\nZ = A\n", "m"))
    assert pickle.loads(pickle.dumps(o)) == o and isinstance(o, Outline)
