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
import re
from dataclasses import dataclass, field
from collections.abc import Iterator
from typing import Any

from ddcheck.tree.evaluate import SA, UNKNOWN, Algo, Evaluator, Obj, Span, World, guards_to, statements_before
from ddcheck.tree.step import Reached, build_worker, walk
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.names import (DRAFT_TOKEN_NUM, MODEL_EXECUTOR_DIR, NUM_TOKENS_PER_REQ,
                                  SPEC_INFO_FILE as SPEC_INFO, SPEC_INFO_MODULE, SPEC_INPUT_TYPE_CLASS,
                                  SPEC_INPUT_TYPE_FIELD, SPECULATIVE_ALGORITHM_CLASS, VERIFY_FUNCTION_MARKERS,
                                  WIDTH_FIELDS)



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
    input_type: str | None = None  # the SpecInputType member the class sets (``spec_input_type=``)
    per_step: bool = False  # W is computed in the step (a local of the method), not fixed at start-up
    # The range W takes over the step's own decisions (its tests that depend on the batch taken both
    # ways; ``min(x, cap)`` of a per-step x bounded by the cap), each end None where it cannot be evaluated.
    width_min: int | None = None
    width_max: int | None = None
    mask_from: "MaskSource | None" = None  # the tree function whose result the worker passes as custom_mask
    # Whether the launch's step reaches the site: True (every test on the way holds), None (on steps
    # whose batch passes the tests that read it), False (a test on the way is false for the launch).
    reached: bool | None = True
    reached_why: str = ""
    width_from: str = ""  # where W's value is set (path:line of the attribute's assignment), when known


@dataclass
class MaskSource:
    """``custom_mask=m`` where ``(.., m, ..) = module.function(...)`` in the worker: the tree's own mask builder."""

    module: str
    function: str
    index: int | None  # position in the tuple it returns; None when it returns the mask itself
    path: str = ""  # where the function is defined
    line: int = 0
    constants: dict[str, str] = field(default_factory=dict)  # call-site keywords given as `torch.X`/constants


@dataclass
class WorkerFacts:
    """What the tree's worker for one launch builds: the worker class and the verify inputs it may build."""

    worker: str | None = None
    worker_path: str = ""
    worker_line: int = 0
    choices: list[VerifyChoice] = field(default_factory=list)  # the sites the launch's step reaches
    sites: list[VerifyChoice] = field(default_factory=list)  # every site met, reached or not
    entry: str = ""  # path:line of the method the step starts at ("" where it was not followed)
    note: str = ""

    @property
    def widths(self) -> set[int]:
        return {c.width for c in self.choices if c.width is not None}


# --------------------------------------------------------------------------- the tree's modules


