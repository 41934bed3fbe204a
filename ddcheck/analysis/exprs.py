"""Small predicates over Python expressions (stdlib ``ast``), shared by the verify-path model."""

from __future__ import annotations

import ast
from ast import AST
from collections.abc import Iterator

from ddcheck.tree.syntax import dotted  # noqa: F401 (the analysis's spelling of it)
from ddcheck.analysis.vocabulary import MODE_PREDICATE_PREFIX, PER_STEP_CALL_MARKERS, VERIFY_ENUM_MEMBERS, Vocabulary
from ddcheck.tree.names import FORWARD_MODE

ARITH_CALLS = frozenset({"int", "max", "min", "abs", "round"})
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)




def self_attr(node: ast.AST) -> str | None:
    """``X`` when node is ``self.X``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def buffer_key(node: ast.AST) -> tuple[str, object] | None:
    """(attr, key) of a buffer read ``self.X`` (key None) or ``self.X["key"]``; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.ctx, ast.Load):
        return self_attr(node.value) or "", node.slice.value
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        return self_attr(node) or "", None
    return None


def walk(node: ast.AST, keep=None) -> Iterator[ast.AST]:
    """Pre-order walk that does not enter nested functions, classes or lambdas (``ast.iter_child_nodes``'
    order; read from ``_fields`` directly: this walk is the scan's hottest loop). With ``keep``, a
    statement under ``node`` for which ``keep(stmt)`` is false is skipped, and all under it."""
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        yield n
        for name in reversed(n._fields):
            value = getattr(n, name, None)
            if isinstance(value, list):
                for child in reversed(value):
                    if isinstance(child, AST) and not isinstance(child, SCOPES) \
                            and (keep is None or not isinstance(child, ast.stmt) or keep(child)):
                        push(child)
            elif isinstance(value, AST) and not isinstance(value, SCOPES):
                push(value)


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` as a list, in its order, without its two generators (the
    verify pass asks for the children of every expression it reads)."""
    out = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out.extend(c for c in value if isinstance(c, AST))
        elif isinstance(value, AST):
            out.append(value)
    return out


def every_node(node: ast.AST, only: frozenset[str] | None = None) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included, nested scopes too), like ``ast.walk`` but faster
    (order: depth first); with ``only``, through those fields alone."""
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        yield n
        for name in n._fields:
            if only is not None and name not in only:
                continue
            value = getattr(n, name, None)
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, AST):
                        push(child)
            elif isinstance(value, AST):
                push(value)


def call_leaf(call: ast.Call) -> str:
    return (dotted(call.func) or "").rsplit(".", 1)[-1].rstrip("()")


def mentions_per_step(node: ast.AST, vocab: Vocabulary) -> bool:
    """True when the expression reads the per-step width W of the verify input or a runtime shape."""
    for n in walk(node):
        if isinstance(n, ast.Attribute) and n.attr in vocab.per_step_attrs and self_attr(n) is None:
            return True
        if isinstance(n, ast.Call):
            leaf = call_leaf(n)
            if leaf == "getattr" and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) \
                    and n.args[1].value in vocab.per_step_attrs:
                return True
            # `self._target_verify_num_tokens_per_req(spec_info)` reads W; `decode_num_tokens_per_req()`
            # with no verify input in its arguments is a start-up value.
            if any(m in leaf for m in PER_STEP_CALL_MARKERS) and any(
                    "spec_info" in (dotted(a) or "") or "batch" in (dotted(a) or "")
                    for a in [*n.args, *(k.value for k in n.keywords)]):
                return True
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv):
            # `input_ids.shape[0] // bs`, `num_tokens // bs`: the width the batch actually has.
            left = n.left
            if isinstance(left, ast.Subscript) and (dotted(left.value) or "").endswith(".shape"):
                return True
            if isinstance(left, ast.Call) and call_leaf(left) in ("numel", "size"):
                return True
            if isinstance(left, ast.Name) and "num_tokens" in left.id:
                return True
    return False


