"""Facts read from the target SGLang tree with ``ast``/text, never by importing it: which start-up
guards the release has (so a check fires only where that release would), the backend-name -> file
map of ``attention_registry.py``, which backends honour the custom (tree) mask, which refuse
topk > 1, and whether the verify CUDA graph is captured at the per-step width.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ddcheck.base.findings import Evidence
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import (ALGORITHMS, ARG_GROUPS_DIR, ARG_GROUP_FIELDS_DIR, MODEL_RUNNERS_DIR, ATTENTION_REGISTRY_FILE as REGISTRY,
                                  MODEL_EXECUTOR_DIR, REGISTRY_FUNCTION_HINTS as _FUNC_HINTS,
                                  SERVER_ARGS_FILE, SPEC_INFO_FILE)
from ddcheck.tree.names import ATTENTION_BACKEND, SPECULATIVE_ALGORITHM



@dataclass
class Guard:
    """A ``raise``/``assert``/``logger.warning`` of the start-up code whose message matched."""

    relpath: str
    line: int
    message: str
    tests: list[ast.expr] = field(default_factory=list)  # enclosing ``if`` tests, innermost last
    algos: set[str] = field(default_factory=set)  # algorithms the enclosing code is specific to
    scopes: list[ast.AST] = field(default_factory=list)  # enclosing function, then module

    @property
    def evidence(self) -> Evidence:
        return Evidence(path=self.relpath, line=self.line, text=self.message[:160])


def _startup_files(tree: SourceTree):
    for f in tree.files:
        rel = f.relpath
        if rel.endswith(SERVER_ARGS_FILE) or rel.endswith(SPEC_INFO_FILE) or (
                ARG_GROUPS_DIR in rel and ARG_GROUP_FIELDS_DIR not in rel and rel.endswith(".py")):
            yield f


def _flatten(node) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_flatten(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _flatten(node.left) + _flatten(node.right)
    return ""


def _algos_in(node) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in ALGORITHMS}


_CACHE: dict[tuple[str, int], tuple[SourceTree, object]] = {}


def _cached(kind: str, tree: SourceTree, compute):
    """Per-process memo keyed by tree identity (SourceTree is not hashable); keeps the tree alive."""
    key = (kind, id(tree))
    hit = _CACHE.get(key)
    if hit is None or hit[0] is not tree:
        if len(_CACHE) > 64:
            _CACHE.clear()
        hit = _CACHE[key] = (tree, compute(tree))
    return hit[1]


def _all_guards(tree: SourceTree) -> tuple[Guard, ...]:
    return _cached("guards", tree, _compute_guards)


def _compute_guards(tree: SourceTree) -> tuple[Guard, ...]:
    out: list[Guard] = []
    for f in _startup_files(tree):
        src = f.read_bytes().decode("utf-8", "replace")
        mod = TreeModules.of(tree).parsed(f.relpath) if "speculative" in src or "topk" in src else None
        if mod is None:
            continue

        def visit(node, tests, algos, scopes):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                hint = next((v for k, v in _FUNC_HINTS.items() if k in node.name.lower()), set())
                algos = algos | hint
                scopes = [node] + scopes
            msg, line = None, None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                msg, line = _flatten(node.exc.args[0]), node.lineno
            elif isinstance(node, ast.Assert):
                msg, line = (_flatten(node.msg) if node.msg else "") + " " + ast.unparse(node.test), node.lineno
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("warning", "warning_once", "info") and node.args:
                msg, line = _flatten(node.args[0]), node.lineno
            if msg:
                out.append(Guard(f.relpath, line, msg, list(tests), set(algos), scopes + [mod]))
            if isinstance(node, ast.If):
                inner = algos | _algos_in(node.test) if _mentions_algorithm(node.test) else algos
                for ch in node.body:
                    visit(ch, tests + [node.test], inner, scopes)
                for ch in node.orelse:
                    visit(ch, tests, algos, scopes)
                return
            for ch in ast.iter_child_nodes(node):
                visit(ch, tests, algos, scopes)

        visit(mod, [], set(), [])
    return tuple(out)


def _mentions_algorithm(test) -> bool:
    text = ast.unparse(test)
    return SPECULATIVE_ALGORITHM in text or "is_eagle" in text or "is_ngram" in text or "is_dflash" in text


def guards(tree: SourceTree, pattern: str) -> list[Guard]:
    """Start-up guards whose message matches ``pattern`` (regex, case-insensitive)."""
    rx = re.compile(pattern, re.I | re.S)
    return [g for g in _all_guards(tree) if rx.search(g.message)]


def guard_for(tree: SourceTree, pattern: str, algo: str | None = None) -> Guard | None:
    """The guard matching ``pattern`` that applies to ``algo`` (guards with no algorithm context
    apply to all)."""
    hits = guards(tree, pattern)
    if algo is not None:
        hits = [g for g in hits if not g.algos or algo in g.algos or (algo == "NEXTN" and "EAGLE" in g.algos)]
    return hits[0] if hits else None


def allow_list(g: Guard) -> list[str] | None:
    """Backends a guard allows: the ``attention_backend not in X`` / ``!= "x"`` of its ``if`` test."""
    for test in reversed(g.tests):
        for node in ast.walk(test):
            if not isinstance(node, ast.Compare) or ATTENTION_BACKEND not in ast.unparse(node.left):
                continue
            op, comp = node.ops[0], node.comparators[0]
            if isinstance(op, ast.NotEq) and isinstance(comp, ast.Constant):
                return [comp.value]
            if isinstance(op, ast.NotIn):
                v = _resolve(comp, g.scopes)
                if v is not None:
                    return v
    return None


def _resolve(node, scopes) -> list[str] | None:
    try:
        return list(ast.literal_eval(node))
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Name):
        for scope in scopes:
            for n in ast.walk(scope):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets):
                    try:
                        return list(ast.literal_eval(n.value))
                    except (ValueError, SyntaxError, TypeError):
                        continue
    return None


def text_marker(tree: SourceTree, pattern: str, files=None) -> Evidence | None:
    """First line of the start-up sources (or ``files``) matching ``pattern``."""
    rx = re.compile(pattern)
    cands = [f for f in tree.files if f.relpath in files] if files else list(_startup_files(tree))
    for f in cands:
        text = f.read_bytes().decode("utf-8", "replace")
        m = rx.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            return Evidence(path=f.relpath, line=line, text=text.splitlines()[line - 1].strip())
    return None


# ---------------------------------------------------------------------------------------------
# attention backends
# ---------------------------------------------------------------------------------------------

def _registry(tree: SourceTree) -> dict[str, tuple[str, ...]]:
    f = tree.find(REGISTRY)
    if f is None:
        return {}
    root = f.relpath[: -len(REGISTRY)]
    known = {x.relpath for x in tree.files}
    out: dict[str, tuple[str, ...]] = {}
    for fn in ast.walk(TreeModules.of(tree).parsed(f.relpath) or ast.Module(body=[], type_ignores=[])):
        if not isinstance(fn, ast.FunctionDef):
            continue
        names = [d.args[0].value for d in fn.decorator_list if isinstance(d, ast.Call) and d.args
                 and isinstance(d.args[0], ast.Constant) and "register" in ast.unparse(d.func)]
        mods = [n.module for n in ast.walk(fn) if isinstance(n, ast.ImportFrom) and n.module
                and ".attention" in n.module and n.module.endswith("backend")]
        files = tuple(dict.fromkeys(p for p in (root + m.replace(".", "/") + ".py" for m in mods) if p in known))
        for name in names:
            out[name] = files
    return out


def backend_files(tree: SourceTree) -> dict[str, tuple[str, ...]]:
    """Attention backend name -> the backend module files its factory builds (all branches)."""
    return _cached("registry", tree, _registry)


def _read(tree: SourceTree, relpath: str) -> str:
    f = next((x for x in tree.files if x.relpath == relpath), None)
    return f.read_bytes().decode("utf-8", "replace") if f else ""


def mask_honoured(tree: SourceTree, backend: str) -> tuple[bool | None, list[str]]:
    """Whether any module of ``backend`` reads the verify ``custom_mask`` (None: backend unknown)."""
    files = backend_files(tree).get(backend)
    if not files:
        return None, []
    return any("custom_mask" in _read(tree, p) for p in files), list(files)


def topk1_only(tree: SourceTree, backend: str) -> list[Evidence]:
    """Evidence lines where the backend's modules refuse topk > 1 for speculative decoding."""
    ev = []
    for p in backend_files(tree).get(backend, ()):
        for i, line in enumerate(_read(tree, p).splitlines(), 1):
            if re.search(r"only supports? topk\s*=+\s*1", line):
                ev.append(Evidence(path=p, line=i, text=line.strip()))
    return ev