def worker_class(mods: TreeModules, algorithm: str, values: dict[str, Any] | None = None,
                 environ: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(class name, module) the tree's SpeculativeAlgorithm gives for ``algorithm``: its method that
    returns an imported worker class, run for this algorithm (``self.is_eagle()`` is the tree's own
    test, so EAGLE3 gets what ``is_eagle`` says it shares) and these settings; else what the tree builds
    for it elsewhere (:func:`_workers_constructed`)."""
    hit = mods.module(SPEC_INFO_MODULE)
    if hit is None:
        return None
    found = _worker_by_the_trees_tests(mods, algorithm, values or {}, environ)
    if found is not None:
        return found
    # A class built under the algorithm's test that builds no verify input is not its worker (a
    # scheduler builds inputs and workers alike under the same test): the first that does, else the first.
    built = list(_workers_constructed(mods, algorithm, values or {}, environ))
    return next((c for c in built if _inputs_of(mods, c, values or {}, environ, algorithm).choices),
                built[0] if built else None)


def _worker_by_the_trees_tests(mods: TreeModules, algorithm: str, values: dict[str, Any],
                               environ: dict[str, str] | None) -> tuple[str, str] | None:
    hit = mods.find_class(SPECULATIVE_ALGORITHM_CLASS, SPEC_INFO_MODULE)
    if hit is None:
        return None
    world = World(mods, algorithm)
    for fn in (f for f in hit[1].body if isinstance(f, ast.FunctionDef)):
        imports = {a.asname or a.name: (mods.imported(hit[2], n), a.name) for n in ast.walk(fn)
                   if isinstance(n, ast.ImportFrom) and mods.imported(hit[2], n) for a in n.names}
        if not imports:
            continue
        ev = Evaluator(values, world=world, module=hit[2], environ=environ)
        ev.self_value = Algo(algorithm.upper())
        ev.local = {a.arg: SA if "server_args" in a.arg else UNKNOWN for a in fn.args.args[1:]}
        ret = _reached_return(ev, fn.body)
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Name) and ret.value.id in imports:
            module, name = imports[ret.value.id]
            return name, module
    return None


def _workers_constructed(mods: TreeModules, algorithm: str, values: dict[str, Any],
                         environ: dict[str, str] | None) -> Iterator[tuple[str, str]]:
    """(class, module) of each class the tree may build as the draft worker for ``algorithm`` where no method of its
    SpeculativeAlgorithm returns one: the class a factory registered under the algorithm's name returns
    (``register(\"EAGLE\", worker_cls=make)``), else the class built under a test the algorithm passes
    (``if self.spec_algorithm.is_eagle(): self.draft_worker = EAGLEWorker(...)``: the tree's own
    ``is_*`` methods decide, so EAGLE3 gets what ``is_eagle`` says it shares). A test it cannot decide
    (``A if self.enable_overlap else B``) is taken as false, as everywhere in this reader."""
    world = World(mods, algorithm)
    algo = Evaluator(values, world=world, environ=environ)
    algo.local["__algorithm__"] = Algo(algorithm.upper())

    def passes(name: str) -> bool:
        """``x.is_<name>()``, asked of the algorithm itself."""
        return algo(ast.Call(func=ast.Attribute(value=ast.Name("__algorithm__", ast.Load()), attr=name,
                                                ctx=ast.Load()), args=[], keywords=[])) is True

    registered = _registered_factory(mods, algorithm, values, environ)
    if registered is not None:
        yield registered
    tests = [n for n in world.algo_methods if n.startswith("is_")] or [f"is_{algorithm.lower()}"]
    # the tests this algorithm passes: only a file that asks one of them is read as a syntax tree
    passed = {n for n in tests if passes(n)}
    if not passed:
        return
    # one read of each file (a wheel's member is inflated on each read), one pass over its bytes
    wanted = re.compile(rb"\.(?:" + b"|".join(re.escape(n.encode()) for n in sorted(passed)) + rb")\(\)")
    for relpath in mods.files_matching(wanted):
        module = mods.dotted(relpath)
        tree = mods.parsed(relpath)
        for node in _tests_of_the_algorithm(tree) if tree is not None else ():
            if node.test.func.attr in passed:
                for found in _classes_built_in(mods, module, node.body, Evaluator(values, environ=environ)):
                    yield found


def _tests_of_the_algorithm(tree: ast.Module) -> list[ast.If]:
    """The ``if x.is_<name>():`` statements of a module, in walk order; kept on its syntax tree, which is
    shared by every reader of the same bytes (:meth:`TreeModules.parsed`)."""
    found = tree.__dict__.get("_ddcheck_is_tests")
    if found is None:
        found = tree.__dict__["_ddcheck_is_tests"] = [
            n for n in ast.walk(tree) if isinstance(n, ast.If) and isinstance(n.test, ast.Call)
            and isinstance(n.test.func, ast.Attribute) and n.test.func.attr.startswith("is_")
            and not n.test.args and not n.test.keywords]
    return found


def _registered_factory(mods: TreeModules, algorithm: str, values: dict[str, Any],
                        environ: dict[str, str] | None) -> tuple[str, str] | None:
    """A module-level call of the SpeculativeAlgorithm module that names ``algorithm`` (a string argument)
    and hands over a worker class or a function that builds one: that class."""
    hit = mods.module(SPEC_INFO_MODULE)
    if hit is None:
        return None
    module, tree = SPEC_INFO_MODULE, hit[1]
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or not any(
                isinstance(a, ast.Constant) and a.value == algorithm.upper() for a in call.args):
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if not isinstance(arg, ast.Name):
                continue
            if arg.id in functions:
                fn = functions[arg.id]
                ev = Evaluator(values, environ=environ)
                ev.local = {a.arg: UNKNOWN for a in fn.args.args}
                ret = _reached_return(ev, fn.body)
                found = next(_classes_built_in(mods, module, fn.body, ev, ret), None) if ret is not None else None
            else:
                found = _worker_named(mods, module, arg.id, mods.imports_of(module))
            if found is not None:
                return found
    return None


def _classes_built_in(mods: TreeModules, module: str, body: list[ast.stmt], ev: Evaluator,
                      ret: ast.Return | None = None) -> Iterator[tuple[str, str]]:
    """The tree classes ``body`` constructs (``ret``'s call, else each call of a tree class, in order),
    following ``Cls = A if test else B`` as the evaluator decides ``test``."""
    scope = ast.Module(body=body, type_ignores=[])
    imports = {**mods.imports_of(module), **mods.imports_in(module, scope)}
    chosen: dict[str, ast.expr] = {}
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            chosen[n.targets[0].id] = n.value
    calls = [ret.value] if ret is not None else [n for n in ast.walk(scope) if isinstance(n, ast.Call)]
    for call in calls:
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        name, seen = call.func.id, set()
        while name in chosen and name not in imports and name not in seen:
            seen.add(name)
            value = chosen[name]
            if isinstance(value, ast.IfExp):
                test = ev(value.test)
                value = value.body if test is not UNKNOWN and test else value.orelse
            if not isinstance(value, ast.Name):
                break
            name = value.id
        found = _worker_named(mods, module, name, imports)
        if found is not None:
            yield found


def _worker_named(mods: TreeModules, module: str, name: str, imports: dict[str, str]) -> tuple[str, str] | None:
    """(class, module) of the tree class ``name`` means in ``module``, or None when it is not a tree class."""
    where = imports.get(name, module)
    hit = mods.find_class(name, where)
    return (hit[1].name, hit[2]) if hit is not None else None


def _reached_return(ev: Evaluator, body: list[ast.stmt]) -> ast.Return | None:
    """The ``return`` the tree's code reaches in ``body`` for the evaluator's launch; a test it cannot
    decide (a run-time switch) is taken as false, the way to the method's plain return."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return stmt
        if isinstance(stmt, ast.If):
            t = ev.test(stmt.test)
            got = _reached_return(ev, stmt.orelse if t is UNKNOWN or not t else stmt.body)
            if got is not None:
                return got
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.ImportFrom, ast.Expr)):
            ev.run([stmt], ev.local)
        elif isinstance(stmt, ast.Raise):
            return None
    return None


# --------------------------------------------------------------------------- evaluation

def _class_chain(mods: TreeModules, name: str, module: str) -> list[tuple[str, ast.ClassDef, str]]:
    """The class and its bases defined in the tree, base first."""
    return mods.class_chain(name, module)[::-1]


def class_fields(mods: TreeModules, name: str, module: str) -> tuple[list[str], str, int]:
    """The annotated fields of a verify-input class and its bases (dataclass fields), and where it is."""
    chain = _class_chain(mods, name, module)
    fields: list[str] = []
    for _, node, _ in chain:
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields.append(item.target.id)
    where = (chain[-1][0], chain[-1][1].lineno) if chain else ("", 0)
    return sorted(set(fields)), where[0], where[1]


def _none(value: Any) -> bool:
    """A keyword the worker passes as None for these settings sets nothing (``custom_mask=None``: a chain)."""
    return value is None


def class_input_type(mods: TreeModules, name: str, module: str) -> str | None:
    """The ``SpecInputType`` member a verify-input class gives itself: ``spec_input_type=SpecInputType.X``
    passed up from its own ``__init__``/``__post_init__``, or a field default (the subclass's wins)."""
    for _, node, _ in reversed(_class_chain(mods, name, module)):
        for item in ast.walk(node):
            value = None
            if isinstance(item, ast.keyword) and item.arg == SPEC_INPUT_TYPE_FIELD:
                value = item.value
            elif isinstance(item, (ast.AnnAssign, ast.Assign)) and item.value is not None and any(
                    isinstance(t, ast.Name) and t.id == SPEC_INPUT_TYPE_FIELD
                    for t in (item.targets if isinstance(item, ast.Assign) else [item.target])):
                value = item.value
            if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                    and value.value.id == SPEC_INPUT_TYPE_CLASS:
                return value.attr
    return None


def verify_inputs(tree: SourceTree, algorithm: str, values: dict[str, Any],
                  environ: dict[str, str] | None = None) -> WorkerFacts:
    """The verify inputs the tree's worker for ``algorithm`` builds for these settings (``values``:
    server_args after start-up; ``environ``: the launch's environment, as the worker's
    ``os.environ.get`` reads it, None when not known)."""
    mods = TreeModules.of(tree)
    found = worker_class(mods, algorithm, values, environ)
    if found is None:
        return WorkerFacts(note=f"no worker for {algorithm} found in {SPEC_INFO}")
    return _inputs_of(mods, found, values, environ, algorithm)


def _inputs_of(mods: TreeModules, found: tuple[str, str], values: dict[str, Any],
               environ: dict[str, str] | None, algorithm: str | None = None) -> WorkerFacts:
    """The verify inputs the worker class ``found`` (name, module) builds on the launch's step: the
    sites its step reaches from the scheduler's entry point (:mod:`ddcheck.tree.step`), each judged
    reached or not; where the step cannot be followed (no entry method, or no site on its way), every
    construction in the worker's methods, each marked as not known to be reached."""
    name, module = found
    if mods.class_chain(name, module):
        world = World(mods, algorithm)
        worker, init_note = build_worker(world, name, module, values, environ)
        step = walk(mods, world, worker, values, environ, _input_class_finder(mods),
                    skip=lambda n: any(word in n.lower() for word in SPECIAL_PATHS))
        if step.entry and step.sites:
            facts = WorkerFacts(entry=step.entry)
            chain = _class_chain(mods, name, module)
            facts.worker, facts.worker_path, facts.worker_line = chain[-1][1].name, chain[-1][0], chain[-1][1].lineno
            for site in step.sites:
                choice = _site_choice(mods, world, site, values, environ)
                if choice is not None:
                    facts.sites.append(choice)
            facts.choices = [c for c in facts.sites if c.reached is not False]
            notes = [n for n in (init_note, step.note) if n]
            if not facts.choices:
                notes.append(f"the step from {step.entry} reaches no verify input for these settings: "
                             + "; ".join(f"{c.path}:{c.line} {c.reached_why}" for c in facts.sites))
            facts.note = "; ".join(notes)
            if facts.sites:
                return facts
        why = step.note or f"the step from {step.entry} builds no verify input ddcheck can see"
    else:
        why = ""
    facts = _inputs_scanned(mods, found, values, environ)
    for c in facts.choices:
        c.reached, c.reached_why = None, f"not known to be reached ({why}): every construction in the worker counted"
    facts.sites = list(facts.choices)
    return facts


def _input_class_finder(mods: TreeModules):
    """Whether a call builds a verify input: it calls a tree class that declares a per-step width field
    and hands it that field by keyword (a width of a constant 1 or less is a placeholder, not a step)."""
    memo: dict[tuple[str, str], tuple[str, str] | None] = {}

    def find(call: ast.Call, module: str, local_imports: dict[str, str]) -> tuple[str, str] | None:
        if not isinstance(call.func, ast.Name):
            return None
        kw = next((k for k in call.keywords if k.arg in WIDTH_FIELDS), None)
        if kw is None or isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int) and kw.value.value <= 1:
            return None
        name = call.func.id
        where = local_imports.get(name) or mods.imports_of(module).get(name) or module
        if (name, where) not in memo:
            hit = mods.find_class(name, where)
            memo[(name, where)] = None
            if hit is not None and any(
                    isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name) and i.target.id in WIDTH_FIELDS
                    for _, node, _ in mods.class_chain(hit[1].name, hit[2]) for i in node.body):
                memo[(name, where)] = (hit[1].name, hit[2])
        return memo[(name, where)]

    return find


