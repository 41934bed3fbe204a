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
from dataclasses import dataclass, field
TYPE_CHECKING = False  # read by type checkers as typing.TYPE_CHECKING; a scan does not load typing
if TYPE_CHECKING:
    from typing import Any

from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import (MODEL_RUNNER_CLASS, MODEL_RUNNER_MODULE, PACKAGE, SERVER_ARGS_GETTERS,
                                  SPECULATIVE_ALGORITHM_CLASS, SPEC_INFO_MODULE)

UNKNOWN = object()
_FELL_THROUGH = object()


@dataclass(frozen=True)
class Span:
    """A number known only between bounds (``min(x, cap)`` with ``x`` decided per step; a per-step width,
    ``Span(lo=1)``): ``lo``/``hi`` None where that end is not known."""

    lo: Any = None
    hi: Any = None


@dataclass(frozen=True)
class Sym:
    """A dotted constant of the tree not resolved to its value (``SpecInputType.DDTREE_VERIFY``): two of
    one class are equal only when they are the same member; it is never None."""

    name: str

    @property
    def owner(self) -> str:
        return self.name.rsplit(".", 1)[0]


MAX_CALL_DEPTH = 8
MAX_BINDING_DEPTH = 4  # locals read through the expressions bound to them


@dataclass(frozen=True)
class Algo:
    """A ``SpeculativeAlgorithm`` member (``SpeculativeAlgorithm.DDTREE``, or ``self`` in its methods)."""

    name: str


class _SA:
    """``server_args`` as a value: attribute reads give the launch's values."""


SA = _SA()


@dataclass(eq=False)
class Obj:
    """An object of the tree whose attributes the launch decides (a target ``ModelRunner``, the draft
    worker, a component its ``__init__`` builds): what its ``__init__`` chain stored, evaluated."""

    label: str
    attrs: dict[str, Any]
    cls: str = ""  # the tree class whose methods calls on it run
    module: str = ""
    lines: dict[str, str] = field(default_factory=dict)  # attribute -> path:line of the statement that set it
    # Its attributes are all in ``attrs`` (an UNKNOWN value: carried, value not known); any other name is
    # absent, as ``hasattr``/``getattr(x, n, default)`` on the real object would find.
    closed: bool = False
    kinds: frozenset[str] = frozenset()  # its class and bases, by name (``isinstance``); empty: not known


@dataclass(eq=False)
class Hooks:
    """What the code being read takes from its context, shared by every call followed from it.

    ``names``/``attrs``: free names and attributes (whatever their base) the context fixes (the verify
    input as ``spec_info`` / ``forward_batch.spec_info``); ``methods``: the method a ``self.m(...)`` runs
    where ``self`` is the class being read; ``binding``: the expression bound to a local where it is read
    (the function being read, not the calls followed); ``watch``: a value whose reads set ``touched``."""

    names: dict[str, Any] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    methods: Any = None  # Callable[[str], ast.FunctionDef | None]
    binding: Any = None  # Callable[[str, ast.AST], ast.expr | None]
    watch: Any = None
    touched: bool = False
    self_obj: Any = None  # ``self`` as an Obj over the evaluator's self_env, made for ``methods``


def truth(v: Any) -> bool | None:
    """A value's truth where it is known (None where not): unknown values, per-step numbers that may be 0."""
    if v is UNKNOWN:
        return None
    if isinstance(v, Span):
        if v.lo is not None and v.lo > 0 or v.hi is not None and v.hi < 0:
            return True
        return False if v.lo == v.hi == 0 else None
    if isinstance(v, (Obj, Sym, Algo, _SA)):
        return True
    try:
        return bool(v)
    except Exception:  # noqa: BLE001 - a value that will not say
        return None


class _Raised(Exception):
    """The tree's code raises here, for these values (``int("")``, ``raise ValueError(...)``): ``exc`` is
    the exception (an instance of a builtin class) or None where its class is the tree's own."""

    def __init__(self, exc: BaseException | None):
        super().__init__(exc)
        self.exc = exc