# ---------------------------------------------------------------------------------------------
# CUDA graph capture width
# ---------------------------------------------------------------------------------------------

def _graph_files(tree: SourceTree):
    for f in tree.files:
        rel = f.relpath
        if MODEL_EXECUTOR_DIR in rel and ("cuda_graph" in rel or MODEL_RUNNERS_DIR in rel) and rel.endswith(".py"):
            yield f


def verify_capture(tree: SourceTree, width_source: str) -> tuple[bool, Evidence | None]:
    """Does the target-verify CUDA graph capture at the per-step width?

    ``width_source`` names what W is derived from (``ddtree``: the DDTree budget). Returns
    (captures_at_W, evidence): evidence is the W-aware line when found, else the line where the
    capture width is taken from ``speculative_num_draft_tokens`` (C).
    """
    c_line: Evidence | None = None
    for f in _graph_files(tree):
        text = f.read_bytes().decode("utf-8", "replace")
        for i, line in enumerate(text.splitlines(), 1):
            if width_source in line.lower() and "#" not in line.split(width_source)[0]:
                return True, Evidence(path=f.relpath, line=i, text=line.strip())
            if "server_args.speculative_num_draft_tokens" in line and (c_line is None or "server_args" not in c_line.text):
                c_line = Evidence(path=f.relpath, line=i, text=line.strip())
    return False, c_line