def _site_choice(mods: TreeModules, world: World, site: Reached, values: dict[str, Any],
                 environ: dict[str, str] | None) -> VerifyChoice | None:
    """A reached site as a choice: W evaluated at the site (its range over the step's own decisions)."""
    kw = next((k for k in site.call.keywords if k.arg == DRAFT_TOKEN_NUM), None) \
        or next(k for k in site.call.keywords if k.arg in WIDTH_FIELDS)
    ev = site.ev if site.ev is not None else site.evaluator(values, world, environ)
    width = ev(kw.value)
    if isinstance(width, bool) or not isinstance(width, int):
        lo, hi = _site_range(site, kw.value, values, world, environ)
        width = lo if isinstance(lo, int) and lo == hi else UNKNOWN
    else:
        lo = hi = width
    attrs, cls_rel, cls_line = class_fields(mods, site.cls, site.cls_module)
    imports = mods.imports_of(site.module)
    return VerifyChoice(
        cls=site.cls, width=width if isinstance(width, int) else None, width_expr=ast.unparse(kw.value),
        path=site.path, line=site.call.lineno,
        when=[c.said() for c in site.conds if c.holds is not None],
        attrs=attrs, cls_path=cls_rel, cls_line=cls_line,
        kwargs=[k.arg for k in site.call.keywords if k.arg and not _none(ev(k.value))],
        input_type=class_input_type(mods, site.cls, site.cls_module),
        per_step=not isinstance(width, int) and (_computed_in_step(kw.value) or lo != hi),
        width_min=lo, width_max=hi,
        mask_from=mask_source(mods, site.fn, site.module, site.call, imports),
        reached=site.reached, reached_why=site.why, width_from=_width_from(kw.value, site))