@dataclass(frozen=True)
class Flow:
    """How a block ended: ``return`` (with its value), ``raise`` (with its exception, None: the tree's
    own class), or ``unknown`` (ways through it that end differently)."""

    kind: str
    value: Any = None


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
        self.owner: tuple[str, str] | None = None  # (class, module) whose method is being run: super()'s start
        self.local: dict[str, Any] = {}
        self.world, self.module, self.depth = world, module, depth
        self.imports: dict[str, str] = {}  # names imported inside the function being evaluated
        # A ``return`` before the statement being reached ends that way through the code (the site is
        # not reached on it), as a ``raise`` does; off inside a followed call, where it is the value.
        self.to_site = True
        # In an ``__init__``, a ``return`` under a test the launch does not decide still leaves an object:
        # the attributes it had then are kept here and joined with the end's (``_join_early``).
        self.constructing = False
        self.early: list[dict[str, Any]] = []
        self.hooks = Hooks()
        self.at: ast.AST | None = None  # where the expression being read stands (for ``hooks.binding``)
        self._binding_depth = 0

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

    def _child(self, module: str) -> "Evaluator":
        """A fresh evaluator of this kind for a followed call's body."""
        return Evaluator(self.values, world=self.world, module=module, depth=self.depth + 1, environ=self.environ)

    def _inner(self, module: str) -> "Evaluator":
        """An evaluator for a followed call: the launch, the world, and the forced/undecided tests shared."""
        inner = self._child(module)
        inner.forced, inner.spans, inner.undecided = self.forced, self.spans, self.undecided
        inner.hooks, inner._binding_depth = self.hooks, MAX_BINDING_DEPTH  # a callee's locals are its own
        inner.to_site = False
        return inner

    def call(self, fn: ast.FunctionDef, module: str, args: list[Any], kwargs: dict[str, Any],
             self_value: Any = None, owner: tuple[str, str] | None = None) -> Any:
        """What a tree function returns for these arguments, followed a few calls deep (raises
        :class:`_Raised` where the tree's code raises for them)."""
        if self.depth >= MAX_CALL_DEPTH:
            return UNKNOWN
        inner = self._inner(module)
        inner.self_value, inner.owner = self_value, owner
        a = fn.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]]
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
        if self_value is not None and positional and not static:
            positional = positional[1:]
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        bound = dict(zip(positional, args))
        if a.vararg is not None:
            bound[a.vararg.arg] = tuple(args[len(positional):]) if UNKNOWN not in args else UNKNOWN
        for name in [*positional, *(k.arg for k in a.kwonlyargs)]:
            if name in kwargs:
                bound[name] = kwargs[name]
            elif name not in bound:
                bound[name] = inner(defaults[name]) if name in defaults else UNKNOWN
        if a.kwarg is not None:
            bound[a.kwarg.arg] = {k: v for k, v in kwargs.items() if k not in bound}
        inner.local = bound
        inner.constructing = fn.name == "__init__" and isinstance(self_value, Obj)
        got = inner.returns(fn.body)
        if inner.constructing:
            _join_early(self_value.attrs, inner.early)
        return None if got is _FELL_THROUGH else got

    def returns(self, body: list[ast.stmt]) -> Any:
        """The value ``body`` returns (``_FELL_THROUGH`` where it ends without a return)."""
        saved, self.to_site = self.to_site, False
        try:
            flow = self.exec_block(body, self.local)
        finally:
            self.to_site = saved
        if flow is None:
            return _FELL_THROUGH
        if flow.kind == "return":
            return flow.value
        if flow.kind == "raise":
            raise _Raised(flow.value)
        return UNKNOWN

    def _import(self, stmt: ast.ImportFrom) -> None:
        if self.world is not None:  # relative imports resolved from the module being evaluated
            self.imports.update(self.world.mods.imports_in(self.module, stmt))
        elif stmt.module and stmt.module.startswith(PACKAGE + "."):
            for a in stmt.names:
                self.imports[a.asname or a.name] = stmt.module

    def __call__(self, node: ast.expr) -> Any:
        try:
            return self._v(node)
        except _Raised:
            return UNKNOWN

    def test(self, node: ast.expr) -> Any:
        """A test's truth: True, False, or UNKNOWN (also where the tree's code raises in it)."""
        try:
            return self._test(node)
        except _Raised:
            return UNKNOWN

    def _test(self, node: ast.expr) -> Any:
        """A test's truth (raises :class:`_Raised` where the tree's code does). ``a and b`` is false where
        any operand is, ``a or b`` true where any is, whatever the others are; ``not`` turns it round."""
        if id(node) in self.forced:
            return self.forced[id(node)]
        if isinstance(node, ast.BoolOp):
            is_and, unsure = isinstance(node.op, ast.And), False
            for v in node.values:
                try:
                    t = self._test(v)
                except _Raised:
                    if not unsure:
                        raise
                    t = UNKNOWN  # raised only where the unknown operands before it let it run
                if t is UNKNOWN:
                    unsure = True
                elif t != is_and:
                    return t
            return UNKNOWN if unsure else is_and
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            t = self._test(node.operand)
            return UNKNOWN if t is UNKNOWN else not t
        t = truth(self._v(node))
        return UNKNOWN if t is None else t

    def _v(self, node: ast.expr) -> Any:
        """``node``'s value; :class:`_Raised` where the tree's code raises, anything else odd unknown."""
        try:
            return self._e(node)
        except _Raised:
            raise
        except RecursionError:
            return UNKNOWN
        except Exception:  # noqa: BLE001 - anything odd is simply unknown
            return UNKNOWN

    def _attr(self, base: Any, attr: str) -> Any:
        if base is SA:
            return self.values.get(attr, UNKNOWN)
        if isinstance(base, Obj):
            if attr in base.attrs:
                return base.attrs[attr]
            prop = self._property(base, attr)
            return prop() if prop is not None else UNKNOWN
        if isinstance(base, Algo) and attr == "name":
            return base.name
        return UNKNOWN

    def _property(self, obj: Obj, attr: str):
        """A ``@property`` of the object's class (or a constant of its class body), as a thunk."""
        if self.world is None or not obj.cls:
            return None
        for _, node, mod in self.world.mods.class_chain(obj.cls, obj.module):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == attr:
                    if any(isinstance(d, ast.Name) and d.id in ("property", "cached_property")
                           or isinstance(d, ast.Attribute) and d.attr == "cached_property" for d in item.decorator_list):
                        return lambda: self.call(item, mod, [], {}, self_value=obj, owner=(node.name, mod))
                    return None
                if isinstance(item, (ast.Assign, ast.AnnAssign)) and item.value is not None and any(
                        isinstance(t, ast.Name) and t.id == attr
                        for t in (item.targets if isinstance(item, ast.Assign) else [item.target])):
                    return lambda: self._inner(mod)(item.value)
        return None

    def _e(self, n: ast.expr) -> Any:
        v = self._node(n)
        if v is self.hooks.watch and v is not None:
            self.hooks.touched = True
        return v

    def _name(self, n: ast.Name) -> Any:
        if n.id in self.local:
            return self.local[n.id]
        if n.id in self.sa:
            return SA
        if n.id == "self" and self.self_value is not None:
            return self.self_value
        if n.id in self.hooks.names:
            return self.hooks.names[n.id]
        if self.hooks.binding is not None and self._binding_depth < MAX_BINDING_DEPTH:
            bound = self.hooks.binding(n.id, self.at if self.at is not None else n)
            if bound is not None:
                saved, self.at = self.at, bound
                self._binding_depth += 1
                try:
                    return self._v(bound)
                finally:
                    self._binding_depth -= 1
                    self.at = saved
        return {"None": None, "True": True, "False": False}.get(n.id, UNKNOWN)

    def _node(self, n: ast.expr) -> Any:  # noqa: C901 - one case per node type
        if id(n) in self.forced:
            return self.forced[id(n)]
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return self._name(n)
        if isinstance(n, ast.Attribute) and n.attr in self.hooks.attrs:
            return self.hooks.attrs[n.attr]
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == SPECULATIVE_ALGORITHM_CLASS \
                and n.value.id not in self.local:
            return Algo(n.attr)
        if isinstance(n, ast.Attribute) and n.attr == "server_args" and not (
                isinstance(n.value, ast.Name) and n.value.id == "self" and (
                    "server_args" in self.self_env or isinstance(self.self_value, Obj)
                    and "server_args" in self.self_value.attrs)):
            return SA  # model_runner.server_args
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                and self.self_value is None:
            return self.self_env.get(n.attr, UNKNOWN)
        if isinstance(n, ast.Attribute):
            base = self._e(n.value)
            got = self._attr(base, n.attr)
            if got is UNKNOWN and base is UNKNOWN and isinstance(n.value, ast.Name) and n.value.id[:1].isupper():
                return Sym(f"{n.value.id}.{n.attr}")  # a class's constant, left by name
            return got
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            a, b = self._e(n.left), self._e(n.right)
            return UNKNOWN if UNKNOWN in (a, b) or None in (a, b) else _BIN[type(n.op)](a, b)
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.Not):
                t = self._test(n.operand)
                return UNKNOWN if t is UNKNOWN else not t
            v = self._e(n.operand)
            if v is UNKNOWN or not isinstance(n.op, ast.USub) or isinstance(v, (Span, Sym, Obj, Algo, _SA)):
                return UNKNOWN
            return -v
        if isinstance(n, ast.BoolOp):
            # the value Python would give: operands in turn until one decides; unknown once one is unknown
            is_and = isinstance(n.op, ast.And)
            v: Any = UNKNOWN
            for operand in n.values:
                v = self._e(operand)
                t = truth(v)
                if t is None:
                    return UNKNOWN
                if t != is_and:
                    return v
            return v
        if isinstance(n, ast.Compare):
            return self._compare(n)
        if isinstance(n, ast.IfExp):
            t = self._test(n.test)
            if t is UNKNOWN:
                self.undecided.append(n.test)
            return UNKNOWN if t is UNKNOWN else self._e(n.body if t else n.orelse)
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)):
            items = [self._e(e) for e in n.elts]
            if UNKNOWN in items:
                return UNKNOWN
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(n)](items)
        if isinstance(n, ast.JoinedStr):
            parts = [self._e(p.value) if isinstance(p, ast.FormattedValue) else p.value for p in n.values]
            return UNKNOWN if UNKNOWN in parts else "".join(map(str, parts))
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._comprehension(n)
        if isinstance(n, ast.Subscript):
            if self.environ is not None and _is_environ(n.value):
                key = self._e(n.slice)
                if not isinstance(key, str):
                    return UNKNOWN
                if key not in self.environ:
                    raise _Raised(KeyError(key))
                return self.environ[key]
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
            partial = _partial_compare(op, left, right)
            if partial is not None:
                if partial is UNKNOWN or not partial:
                    return partial
                left = right
                continue
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, (list, tuple, set, dict, str)):
                    return UNKNOWN
                ok = (left in right) == isinstance(op, ast.In)
            elif type(op) in _CMP:
                if None in (left, right) and type(op) not in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq):
                    return UNKNOWN
                if isinstance(op, (ast.Is, ast.IsNot)) and not (left is None or right is None
                                                                or isinstance(left, bool) or isinstance(right, bool)):
                    return UNKNOWN  # identity of two values ddcheck made is not the tree's
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

    def _call(self, n: ast.Call) -> Any:  # noqa: C901 - one case per kind of callee
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
        if isinstance(f, ast.Name) and f.id == "getattr" and len(n.args) in (2, 3) and "getattr" not in self.local:
            base, name = self._e(n.args[0]), self._e(n.args[1])
            if not isinstance(name, str) or base is UNKNOWN:
                return UNKNOWN
            got = self._attr(base, name)
            if got is UNKNOWN and len(n.args) == 3 and (base is SA and name not in self.values
                                                         or self._absent(base, name) is True):
                return self._e(n.args[2])
            return got
        if isinstance(f, ast.Name) and f.id == "hasattr" and len(n.args) == 2 and "hasattr" not in self.local:
            base, name = self._e(n.args[0]), self._e(n.args[1])
            absent = self._absent(base, name) if isinstance(name, str) else None
            return UNKNOWN if absent is None else not absent
        if isinstance(f, ast.Name) and f.id == "isinstance" and len(n.args) == 2 and "isinstance" not in self.local:
            base = self._e(n.args[0])
            kinds = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
            names = [k.id if isinstance(k, ast.Name) else k.attr if isinstance(k, ast.Attribute) else None
                     for k in kinds]
            if isinstance(base, Obj) and base.kinds and all(names):
                return any(k in base.kinds for k in names)
            return UNKNOWN
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == SPECULATIVE_ALGORITHM_CLASS \
                and f.attr == "from_string" and len(n.args) == 1 and f.value.id not in self.local:
            name = self._e(n.args[0])  # the enum's constructor from the flag's string
            return Algo(name.upper()) if isinstance(name, str) else Algo("NONE") if name is None else UNKNOWN
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords):
            return UNKNOWN  # *args/**kwargs: which parameter gets what is not known here
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                and f.value.func.id == "super":
            return self._super_call(f.attr, n)
        if isinstance(f, ast.Attribute):
            base = self._e(f.value) if not (isinstance(f.value, ast.Name) and f.value.id == "self"
                                            and self.self_value is None) else self._hooked_self()
            if isinstance(base, str) and f.attr in _STR_METHODS:
                args = [self._e(a) for a in n.args]
                if UNKNOWN in args or n.keywords:
                    return UNKNOWN
                return getattr(base, f.attr)(*args)
            args = [self._e(a) for a in n.args]
            kwargs = {k.arg: self._e(k.value) for k in n.keywords if k.arg}
            if isinstance(base, Algo):  # the algorithm's own method, or its is_<name>() test
                fn = self.world.algo_methods.get(f.attr) if self.world is not None else None
                if fn is not None:
                    return self.call(fn, self.world.algo_module, args, kwargs, self_value=Algo(base.name.upper()))
                if f.attr.startswith("is_") and not n.args:
                    return f.attr == f"is_{base.name.lower()}"
                return UNKNOWN
            if isinstance(base, Obj) and self.world is not None and base.cls:
                hit = self._method(base.cls, base.module, f.attr)
                if hit is not None:
                    return self.call(hit[0], hit[1], args, kwargs, self_value=base, owner=hit[2])
            if base is not None and base is self.hooks.self_obj and self.hooks.methods is not None:
                fn = self.hooks.methods(f.attr)  # the read class's own method, its self the same
                if fn is not None:
                    return self.call(fn, self.module, args, kwargs, self_value=base)
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
                if f.id in ("int", "bool") and len(args) == 1 and not n.keywords and isinstance(args[0], Span):
                    t = truth(args[0])  # a per-step number: int() keeps it, bool() is its truth
                    return args[0] if f.id == "int" else UNKNOWN if t is None else t
                if UNKNOWN in args or n.keywords or any(a is None for a in args) \
                        or any(isinstance(a, (_SA, Obj, Algo, Span, Sym)) for a in args):
                    return UNKNOWN
                try:
                    return builtin(*args)
                except (ValueError, TypeError, ZeroDivisionError, KeyError, IndexError) as exc:
                    raise _Raised(exc) from None  # int(""): the tree's own code raises here
            exc_cls = _EXCEPTIONS.get(f.id)
            if exc_cls is not None and f.id not in self.local and not any(
                    isinstance(a, (_SA, Obj, Algo, Span, Sym)) or a is UNKNOWN for a in args):
                return exc_cls(*args)
            if self.world is not None and f.id not in self.local:
                module = self.imports.get(f.id)
                where = module or self.module
                hit = self.world.mods.find_function(f.id, where) if where else None
                if hit is not None:
                    return self.call(hit[0], hit[1], args, kwargs)
                found = self.world.mods.find_class(f.id, where) if where else None
                if found is not None:
                    return self.construct(found[1].name, found[2], args, kwargs)
        return UNKNOWN

    def _hooked_self(self) -> Any:
        """``self`` where the code read is a class's own (no object built for it): with ``hooks.methods``,
        an open object over the attributes its ``__init__`` set, so ``self.m(...)`` runs ``m`` and
        ``self.x`` reads them inside it; else UNKNOWN."""
        if self.hooks.methods is None:
            return UNKNOWN
        if self.hooks.self_obj is None:
            self.hooks.self_obj = Obj("self", self.self_env)
        return self.hooks.self_obj

    def _absent(self, base: Any, name: str) -> bool | None:
        """Is attribute ``name`` absent from ``base`` (True), present (False), or not known (None)."""
        if isinstance(base, Obj):
            if name in base.attrs:
                return False
            if base.closed:
                return True
            return None
        if base is SA:
            return None if name not in self.values else False
        return None

    def _method(self, cls: str, module: str, name: str, after: str | None = None):
        """(function, module, (class, module)) of the method ``name`` a call on a ``cls`` runs (after the
        class ``after`` in its resolution order: ``super()``), or None."""
        if self.world is None:
            return None
        chain = self.world.mods.class_chain(cls, module)
        if after is not None:
            names = [node.name for _, node, _ in chain]
            if after not in names:
                return None
            chain = chain[names.index(after) + 1:]
        for _, node, mod in chain:
            fn = next((f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and f.name == name), None)
            if fn is not None:
                return fn, mod, (node.name, mod)
        return None

    def _super_call(self, name: str, n: ast.Call) -> Any:
        obj = self.self_value
        if not isinstance(obj, Obj) or self.owner is None:
            return UNKNOWN
        hit = self._method(obj.cls, obj.module, name, after=self.owner[0])
        if hit is None:
            return UNKNOWN if name != "__init__" else None
        args = [self._e(a) for a in n.args]
        kwargs = {k.arg: self._e(k.value) for k in n.keywords if k.arg}
        return self.call(hit[0], hit[1], args, kwargs, self_value=obj, owner=hit[2])

    def construct(self, cls: str, module: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """An instance of the tree class ``cls`` built with these arguments: its ``__init__`` run (bases'
        through ``super()``), or, with none, its annotated fields bound as a dataclass binds them."""
        if self.world is None or self.depth >= MAX_CALL_DEPTH:
            return UNKNOWN
        obj = Obj(cls, {}, cls=cls, module=module)
        init = self._method(cls, module, "__init__")
        if init is not None:
            self.call(init[0], init[1], args, kwargs, self_value=obj, owner=init[2])
            return obj
        fields: list[tuple[str, ast.expr | None]] = []
        for _, node, mod in reversed(self.world.mods.class_chain(cls, module)):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and "ClassVar" not in ast.unparse(item.annotation):
                    fields = [f for f in fields if f[0] != item.target.id] + [(item.target.id, item.value)]
        for i, (name, default) in enumerate(fields):
            if i < len(args):
                obj.attrs[name] = args[i]
            elif name in kwargs:
                obj.attrs[name] = kwargs[name]
            elif default is not None:
                obj.attrs[name] = self._inner(module)(default) if not isinstance(default, ast.Call) else UNKNOWN
        post = self._method(cls, module, "__post_init__")
        if post is not None:
            self.call(post[0], post[1], [], {}, self_value=obj, owner=post[2])
        return obj

    # ------------------------------------------------------------------ statements

    def run(self, body: list[ast.stmt], env: dict[str, Any]) -> None:
        """Evaluation of ``body``'s statements into ``env`` (self attributes or locals), taking ``if``
        branches whose test evaluates; where it does not, a branch that ends (``raise``, ``return``) is
        not the way on, and values the ways on differ in become unknown. Loops forget what they bind."""
        saved, self.local = self.local, env
        try:
            self.exec_block(body, env)
        finally:
            self.local = saved if env is not saved else self.local

    def exec_block(self, body: list[ast.stmt], env: dict[str, Any]) -> Flow | None:
        for stmt in body:
            flow = self.exec_stmt(stmt, env)
            if flow is not None:
                return flow
        return None

    def exec_stmt(self, stmt: ast.stmt, env: dict[str, Any]) -> Flow | None:  # noqa: C901
        try:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                if getattr(stmt, "value", None) is None:
                    return None
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = self._v(stmt.value)
                for t in targets:
                    self._store(t, value, env, stmt.lineno)
            elif isinstance(stmt, ast.ImportFrom):
                self._import(stmt)
            elif isinstance(stmt, ast.AugAssign):
                t = stmt.target
                old = env.get(t.id, UNKNOWN) if isinstance(t, ast.Name) else self._self_attr(t.attr) \
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                    else UNKNOWN
                new = self._v(ast.BinOp(left=ast.Constant(old), op=stmt.op, right=stmt.value)) \
                    if old is not UNKNOWN and type(stmt.op) in _BIN else UNKNOWN
                self._store(stmt.target, new, env, stmt.lineno)
            elif isinstance(stmt, ast.Expr):
                self._effect(stmt.value, env)
            elif isinstance(stmt, ast.Return):
                return Flow("return", self._v(stmt.value) if stmt.value is not None else None)
            elif isinstance(stmt, ast.Raise):
                exc = self._v(stmt.exc) if stmt.exc is not None else None
                return Flow("raise", exc if isinstance(exc, BaseException) else None)
            elif isinstance(stmt, ast.If):
                return self._if(stmt, env)
            elif isinstance(stmt, ast.Try):
                return self._try(stmt, env)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        self._store(item.optional_vars, UNKNOWN, env, stmt.lineno)
                return self.exec_block(stmt.body, env)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                env[stmt.name] = UNKNOWN
            elif not isinstance(stmt, (ast.Pass, ast.Assert, ast.Import, ast.Global, ast.Nonlocal)):
                self._forget(stmt, env)  # a loop: what it binds is not known after it
                if not self.to_site and any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(stmt)):
                    return Flow("unknown")  # it may end the function, with a value not known here
        except _Raised as raised:
            return Flow("raise", raised.exc)
        return None

    def _self_attr(self, name: str) -> Any:
        if isinstance(self.self_value, Obj):
            return self.self_value.attrs.get(name, UNKNOWN)
        return self.self_env.get(name, UNKNOWN)

    def _state(self, env: dict[str, Any]) -> tuple[dict, dict]:
        attrs = self.self_value.attrs if isinstance(self.self_value, Obj) else self.self_env
        return dict(env), dict(attrs)

    def _restore(self, env: dict[str, Any], state: tuple[dict, dict]) -> None:
        attrs = self.self_value.attrs if isinstance(self.self_value, Obj) else self.self_env
        env.clear()
        env.update(state[0])
        attrs.clear()
        attrs.update(state[1])

    def join(self, env: dict[str, Any], other: tuple[dict, dict]) -> None:
        """Two ways on joined (``other``, a :meth:`_state`, and the current one): what they disagree on
        is unknown."""
        attrs = self.self_value.attrs if isinstance(self.self_value, Obj) else self.self_env
        for theirs, current in ((other[0], env), (other[1], attrs)):
            for k in set(theirs) | set(current):
                if not _same(theirs.get(k, UNKNOWN), current.get(k, UNKNOWN)):
                    current[k] = UNKNOWN

    def _ends(self, flow: Flow | None) -> bool:
        """The way through a block is no way on: it raised, or returned before the statement reached."""
        return flow is not None and (flow.kind == "raise" or flow.kind == "return" and self.to_site)

    def _if(self, stmt: ast.If, env: dict[str, Any]) -> Flow | None:
        t = self._test(stmt.test)
        if t is not UNKNOWN:
            return self.exec_block(stmt.body if t else stmt.orelse, env)
        self.undecided.append(stmt.test)
        before = self._state(env)
        first = self.exec_block(stmt.body, env)
        after_body = self._state(env)
        self._restore(env, before)
        second = self.exec_block(stmt.orelse, env)
        if self.constructing and not self.to_site:
            if first is not None and first.kind == "return" and second is None:
                self.early.append(after_body[1])
                return None
            if second is not None and second.kind == "return" and first is None:
                self.early.append(self._state(env)[1])
                self._restore(env, after_body)
                return None
        if self._ends(first) and not self._ends(second):
            return second
        if self._ends(second) and not self._ends(first):
            self._restore(env, after_body)
            return first
        if first is not None and first == second and first.kind == "return" \
                and not isinstance(first.value, (Obj, list, dict, set)):
            return first
        self.join(env, after_body)
        if first is None and second is None:
            return None
        if self._ends(first) and self._ends(second):
            return first if first == second else Flow("unknown")
        return Flow("unknown")

    def _try(self, stmt: ast.Try, env: dict[str, Any]) -> Flow | None:
        flow = self.exec_block(stmt.body, env)
        if flow is not None and flow.kind == "raise":
            handler = _handler(stmt.handlers, flow.value)
            if handler is None:
                pass  # not caught here: it goes on up
            elif handler is UNKNOWN:
                flow = Flow("unknown")
            else:
                if handler.name:
                    env[handler.name] = flow.value if flow.value is not None else UNKNOWN
                flow = self.exec_block(handler.body, env)
        elif flow is None and stmt.orelse:
            flow = self.exec_block(stmt.orelse, env)
        if stmt.finalbody:
            last = self.exec_block(stmt.finalbody, env)
            flow = last if last is not None else flow
        return flow

    _MUTATORS = {"append", "extend", "add", "update", "insert", "remove", "discard", "pop", "clear", "sort",
                 "reverse", "setdefault", "__setitem__"}

    def _effect(self, call: ast.expr, env: dict[str, Any]) -> None:
        """A call made for what it does: a method of an object the tree builds (the worker's own
        ``self._setup()``, ``super().__init__(...)``) is followed; a list/set local's ``append`` applied."""
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and self.world is not None and (
                isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
                and call.func.value.func.id == "super"
                or isinstance(self.self_value, Obj) and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "self" and call.func.attr not in self._MUTATORS):
            self._v(call)
            return
        self._mutation(call, env)

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
            self._store(owner, UNKNOWN, env)

    def _forget(self, stmt: ast.stmt, env: dict[str, Any]) -> None:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                env[n.id] = UNKNOWN
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                self._store(n, UNKNOWN, env)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in self._MUTATORS:
                owner = n.func.value  # inside a loop a mutation may run any number of times
                if isinstance(owner, ast.Name):
                    env[owner.id] = UNKNOWN
                elif isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
                    self._store(owner, UNKNOWN, env)

    def _store(self, t: ast.expr, value: Any, env: dict[str, Any], line: int = 0) -> None:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            if isinstance(self.self_value, Obj):
                self.self_value.attrs[t.attr] = value
                if line and self.world is not None:
                    hit = self.world.mods.module(self.module)
                    self.self_value.lines[t.attr] = f"{hit[0] if hit else self.module}:{line}"
            else:
                self.self_env[t.attr] = value
            self.self_lines[t.attr] = line
        elif isinstance(t, ast.Name):
            env[t.id] = value
        elif isinstance(t, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(t.elts):
            for sub, v in zip(t.elts, value):
                self._store(sub, v, env, line)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for sub in t.elts:
                self._store(sub.value if isinstance(sub, ast.Starred) else sub, UNKNOWN, env, line)
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in env:
            env[t.value.id] = UNKNOWN  # x[i] = v changes x
        elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) \
                and isinstance(t.value.value, ast.Name) and t.value.value.id == "self":
            self._store(t.value, UNKNOWN, env)
        elif isinstance(t, ast.Attribute):
            base = self(t.value)  # obj.x = v on an object the tree built
            if isinstance(base, Obj):
                base.attrs[t.attr] = value


