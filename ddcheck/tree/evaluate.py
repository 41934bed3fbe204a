"""Evaluating a tree's code over a launch's settings, without running it.

A small interpreter over ``ast`` expressions and straight-line statements: constants, arithmetic,
comparisons, ``and``/``or``/``not``, conditional expressions, ``int``/``max``/``min``, reads of
``server_args.X`` (the launch's values) and of ``self.X`` bound earlier. Anything else is
:data:`UNKNOWN`, and an ``if`` whose test is unknown keeps only what both branches agree on.

With a :class:`World`, calls are followed into the tree: its module-level functions (found through
the calling module's imports), the ``SpeculativeAlgorithm`` methods (``self`` is the launch's
algorithm) and the ``ModelRunner`` methods (``self`` is a target model runner of this launch), a few
calls deep. That is how a graph runner's capture width is read whatever helper a tree routes it
through (``resolve_num_tokens_per_req(...)``, ``max(resolve_..._buckets(...))``).
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any

from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import (MODEL_RUNNER_CLASS, MODEL_RUNNER_MODULE, PACKAGE, SERVER_ARGS_GETTERS,
                                  SPECULATIVE_ALGORITHM_CLASS, SPEC_INFO_MODULE)

UNKNOWN = object()
_FELL_THROUGH = object()


@dataclass(frozen=True)
class Span:
    """A value known only between bounds (``min(x, cap)`` with ``x`` decided per step): ``lo``/``hi``
    None where that end is not known."""

    lo: Any = None
    hi: Any = None
MAX_CALL_DEPTH = 8


@dataclass(frozen=True)
class Algo:
    """A ``SpeculativeAlgorithm`` member (``SpeculativeAlgorithm.DDTREE``, or ``self`` in its methods)."""

    name: str


class _SA:
    """``server_args`` as a value: attribute reads give the launch's values."""


SA = _SA()


@dataclass
class Obj:
    """An object of the tree whose attributes the launch decides (a target ``ModelRunner``)."""

    label: str
    attrs: dict[str, Any]
    cls: str = ""  # the tree class whose methods calls on it run
    module: str = ""


class World:
    """What calls in the tree's code resolve to for one launch."""

    def __init__(self, mods: TreeModules, algorithm: str | None):
        self.mods, self.algorithm = mods, algorithm
        self.algo_methods: dict[str, ast.FunctionDef] = {}
        self.algo_module = SPEC_INFO_MODULE
        hit = mods.find_class(SPECULATIVE_ALGORITHM_CLASS, self.algo_module)
        if hit is not None:
            self.algo_methods = {f.name: f for f in hit[1].body if isinstance(f, ast.FunctionDef)}
            self.algo_module = hit[2]

    def model_runner(self) -> Obj:
        """A target model runner of this launch (``is_draft_worker`` False)."""
        return Obj("model_runner", {"spec_algorithm": Algo(self.algorithm or "NONE"), "server_args": SA,
                                    "is_draft_worker": False},
                   cls=MODEL_RUNNER_CLASS, module=MODEL_RUNNER_MODULE)

    def method(self, obj: Obj, name: str) -> tuple[ast.FunctionDef, str] | None:
        return self.mods.method(obj.cls, obj.module, name) if obj.cls else None


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}