def _width_from(expr: ast.expr, site: Reached) -> str:
    """Where the attribute W reads was set (``self.verify_num_draft_tokens``: its ``__init__`` line)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                and isinstance(site.self_obj, Obj) and n.attr in site.self_obj.lines:
            return f"self.{n.attr} set at {site.self_obj.lines[n.attr]}"
    return ""


_NO_SITE = object()


def _site_range(site: Reached, expr: ast.expr, values: dict[str, Any], world: World,
                environ: dict[str, str] | None) -> tuple[int | None, int | None]:
    """The least and greatest width ``expr`` gives at the site over the step's own decisions: the
    statements before it that W depends on (its backward slice) are run again with each test met on the
    way that the launch does not decide taken both ways (inside the worker's methods it calls too); a way
    that raises or returns before the site is no way there. An end is None where it cannot be evaluated."""
    stmts = backward_slice(statements_before(site.fn.body, site.call), expr)

    def run(forced: dict[int, bool]) -> tuple[Any, list[ast.expr]]:
        ev = site.evaluator(values, world, environ)
        ev.spans, ev.forced = True, forced
        if ev.exec_block(stmts, ev.local) is not None:
            return _NO_SITE, ev.undecided
        return ev(expr), ev.undecided

    return _ends([v for v in _both_ways(run) if v is not _NO_SITE])


def _both_ways(run) -> list[Any]:
    """``run``'s value with no test forced, or, where it met undecided tests, once per way of taking them
    (the first MAX_STEP_TESTS): ``run(forced) -> (value, tests met)``."""
    first, tests = run({})
    tests = list({id(t): t for t in tests}.values())[:MAX_STEP_TESTS]
    if not tests:
        return [first]
    return [run({id(t): bool(mask >> i & 1) for i, t in enumerate(tests)})[0] for mask in range(2 ** len(tests))]


def _ends(outcomes: list[Any]) -> tuple[int | None, int | None]:
    if not outcomes:
        return None, None
    los, his = [], []
    for v in outcomes:
        if isinstance(v, bool) or not isinstance(v, (int, Span)):
            return None, None
        lo, hi = (v, v) if isinstance(v, int) else (v.lo, v.hi)
        los.append(lo if isinstance(lo, int) else None)
        his.append(hi if isinstance(hi, int) else None)
    return (None if None in los else min(los)), (None if None in his else max(his))


def backward_slice(stmts: list[ast.stmt], expr: ast.expr) -> list[ast.stmt]:
    """The statements of ``stmts`` whose bindings ``expr`` depends on, directly or through each other."""
    needed = _reads(expr)
    kept: list[ast.stmt] = []
    for stmt in reversed(stmts):
        if _binds(stmt) & needed:
            kept.append(stmt)
            needed |= _reads(stmt)
    return kept[::-1]


def _reads(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            out.add("self." + n.attr)
    return out


def _binds(stmt: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            out.add("self." + n.attr)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out


def _inputs_scanned(mods: TreeModules, found: tuple[str, str], values: dict[str, Any],
                    environ: dict[str, str] | None) -> WorkerFacts:
    """Every verify input the worker class's methods build for these settings (no step followed)."""
    facts = WorkerFacts()
    name, module = found
    chain = _class_chain(mods, name, module)
    if not chain:
        facts.note = f"worker class {name} not found in {module}"
        return facts
    facts.worker, facts.worker_path, facts.worker_line = chain[-1][1].name, chain[-1][0], chain[-1][1].lineno
    seen: set[tuple] = set()

    def scan(chain) -> Evaluator:
        ev = Evaluator(values, environ=environ)
        for _, node, _ in chain:
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is not None:
                params = [a.arg for a in init.args.args]
                ev.sa = {params[1]} if len(params) > 1 else {"server_args"}
                ev.run(init.body, {})
        overridden: set[str] = set()  # methods a subclass redefines without calling the base's
        for rel, node, mod in reversed(chain):  # the subclass first
            imports = mods.imports_of(mod)
            methods = [fn for fn in node.body if isinstance(fn, ast.FunctionDef) and fn.name != "__init__"]
            live = [fn for fn in methods if fn.name not in overridden]
            overridden |= {fn.name for fn in methods if not _calls_super(fn)}
            for fn in live:
                if any(word in fn.name.lower() for word in SPECIAL_PATHS):
                    continue  # an idle or 1-node placeholder input, not the launch's verify step
                for call in ast.walk(fn):
                    at = call  # where the worker builds it, in its own body (the tests on the way to it)
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                        call = _factory_call(mods, mod, fn, call, imports) or call  # Cls.create(...)
                    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                        continue
                    built = call, mod, rel  # the VerifyInput call, the module it is in, its file
                    width_node = None
                    if not call.func.id.endswith("VerifyInput"):
                        # A tree function the worker calls that builds it (``build_eagle_verify_input(...,
                        # num_draft_tokens=self.x)``): W is what the worker hands that parameter.
                        through = _built_through(mods, mod, fn, call, imports)
                        if through is None:
                            continue
                        built, width_node = through[0], through[1]
                    vcall = built[0]
                    kw = next((k for k in vcall.keywords if k.arg == "draft_token_num"), None)
                    if kw is None or (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int)
                                      and kw.value.value <= 1):
                        continue
                    if width_node is not None:
                        kw = ast.keyword(arg="draft_token_num", value=width_node)
                    conds = guards_to(fn.body, at, [])
                    local_ev = Evaluator(values, environ=environ)
                    local_ev.sa, local_ev.self_env = ev.sa, dict(ev.self_env)
                    local_ev.run(statements_before(fn.body, at), local_ev.local)
                    results = [(c, pol, local_ev.test(c)) for c, pol in conds]
                    if any(v is not UNKNOWN and bool(v) != pol for _, pol, v in results):
                        continue  # a test on the way is false for these settings
                    width = local_ev(kw.value)
                    lo, hi = (width, width) if isinstance(width, int) else _width_range(values, environ, ev, fn, at, kw.value)
                    if isinstance(lo, int) and lo == hi:
                        width = lo  # every way through the step gives the same width
                    vmod, vrel, vname = built[1], built[2], vcall.func.id
                    cls_module = (mods.imports_in(mod, fn).get(vname) or imports.get(vname, mod)) if vcall is call \
                        else mods.imports_of(vmod).get(vname, vmod)
                    attrs, cls_rel, cls_line = class_fields(mods, vname, cls_module)
                    input_type = class_input_type(mods, vname, cls_module)
                    key = (vname, width if width is not UNKNOWN else None)
                    if key in seen:
                        continue
                    seen.add(key)
                    facts.choices.append(VerifyChoice(
                        cls=vname, width=width if isinstance(width, int) else None,
                        width_expr=ast.unparse(kw.value), path=vrel, line=vcall.lineno,
                        when=[("" if pol else "not ") + f"({ast.unparse(c)})" for c, pol, v in results if v is not UNKNOWN],
                        attrs=attrs, cls_path=cls_rel, cls_line=cls_line,
                        kwargs=[k.arg for k in vcall.keywords if k.arg and not (vcall is call and _none(local_ev(k.value)))],
                        input_type=input_type,
                        per_step=not isinstance(width, int) and (_computed_in_step(kw.value) or lo != hi),
                        width_min=lo, width_max=hi,
                        mask_from=mask_source(mods, fn, mod, call, imports) if vcall is call else None))
        return ev

    ev = scan(chain)
    if not facts.choices:
        # The worker may hand the step to a part it builds (``self.draft_worker = EagleDraftWorker(...)``):
        # that part's methods build the verify input, with its own __init__'s attributes.
        for part in _parts(mods, chain, ev):
            scan(part)
            if facts.choices:
                break
    if not facts.choices:
        facts.note = f"{name} builds no verify input with draft_token_num= that these settings reach"
    return facts


