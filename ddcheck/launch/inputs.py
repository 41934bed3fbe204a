"""How a backend's verify path treats a launch's verify input: which way a width resolver goes for
its class, and whether the tree mask is read on a path the launch's settings take.

``ddcheck scan`` reports a resolver's ``return C`` as a fallback (DD003): W for some verify inputs,
C for the others. For a launch, the verify input is known (its class and fields, from the tree's
worker), so the tests guarding the resolver's ``return W`` — ``hasattr(spec_info, "tree_budget")``,
``isinstance(spec_info, DDTreeVerifyInput)``, ``spec_info is not None`` — can be decided.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from ddcheck.analysis.exprs import dotted, mentions_per_step
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY
from ddcheck.findings import Finding
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.evaluate import UNKNOWN, Evaluator, guards_to
from ddcheck.tree.modules import TreeModules


def _is_input(node: ast.expr) -> bool:
    return (dotted(node) or "").rsplit(".", 1)[-1] == "spec_info"


def _input_type_read(node: ast.expr) -> bool:
    """``spec_info.spec_input_type`` or ``getattr(spec_info, "spec_input_type", ...)``."""
    if isinstance(node, ast.Attribute) and node.attr == "spec_input_type" and _is_input(node.value):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and _is_input(node.args[0]) and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "spec_input_type")


def input_truth(test: ast.expr, cls: str, attrs: set[str], input_type: str | None = None,
                helpers: dict[str, ast.FunctionDef] | None = None, _depth: int = 0) -> bool | None:
    """A test on the verify input, decided for an instance of ``cls`` carrying ``attrs`` whose
    ``spec_input_type`` is ``SpecInputType.<input_type>``. ``helpers``: the backend class's methods, so
    a test written as ``self._is_tree_spec(spec_info)`` is decided through its ``return``."""
    def again(t: ast.expr) -> bool | None:
        return input_truth(t, cls, attrs, input_type, helpers, _depth + 1)

    if _depth > 6:
        return None
    if isinstance(test, ast.BoolOp):
        vals = [again(v) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = again(test.operand)
        return None if v is None else not v
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _input_type_read(test.left) and input_type:
        right = test.comparators[0]
        names = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        members = [(dotted(n) or "").rsplit(".", 1)[-1] for n in names]
        hit = input_type in members
        op = test.ops[0]
        if isinstance(op, (ast.Eq, ast.Is, ast.In)):
            return hit
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            return not hit
    inlined = inline_helper(test, helpers) if helpers else None
    if inlined is not None:
        return again(inlined)
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


def inline_helper(call: ast.expr, helpers: dict[str, ast.FunctionDef]) -> ast.expr | None:
    """``self.helper(args)`` where the helper (a method of the backend's class) only returns an
    expression: that expression with the call's arguments put in for its parameters
    (``self._is_tree_spec(spec_info)`` -> its test); None otherwise."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self" and call.func.attr in helpers and not call.keywords):
        return None
    fn = helpers[call.func.attr]
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    params = [a.arg for a in fn.args.args]
    if params and params[0] == "self" and not any(isinstance(d, ast.Name) and d.id == "staticmethod"
                                                  for d in fn.decorator_list):
        params = params[1:]
    if len(params) != len(call.args) or fn.args.vararg or fn.args.kwonlyargs:
        return None
    mapping = dict(zip(params, call.args))

    class _Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name):
            return copy.deepcopy(mapping[node.id]) if node.id in mapping else node

    return _Put().visit(copy.deepcopy(body[0].value))


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


def resolver_gives_w(tree: SourceTree, finding: Finding, cls: str, attrs: set[str],
                     input_type: str | None = None) -> tuple[bool | None, str]:
    """(does the resolver return W for this input, the test that decides it)."""
    fn = _function(tree, finding.relpath, finding.function or "")
    if fn is None:
        return None, ""
    helpers = class_methods(tree, finding.relpath, finding.function or "")
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
               and mentions_per_step(n.value, DEFAULT_VOCABULARY)]
    verdicts = []
    for ret in returns:
        conds = guards_to(fn.body, ret, [])
        vals = [(input_truth(t, cls, attrs, input_type, helpers), pol, t) for t, pol in conds]
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
                                if (v := ev(c)) is not UNKNOWN and bool(v) != pol), None)
                    if bad is None:
                        return True, []
                    excluded.append((rel, node.lineno, f"read only when {bad}"))
    return (False, excluded) if seen_read else (None, [])
