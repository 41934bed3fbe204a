"""The launch's step, as the tree's draft worker takes it.

The worker is built as the tree builds it (its ``__init__`` chain evaluated over the launch's values by
:class:`~ddcheck.tree.evaluate.Evaluator`, the components it builds into its attributes included), then
its step is followed from the method the scheduler hands a batch to (``names.DRAFT_WORKER_ENTRY``):
the worker's own calls (``self.m(...)``, ``super().m(...)``), its components' (``self.verifier.run(...)``)
and the tree's functions, with the caller's values bound to their parameters. Every construction of a
verify-input class met on the way is a :class:`Reached` site: reached for this launch (every test on the
way holds), reached on some steps (a test on the way reads the batch), or not reached (a test on the way
is false for the launch), each with the tests that say so. A branch that is not taken is still walked,
without running it, so its sites are reported as not reached, with the test that rules them out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable

from ddcheck.tree.evaluate import SA, UNKNOWN, Evaluator, Flow, Obj, World, _Raised, MAX_CALL_DEPTH
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import DRAFT_WORKER_ENTRY

MAX_METHODS = 600  # methods walked per step (a large worker walks ~100)
MAX_STACK = 14  # calls deep from the entry
STATE_CALL_DEPTH = 3  # calls the walk's own evaluator follows for the values it keeps on the way


@dataclass(frozen=True)
class Cond:
    """A test on the way to a site: its text and place, the way taken, and what it is for the launch
    (True: holds, False: fails, None: decided by the step's batch)."""

    text: str
    at: str
    want: bool
    holds: bool | None
    since: str = ""  # where a caller took the same test, when that decides it here

    def said(self) -> str:
        test = self.text if self.want else f"not ({self.text})"
        state = {True: "holds", False: "is false for this launch", None: "depends on the step's batch"}[self.holds]
        if self.since and self.holds is not None:
            state = f"{'holds' if self.holds else 'is false'} on the steps that come here (the same test at {self.since})"
        return f"`{test}` ({self.at}) {state}"


@dataclass
class Reached:
    """A verify-input construction on the step's way."""

    call: ast.Call
    fn: ast.FunctionDef
    module: str
    path: str
    cls: str
    cls_module: str
    self_obj: Any
    owner: tuple[str, str] | None
    bound: dict[str, Any]
    ev: Evaluator | None  # positioned at the call (None where the walk did not run the way there)
    conds: list[Cond] = field(default_factory=list)
    via: list[str] = field(default_factory=list)

    @property
    def reached(self) -> bool | None:
        if any(c.holds is False for c in self.conds):
            return False
        return None if any(c.holds is None for c in self.conds) else True

    @property
    def why(self) -> str:
        """What decides whether the step reaches the site."""
        if self.reached is False:
            return "not reached: " + next(c.said() for c in self.conds if c.holds is False)
        chain = " -> ".join(self.via)
        step = [c.said() for c in self.conds if c.holds is None]
        head = f"reached from {chain}" if chain else "reached"
        return head + (f", on steps where {'; '.join(step[:3])}" + (" ..." if len(step) > 3 else "") if step else "")

    def evaluator(self, values: dict[str, Any], world: World, environ: dict[str, str] | None) -> Evaluator:
        """A fresh evaluator at the start of the site's method, its parameters bound as the walk bound them."""
        ev = Evaluator(values, world=world, module=self.module, environ=environ)
        ev.self_value, ev.owner, ev.local = self.self_obj, self.owner, dict(self.bound)
        ev.imports = world.mods.imports_in(self.module, self.fn)
        return ev


@dataclass
class Step:
    worker: Obj | None = None
    entry: str = ""  # path:line of the entry method, "" where the worker has none
    sites: list[Reached] = field(default_factory=list)
    note: str = ""


def build_worker(world: World, cls: str, module: str, values: dict[str, Any],
                 environ: dict[str, str] | None) -> tuple[Obj, str]:
    """The worker as its ``__init__`` chain leaves it for the launch (``server_args`` its parameter of
    that name, else its first), and a note where its ``__init__`` raises for the launch."""
    obj = Obj(cls, {}, cls=cls, module=module)
    ev = Evaluator(values, world=world, module=module, environ=environ)
    init = ev._method(cls, module, "__init__")
    if init is None:
        return obj, ""
    a = init[0].args
    params = [p.arg for p in [*a.posonlyargs, *a.args][1:]] + [k.arg for k in a.kwonlyargs]
    named = [p for p in params if "server_args" in p]
    kwargs = {p: SA for p in (named or params[:1])}
    try:
        ev.call(init[0], init[1], [], kwargs, self_value=obj, owner=init[2])
    except _Raised as raised:
        return obj, f"{cls}.__init__ raises for this launch ({type(raised.exc).__name__ if raised.exc else 'the tree'})"
    return obj, ""


def walk(mods: TreeModules, world: World, worker: Obj, values: dict[str, Any], environ: dict[str, str] | None,
         input_class: Callable[[ast.Call, str, dict[str, str]], tuple[str, str] | None],
         skip: Callable[[str], bool] = lambda name: False) -> Step:
    """The verify-input sites the worker's step reaches from ``DRAFT_WORKER_ENTRY``. ``input_class``
    says whether a call (in a module, with the names imported into the function) builds a verify input:
    (class, module) or None; ``skip`` names methods that are not the launch's step (placeholders)."""
    ev0 = Evaluator(values, world=world, module=worker.module, environ=environ)
    entry = ev0._method(worker.cls, worker.module, DRAFT_WORKER_ENTRY)
    step = Step(worker=worker)
    if entry is None:
        step.note = f"{worker.cls} has no {DRAFT_WORKER_ENTRY}"
        return step
    hit = mods.module(entry[1])
    step.entry = f"{hit[0] if hit else entry[1]}:{entry[0].lineno}"
    w = _Walker(mods, world, values, environ, input_class, skip)
    w.method(entry[0], entry[1], entry[2], worker, _bind(entry[0], [], {}, True), [],
             [f"{entry[2][0]}.{DRAFT_WORKER_ENTRY}"], True)
    step.sites = list(w.sites.values())
    if w.count >= MAX_METHODS:
        step.note = f"the step was followed through its first {MAX_METHODS} methods only"
    return step


class _Walker:
    def __init__(self, mods, world, values, environ, input_class, skip):
        self.mods, self.world, self.values, self.environ = mods, world, values, environ
        self.input_class, self.skip = input_class, skip
        self.sites: dict[tuple[str, int, int], Reached] = {}
        self.stack: list[int] = []
        self.count = 0
        # A method is walked once per object and per standing of the way to it (live or not; its tests
        # all holding, some per step): another way there finds the same sites, no better reached.
        self.seen: set[tuple] = set()
        self.ended: Cond | None = None  # the test whose taken branch ended the block just walked

    # ------------------------------------------------------------------ methods

    def method(self, fn, module: str, owner, self_obj, bound: dict[str, Any], conds: list[Cond],
               via: list[str], live: bool, origin: dict[str, str] | None = None,
               assumed: dict[str, tuple[bool, str]] | None = None) -> None:
        key = (id(fn), id(self_obj), live, min((_rank(c.holds) for c in conds), default=2),
               frozenset((assumed or {}).items()))
        if id(fn) in self.stack or len(self.stack) >= MAX_STACK or self.count >= MAX_METHODS or key in self.seen:
            return
        self.seen.add(key)
        self.count += 1
        ev = Evaluator(self.values, world=self.world, module=module, environ=self.environ,
                       depth=MAX_CALL_DEPTH - STATE_CALL_DEPTH)
        ev.self_value, ev.owner, ev.local = self_obj, owner, dict(bound)
        ev.imports = self.mods.imports_in(module, fn)
        hit = self.mods.module(module)
        ctx = _Ctx(fn, module, hit[0] if hit else module, owner, self_obj, dict(bound), via,
                   origin if origin is not None else {p: p for p in bound}, dict(assumed or {}))
        self.stack.append(id(fn))
        try:
            self.block(fn.body, ev, ctx, conds, live)
        finally:
            self.stack.pop()

    def block(self, body: list[ast.stmt], ev: Evaluator, ctx: "_Ctx", conds: list[Cond], live: bool) -> bool:
        """Walks ``body``; True where every way through it ends (return, raise) for the launch."""
        for i, stmt in enumerate(body):
            if self.stmt(stmt, ev, ctx, conds, live) and live:
                # what follows is no way the launch's step goes on: walked for its sites, not reached
                end = self.ended or Cond(f"the step goes past the {type(stmt).__name__.lower()}",
                                         f"{ctx.path}:{stmt.lineno}", True, False)
                self.ended = None
                self.block(body[i + 1:], ev, ctx, conds + [end], False)
                return True
        return False

    def stmt(self, stmt: ast.stmt, ev: Evaluator, ctx: "_Ctx", conds: list[Cond], live: bool) -> bool:  # noqa: C901
        at = f"{ctx.path}:{stmt.lineno}"
        if isinstance(stmt, ast.If):
            self.calls(stmt.test, ev, ctx, conds, live)
            key = ctx.key(stmt.test)
            t, since = ctx.assumed.get(key, (UNKNOWN, "")) if live else (UNKNOWN, "")
            t = ev.test(stmt.test) if live and t is UNKNOWN else t
            text = ast.unparse(stmt.test)
            if not live:
                self.block(stmt.body, ev, ctx, conds + [Cond(text, at, True, None)], False)
                self.block(stmt.orelse, ev, ctx, conds + [Cond(text, at, False, None)], False)
                return False
            if t is UNKNOWN:
                before = ev._state(ev.local)
                ctx.assumed[key] = (True, at)
                first = self.block(stmt.body, ev, ctx, conds + [Cond(text, at, True, None)], True)
                after = ev._state(ev.local)
                ev._restore(ev.local, before)
                ctx.assumed[key] = (False, at)
                second = self.block(stmt.orelse, ev, ctx, conds + [Cond(text, at, False, None)], True)
                del ctx.assumed[key]
                if second and not first:
                    ev._restore(ev.local, after)
                elif not first:
                    ev.join(ev.local, after)
                return first and second
            taken, other = (stmt.body, stmt.orelse) if t else (stmt.orelse, stmt.body)
            self.block(other, ev, ctx, conds + [Cond(text, at, not t, False, since)], False)
            ended = self.block(taken, ev, ctx, conds + [Cond(text, at, bool(t), True, since)], True)
            if ended:
                self.ended = Cond(text, at, not t, False, since)  # the way past this if is its other branch
            return ended
        if isinstance(stmt, ast.Try):
            ended = self.block(stmt.body, ev, ctx, conds, live)
            for h in stmt.handlers:
                before = ev._state(ev.local)
                kind = ast.unparse(h.type) if h.type is not None else "an exception"
                self.block(h.body, ev, ctx, conds + [Cond(f"{kind} raised in the try", at, True, None)], live)
                ev._restore(ev.local, before)
            if not ended:
                ended = self.block(stmt.orelse, ev, ctx, conds, live)
            return self.block(stmt.finalbody, ev, ctx, conds, live) or ended
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.calls(item.context_expr, ev, ctx, conds, live)
                if live and item.optional_vars is not None:
                    ev._store(item.optional_vars, UNKNOWN, ev.local)
            return self.block(stmt.body, ev, ctx, conds, live)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            head = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.test
            self.calls(head, ev, ctx, conds, live)
            if live:
                ev._forget(stmt, ev.local)
            loop = Cond(f"the loop `{ast.unparse(head)[:60]}` runs", at, True, None)
            self.block(stmt.body, ev, ctx, conds + [loop], live)
            self.block(stmt.orelse, ev, ctx, conds, live)
            if live:
                ev._forget(stmt, ev.local)
            return False
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if live:
                ev.local[stmt.name] = UNKNOWN
            return False
        self.calls(stmt, ev, ctx, conds, live)
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return True
        if live:
            flow = ev.exec_stmt(stmt, ev.local)
            return isinstance(flow, Flow) and flow.kind == "raise" and flow.value is not None
        return False

    # ------------------------------------------------------------------ calls

    def calls(self, node: ast.AST, ev: Evaluator, ctx: "_Ctx", conds: list[Cond], live: bool) -> None:
        for call in _calls_in(node):
            found = self.input_class(call, ctx.module, ev.imports)
            if found is not None:
                key = (ctx.path, call.lineno, call.col_offset)
                site = Reached(call, ctx.fn, ctx.module, ctx.path, found[0], found[1], ctx.self_obj, ctx.owner,
                               ctx.bound, ev if live else None, list(conds), list(ctx.via))
                old = self.sites.get(key)
                if old is None or _rank(site.reached) > _rank(old.reached):
                    self.sites[key] = site
                continue
            target = self.callee(call, ev, ctx, live)
            if target is None:
                continue
            fn, module, owner, self_obj = target
            if self.skip(fn.name):
                continue
            bound = _bind(fn, [ev(a) if live else UNKNOWN for a in call.args],
                          {k.arg: ev(k.value) if live else UNKNOWN for k in call.keywords if k.arg},
                          self_obj is not None)
            named = _bind(fn, [a.id if isinstance(a, ast.Name) else None for a in call.args],
                          {k.arg: k.value.id if isinstance(k.value, ast.Name) else None
                           for k in call.keywords if k.arg}, self_obj is not None)
            origin = {p: ctx.origin[n] for p, n in named.items() if isinstance(n, str) and n in ctx.origin}
            via = ctx.via + [f"{owner[0] + '.' if owner else ''}{fn.name} ({ctx.path}:{call.lineno})"]
            self.method(fn, module, owner, self_obj, bound, conds, via, live, origin, ctx.assumed)

    def callee(self, call: ast.Call, ev: Evaluator, ctx: "_Ctx", live: bool):
        """(function, module, owner, self) a call of the step runs, where it is the tree's."""
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                and f.value.func.id == "super" and isinstance(ctx.self_obj, Obj) and ctx.owner:
            hit = ev._method(ctx.self_obj.cls, ctx.self_obj.module, f.attr, after=ctx.owner[0])
            return (hit[0], hit[1], hit[2], ctx.self_obj) if hit else None
        if isinstance(f, ast.Attribute):
            base = ev(f.value)  # a read: the worker's attribute, a component it built
            if isinstance(base, Obj) and base.cls:
                hit = ev._method(base.cls, base.module, f.attr)
                if hit is not None and not _is_property(hit[0]):
                    return hit[0], hit[1], hit[2], base
            return None
        if isinstance(f, ast.Name) and f.id not in ev.local:
            where = ev.imports.get(f.id) or self.mods.imports_of(ctx.module).get(f.id) or ctx.module
            hit = self.mods.find_function(f.id, where)
            if hit is not None:
                return hit[0], hit[1], None, None
        return None


@dataclass
class _Ctx:
    fn: ast.FunctionDef
    module: str
    path: str
    owner: tuple[str, str] | None
    self_obj: Any
    bound: dict[str, Any]
    via: list[str]
    # The step's batch through the calls: a parameter -> the entry's parameter (or caller's name) it is,
    # so a test the caller took one way is taken so again where a callee tests the same thing on it.
    origin: dict[str, str] = field(default_factory=dict)
    assumed: dict[str, tuple[bool, str]] = field(default_factory=dict)  # test -> (way taken, where)

    def key(self, test: ast.expr) -> str:
        """The test as said of the step's own objects (parameters by their origin)."""
        names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
        memo = (id(self.fn), id(self.self_obj), tuple(sorted((n, self.origin.get(n, "")) for n in names)))
        kept = test.__dict__.setdefault("_ddcheck_keys", {})
        if memo not in kept:
            kept[memo] = self._key(test)
        return kept[memo]

    def _key(self, test: ast.expr) -> str:
        class Rename(ast.NodeTransformer):
            def visit_Name(inner, n: ast.Name) -> ast.Name:  # noqa: N805
                name = self.origin.get(n.id, f"{id(self.fn)}.{n.id}" if n.id != "self" else f"self@{id(self.self_obj)}")
                return ast.copy_location(ast.Name(id=name, ctx=n.ctx), n)
        import copy
        return ast.unparse(Rename().visit(copy.deepcopy(test)))


def _rank(reached: bool | None) -> int:
    return {False: 0, None: 1, True: 2}[reached]


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _bind(fn: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any], method: bool) -> dict[str, Any]:
    """A function's parameters bound to a call's values (defaults unknown: only the caller's are kept)."""
    a = fn.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if method and positional and not static:
        positional = positional[1:]
    bound = dict(zip(positional, args))
    for name in [*positional, *(k.arg for k in a.kwonlyargs)]:
        if name in kwargs:
            bound[name] = kwargs[name]
    out = {p: UNKNOWN for p in [*positional, *(k.arg for k in a.kwonlyargs)]}
    out.update(bound)
    return out


def _calls_in(node: ast.AST) -> list[ast.Call]:
    """The calls ``node`` makes itself (not those of a lambda or a function it defines), in source order
    (kept on the node: a method is walked once per way to it)."""
    kept = node.__dict__.get("_ddcheck_calls")
    if kept is None:
        kept = node.__dict__["_ddcheck_calls"] = _find_calls(node)
    return kept


def _find_calls(node: ast.AST) -> list[ast.Call]:
    out: list[ast.Call] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            return
        for child in ast.iter_child_nodes(n):
            visit(child)
        if isinstance(n, ast.Call):
            out.append(n)

    visit(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))