def _parts(mods: TreeModules, chain, ev: Evaluator) -> list:
    """Class chains (base first) of the tree classes the worker's ``__init__`` builds into its attributes."""
    out = []
    for _, node, mod in chain:
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        for stmt in ast.walk(init) if init is not None else ():
            if not (isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                    for t in stmt.targets)):
                continue
            for call in (n for n in ast.walk(stmt.value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
                name = call.func.id  # ``self.part = Part(...)``, also under a conditional expression
                source = mods.imports_in(mod, init).get(name) or mods.imports_of(mod).get(name, mod)
                part = _class_chain(mods, name, source)
                if part and part not in out:
                    out.append(part)
    return out


def _built_through(mods: TreeModules, mod: str, fn: ast.FunctionDef, call: ast.Call, imports: dict[str, str]):
    """((VerifyInput call, its module, its file), the worker's argument for its width) when ``call`` is
    of a tree function whose ``...VerifyInput(draft_token_num=p)`` takes ``p`` from its parameter."""
    source = mods.imports_in(mod, fn).get(call.func.id) or imports.get(call.func.id)
    hit = mods.find_function(call.func.id, source) if source else None
    if hit is None:
        return None
    fdef, fmodule = hit
    params = [a.arg for a in [*fdef.args.posonlyargs, *fdef.args.args]]
    for inner in ast.walk(fdef):
        if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id.endswith("VerifyInput")):
            continue
        kw = next((k for k in inner.keywords if k.arg == "draft_token_num"), None)
        if kw is None or not isinstance(kw.value, ast.Name):
            continue
        p = kw.value.id
        arg = next((k.value for k in call.keywords if k.arg == p), None)
        if arg is None and p in params and params.index(p) < len(call.args):
            arg = call.args[params.index(p)]
        if arg is not None and not isinstance(arg, ast.Starred):
            return (inner, fmodule, (mods.module(fmodule) or ("", None))[0]), arg
    return None


def _factory_call(mods: TreeModules, mod: str, fn: ast.FunctionDef, call: ast.Call,
                  imports: dict[str, str]) -> ast.Call | None:
    """``EagleVerifyInput.create(..., num_verify_tokens)`` (0.4.3-0.4.8 eagle_worker.py): a classmethod of a
    tree class that returns ``cls(...)``, read as the worker's own construction of that class: a call of the
    class at the worker's line whose keywords are the class's fields (its dataclass fields in order, else
    its ``__init__``'s parameters) that the factory hands a parameter of its own, each given what the
    worker hands that parameter. None where the call is no such factory."""
    f = call.func
    if not isinstance(f.value, ast.Name) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    where = mods.imports_in(mod, fn).get(f.value.id) or imports.get(f.value.id) or mod
    chain = mods.class_chain(f.value.id, where)
    factory = next((n for _, node, _ in chain for n in node.body if isinstance(n, ast.FunctionDef)
                    and n.name == f.attr and any(isinstance(d, ast.Name) and d.id == "classmethod"
                                                 for d in n.decorator_list)), None)
    if factory is None or not factory.args.args:
        return None
    params = [a.arg for a in factory.args.args]
    given = {**dict(zip(params[1:], call.args)), **{k.arg: k.value for k in call.keywords if k.arg}}
    fields = _constructor_fields(chain)
    for inner in ast.walk(factory):
        if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == params[0]):
            continue
        if any(isinstance(a, ast.Starred) for a in inner.args) or len(inner.args) > len(fields):
            return None
        handed = [*zip(fields, inner.args), *((k.arg, k.value) for k in inner.keywords if k.arg)]
        keywords = [ast.keyword(arg=name, value=given[v.id]) for name, v in handed
                    if isinstance(v, ast.Name) and v.id in given]
        return ast.copy_location(ast.Call(func=ast.copy_location(ast.Name(f.value.id, ast.Load()), call),
                                          args=[], keywords=keywords), call)
    return None