def arith_leaves(node: ast.AST) -> Iterator[ast.AST]:
    """The operands of an arithmetic value: through ``+ - * //``, unary minus, ``int/max/min``,
    the branches of ``a if t else b`` and the values of ``a or b``; never into comparisons,
    ``not``/``and``, containers, subscripts or calls that build something else."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp):
            stack += [n.right, n.left]
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            stack.append(n.operand)
        elif isinstance(n, ast.Call) and call_leaf(n) in ARITH_CALLS:
            stack += reversed(n.args)
        elif isinstance(n, ast.IfExp):
            stack += [n.orelse, n.body]
        elif isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or):
            stack += reversed(n.values)
        elif isinstance(n, ast.NamedExpr):
            stack.append(n.value)
        else:
            yield n


def c_occurrences(node: ast.AST, c_attrs, vocab: Vocabulary) -> Iterator[ast.Attribute]:
    """C expressions (``*.speculative_num_draft_tokens``, ``self.<C attr>``) among the operands of an
    arithmetic value (see :func:`arith_leaves`)."""
    return (n for n in arith_leaves(node) if is_c_read(n, c_attrs, vocab))


def is_c_read(n: ast.AST, c_attrs, vocab: Vocabulary) -> bool:
    """``x.speculative_num_draft_tokens`` or ``self.<attr holding C>``. On ``self`` the class's own
    bindings decide, so a class that rebinds even ``self.speculative_num_draft_tokens`` to a
    per-step or budget value no longer holds C there."""
    if not (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)):
        return False
    attr = self_attr(n)
    return attr in c_attrs if attr is not None else n.attr in vocab.c_source_attrs


def is_c_valued(node: ast.AST, c_attrs, vocab: Vocabulary) -> bool:
    """C or arithmetic on C, with no per-step width in it."""
    return any(True for _ in c_occurrences(node, c_attrs, vocab)) and not mentions_per_step(node, vocab)


def is_exact_c(node: ast.AST, c_attrs, vocab: Vocabulary) -> bool:
    """The value *is* C (``x.speculative_num_draft_tokens``, ``self.<copy of C>``, ``int(...)`` of it),
    not a value derived from it: only then may a fix put W in its place."""
    while isinstance(node, ast.Call) and call_leaf(node) == "int" and len(node.args) == 1:
        node = node.args[0]
    return is_c_read(node, c_attrs, vocab)


def arith_names(node: ast.AST) -> Iterator[ast.Name]:
    """Names read as arithmetic operands."""
    return (n for n in arith_leaves(node) if isinstance(n, ast.Name))


def is_mode_check(body: list[ast.stmt]) -> bool:
    """``<x>.forward_mode.is_*()`` / ``ForwardMode.X`` anywhere in the statements."""
    for stmt in body:
        for n in walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr.startswith(MODE_PREDICATE_PREFIX) and "mode" in (dotted(n.func.value) or "").lower():
                    return True
            if isinstance(n, ast.Attribute) and dotted(n.value) == FORWARD_MODE:
                return True
    return False


def guard_polarity(test: ast.AST, verify_flags: frozenset[str] = frozenset()) -> int:
    """+1 when the branch guarded by ``test`` runs in target-verify mode, -1 when its else does, 0 else.

    ``verify_flags`` are local names bound to ``...is_target_verify()``.
    """
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
        return 1 if test.func.attr.startswith("is_target_verify") else 0
    if isinstance(test, ast.Name):
        return 1 if test.id in verify_flags else 0
    if isinstance(test, ast.NamedExpr):
        return guard_polarity(test.value, verify_flags)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -guard_polarity(test.operand, verify_flags)
    if isinstance(test, ast.BoolOp):
        pols = [guard_polarity(v, verify_flags) for v in test.values]
        if isinstance(test.op, ast.And):
            # The body of `verify and X` is verify; the else of `verify and X` is not certain.
            return 1 if 1 in pols else 0
        # `verify or X`: the body runs in verify mode too.
        if 1 in pols:
            return 1
        return -1 if all(p == -1 for p in pols) else 0
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        names = [dotted(test.left) or "", dotted(right) or ""]
        if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            names += [dotted(e) or "" for e in right.elts]
        if any(n.rsplit(".", 1)[-1] in VERIFY_ENUM_MEMBERS for n in names):
            if isinstance(op, (ast.Eq, ast.Is, ast.In)):
                return 1
            if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
                return -1
    return 0


def ends_flow(body: list[ast.stmt]) -> bool:
    """True when the block always leaves the enclosing block."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))
