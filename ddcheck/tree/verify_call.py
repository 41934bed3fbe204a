"""The verify input as the tree's worker builds it: its constructor call's keywords, evaluated at run time.

:mod:`ddcheck.tree.worker` finds where the worker builds its verify input
(``DDTreeVerifyInput(draft_token_num=..., visibility=v[:, :n, :n] if capability.use_visibility else None)``).
``ddcheck smoke`` hands the backend that input, so here each keyword of that call is evaluated as
written, on real objects: the tree's functions run (``resolve_..._capability(self.target_worker.
model_runner.attn_backend)`` is handed the backend under test), and the ``if test: raise`` statements on
the way to the call are evaluated too (a test that holds is the worker refusing the launch).

Names resolve, in order: the method's locals assigned before the use (their own expressions, evaluated
the same way; a tuple unpacked from a call takes its element); the values the caller gives by name (the
batch's tree: ``parents``, ``visibility``, ...); the worker's ``self`` (:class:`WorkerSelf`); the
module's imports (loaded through the caller's importer); builtins. A tree function's keyword that cannot
be evaluated is taken by its parameter's name from the given values, else its default. What cannot be
evaluated raises :class:`Unresolved`; the caller keeps its own value for that keyword and says so.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

from ddcheck.tree.evaluate import UNKNOWN, Evaluator
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import ATTN_BACKEND_ATTR, MODEL_RUNNER_ATTR, SERVER_ARGS_ATTR
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.worker import worker_class

MAX_DEPTH = 12  # locals through locals


class Unresolved(Exception):
    """A name or value the worker's code needs that cannot be had here (the message says which)."""


@dataclass
class WorkerCall:
    """Where and how the worker builds its verify input (found for one launch)."""

    module: str
    path: str
    fn: ast.FunctionDef
    call: ast.Call
    self_values: dict[str, Any] = field(default_factory=dict)  # its ``self`` as ``__init__`` sets it

    @property
    def keywords(self) -> list[str]:
        return [k.arg for k in self.call.keywords if k.arg]


@dataclass
class Built:
    """The keywords evaluated, those that could not be (keyword -> why), and a refusal on the way."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    unevaluated: dict[str, str] = field(default_factory=dict)
    refused: str | None = None  # "RuntimeError: message (path:line)"


def find_call(tree: SourceTree, algorithm: str, values: dict[str, Any], path: str, line: int,
              cls: str) -> WorkerCall | None:
    """The ``cls(...)`` call at ``path:line`` of the tree (as ``target.worker`` reported it), in its method,
    with the worker's ``self`` attributes evaluated over the launch's ``values``."""
    mods = TreeModules.of(tree)
    module = mods.dotted(path)
    hit = mods.module(module)
    if hit is None:
        return None
    for fn in (n for n in ast.walk(hit[1]) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and call.lineno == line and isinstance(call.func, ast.Name) \
                    and call.func.id == cls:
                return WorkerCall(module, path, fn, call, _self_values(mods, algorithm, values))
    return None


def _self_values(mods: TreeModules, algorithm: str, values: dict[str, Any]) -> dict[str, Any]:
    """The worker's attributes its ``__init__`` chain sets from the launch's values (plain values only)."""
    found = worker_class(mods, algorithm)
    if found is None:
        return {}
    ev = Evaluator(values)
    for _, node, _ in mods.class_chain(*found)[::-1]:
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None:
            params = [a.arg for a in init.args.args]
            ev.sa = {params[1]} if len(params) > 1 else {"server_args"}
            ev.run(init.body, {})
    return {k: v for k, v in ev.self_env.items() if v is not UNKNOWN and isinstance(v, (int, float, str, type(None)))}


class _Reach:
    """An object the worker reaches that only leads on (``self.target_worker``): its ``model_runner`` is
    the target model runner; anything else done with it cannot be evaluated here."""

    def __init__(self, label: str, runner: Any):
        self._label, self._runner = label, runner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == MODEL_RUNNER_ATTR:
            return self._runner
        return _Reach(f"{self._label}.{name}", self._runner)


class RunnerView:
    """The target model runner as the worker sees it: the harness's runner, with the backend under test
    as its ``attn_backend``."""

    def __init__(self, runner: Any, backend: Any):
        self._runner, self._backend = runner, backend

    def __getattr__(self, name: str) -> Any:
        if name == ATTN_BACKEND_ATTR:
            return self._backend
        return getattr(self._runner, name)


class WorkerSelf(_Reach):
    """The worker's ``self``: what its ``__init__`` sets for the launch, its ``server_args`` (the tree's own
    instance), the target model runner; other attributes lead on (:class:`_Reach`)."""

    def __init__(self, values: dict[str, Any], server_args: Any, runner: Any):
        super().__init__("self", runner)
        self._values, self._server_args = values, server_args

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and name in ("_values", "_server_args", "_label", "_runner"):
            raise AttributeError(name)
        if name in self._values:
            return self._values[name]
        if name == SERVER_ARGS_ATTR and self._server_args is not None:
            return self._server_args
        return super().__getattr__(name)


def evaluate(site: WorkerCall, given: dict[str, Callable[[], Any]], self_obj: Any, mods: TreeModules,
             skip: frozenset[str] = frozenset()) -> Built:
    """The keywords of ``site``'s call (but ``skip``), and whether a raise on the way holds."""
    ev = _Runtime(site, given, self_obj, mods)
    out = Built()
    for test, exc in _raises_on_the_way(site.fn, site.call):
        try:
            if ev.truth(ev.value(test, site.call.lineno)):
                try:
                    what = ev.value(exc, site.call.lineno)
                    words = f"{type(what).__name__}: {what}" if isinstance(what, BaseException) else str(what)
                except Unresolved:
                    words = ast.unparse(exc)
                out.refused = f"{words} ({site.path}:{exc.lineno})"
                return out
        except Unresolved:
            continue  # undecided here: the worker may go on
    for kw in site.call.keywords:
        if not kw.arg or kw.arg in skip:
            continue
        try:
            value = ev.value(kw.value, site.call.lineno)
            if isinstance(value, _Reach):
                raise Unresolved(f"{ast.unparse(kw.value)} is not known here")
            out.kwargs[kw.arg] = value
        except Unresolved as exc:
            out.unevaluated[kw.arg] = str(exc)
        except Exception as exc:  # noqa: BLE001 - the tree's code raised on our values: say so, carry on
            out.unevaluated[kw.arg] = f"{ast.unparse(kw.value)} raised {type(exc).__name__}: {exc}"
    return out