def _constructor_fields(chain: list[tuple[str, ast.ClassDef, str]]) -> list[str]:
    """The names a class's constructor takes positionally: its ``__init__``'s (the nearest class's), else
    its dataclass fields, the bases' first."""
    for _, node, _ in chain:
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            return [a.arg for a in init.args.args[1:]]
    out: list[str] = []
    for _, node, _ in reversed(chain):
        out += [i.target.id for i in node.body if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)
                and "ClassVar" not in ast.unparse(i.annotation)]
    return list(dict.fromkeys(out))  # a field a subclass declares again keeps its place


MAX_STEP_TESTS = 6  # per-step tests taken both ways when W's range is evaluated (2**6 runs at most)


def _width_range(values: dict[str, Any], environ: dict[str, str] | None, init_ev: Evaluator,
                 fn: ast.FunctionDef, call: ast.Call, expr: ast.expr) -> tuple[int | None, int | None]:
    """The least and greatest width ``expr`` gives at ``call`` over the step's own decisions: each
    test on the way that the launch does not decide (it reads the batch) is taken both ways, and a
    ``min``/``max`` of a per-step value with known ones is bounded by them. An end is None where some
    way through the step gives a width with no bound on that side."""

    def run(forced: dict[int, bool]) -> tuple[Any, list[ast.expr]]:
        e = Evaluator(values, environ=environ)
        e.sa, e.self_env, e.spans, e.forced = init_ev.sa, dict(init_ev.self_env), True, forced
        e.run(statements_before(fn.body, call), e.local)
        return e(expr), e.undecided

    return _ends(_both_ways(run))


