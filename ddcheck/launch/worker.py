"""W and the verify-input class, from how the target tree's worker builds its verify input.

For an algorithm, the worker class is the one the tree's ``SpeculativeAlgorithm`` hands out
(``if self.is_<algo>(): from X import Worker; return Worker``) in ``speculative/spec_info.py``. In the
worker (and its bases in the tree) every ``<Something>VerifyInput(..., draft_token_num=E)`` call is
a place a verify input is built; E is evaluated, like the ``if`` tests leading to the call, over the
attributes the worker's ``__init__`` chain sets from ``server_args`` (the values after the tree's own
start-up code ran). Tests that cannot be evaluated leave several candidates, all reported.

This reads the tree with ``ast`` and never runs it: the worker needs a GPU and the model.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ddcheck.launch.evaluate import UNKNOWN, Evaluator, guards_to, statements_before
from ddcheck.sources import SourceTree

SPEC_INFO = "sglang/srt/speculative/spec_info.py"


@dataclass
class VerifyChoice:
    """One verify input the worker may build for these settings."""

    cls: str  # class name, e.g. DDTreeVerifyInput
    width: int | None  # W (draft_token_num), None when it cannot be evaluated
    width_expr: str
    path: str  # where the worker builds it
    line: int
    when: list[str] = field(default_factory=list)  # the tests that lead there, as evaluated
    attrs: list[str] = field(default_factory=list)  # the fields the class carries (its dataclass fields)
    cls_path: str = ""
    cls_line: int = 0
    kwargs: list[str] = field(default_factory=list)  # the fields the worker sets when it builds it


@dataclass
class WorkerFacts:
    worker: str | None = None
    worker_path: str = ""
    worker_line: int = 0
    choices: list[VerifyChoice] = field(default_factory=list)
    note: str = ""

    @property
    def widths(self) -> set[int]:
        return {c.width for c in self.choices if c.width is not None}


# --------------------------------------------------------------------------- the tree's modules


class _Modules:
    def __init__(self, tree: SourceTree):
        self.tree = tree
        root = tree.package_root("sglang")
        self.prefix = f"{root}/" if root else ""
        self.cache: dict[str, tuple[str, ast.Module] | None] = {}

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        if dotted not in self.cache:
            rel = self.prefix + dotted.replace(".", "/") + ".py"
            f = self.tree.find(rel) if rel else None
            try:
                self.cache[dotted] = (f.relpath, ast.parse(f.read_bytes())) if f is not None else None
            except (SyntaxError, ValueError, OSError):
                self.cache[dotted] = None
        return self.cache[dotted]

    def find_class(self, name: str, module: str) -> tuple[str, ast.ClassDef, str] | None:
        """(relpath, ClassDef, module) for ``name`` defined in, or imported into, ``module``."""
        hit = self.module(module)
        if hit is None:
            return None
        rel, mod = hit
        for node in mod.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return rel, node, module
        for node in ast.walk(mod):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang."):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        return self.find_class(a.name, node.module)
        return None

    def imports_of(self, module: str) -> dict[str, str]:
        hit = self.module(module)
        out: dict[str, str] = {}
        if hit is None:
            return out
        for node in ast.walk(hit[1]):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang."):
                for a in node.names:
                    out[a.asname or a.name] = node.module
        return out


def worker_class(mods: _Modules, algorithm: str) -> tuple[str, str] | None:
    """(class name, module) the tree's SpeculativeAlgorithm gives for ``algorithm``."""
    hit = mods.module("sglang.srt.speculative.spec_info")
    if hit is None:
        return None
    want = f"is_{algorithm.lower()}"
    for node in ast.walk(hit[1]):
        if not isinstance(node, ast.If):
            continue
        t = node.test
        if isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and t.func.attr == want and not t.args:
            imports = {a.asname or a.name: (n.module, a.name) for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                       if isinstance(n, ast.ImportFrom) and n.module for a in n.names}
            for n in node.body:
                if isinstance(n, ast.Return) and isinstance(n.value, ast.Name) and n.value.id in imports:
                    module, name = imports[n.value.id]
                    return name, module
    return None


# --------------------------------------------------------------------------- evaluation

def _class_chain(mods: _Modules, name: str, module: str) -> list[tuple[str, ast.ClassDef, str]]:
    """The class and its bases defined in the tree, base first."""
    out: list[tuple[str, ast.ClassDef, str]] = []
    seen = set()
    hit = mods.find_class(name, module)
    while hit is not None and hit[1].name not in seen:
        seen.add(hit[1].name)
        out.insert(0, hit)
        rel, node, mod = hit
        base = next((b.id for b in node.bases if isinstance(b, ast.Name)), None)
        hit = mods.find_class(base, mod) if base else None
    return out


def class_fields(mods: _Modules, name: str, module: str) -> tuple[list[str], str, int]:
    """The annotated fields of a verify-input class and its bases (dataclass fields), and where it is."""
    chain = _class_chain(mods, name, module)
    fields: list[str] = []
    for _, node, _ in chain:
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields.append(item.target.id)
    where = (chain[-1][0], chain[-1][1].lineno) if chain else ("", 0)
    return sorted(set(fields)), where[0], where[1]


