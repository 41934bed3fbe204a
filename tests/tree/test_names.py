"""Each SGLang name ddcheck relies on is defined once, in ddcheck/tree/names.py (issue 33)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ddcheck.tree import names

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ddcheck"
NAMES_FILE = PACKAGE / "tree" / "names.py"
LISTED = {k: v for k, v in vars(names).items() if k.isupper() and not k.startswith("_")}


def _strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(k) | _strings(v) for k, v in value.items())) if value else set()
    if isinstance(value, (tuple, list, set, frozenset)):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


VALUES = set().union(*(_strings(v) for k, v in LISTED.items() if k != "SHARED_WORDS")) - names.SHARED_WORDS
# Spelled nowhere else, not even inside a function: SGLang's modules and files, the backends' metadata
# entry points, the start-up handlers.
# the tree's classes ddcheck finds by name, too.
DISTINCTIVE = {v for v in VALUES if "/" in v or v.startswith(names.PACKAGE + ".")} | set(names.GRAPH_ENTRY_POINTS) | set(
    names.EAGER_ENTRY_POINTS) | set(names.HANDLER_NAMES) | set(names.HANDLER_METHOD_NAMES) | {
    v for k, v in LISTED.items() if k.endswith("_CLASS") or k == "FORWARD_MODE"}


def _sglang_path(value: object) -> bool:
    """A module or file of SGLang written out (``sglang.srt.x``, ``sglang/srt/x.py``), listed or not."""
    return isinstance(value, str) and value.startswith((names.PACKAGE + ".", names.PACKAGE + "/")) \
        and " " not in value


def _is_literal(node: ast.AST) -> bool:
    """A value written out: constants and containers of them (``frozenset({...})`` too)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and all(_is_literal(v) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return all(_is_literal(a) for a in node.args) and not node.keywords
    return False


def _literal_strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def second_definitions(source: str, where: str) -> list[str]:
    """Where ``source`` defines one of names.py's names again: a constant of a listed name bound to a
    literal, a module- or class-level literal holding one of their values, or anywhere a distinctive name
    (a module, a file, an entry point, a handler) spelled out."""
    tree = ast.parse(source)
    out = []
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    scopes = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in scopes:
        for st in body:
            if isinstance(st, ast.Assign):
                targets, value = st.targets, st.value
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                targets, value = [st.target], st.value
            else:
                continue
            bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if bound & LISTED.keys() and _is_literal(value):
                out.append(f"{where}:{st.lineno}: {', '.join(sorted(bound & LISTED.keys()))} defined again")
            written = _is_literal(value) or isinstance(value, (ast.Tuple, ast.Set, ast.List, ast.Dict))
            again = _literal_strings(value) & VALUES if written else set()
            if again:
                out.append(f"{where}:{st.lineno}: {', '.join(sorted(bound))} spells {sorted(again)}")
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and (n.value in DISTINCTIVE or _sglang_path(n.value)) \
                and id(n) not in docstrings:
            out.append(f"{where}:{n.lineno}: {n.value!r} spelled out")
    return sorted(set(out))


def test_no_sglang_name_is_defined_twice():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != NAMES_FILE:
            found += second_definitions(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == []


@pytest.mark.parametrize("source", [
    'EAGLE_FAMILY = {"EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"}',  # the duplicate of issue 33
    'VERIFY_TEXT = ("target_verify", "TARGET_VERIFY")',  # another name, the same words
    'class Hook:\n    OUT = "init_forward_metadata_out_graph"',
    'def f(tree):\n    return tree.find("sglang/srt/server_args.py")',
    'HANDLERS = frozenset({"handle_speculative_decoding"})',
    'def f(mods):\n    return mods.find_class("SpeculativeAlgorithm", "m")',  # a tree class by name
    'def f(rt):\n    return rt.load("sglang.srt.layers.some_new_module")',  # an SGLang module not listed
])
def test_the_check_finds_a_second_definition(source):
    assert second_definitions(source, "x.py")


@pytest.mark.parametrize("source", [
    "from ddcheck.tree.names import EAGLE_FAMILY",
    "from ddcheck.tree.names import GRAPH_ENTRY_POINTS as GRAPH\nALL = (*GRAPH, 'warmup')",
    'def f(s):\n    return s.algorithm == "DDTREE"',  # a use inside code, not a definition
])
def test_the_check_accepts_imports_and_uses(source):
    assert second_definitions(source, "x.py") == []


def test_the_duplicates_the_issue_names_are_one_object():
    from ddcheck.analysis import engine, triage, vocabulary
    from ddcheck.guard import hook
    from ddcheck.config import facts, paths, speculative, treerun

    assert facts.EAGLE_FAMILY is speculative.EAGLE_FAMILY is names.EAGLE_FAMILY
    assert engine.VERIFY_TEXT is names.VERIFY_MARKERS
    assert triage.VERIFY_MARKER_BYTES == tuple(m.encode() for m in names.VERIFY_MARKERS)
    assert vocabulary.WIDTH_FIELDS is names.WIDTH_FIELDS
    assert paths.GRAPH is names.GRAPH_ENTRY_POINTS and hook.OUT_GRAPH in names.GRAPH_ENTRY_POINTS
    assert treerun.HANDLER_NAMES is names.HANDLER_NAMES


def test_the_guard_no_longer_imports_the_analysis():
    """The guard runs inside every SGLang process: it reads the width fields from names.py, not
    through the analysis's vocabulary."""
    import subprocess
    import sys

    code = "import sys, ddcheck.guard.hook; print(sorted(m for m in sys.modules if m.startswith('ddcheck.analysis')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ files and ServerArgs fields, from a release

GENERIC = {"__init__.py", "__main__.py", "__pycache__", "python", "tests", "test"}  # any Python tree's


def release_words(wheel_path: Path) -> tuple[set[str], set[str]]:
    """(the folder and file names of a real sglang release, the fields of its ServerArgs with a ``_`` in
    their name: ``device`` and ``dtype`` are everyone's words)."""
    import zipfile

    with zipfile.ZipFile(wheel_path) as z:
        listed = [n for n in z.namelist() if n.startswith(names.PACKAGE + "/")]
        source = z.read(names.SERVER_ARGS_FILE).decode("utf-8")
    parts = {p for n in listed for p in n.split("/")[1:] if p} - GENERIC
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == names.SERVER_ARGS_CLASS)
    fields = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return parts, {f for f in fields if "_" in f}


def spelled_literals(source: str, where: str, parts: set[str], fields: set[str]) -> list[str]:
    """Where ``source`` spells an SGLang file or folder (a path whose every part is a folder or file of the
    release: ``srt/server_args.py``, ``/arg_groups/``, ``triton_backend.py``) or a ServerArgs field
    (``"speculative_num_steps"``), docstrings aside."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Constant) or not isinstance(n.value, str) or id(n) in docstrings or " " in n.value:
            continue
        segments = [s for s in n.value.split("/") if s]
        if ("/" in n.value or n.value.endswith(".py")) and segments and all(s in parts for s in segments):
            out.append(f"{where}:{n.lineno}: SGLang path {n.value!r} spelled out")
        elif n.value in fields:
            out.append(f"{where}:{n.lineno}: SGLang field {n.value!r} spelled out")
    return out


def test_no_sglang_file_or_server_args_field_is_spelled_outside_names(wheel):
    parts, fields = release_words(wheel("0.5.16"))
    parts |= release_words(wheel("0.5.23"))[0]  # its arg_groups/
    assert {"srt", "arg_groups", "triton_backend.py"} <= parts
    assert {"speculative_num_steps", "page_size"} <= fields
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != NAMES_FILE:
            found += spelled_literals(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)), parts, fields)
    assert found == []


@pytest.mark.parametrize("source", [
    'def f(tree):\n    return tree.find("srt/layers/attention/triton_backend.py")',
    'def f(rel):\n    return "/arg_groups/" in rel',
    'def f(ns):\n    return ns.get("speculative_num_steps")',
])
def test_the_check_finds_a_file_or_field_spelled_out(source):
    parts = {"srt", "layers", "attention", "triton_backend.py", "arg_groups"}
    assert spelled_literals(source, "x.py", parts, {"speculative_num_steps"})
    assert spelled_literals('from ddcheck.tree.names import TRITON_BACKEND_FILE\nX = "a/b"', "x.py", parts,
                            {"speculative_num_steps"}) == []


# ------------------------------------------------------------------ what smoke hands a backend (issue 42)

SMOKE = PACKAGE / "smoke"


def runtime_fields(wheel_path: Path) -> set[str]:
    """The fields of a real release's ForwardBatch and the attributes its ModelRunner assigns (``self.X =``
    anywhere in the class), those with a ``_`` in their name (``device`` is everyone's word)."""
    import zipfile

    def cls(source: str, name: str) -> ast.ClassDef:
        return next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)

    with zipfile.ZipFile(wheel_path) as z:
        batch = cls(z.read(names.FORWARD_BATCH_FILE).decode("utf-8"), names.FORWARD_BATCH_CLASS)
        runner = cls(z.read(names.MODEL_RUNNER_FILE).decode("utf-8"), names.MODEL_RUNNER_CLASS)
    fields = {s.target.id for s in batch.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    fields |= {n.attr for n in ast.walk(runner) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
               and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {f for f in fields if "_" in f}


def test_smoke_spells_no_forward_batch_or_model_runner_field(wheel):
    """The harness binds its values to the tree's ForwardBatch and ModelRunner through names.py only: no
    field of theirs is written out in ddcheck/smoke (fakes.py spelled about 120)."""
    fields = runtime_fields(wheel("0.5.16")) | runtime_fields(wheel("0.5.23"))
    assert {"seq_lens", "out_cache_loc", "req_to_token_pool", "token_to_kv_pool_allocator"} <= fields
    found = []
    for path in sorted(SMOKE.rglob("*.py")):
        source, where = path.read_text(encoding="utf-8"), str(path.relative_to(REPO))
        found += spelled_literals(source, where, set(), fields) + recorded_keywords(source, where, fields)
    assert found == []


def recorded_keywords(source: str, where: str, fields: set[str]) -> list[str]:
    """A field handed by keyword to a Recording (the tree's class stood in for) or to a backend's entry point
    (the harness's ``_call``): ``Recording(..., seq_lens=x)``, ``_call(fn, req_pool_indices=r)``."""
    return [f"{where}:{n.lineno}: {k.arg!r} handed by keyword" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in ("Recording", "_call")
            for k in n.keywords if k.arg in fields]


def test_the_check_finds_a_forward_batch_field_spelled_out():
    fields = {"seq_lens", "out_cache_loc"}
    assert spelled_literals('def f(fb):\n    return Recording("fb", **{"out_cache_loc": 2})', "x.py", set(), fields)
    assert recorded_keywords('def f(t):\n    return loader.Recording("fb", t, seq_lens=1)', "x.py", fields)
    assert recorded_keywords('def f(b):\n    _call(b.capture, bs=1, out_cache_loc=2)', "x.py", fields)
    ok = "from ddcheck.tree.names import SEQ_LENS\nX = Recording('fb', t, **{SEQ_LENS: 1})"
    assert spelled_literals(ok, "x.py", set(), fields) == recorded_keywords(ok, "x.py", fields) == []
