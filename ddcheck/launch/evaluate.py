"""Evaluating a tree's code over a launch's settings, without running it.

A small interpreter over ``ast`` expressions and straight-line statements: constants, arithmetic,
comparisons, ``and``/``or``/``not``, conditional expressions, ``int``/``max``/``min``, reads of
``server_args.X`` (the launch's values) and of ``self.X`` bound earlier. Anything else is
:data:`UNKNOWN`, and an ``if`` whose test is unknown keeps only what both branches agree on.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

UNKNOWN = object()
_FELL_THROUGH = object()


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}


class Evaluator:
    def __init__(self, values: dict[str, Any], sa_name: str = "server_args"):
        self.values = values
        self.sa = {sa_name}
        self.self_env: dict[str, Any] = {}
        self.local: dict[str, Any] = {}
        self.methods: dict[str, ast.FunctionDef] | None = None  # SpeculativeAlgorithm's, for capture_width
        self.algorithm: str | None = None

    def bind_init(self, init: ast.FunctionDef | None) -> "Evaluator":
        """Evaluate a class's ``__init__`` into ``self_env`` (its parameters unknown), locals left empty."""
        if init is not None:
            self.local = {a.arg: UNKNOWN for a in init.args.args[1:]}
            self.run(init.body, self.local)
            self.local = {}
        return self

    def methods_eval(self, fn: ast.FunctionDef, args: list[Any]) -> Any:
        """The value a SpeculativeAlgorithm method returns for this algorithm (``self.is_x()`` decided)."""
        inner = Evaluator(self.values)
        inner.methods, inner.algorithm = self.methods, self.algorithm
        params = [a.arg for a in fn.args.args][1:]
        inner.local = dict(zip(params, args))
        return inner.returns(fn.body)

    def returns(self, body: list[ast.stmt]) -> Any:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                return self(stmt.value) if stmt.value is not None else None
            if isinstance(stmt, ast.If):
                t = self(stmt.test)
                if t is UNKNOWN:
                    return UNKNOWN
                got = self.returns(stmt.body if t else stmt.orelse)
                if got is not _FELL_THROUGH:
                    return got
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self.run([stmt], self.local)
            elif not isinstance(stmt, (ast.Expr, ast.Pass)):
                return UNKNOWN
        return _FELL_THROUGH

    def __call__(self, node: ast.expr) -> Any:
        try:
            return self._e(node)
        except Exception:  # noqa: BLE001 - anything odd is simply unknown
            return UNKNOWN

    def _e(self, n: ast.expr) -> Any:
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in self.local:
                return self.local[n.id]
            return {"None": None, "True": True, "False": False}.get(n.id, UNKNOWN)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "server_args":
            return self.values.get(n.attr, UNKNOWN)  # model_runner.server_args.X
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.value.id in self.sa:
                return self.values.get(n.attr, UNKNOWN)
            if n.value.id == "self":
                return self.self_env.get(n.attr, UNKNOWN)
            return UNKNOWN
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            a, b = self._e(n.left), self._e(n.right)
            return UNKNOWN if UNKNOWN in (a, b) or None in (a, b) else _BIN[type(n.op)](a, b)
        if isinstance(n, ast.UnaryOp):
            v = self._e(n.operand)
            if v is UNKNOWN:
                return UNKNOWN
            return (not v) if isinstance(n.op, ast.Not) else -v if isinstance(n.op, ast.USub) else UNKNOWN
        if isinstance(n, ast.BoolOp):
            vals = [self._e(v) for v in n.values]
            if isinstance(n.op, ast.And):
                for v in vals:
                    if v is UNKNOWN:
                        return UNKNOWN
                    if not v:
                        return v
                return vals[-1]
            for v in vals:
                if v is UNKNOWN:
                    return UNKNOWN
                if v:
                    return v
            return vals[-1]
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMP:
            a, b = self._e(n.left), self._e(n.comparators[0])
            if UNKNOWN in (a, b):
                return UNKNOWN
            if None in (a, b) and type(n.ops[0]) not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                return UNKNOWN
            return _CMP[type(n.ops[0])](a, b)
        if isinstance(n, ast.IfExp):
            t = self._e(n.test)
            return UNKNOWN if t is UNKNOWN else self._e(n.body if t else n.orelse)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and self.methods is not None:
            fn = self.methods.get(n.func.attr)
            if fn is not None:
                return self.methods_eval(fn, [self._e(a) for a in n.args])
            if n.func.attr.startswith("is_") and not n.args and self.algorithm:
                return n.func.attr == f"is_{self.algorithm.lower()}"
            return UNKNOWN
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            args = [self._e(a) for a in n.args]
            if n.func.id == "getattr" and len(n.args) in (2, 3) and isinstance(n.args[0], ast.Name) \
                    and n.args[0].id in self.sa and isinstance(args[1], str):
                return self.values.get(args[1], args[2] if len(args) == 3 else UNKNOWN)
            if UNKNOWN in args or n.keywords:
                return UNKNOWN
            fn = {"int": int, "max": max, "min": min, "bool": bool, "abs": abs}.get(n.func.id)
            return fn(*args) if fn and None not in args else UNKNOWN
        return UNKNOWN

    def run(self, body: list[ast.stmt], env: dict[str, Any]) -> None:
        """Straight-line evaluation of assignments into ``env`` (self attributes or locals), taking
        ``if`` branches whose test evaluates; where it does not, values that differ become unknown."""
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = self(stmt.value)
                for t in targets:
                    self._store(t, value, env)
            elif isinstance(stmt, ast.If):
                t = self(stmt.test)
                if t is UNKNOWN:
                    before = dict(env)
                    self.run(stmt.body, env)
                    after_body = dict(env)
                    env.clear()
                    env.update(before)
                    self.run(stmt.orelse, env)
                    for k in set(after_body) | set(env):
                        if after_body.get(k, UNKNOWN) != env.get(k, UNKNOWN):
                            env[k] = UNKNOWN
                else:
                    self.run(stmt.body if t else stmt.orelse, env)

    def _store(self, t: ast.expr, value: Any, env: dict[str, Any]) -> None:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            self.self_env[t.attr] = value
        elif isinstance(t, ast.Name):
            env[t.id] = value