SPECIAL_PATHS = ("idle", "trivial", "dummy", "warmup", "fake", "placeholder")
_BUILTIN_CALLS = {"int", "max", "min", "len", "abs", "bool", "float"}


def _computed_in_step(expr: ast.expr) -> bool:
    """A width that names a local of the method (``verify_token_num``) is computed in the step; one
    that reads only ``self`` attributes and constants (``int(self.block_size)``) is fixed at start-up,
    even when ddcheck cannot evaluate it."""
    called = {id(n.func) for n in ast.walk(expr) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and n.id != "self" and not (id(n) in called and n.id in _BUILTIN_CALLS)
               for n in ast.walk(expr))


def mask_source(mods: TreeModules, fn: ast.FunctionDef, module: str, call: ast.Call,
                imports: dict[str, str]) -> MaskSource | None:
    """The tree function that builds the mask the worker (``fn`` of ``module``) passes as ``custom_mask=``
    at ``call``."""
    kw = next((k for k in call.keywords if k.arg == "custom_mask"), None)
    if kw is None or not isinstance(kw.value, ast.Name):
        return None
    name = kw.value.id
    local_imports = mods.imports_in(module, fn)
    found: MaskSource | None = None
    earlier = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno < call.lineno),
                     key=lambda n: (n.lineno, n.col_offset))  # nested in with/if blocks too, in order
    for stmt in earlier:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name)):
            continue
        target, builder = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name) and target.id == name:
            index = None
        elif isinstance(target, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in target.elts):
            index = next(i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name)
        else:
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                found = None  # rebound some other way
            continue
        module = local_imports.get(builder.func.id) or imports.get(builder.func.id)
        hit = mods.find_function(builder.func.id, module) if module else None
        if hit is None:
            found = None
            continue
        fdef, fmodule = hit
        rel = (mods.module(fmodule) or ("", None))[0]
        constants = {k.arg: ast.unparse(k.value) for k in builder.keywords if k.arg and (
            isinstance(k.value, ast.Constant) or (isinstance(k.value, ast.Attribute)
                                                   and isinstance(k.value.value, ast.Name) and k.value.value.id == "torch"))}
        found = MaskSource(fmodule, fdef.name, index, rel, fdef.lineno, constants)
    return found


def _calls_super(fn: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == fn.name
               and isinstance(n.func.value, ast.Call) and isinstance(n.func.value.func, ast.Name)
               and n.func.value.func.id == "super" for n in ast.walk(fn))


# Names that mark the capture width in a graph runner's ``__init__``: upstream's
# ``get_num_tokens_per_bs_for_target_verify``, newer ``decode_num_tokens_per_req``/``num_tokens_per_req``.
CAPTURE_MARKS = (*VERIFY_FUNCTION_MARKERS, NUM_TOKENS_PER_REQ, "num_tokens_per_bs")
RUNNER_DIR = MODEL_EXECUTOR_DIR


@dataclass
class CaptureFacts:
    """How the tree's CUDA-graph runner treats target verify, for one launch."""

    width: int | None = None  # tokens per request it captures verify graphs with
    at: str = ""  # where that width is set
    gate_at: str = ""  # where ``can_run`` refuses a batch of another width (it then runs eagerly)


def capture_width(tree: SourceTree, algorithm: str, values: dict[str, Any]) -> tuple[int | None, str]:
    """(tokens per request of the verify graphs, where), see :func:`graph_capture`."""
    facts = graph_capture(tree, algorithm, values)
    return facts.width, facts.at


