"""How a backend's verify path treats a launch's verify input: which way a width resolver goes for
its class, and whether the tree mask is read on a path the launch's settings take.

``ddcheck scan`` reports a resolver's ``return C`` as a fallback (DD003): W for some verify inputs,
C for the others. For a launch, the verify input is known (its class and fields, from the tree's
worker), so the tests guarding the resolver's ``return W`` — ``hasattr(spec_info, "tree_budget")``,
``isinstance(spec_info, DDTreeVerifyInput)``, ``spec_info is not None`` — can be decided.
"""

from __future__ import annotations

import ast
from typing import Any

from ddcheck.analysis.exprs import dotted, mentions_per_step
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
from ddcheck.findings import Finding
from ddcheck.launch.evaluate import UNKNOWN, Evaluator, guards_to
from ddcheck.sources import SourceTree


def _is_input(node: ast.expr) -> bool:
    return (dotted(node) or "").rsplit(".", 1)[-1] == "spec_info"


def input_truth(test: ast.expr, cls: str, attrs: set[str]) -> bool | None:
    """A test on the verify input, decided for an instance of ``cls`` carrying ``attrs``."""
    if isinstance(test, ast.BoolOp):
        vals = [input_truth(v, cls, attrs) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = input_truth(test.operand, cls, attrs)
        return None if v is None else not v
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.args and _is_input(test.args[0]):
        if test.func.id == "hasattr" and len(test.args) == 2 and isinstance(test.args[1], ast.Constant):
            return test.args[1].value in attrs
        if test.func.id == "isinstance" and len(test.args) == 2:
            names = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            return True if any((dotted(n) or "").rsplit(".", 1)[-1] == cls for n in names) else None
        if test.func.id == "getattr" and len(test.args) >= 2 and isinstance(test.args[1], ast.Constant):
            return None if test.args[1].value in attrs else (
                bool(test.args[2].value) if len(test.args) == 3 and isinstance(test.args[2], ast.Constant) else None)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _is_input(test.left) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return isinstance(test.ops[0], ast.IsNot)
    return None


def _function(tree: SourceTree, relpath: str, qualname: str) -> ast.FunctionDef | None:
    f = tree.find(relpath)
    if f is None:
        return None
    node: ast.AST = ast.parse(f.read_bytes())
    for part in qualname.split("."):
        node = next((n for n in getattr(node, "body", []) if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
    return node if isinstance(node, ast.FunctionDef) else None


def resolver_gives_w(tree: SourceTree, finding: Finding, cls: str, attrs: set[str]) -> tuple[bool | None, str]:
    """(does the resolver return W for this input, the test that decides it)."""
    fn = _function(tree, finding.relpath, finding.function or "")
    if fn is None:
        return None, ""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
               and mentions_per_step(n.value, DEFAULT_VOCABULARY)]
    verdicts = []
    for ret in returns:
        conds = guards_to(fn.body, ret, [])
        vals = [(input_truth(t, cls, attrs), pol, t) for t, pol in conds]
        vals = [(None if v is None else v == pol, t) for v, pol, t in vals]
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
        if f is None:
            continue
        mod = ast.parse(f.read_bytes())
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
                                if (v := ev(c)) is not UNKNOWN and bool(v) != pol), None)
                    if bad is None:
                        return True, []
                    excluded.append((rel, node.lineno, f"read only when {bad}"))
    return (False, excluded) if seen_read else (None, [])