def _partial_compare(op: ast.cmpop, left: Any, right: Any) -> Any:
    """A comparison with a value known only in part (a :class:`Sym`, a :class:`Span`): True/False where
    that part decides it, UNKNOWN where it does not, None where neither side is such a value."""
    syms = [x for x in (left, right) if isinstance(x, Sym)]
    spans = [x for x in (left, right) if isinstance(x, Span)]
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, Sym) and isinstance(right, (list, tuple, set)):
        if all(isinstance(x, Sym) and x.owner == left.owner for x in right):
            return (left in right) == isinstance(op, ast.In)
        return UNKNOWN
    if not syms and not spans:
        return None
    if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and None in (left, right):
        return isinstance(op, (ast.IsNot, ast.NotEq))  # neither is ever None
    if syms and isinstance(op, (ast.Eq, ast.NotEq)):
        if len(syms) == 2 and syms[0].owner == syms[1].owner:
            return (left == right) == isinstance(op, ast.Eq)
        return UNKNOWN  # a member may equal a plain value (an IntEnum), or another class's
    if len(spans) == 1 and not syms and isinstance(other := right if spans[0] is left else left, (int, float)) \
            and not isinstance(other, bool):
        lo, hi = spans[0].lo, spans[0].hi
        if spans[0] is right:  # k < span  is  span > k
            op = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE(), ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}.get(type(op), op)
        below = hi is not None and hi < other  # every value < k
        above = lo is not None and lo > other
        if isinstance(op, ast.Gt):
            return True if above else False if hi is not None and hi <= other else UNKNOWN
        if isinstance(op, ast.GtE):
            return True if lo is not None and lo >= other else False if below else UNKNOWN
        if isinstance(op, ast.Lt):
            return True if below else False if lo is not None and lo >= other else UNKNOWN
        if isinstance(op, ast.LtE):
            return True if hi is not None and hi <= other else False if above else UNKNOWN
        if isinstance(op, (ast.Eq, ast.NotEq)) and (below or above):
            return isinstance(op, ast.NotEq)
    return UNKNOWN