def graph_capture(tree: SourceTree, algorithm: str, values: dict[str, Any],
                  input_fields: set[str] | None = None) -> CaptureFacts:
    """The width the tree's CUDA-graph runner captures target-verify graphs with, and whether it
    replays a batch of another width at all.

    The runner is a ``*CudaGraphRunner`` class under ``model_executor/`` (not a draft or prefill one)
    whose ``__init__`` sets an attribute from an expression naming the verify width. Its whole
    ``__init__`` is evaluated for this launch as a *target* runner, following the calls it makes
    into the tree (the algorithm's methods, ``ModelRunner`` methods, helper functions), so a fork
    that captures at ``budget + 1`` in a branch of its own is read as such. Its ``can_run`` is then
    searched for a comparison of the batch's width with the captured one that holds for this
    launch (``spec_info.num_tokens_per_req != self.captured_req_width``: eager instead); one under a
    test that is false for it (``... if spec_algorithm.is_ngram() else True``) does not count, nor
    one that reads a field of the verify input that the launch's input class (``input_fields``; None:
    not known) does not have."""
    mods = TreeModules.of(tree)
    world = World(mods, algorithm)
    for rel, module, cls, init, attrs in _graph_runners(mods):
        ev = Evaluator(values, world=world, module=module)
        params = [a.arg for a in [*init.args.args[1:], *init.args.kwonlyargs]]
        ev.local = {p: None for p in params}  # overrides unset: the runner falls back to server_args
        ev.local[params[0] if params else "model_runner"] = world.model_runner()
        ev.self_env["model_runner"] = world.model_runner()  # what a base __init__ stores
        ev.run(init.body, ev.local)
        for attr in attrs:
            w = ev.self_env.get(attr, UNKNOWN)
            if isinstance(w, int) and not isinstance(w, bool):
                gate = _replay_gate(mods, cls, module, ev, attrs, values, world, input_fields)
                return CaptureFacts(w, f"{rel}:{ev.self_lines.get(attr, init.lineno)}", gate)
    return CaptureFacts()


GATE_METHODS = ("can_run", "can_run_graph")
# What a batch's own width is read through in a runner's can_run.
BATCH_WIDTH_MARKS = ("numel", NUM_TOKENS_PER_REQ, DRAFT_TOKEN_NUM, "runtime_num_tokens")


def _replay_gate(mods: TreeModules, cls: str, module: str, init_ev: Evaluator, attrs: list[str],
                 values: dict[str, Any], world: World, input_fields: set[str] | None) -> str:
    for rel, node, mod in mods.class_chain(cls, module):  # the subclass's gate, else its nearest base's
        for fn in (n for n in node.body if isinstance(n, ast.FunctionDef) and n.name in GATE_METHODS):
            parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
            ev = Evaluator(values, world=world, module=mod)
            ev.self_env = dict(init_ev.self_env)
            for cmp in (n for n in ast.walk(fn) if isinstance(n, ast.Compare)):
                text = ast.unparse(cmp)
                captured = any(f"self.{a}" in text for a in attrs) or "bucket" in text or "num_tokens_per_bs" in text
                if not (captured and any(m in text for m in BATCH_WIDTH_MARKS)):
                    continue
                read = {n.attr for n in ast.walk(cmp) if isinstance(n, ast.Attribute)
                        and (ast.unparse(n.value).endswith("spec_info"))}
                if read and (input_fields is None or not read <= input_fields):
                    continue  # a width the launch's verify input may not carry: no gate for it
                if _holds_for_launch(cmp, parents, fn, ev):
                    return f"{rel}:{cmp.lineno}"
            return ""  # the subclass's can_run decides
    return ""


def _holds_for_launch(node: ast.AST, parents: dict, fn: ast.FunctionDef, ev: Evaluator) -> bool:
    """No test enclosing ``node`` inside ``fn`` is known to be false (or true, on its else side)."""
    child = node
    while id(child) in parents and child is not fn:
        parent = parents[id(child)]
        test, want = None, True
        if isinstance(parent, (ast.IfExp, ast.If)) and child is not parent.test:
            test = parent.test
            want = child is parent.body or (isinstance(parent, ast.If) and any(child is s for s in parent.body))
        if test is not None:
            v = ev.test(test)
            if v is not UNKNOWN and bool(v) != want:
                return False
        child = parent
    return True


def _graph_runners(mods: TreeModules):
    """(relpath, module, class, __init__, capture attributes) of the target graph runners in the tree."""
    skip = ("draft", "prefill", "piecewise", "eagle", "mtp")
    for f in mods.tree.files:
        if not (f.relpath.startswith(mods.prefix + RUNNER_DIR) and f.relpath.endswith(".py")):
            continue
        try:  # a runner class is named so in its file's text: the others are not parsed (~0.4 s a run)
            data = f.read_bytes()
            if data.isascii() and b"cudagraphrunner" not in data.lower():
                continue
        except OSError:
            pass  # what the module model makes of an unreadable file, as before
        module = mods.dotted(f.relpath)
        hit = mods.module(module)
        if hit is None:
            continue
        for cls in (n for n in hit[1].body if isinstance(n, ast.ClassDef)):
            name = cls.name.lower()
            if "cudagraphrunner" not in name or any(k in name for k in skip):
                continue
            init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is None:
                continue
            attrs = [t.attr for stmt in ast.walk(init) if isinstance(stmt, ast.Assign)
                     for t in stmt.targets
                     if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                     and any(m in t.attr or m in ast.unparse(stmt.value) for m in CAPTURE_MARKS)]
            if attrs:
                yield f.relpath, module, cls.name, init, list(dict.fromkeys(attrs))
