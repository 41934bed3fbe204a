"""How a backend's verify path treats a launch's verify input: which way a width resolver goes for
its class, and whether the tree mask is read on a path the launch's settings take.

``ddcheck scan`` reports a resolver's ``return C`` as a fallback (DD003): W for some verify inputs,
C for the others. For a launch, the verify input is known (its class and fields, from the tree's
worker), so the tests guarding the resolver's ``return W`` — ``hasattr(spec_info, "tree_budget")``,
``isinstance(spec_info, DDTreeVerifyInput)``, ``spec_info is not None`` — can be decided.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from ddcheck.analysis.exprs import mentions_per_step
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
from ddcheck.base.findings import Finding
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.evaluate import UNKNOWN, Evaluator, Hooks, Obj, Span, Sym, guards_to
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import SPEC_INFO_FIELD, SPEC_INPUT_TYPE_CLASS, SPEC_INPUT_TYPE_FIELD, WIDTH_FIELDS

WIDTH = Span(lo=1)  # a per-step width: a positive number


def input_value(cls: str, fields: Iterable[str], input_type: str | None, kinds: Iterable[str] = ()) -> Obj:
    """The launch's verify input as the evaluator reads it: an instance of ``cls`` (with ``kinds``, its class
    and bases by name) carrying exactly ``fields``, its ``spec_input_type`` the member ``input_type`` (not
    known where None), its width fields a per-step width."""
    attrs: dict[str, Any] = {f: WIDTH if f in WIDTH_FIELDS else UNKNOWN for f in fields}
    attrs[SPEC_INPUT_TYPE_FIELD] = Sym(f"{SPEC_INPUT_TYPE_CLASS}.{input_type}") if input_type else UNKNOWN
    return Obj(cls, attrs, closed=True, kinds=frozenset(kinds))


def reading_input(ev: Evaluator, value: Obj, helpers: dict[str, ast.FunctionDef]) -> Evaluator:
    """``ev`` set to read the backend's code for this verify input: ``spec_info`` (a name or any
    ``x.spec_info``) is it, ``self.m(...)`` runs the backend class's method ``m``."""
    ev.hooks = Hooks(names={SPEC_INFO_FIELD: value}, attrs={SPEC_INFO_FIELD: value}, methods=helpers.get)
    return ev


def _function(tree: SourceTree, relpath: str, qualname: str) -> ast.FunctionDef | None:
    f = tree.find(relpath)
    fn = TreeModules.of(tree).defined(f.relpath, qualname) if f is not None else None
    return fn if isinstance(fn, ast.FunctionDef) else None


def class_methods(tree: SourceTree, relpath: str, qualname: str) -> dict[str, ast.FunctionDef]:
    """The methods of the class a function (``Class.method``) belongs to."""
    f = tree.find(relpath)
    cls = TreeModules.of(tree).defined(f.relpath, qualname.split(".")[0]) if f is not None and "." in qualname \
        else None
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)} if isinstance(cls, ast.ClassDef) else {}


def resolver_gives_w(tree: SourceTree, finding: Finding, value: Obj) -> tuple[bool | None, str]:
    """(does the resolver return W for the verify input ``value``, the test that decides it)."""
    fn = _function(tree, finding.relpath, finding.function or "")
    if fn is None:
        return None, ""
    ev = reading_input(Evaluator({}), value, class_methods(tree, finding.relpath, finding.function or ""))
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
               and mentions_per_step(n.value, DEFAULT_VOCABULARY)]
    verdicts = []
    for ret in returns:
        conds = guards_to(fn.body, ret, [])
        vals = [(ev.test(t), pol, t) for t, pol in conds]
        vals = [(None if v is UNKNOWN else v == pol, t) for v, pol, t in vals]
        if any(v is False for v, _ in vals):
            verdicts.append((False, next(ast.unparse(t) for v, t in vals if v is False)))
        elif all(v is True for v, _ in vals):
            return True, " and ".join(ast.unparse(t) for _, t in vals) or "always"
        else:
            verdicts.append((None, " and ".join(ast.unparse(t) for v, t in vals if v is None)))
    if any(v is None for v, _ in verdicts):
        return None, next(t for v, t in verdicts if v is None)
    return (False, verdicts[0][1]) if verdicts else (None, "")


def mask_reads(tree: SourceTree, relpaths: list[str], values: dict[str, Any]) -> tuple[bool | None, list]:
    """Does a backend's code read the verify input's ``custom_mask`` on some path these settings can
    take? Each read's enclosing tests are evaluated over the backend class's ``__init__`` attributes
    (``self.topk = server_args.speculative_eagle_topk or 0``). (False, the test that excludes the
    read) for every read when none is reachable; (True, []) when one is; (None, []) when there is none."""
    excluded: list[tuple[str, int, str]] = []
    seen_read = False
    for rel in relpaths:
        f = tree.find(rel)
        mod = TreeModules.of(tree).parsed(f.relpath) if f is not None else None
        if mod is None:
            continue
        for cls in (n for n in mod.body if isinstance(n, ast.ClassDef)):
            init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            ev = Evaluator(values).bind_init(init)
            for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name != "__init__"):
                for node in ast.walk(fn):
                    if not (isinstance(node, ast.Attribute) and node.attr == "custom_mask"
                            and "spec_info" in ast.unparse(node.value)):
                        continue
                    seen_read = True
                    conds = guards_to(fn.body, node, [])
                    bad = next((f"{'' if pol else 'not '}({ast.unparse(c)})" for c, pol in conds
                                if (v := ev.test(c)) is not UNKNOWN and bool(v) != pol), None)
                    if bad is None:
                        return True, []
                    excluded.append((rel, node.lineno, f"read only when {bad}"))
    return (False, excluded) if seen_read else (None, [])