def _join_early(attrs: dict[str, Any], early: list[dict[str, Any]]) -> None:
    """An object's attributes over the ways its ``__init__`` ended: one both ways set differently is
    unknown; one only a way sets is that way's (on the others it is absent, so no read of it runs there)."""
    for other in early:
        for k, v in other.items():
            if k not in attrs:
                attrs[k] = v
            elif not _same(attrs[k], v):
                attrs[k] = UNKNOWN


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a is b or (type(a) is type(b) and not isinstance(a, Obj) and a == b))
    except Exception:  # noqa: BLE001 - values that will not compare are not known to be the same
        return False


def _handler(handlers: list[ast.ExceptHandler], exc: BaseException | None):
    """The ``except`` clause that catches ``exc`` (a builtin exception; None: the tree's own class): the
    handler, None where none does, UNKNOWN where it cannot be told."""
    for h in handlers:
        if h.type is None:
            return h
        names = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        classes = [_EXCEPTIONS.get(x.id) if isinstance(x, ast.Name) else None for x in names]
        if exc is None:
            return UNKNOWN
        if any(c is not None and isinstance(exc, c) for c in classes):
            return h
        # a class of the tree's own can only be a subclass of a builtin: it never catches a builtin's instance
    return None


_STR_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "split", "rsplit", "startswith", "endswith",
                "isdigit", "isnumeric", "replace", "partition", "removeprefix", "removesuffix", "title", "format",
                "join", "casefold", "isdecimal", "count", "find", "zfill"}
_EXCEPTIONS = {name: obj for name, obj in vars(__import__("builtins")).items()
               if isinstance(obj, type) and issubclass(obj, BaseException)}


_BUILTINS = {"int": int, "max": max, "min": min, "bool": bool, "abs": abs, "len": len, "sorted": sorted,
             "set": set, "list": list, "tuple": tuple, "any": any, "all": all, "float": float, "str": str,
             "round": round, "divmod": divmod, "isinstance": None}
_BUILTINS = {k: v for k, v in _BUILTINS.items() if v is not None}


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