def _raises_on_the_way(fn: ast.FunctionDef, call: ast.Call) -> list[tuple[ast.expr, ast.expr]]:
    """``if test: raise E(...)`` statements that run before ``call`` in the blocks leading to it."""
    out = []

    def walk(body: list[ast.stmt]) -> None:
        for stmt in body:
            if any(n is call for n in ast.walk(stmt)):
                for name in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, name, None)
                    if isinstance(inner, list) and any(n is call for s in inner for n in ast.walk(s)):
                        walk(inner)
                return
            if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Raise) \
                    and stmt.body[0].exc is not None and not stmt.orelse:
                out.append((stmt.test, stmt.body[0].exc))

    walk(fn.body)
    return out


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.truediv, ast.Mod: operator.mod, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


class _Runtime:
    """A small interpreter of the worker's expressions over real objects."""

    def __init__(self, site: WorkerCall, given: dict[str, Callable[[], Any]], self_obj: Any, mods: TreeModules):
        self.site, self.given, self.self_obj, self.mods = site, given, self_obj, mods
        self.imports = {**mods.imports_of(site.module), **mods.imports_in(site.module, site.fn)}
        self.libraries = _library_imports(mods, site.module)
        self.assigned = sorted((n for n in ast.walk(site.fn) if isinstance(n, (ast.Assign, ast.AnnAssign))),
                               key=lambda n: (n.lineno, n.col_offset))
        self.memo: dict[tuple[str, int], Any] = {}
        self.depth = 0

    # ------------------------------------------------------------------ names

    def name(self, name: str, before: int) -> Any:
        if name == "self":
            return self.self_obj
        key = (name, before)
        if key in self.memo:
            return self.memo[key]
        value, why = UNKNOWN, f"`{name}`"
        stmt = next((s for s in reversed(self.assigned) if s.lineno < before and _binds(s, name)), None)
        if stmt is not None and stmt.value is not None and self.depth < MAX_DEPTH:
            self.depth += 1
            try:
                value = self._element(stmt, name, self.value(stmt.value, stmt.lineno))
            except Unresolved as exc:
                why = str(exc)
            except Exception as exc:  # noqa: BLE001 - the tree's code raised on our values
                why = f"{ast.unparse(stmt.value)[:60]} raised {type(exc).__name__}: {exc}"
            finally:
                self.depth -= 1
        if value is UNKNOWN and name in self.given:
            value = self.given[name]()
        if value is UNKNOWN and name in self.imports:
            try:
                value = getattr(importlib.import_module(self.imports[name]), name)
            except Exception as exc:  # noqa: BLE001
                why = f"{self.imports[name]}.{name} does not load here: {type(exc).__name__}"
        if value is UNKNOWN and name in self.libraries:
            lib, attr = self.libraries[name]
            try:
                value = importlib.import_module(lib) if attr is None else getattr(importlib.import_module(lib), attr)
            except Exception as exc:  # noqa: BLE001
                why = f"{lib} does not load here: {type(exc).__name__}"
        if value is UNKNOWN and hasattr(builtins, name):
            value = getattr(builtins, name)
        if value is UNKNOWN:
            raise Unresolved(why if why != f"`{name}`" else f"`{name}` is not known here")
        self.memo[key] = value
        return value

    @staticmethod
    def _element(stmt: ast.stmt, name: str, value: Any) -> Any:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
        if isinstance(target, ast.Name):
            return value
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        return tuple(value)[names.index(name)]

    # ------------------------------------------------------------------ expressions

    def truth(self, value: Any) -> bool:
        if isinstance(value, _Reach):
            raise Unresolved(f"{value._label} is not known here")
        return bool(value)

    def value(self, n: ast.expr, at: int) -> Any:  # noqa: C901 - one case per node type
        v = lambda x: self.value(x, at)  # noqa: E731
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return self.name(n.id, at)
        if isinstance(n, ast.Attribute):
            base = v(n.value)
            try:
                return getattr(base, n.attr)
            except AttributeError as exc:
                raise Unresolved(f"{ast.unparse(n)}: {exc}") from None
        if isinstance(n, ast.Subscript):
            base, index = v(n.value), v(n.slice)
            self._plain(base, n)
            return base[index]
        if isinstance(n, ast.Slice):
            return slice(*(v(x) if x is not None else None for x in (n.lower, n.upper, n.step)))
        if isinstance(n, (ast.Tuple, ast.List)):
            items = [v(e) for e in n.elts]
            return tuple(items) if isinstance(n, ast.Tuple) else items
        if isinstance(n, ast.IfExp):
            return v(n.body) if self.truth(v(n.test)) else v(n.orelse)
        if isinstance(n, ast.BoolOp):
            result = None
            for e in n.values:
                result = v(e)
                if self.truth(result) is isinstance(n.op, ast.Or):
                    return result
            return result
        if isinstance(n, ast.UnaryOp):
            x = v(n.operand)
            if isinstance(n.op, ast.Not):
                return not self.truth(x)
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(n.op)](
                self._plain(x, n))
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            return _BIN[type(n.op)](self._plain(v(n.left), n), self._plain(v(n.right), n))
        if isinstance(n, ast.Compare):
            left = self._plain(v(n.left), n)
            for op, right in zip(n.ops, n.comparators):
                r = self._plain(v(right), n)
                if not _CMP[type(op)](left, r):
                    return False
                left = r
            return True
        if isinstance(n, ast.JoinedStr):
            return "".join(str(v(p.value)) if isinstance(p, ast.FormattedValue) else str(p.value)
                           for p in n.values)
        if isinstance(n, ast.Call):
            return self.call(n, at)
        raise Unresolved(f"{ast.unparse(n)[:60]} ({type(n).__name__}) is not evaluated here")

    @staticmethod
    def _plain(x: Any, n: ast.expr) -> Any:
        if isinstance(x, _Reach):
            raise Unresolved(f"{x._label} is not known here (in {ast.unparse(n)[:60]})")
        return x

    def call(self, n: ast.Call, at: int) -> Any:
        fn = self._plain(self.value(n.func, at), n)
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            raise Unresolved(f"{ast.unparse(n)[:60]}: * or ** arguments")
        args = [self.value(a, at) for a in n.args]
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        kwargs: dict[str, Any] = {}
        for kw in n.keywords:
            try:
                kwargs[kw.arg] = self._plain(self.value(kw.value, at), kw.value)
            except Unresolved:
                p = params.get(kw.arg)
                if kw.arg in self.given:  # the batch's value under the parameter's own name
                    kwargs[kw.arg] = self.given[kw.arg]()
                elif p is None or p.default is inspect.Parameter.empty:
                    raise
        return fn(*args, **kwargs)


def _binds(stmt: ast.stmt, name: str) -> bool:
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
        getattr(stmt, "target", None)
    if isinstance(target, ast.Name):
        return target.id == name
    return isinstance(target, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in target.elts)


def _library_imports(mods: TreeModules, module: str) -> dict[str, tuple[str, str | None]]:
    """Local name -> (module, attribute or None) for the module's top-level imports from outside the tree
    (``import torch``, ``from typing import Optional``): the tree's own are :meth:`TreeModules.imports_of`."""
    hit = mods.module(module)
    out: dict[str, tuple[str, str | None]] = {}
    for node in hit[1].body if hit is not None else ():
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom) and not node.level and mods.imported(module, node) is None:
            for a in node.names:
                out[a.asname or a.name] = (node.module or "", a.name)
    return out