def _ends_flow(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def guards_to(body: list[ast.stmt], target: ast.AST, conds: list[tuple[ast.expr, bool]]):
    """The (test, polarity) pairs on the way from ``body`` to ``target``, early exits included."""
    for stmt in body:
        if any(n is target for n in ast.walk(stmt)):
            if isinstance(stmt, ast.If):
                if any(n is target for n in ast.walk(stmt.test)):
                    return conds
                if any(n is target for s in stmt.body for n in ast.walk(s)):
                    return guards_to(stmt.body, target, conds + [(stmt.test, True)])
                return guards_to(stmt.orelse, target, conds + [(stmt.test, False)])
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and any(n is target for s in inner for n in ast.walk(s)):
                    return guards_to(inner, target, conds)
            for h in getattr(stmt, "handlers", []) or []:
                if any(n is target for n in ast.walk(h)):
                    return guards_to(h.body, target, conds)
            return conds
        if isinstance(stmt, ast.If) and _ends_flow(stmt.body) and not stmt.orelse:
            conds = conds + [(stmt.test, False)]
    return conds


def statements_before(body: list[ast.stmt], target: ast.AST) -> list[ast.stmt]:
    """Statements that run before ``target`` on its way down (flattened into taken blocks)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if any(n is target for n in ast.walk(stmt)):
            for name in ("body", "orelse"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and any(n is target for s in inner for n in ast.walk(s)):
                    return out + statements_before(inner, target)
            return out
        out.append(stmt)
    return out


def tree_class(tree, relpath: str, name: str) -> ast.ClassDef | None:
    """The top-level class ``name`` of the tree file ending in ``relpath``, parsed with ``ast``."""
    f = tree.find(relpath)
    if f is None:
        return None
    mod = ast.parse(f.read_bytes())
    return next((c for c in mod.body if isinstance(c, ast.ClassDef) and c.name == name), None)