class Evaluator:
    def __init__(self, values: dict[str, Any], sa_name: str = "server_args", world: World | None = None,
                 module: str = "", depth: int = 0, environ: dict[str, str] | None = None):
        self.values = values
        # The launch's environment, as the tree's ``os.environ.get``/``os.getenv`` read it; None: not known.
        self.environ = environ
        self.forced: dict[int, bool] = {}  # id(test node) -> the branch a per-step test is taken as
        self.spans = False  # min/max of an unknown and a known value give a Span
        self.undecided: list[ast.expr] = []  # tests met that could not be decided (per-step ones)
        self.sa = {sa_name}
        self.self_env: dict[str, Any] = {}
        self.self_lines: dict[str, int] = {}  # self attribute -> line of the assignment that set it
        self.self_value: Any = None  # ``self`` as a value (an Algo, an Obj) inside a followed method
        self.local: dict[str, Any] = {}
        self.world, self.module, self.depth = world, module, depth
        self.imports: dict[str, str] = {}  # names imported inside the function being evaluated

    def bind_init(self, init: ast.FunctionDef | None) -> "Evaluator":
        """Evaluate a class's ``__init__`` into ``self_env`` (its parameters unknown; with a world, the
        first is this launch's target model runner), locals left empty."""
        if init is not None:
            self.local = {a.arg: UNKNOWN for a in init.args.args[1:]}
            if self.world is not None and len(init.args.args) > 1:
                self.local[init.args.args[1].arg] = self.world.model_runner()
            self.run(init.body, self.local)
            self.local = {}
        return self

    def call(self, fn: ast.FunctionDef, module: str, args: list[Any], kwargs: dict[str, Any],
             self_value: Any = None) -> Any:
        """What a tree function returns for these arguments, followed a few calls deep."""
        if self.depth >= MAX_CALL_DEPTH:
            return UNKNOWN
        inner = Evaluator(self.values, world=self.world, module=module, depth=self.depth + 1, environ=self.environ)
        inner.self_value = self_value
        a = fn.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]]
        if self_value is not None and positional:
            positional = positional[1:]
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        bound = dict(zip(positional, args))
        for name in [*positional, *(k.arg for k in a.kwonlyargs)]:
            if name in kwargs:
                bound[name] = kwargs[name]
            elif name not in bound:
                bound[name] = inner(defaults[name]) if name in defaults else UNKNOWN
        inner.local = bound
        got = inner.returns(fn.body)
        return None if got is _FELL_THROUGH else got

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
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
                self.run([stmt], self.local)
            elif isinstance(stmt, ast.ImportFrom):
                self._import(stmt)
            elif not isinstance(stmt, (ast.Pass, ast.Assert, ast.Import)):
                return UNKNOWN  # a raise, a loop, a with: no value we can vouch for
        return _FELL_THROUGH

    def _import(self, stmt: ast.ImportFrom) -> None:
        if self.world is not None:  # relative imports resolved from the module being evaluated
            self.imports.update(self.world.mods.imports_in(self.module, stmt))
        elif stmt.module and stmt.module.startswith(PACKAGE + "."):
            for a in stmt.names:
                self.imports[a.asname or a.name] = stmt.module

    def __call__(self, node: ast.expr) -> Any:
        try:
            return self._e(node)
        except RecursionError:
            return UNKNOWN
        except Exception:  # noqa: BLE001 - anything odd is simply unknown
            return UNKNOWN

    def _attr(self, base: Any, attr: str) -> Any:
        if base is SA:
            return self.values.get(attr, UNKNOWN)
        if isinstance(base, Obj):
            return base.attrs.get(attr, UNKNOWN)
        if isinstance(base, Algo) and attr == "name":
            return base.name
        return UNKNOWN

    def _e(self, n: ast.expr) -> Any:
        if id(n) in self.forced:
            return self.forced[id(n)]
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in self.local:
                return self.local[n.id]
            if n.id in self.sa:
                return SA
            if n.id == "self" and self.self_value is not None:
                return self.self_value
            return {"None": None, "True": True, "False": False}.get(n.id, UNKNOWN)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == SPECULATIVE_ALGORITHM_CLASS \
                and n.value.id not in self.local:
            return Algo(n.attr)
        if isinstance(n, ast.Attribute) and n.attr == "server_args" and not (
                isinstance(n.value, ast.Name) and n.value.id == "self" and "server_args" in self.self_env):
            return SA  # model_runner.server_args
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                and self.self_value is None:
            return self.self_env.get(n.attr, UNKNOWN)
        if isinstance(n, ast.Attribute):
            return self._attr(self._e(n.value), n.attr)
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
        if isinstance(n, ast.Compare):
            return self._compare(n)
        if isinstance(n, ast.IfExp):
            t = self._e(n.test)
            if t is UNKNOWN:
                self.undecided.append(n.test)
            return UNKNOWN if t is UNKNOWN else self._e(n.body if t else n.orelse)
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            items = [self._e(e) for e in n.elts]
            if UNKNOWN in items:
                return UNKNOWN
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(n)](items)
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._comprehension(n)
        if isinstance(n, ast.Subscript):
            if self.environ is not None and _is_environ(n.value):
                key = self._e(n.slice)
                return self.environ.get(key, UNKNOWN) if isinstance(key, str) else UNKNOWN
            base, index = self._e(n.value), self._e(n.slice)
            return UNKNOWN if UNKNOWN in (base, index) or isinstance(base, (_SA, Obj, Algo)) else base[index]
        if isinstance(n, ast.Call):
            return self._call(n)
        return UNKNOWN

    def _compare(self, n: ast.Compare) -> Any:
        left = self._e(n.left)
        for op, right_node in zip(n.ops, n.comparators):
            right = self._e(right_node)
            if UNKNOWN in (left, right):
                return UNKNOWN
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, (list, tuple, set, dict, str)):
                    return UNKNOWN
                ok = (left in right) == isinstance(op, ast.In)
            elif type(op) in _CMP:
                if None in (left, right) and type(op) not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                    return UNKNOWN
                ok = _CMP[type(op)](left, right)
            else:
                return UNKNOWN
            if not ok:
                return False
            left = right
        return True

    def _comprehension(self, n) -> Any:
        if len(n.generators) != 1 or not isinstance(n.generators[0].target, ast.Name):
            return UNKNOWN
        gen = n.generators[0]
        it = self._e(gen.iter)
        if not isinstance(it, (list, tuple, set, range)):
            return UNKNOWN
        out, saved = [], self.local.get(gen.target.id, _FELL_THROUGH)
        try:
            for v in it:
                self.local[gen.target.id] = v
                tests = [self._e(t) for t in gen.ifs]
                if UNKNOWN in tests:
                    return UNKNOWN
                if all(tests):
                    item = self._e(n.elt)
                    if item is UNKNOWN:
                        return UNKNOWN
                    out.append(item)
        finally:
            if saved is _FELL_THROUGH:
                self.local.pop(gen.target.id, None)
            else:
                self.local[gen.target.id] = saved
        return set(out) if isinstance(n, ast.SetComp) else out

    def _call(self, n: ast.Call) -> Any:
        f = n.func
        if self.environ is not None and (
                isinstance(f, ast.Attribute) and f.attr == "get" and _is_environ(f.value)
                or ast.unparse(f) in ("os.getenv", "getenv")) and 1 <= len(n.args) <= 2:
            key = self._e(n.args[0])  # the launch's environment, as the tree reads it
            if not isinstance(key, str):
                return UNKNOWN
            return self.environ[key] if key in self.environ else self._e(n.args[1]) if len(n.args) == 2 else None
        if isinstance(f, ast.Name) and f.id in SERVER_ARGS_GETTERS and not n.args:
            return SA
        if isinstance(f, ast.Name) and f.id == "getattr" and len(n.args) in (2, 3):
            base, name = self._e(n.args[0]), self._e(n.args[1])
            if not isinstance(name, str) or base is UNKNOWN:
                return UNKNOWN
            got = self._attr(base, name)
            if got is UNKNOWN and len(n.args) == 3 and (base is SA and name not in self.values):
                return self._e(n.args[2])
            return got
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == SPECULATIVE_ALGORITHM_CLASS \
                and f.attr == "from_string" and len(n.args) == 1 and f.value.id not in self.local:
            name = self._e(n.args[0])  # the enum's constructor from the flag's string
            return Algo(name.upper()) if isinstance(name, str) else Algo("NONE") if name is None else UNKNOWN
        if isinstance(f, ast.Attribute):
            base = self._e(f.value) if not (isinstance(f.value, ast.Name) and f.value.id == "self"
                                            and self.self_value is None) else UNKNOWN
            args = [self._e(a) for a in n.args]
            kwargs = {k.arg: self._e(k.value) for k in n.keywords if k.arg}
            if isinstance(base, Algo):  # the algorithm's own method, or its is_<name>() test
                fn = self.world.algo_methods.get(f.attr) if self.world is not None else None
                if fn is not None:
                    return self.call(fn, self.world.algo_module, args, kwargs, self_value=Algo(base.name.upper()))
                if f.attr.startswith("is_") and not n.args:
                    return f.attr == f"is_{base.name.lower()}"
                return UNKNOWN
            if isinstance(base, Obj) and self.world is not None:
                hit = self.world.method(base, f.attr)
                if hit is not None:
                    return self.call(hit[0], hit[1], args, kwargs, self_value=base)
            return UNKNOWN
        if isinstance(f, ast.Name):
            args = [self._e(a) for a in n.args]
            kwargs = {k.arg: self._e(k.value) for k in n.keywords if k.arg}
            builtin = _BUILTINS.get(f.id)
            if self.spans and f.id in ("min", "max") and f.id not in self.local and len(args) > 1 \
                    and not n.keywords and UNKNOWN in args:
                known = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
                if known and len(known) + args.count(UNKNOWN) == len(args):  # a per-step value, bounded
                    return Span(hi=min(known)) if f.id == "min" else Span(lo=max(known))
            if builtin is not None and f.id not in self.local:
                if UNKNOWN in args or n.keywords or any(a is None for a in args):
                    return UNKNOWN
                return builtin(*args)
            if self.world is not None and not any(k.arg is None for k in n.keywords):
                module = self.imports.get(f.id)
                hit = (self.world.mods.find_function(f.id, module) if module
                       else self.world.mods.find_function(f.id, self.module) if self.module else None)
                if hit is not None:
                    return self.call(hit[0], hit[1], args, kwargs)
        return UNKNOWN

    def run(self, body: list[ast.stmt], env: dict[str, Any]) -> None:
        """Straight-line evaluation of assignments into ``env`` (self attributes or locals), taking
        ``if`` branches whose test evaluates; where it does not, values that differ become unknown."""
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = self(stmt.value)
                for t in targets:
                    self._store(t, value, env, stmt.lineno)
            elif isinstance(stmt, ast.ImportFrom):
                self._import(stmt)
            elif isinstance(stmt, ast.AugAssign):
                t = stmt.target
                old = env.get(t.id, UNKNOWN) if isinstance(t, ast.Name) else self.self_env.get(t.attr, UNKNOWN) \
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                    else UNKNOWN
                new = self(ast.BinOp(left=ast.Constant(old), op=stmt.op, right=stmt.value)) \
                    if old is not UNKNOWN and type(stmt.op) in _BIN else UNKNOWN
                self._store(stmt.target, new, env, stmt.lineno)
            elif isinstance(stmt, ast.Expr):
                self._mutation(stmt.value, env)
            elif isinstance(stmt, ast.If):
                t = self(stmt.test)
                if t is UNKNOWN:
                    self.undecided.append(stmt.test)
                    before, before_self = dict(env), dict(self.self_env)
                    self.run(stmt.body, env)
                    after_body, after_self = dict(env), dict(self.self_env)
                    env.clear()
                    env.update(before)
                    self.self_env.clear()
                    self.self_env.update(before_self)
                    self.run(stmt.orelse, env)
                    for k in set(after_body) | set(env):
                        if after_body.get(k, UNKNOWN) != env.get(k, UNKNOWN):
                            env[k] = UNKNOWN
                    for k in set(after_self) | set(self.self_env):
                        if after_self.get(k, UNKNOWN) != self.self_env.get(k, UNKNOWN):
                            self.self_env[k] = UNKNOWN
                else:
                    self.run(stmt.body if t else stmt.orelse, env)
            elif not isinstance(stmt, (ast.Pass, ast.Assert, ast.Import, ast.Return, ast.Raise)):
                self._forget(stmt, env)  # a loop, with, try...: what it binds is not known after it

    _MUTATORS = {"append", "extend", "add", "update", "insert", "remove", "discard", "pop", "clear", "sort",
                 "reverse", "setdefault", "__setitem__"}

    def _mutation(self, call: ast.expr, env: dict[str, Any]) -> None:
        """``x.append(v)`` on a known local list/set is applied; any other call on a local that may
        change it leaves it unknown (a skipped mutation would be a wrong value, not a missing one)."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            return
        owner = call.func.value
        if isinstance(owner, ast.Name) and owner.id in env:
            target = env[owner.id]
            args = [self(a) for a in call.args]
            if isinstance(target, (list, set)) and call.func.attr in ("append", "add", "extend", "update") \
                    and len(args) == 1 and UNKNOWN not in args and not call.keywords:
                copy_ = type(target)(target)
                getattr(copy_, call.func.attr)(args[0])
                env[owner.id] = copy_
            elif call.func.attr in self._MUTATORS:
                env[owner.id] = UNKNOWN
        elif isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self" \
                and call.func.attr in self._MUTATORS:
            self.self_env[owner.attr] = UNKNOWN

    def _forget(self, stmt: ast.stmt, env: dict[str, Any]) -> None:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                env[n.id] = UNKNOWN
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                self.self_env[n.attr] = UNKNOWN
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in self._MUTATORS:
                owner = n.func.value  # inside a loop a mutation may run any number of times
                if isinstance(owner, ast.Name):
                    env[owner.id] = UNKNOWN
                elif isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
                    self.self_env[owner.attr] = UNKNOWN

    def _store(self, t: ast.expr, value: Any, env: dict[str, Any], line: int = 0) -> None:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            self.self_env[t.attr] = value
            self.self_lines[t.attr] = line
        elif isinstance(t, ast.Name):
            env[t.id] = value
        elif isinstance(t, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(t.elts):
            for sub, v in zip(t.elts, value):
                self._store(sub, v, env, line)
        elif isinstance(t, ast.Tuple):
            for sub in t.elts:
                self._store(sub, UNKNOWN, env, line)
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in env:
            env[t.value.id] = UNKNOWN  # x[i] = v changes x
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) \
                and isinstance(t.value.value, ast.Name) and t.value.value.id == "self":
            self.self_env[t.value.attr] = UNKNOWN


_BUILTINS = {"int": int, "max": max, "min": min, "bool": bool, "abs": abs, "len": len, "sorted": sorted,
             "set": set, "list": list, "tuple": tuple, "any": any, "all": all}


def _is_environ(node: ast.expr) -> bool:
    return ast.unparse(node) in ("os.environ", "environ")


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