def verify_inputs(tree: SourceTree, algorithm: str, values: dict[str, Any]) -> WorkerFacts:
    mods = _Modules(tree)
    facts = WorkerFacts()
    found = worker_class(mods, algorithm)
    if found is None:
        facts.note = f"no worker for {algorithm} found in {SPEC_INFO}"
        return facts
    name, module = found
    chain = _class_chain(mods, name, module)
    if not chain:
        facts.note = f"worker class {name} not found in {module}"
        return facts
    facts.worker, facts.worker_path, facts.worker_line = name, chain[-1][0], chain[-1][1].lineno
    ev = Evaluator(values)
    for _, node, _ in chain:
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None:
            params = [a.arg for a in init.args.args]
            ev.sa = {params[1]} if len(params) > 1 else {"server_args"}
            ev.run(init.body, {})
    seen: set[tuple] = set()
    overridden: set[str] = set()  # methods a subclass redefines without calling the base's
    for rel, node, mod in reversed(chain):  # the subclass first
        imports = mods.imports_of(mod)
        methods = [fn for fn in node.body if isinstance(fn, ast.FunctionDef) and fn.name != "__init__"]
        live = [fn for fn in methods if fn.name not in overridden]
        overridden |= {fn.name for fn in methods if not _calls_super(fn)}
        for fn in live:
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id.endswith("VerifyInput")):
                    continue
                kw = next((k for k in call.keywords if k.arg == "draft_token_num"), None)
                if kw is None:
                    continue
                conds = guards_to(fn.body, call, [])
                local_ev = Evaluator(values)
                local_ev.sa, local_ev.self_env = ev.sa, ev.self_env
                local_ev.run(statements_before(fn.body, call), local_ev.local)
                results = [(c, pol, local_ev(c)) for c, pol in conds]
                if any(v is not UNKNOWN and bool(v) != pol for _, pol, v in results):
                    continue  # a test on the way is false for these settings
                width = local_ev(kw.value)
                cls_module = _import_module_for(fn, call.func.id) or imports.get(call.func.id, mod)
                attrs, cls_rel, cls_line = class_fields(mods, call.func.id, cls_module)
                key = (call.func.id, width if width is not UNKNOWN else None)
                if key in seen:
                    continue
                seen.add(key)
                facts.choices.append(VerifyChoice(
                    cls=call.func.id, width=width if isinstance(width, int) else None,
                    width_expr=ast.unparse(kw.value), path=rel, line=call.lineno,
                    when=[("" if pol else "not ") + f"({ast.unparse(c)})" for c, pol, v in results if v is not UNKNOWN],
                    attrs=attrs, cls_path=cls_rel, cls_line=cls_line,
                    kwargs=[k.arg for k in call.keywords if k.arg]))
    if not facts.choices:
        facts.note = f"{name} builds no verify input with draft_token_num= that these settings reach"
    return facts


def _calls_super(fn: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == fn.name
               and isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
               and n.func.value.func.id == "super" for n in ast.walk(fn))


def _import_module_for(fn: ast.FunctionDef, name: str) -> str | None:
    for n in ast.walk(fn):
        if isinstance(n, ast.ImportFrom) and n.module and any((a.asname or a.name) == name for a in n.names):
            return n.module
    return None


def capture_width(tree: SourceTree, algorithm: str, values: dict[str, Any]) -> tuple[int | None, str]:
    """Tokens per request the tree's CUDA-graph runner captures target-verify graphs with
    (``self.num_tokens_per_bs = spec_algorithm.get_num_tokens_per_bs_for_target_verify(...)``),
    evaluated for this algorithm and these settings; (None, "") when it cannot be told."""
    mods = _Modules(tree)
    spec = mods.module("sglang.srt.speculative.spec_info")
    methods: dict[str, ast.FunctionDef] = {}
    if spec is not None:
        for node in ast.walk(spec[1]):
            if isinstance(node, ast.ClassDef):
                methods.update({f.name: f for f in node.body if isinstance(f, ast.FunctionDef)})
    f = tree.find("sglang/srt/model_executor/cuda_graph_runner.py")
    if f is not None:
        rel = f.relpath
        mod = ast.parse(f.read_bytes())
        for cls in (n for n in mod.body if isinstance(n, ast.ClassDef)):
            init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is None:
                continue
            for stmt in ast.walk(init):
                if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == "num_tokens_per_bs" for t in stmt.targets) \
                        and "target_verify" in ast.unparse(stmt.value):
                    ev = Evaluator(values)
                    ev.methods, ev.algorithm = methods, algorithm
                    ev.sa = {"server_args"}
                    ev.local = {a.arg: None for a in [*init.args.args[1:], *init.args.kwonlyargs]}  # overrides unset
                    ev.run(statements_before(init.body, stmt), ev.local)
                    w = ev(stmt.value)
                    if isinstance(w, int):
                        return w, f"{rel}:{stmt.lineno}"
    return None, ""
