"""Ties the per-function verify model together across functions and modules and turns the reads
of C on the verify path into findings."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..findings import Edit, Finding, FixPlan, FixSafety
from ..rules import rule_of
from .exprs import (buffer_key, dotted, every_node, is_c_read, is_exact_c, is_mode_check,
                    mentions_per_step, walk)
from .hazards import (ALIAS, ARGUMENT, CAPACITY, DERIVED, FALLBACK, HARMLESS, LAYOUT, RANK, RULE_OF_KIND, Verdict,
                      classify, judged, layout_of, said)
from ..target.modes import VERIFY_MEMBER, ModeTable
from ..target.names import FORWARD_BATCH_MODULE as FORWARD_MODE_MODULE
from .module import ClassFacts, FunctionInfo, ModuleModel, Outline, names_a_budget, statement_lines
from .verify_path import FunctionPass, Site
from . import edits as E
from .vocabulary import FIX_LOCAL as LOCAL, FIX_PARAMETER as THREADED, WIDTH_WORDS, Vocabulary
from ..target.names import DRAFT_TOKEN_NUM, VERIFY_MARKERS as VERIFY_TEXT



# A hint as the analysis knows it: the rule's case (a key of its [hints]) and the facts it is filled with.
Hint = tuple[str, dict[str, object]]


@dataclass(frozen=True, eq=False)
class Origin:
    """Where a tainted parameter's C came from."""

    model: ModuleModel
    node: ast.expr


@dataclass
class ParamUse:
    """How a helper uses one of its parameters when handed C (a hazard kind, where it happens)."""

    kind: str
    what: str
    where: str  # "helper() at file:line"


@dataclass
class Reported:
    """A finding before it becomes a :class:`Finding`, kept with what the fixer needs."""

    kind: str
    what: str
    fp: FunctionPass
    node: ast.expr
    anchor: ast.stmt | None
    c_expr: str  # how C is spelled here, for the fallback (``self.num_draft_tokens``)
    exact: bool  # the read is C itself, not a value derived from it: W may take its place
    # the hint's case and facts, set where the hazard is not a read of C (a C-sized buffer filled per step)
    hint: Hint | None = None
    buffer_line: int = 0  # the read is of a buffer laid out with C at start-up (that line)
    plan: FixPlan | None = None  # a fix planned where the finding is made (a capacity at its allocation)
    replacement: str | None = None
    case: str = ""  # the rule's [what] case that ``what`` says


@dataclass
class MethodUses:
    """Where the tree uses a method name: modules calling ``self.<name>(`` and modules defining a
    ``<name>`` (outlined: only those with a class deriving from the helper's are parsed), modules
    calling it on another object (test code aside; named, parsed one by one as they are checked)."""

    callers: list[Outline] = field(default_factory=list)
    definers: list[Outline] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # dotted module names, in the order to check them


@dataclass
class Thread:
    """W threaded into a helper: the edits, the calls that hand W in, and the calls that need not
    (each passes a forward mode other than TARGET_VERIFY)."""

    edits: list[Edit]
    where: list[str]
    exempt: list[str]


def is_test_module(relpath: str) -> bool:
    """Test code (``sglang/test/...``, ``tests/``, ``test_*.py``): its calls are not on a serving path."""
    parts = relpath.replace("\\", "/").split("/")
    name = parts[-1]
    return bool({"test", "tests"} & set(parts[:-1])) or name.startswith("test_") or name.endswith("_test.py")


@dataclass
class Engine:
    """The analysis of a tree's verify paths: follows each into its helpers and reports hazards."""

    vocab: Vocabulary
    load_module: Callable[..., ModuleModel | None]  # (dotted module name, needs_c=False) -> model (lazy)
    width_api: str = DRAFT_TOKEN_NUM  # or NUM_TOKENS_PER_REQ, read from the target tree
    inherited_c_attrs: frozenset[str] = frozenset()
    reported: dict[tuple, Reported] = field(default_factory=dict)
    _memo: dict[tuple, dict[str, list[ParamUse]]] = field(default_factory=dict)
    _c_attrs: dict[int, dict[str, ClassFacts]] = field(default_factory=dict)
    _mode_checks: dict[int, bool] = field(default_factory=dict)
    _modes: ModeTable | None = None
    # helper function node id -> the verify-branch calls of it as a method of its own class:
    # (caller's pass, call, call's statement)
    callers: dict[int, dict[int, tuple[FunctionPass, ast.Call]]] = field(default_factory=dict)
    _method_calls: dict[tuple, dict] = field(default_factory=dict)  # (module id, name) -> _self_calls' table
    _caller_passes: dict[int, tuple] = field(default_factory=dict)  # function node id -> _caller_pass
    # function node id -> its pass as an entry point with nothing tainted: what _caller_pass would run
    _entry_passes: dict[int, FunctionPass] = field(default_factory=dict)
    _threads: dict[int, object] = field(default_factory=dict)  # helper node id -> _thread_edits, per findings()
    _prepared_reports: set[tuple] = field(default_factory=set)  # reported keys prepare_threads() has seen
    # method name -> where the tree uses it, for threading W into helpers
    method_uses: Callable[[str], MethodUses | None] = lambda name: MethodUses()
    # dotted module name -> its outline, which another process may have parsed; None: from load_module
    outline_of: Callable[[str], Outline | None] | None = None
    # the target's ForwardMode table as the tree's reader finds it; None: from its module, loaded here
    mode_table: Callable[[], ModeTable | None] | None = None
    _locals: dict[int, dict[tuple[int, str], str]] = field(default_factory=dict)  # function -> (anchor, W) -> name
    _other_calls_memo: dict[tuple, list[ast.Call]] = field(default_factory=dict)  # (module id, name) -> calls
    # the server argument in which the tree states a tree drafter's budget (read on first use), or None
    budget_flag: Callable[[], str | None] = lambda: None
    _budget: list = field(default_factory=list)
    _alloc_passes: dict[int, FunctionPass] = field(default_factory=dict)  # allocating function id -> its pass

    @property
    def modes(self) -> ModeTable:
        """The target's own ForwardMode predicates (parsed on first use), else upstream's."""
        if self._modes is None:
            table = self.mode_table() if self.mode_table is not None else None
            if table is None:
                model = self.load_module(FORWARD_MODE_MODULE)
                table = ModeTable.from_module(model.tree, model.source.display) if model is not None else None
            self._modes = table or ModeTable()
        return self._modes

    def analyze(self, model: ModuleModel) -> None:
        for f in list(model.functions.values()):
            if "<locals>" in f.qualname:
                continue
            # Only functions that read C or test for verification can start a verify path.
            text = model.text_of(f.node)
            tokens = self.c_attrs_of(model, f.cls) | self.vocab.c_source_attrs
            if any(m in text for m in VERIFY_TEXT) or any(t in text for t in tokens):
                self.run_function(model, f, self.vocab.is_verify_function(f.name), {})

    def facts(self, model: ModuleModel, cls: str | None) -> ClassFacts:
        table = self._c_attrs.get(id(model))
        if table is None:
            table = self._c_attrs[id(model)] = model.class_c_attrs(self.vocab, self.inherited_c_attrs)
        if cls is None:
            extra = set(self.vocab.extra_c_attrs) | set(self.vocab.c_source_attrs)
            return ClassFacts(extra, extra, {})
        default = set(self.inherited_c_attrs) | set(self.vocab.extra_c_attrs) | set(self.vocab.c_source_attrs)
        return table.get(cls) or ClassFacts(default, default, {})

    def c_attrs_of(self, model: ModuleModel, cls: str | None, exact: bool = False) -> set[str]:
        """``self.X`` attributes of ``cls`` that hold C (with ``exact``: those that are copies of C)."""
        f = self.facts(model, cls)
        return f.exact if exact else f.c_attrs

    def run_function(self, model: ModuleModel, func: FunctionInfo, entry_verify: bool,
                     tainted: dict[str, Origin]) -> dict[str, list[ParamUse]]:
        key = (model.source.relpath, func.qualname, entry_verify, tuple(sorted(tainted)))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = {}  # recursion guard
        facts = self.facts(model, func.cls)
        fp = FunctionPass(model, func, entry_verify, facts.c_attrs, self.vocab,
                          tainted_params=dict(tainted), buffers=facts.buffers, sized=facts.sized,
                          modes=lambda: self.modes).run()
        if not tainted and entry_verify == self.vocab.is_verify_function(func.name):
            self._entry_passes[id(func.node)] = fp
        param_uses: dict[str, list[ParamUse]] = {}
        if fp.sites or fp.fills:
            model.link(func.node)  # parent links, for judging each read by its surroundings
        for fill in fp.fills:
            self._allocation(fp, fill.attr, fill.node, said(CAPACITY, "use_fill", value=fp.model.code(fill.source)))
        for node, attr in fp.touches:
            self._allocation(fp, attr, node, None)
        for site in fp.sites:
            self._judge(fp, site, param_uses)
        for call, _anchor in fp.verify_calls:
            self._follow_call(fp, call)
        self._memo[key] = param_uses
        return param_uses

    # -- capacity, found where it is made ---------------------------------------------------------

    def _allocation(self, fp: FunctionPass, attr: str, at: ast.expr, how: str | None) -> None:
        """``self.<attr>`` was allocated with C in its size (room for C tokens per request) and the verify
        path at ``at`` uses it: DD002 at the allocation, naming that use. The fix sizes it for the largest
        width the launch can verify where the tree states one (a tree drafter's budget flag, read from
        server args in scope there); elsewhere there is none, and the hint says what the size must cover."""
        facts = self.facts(fp.model, fp.func.cls)
        model = fp.model
        model.link(fp.func.node)
        parent = model.parent(at)
        key = parent.slice.value if isinstance(parent, ast.Subscript) and parent.value is at \
            and isinstance(parent.slice, ast.Constant) else None
        call = facts.allocations.get((attr, key))
        owner = _enclosing_function(model, fp.func.cls, call) if call is not None else None
        if owner is None:
            return
        use = how or _use_of(model, fp, at if key is None else parent, self.vocab)
        if use is None:
            return
        if key is not None:
            attr = f"{attr}[{key!r}]"
        afp = self._alloc_passes.get(id(owner.node))
        if afp is None:
            afp = self._alloc_passes[id(owner.node)] = FunctionPass(
                model, owner, False, facts.c_attrs, self.vocab, modes=lambda: self.modes).run()
        model.link(owner.node)
        sizes = [*call.args, *(k.value for k in call.keywords if k.arg == "size")]
        node = next((n for a in sizes for n in every_node(a) if is_c_read(n, facts.c_attrs, self.vocab)), call)
        where = f"{model.source.display.rsplit('/', 1)[-1]}:{at.lineno}"
        what = said(CAPACITY, "sized_at_startup", symbol=f"self.{attr}", what=use, where=where,
                    function=fp.func.qualname)
        exact = node is not call and is_exact_c(node, self.c_attrs_of(model, fp.func.cls, exact=True), self.vocab)
        c = model.code(node)
        plan, replacement, hint = self._largest_width(model, owner, afp, node, exact, f"`self.{attr}`")
        verdict = Verdict(CAPACITY, what, case="sized_at_startup")
        self._report(afp, node, None, verdict, c, exact=False, hint=hint)
        reported = self.reported.get((model.source.relpath, node.lineno, node.col_offset))
        if reported is not None and reported.hint == hint and reported.plan is None:
            reported.plan, reported.replacement = plan, replacement

    def _largest_width(self, model: ModuleModel, owner: FunctionInfo, afp: FunctionPass, node: ast.expr, exact: bool,
                       sized: str) -> tuple[FixPlan | None, str | None, Hint]:
        """The fix and hint of a capacity fixed at start-up: C at ``node`` (in ``owner``) becomes the largest
        width the launch can verify where the tree states it (its tree-budget server argument, read from
        server args in scope there); elsewhere no fix, and the hint says what the size must cover (``sized``:
        how the hint names it)."""
        plan, replacement = None, None
        flag = self._tree_budget()
        args = _server_args_in(model, owner, afp) if flag and exact else None
        c = model.code(node)
        if args is not None:
            replacement = f'max({c}, (getattr({args}, "{flag}", None) or 0) + 1)'
            first, last = _top_level_span(model, node.lineno)
            try:
                plan = FixPlan(safety=FixSafety.safe, edits=[E.replace(model, node, replacement)],
                               block_first=first, block_last=last)
            except E.EditError:
                plan, replacement = None, None
        if plan is not None:
            hint = "largest_width", {"sized": sized, "flag": flag, "args": args, "replacement": replacement}
        elif flag and exact:
            hint = "largest_width_no_args", {"sized": sized, "flag": flag, "function": owner.qualname}
        elif flag:
            hint = "largest_width_spelled", {"sized": sized, "flag": flag, "c_expr": c}
        else:
            hint = "no_largest_width", {"sized": sized}
        return plan, replacement, hint

    def _tree_budget(self) -> str | None:
        if not self._budget:
            self._budget.append(self.budget_flag())
        return self._budget[0]

    # -- judging one read of C -----------------------------------------------------------------

    def _judge(self, fp: FunctionPass, site: Site, param_uses: dict[str, list[ParamUse]]) -> None:
        via = site.via
        if via is not None and via.in_verify and via.origin is None:
            return  # a local bound on the verify path is judged at its binding (see _alias)
        verdict = classify(site.node, fp.model.parents, self.vocab)
        if site.buffer_line:
            # A buffer laid out with C at start-up: whatever it feeds is laid out with C.
            if verdict.kind in (HARMLESS, FALLBACK):
                return
            if buffer_key(site.node) in self.facts(fp.model, fp.func.cls).length_only:
                self._report(fp, site.node, site.anchor, judged(CAPACITY, "length_only", buffer_line=site.buffer_line),
                             fp.model.code(site.node), exact=False, hint=("length_only", {}))
                return
            self._report(fp, site.node, site.anchor, judged(LAYOUT, "buffer_layout", buffer_line=site.buffer_line),
                         fp.model.code(site.node), exact=False, buffer_line=site.buffer_line)
            return
        if verdict.kind == ALIAS and verdict.what == DERIVED:
            # `n = bs * C`, `max_len += C`: a start-up size grown by C is a capacity; otherwise the value
            # is judged by what it feeds (nothing, when it only feeds size checks).
            verdict = self._derived(fp, site, verdict.target)
        elif verdict.kind == ALIAS:
            # `x = C` (or `y = x` with x holding C from outside the block): judged by what x feeds.
            verdict = self._alias(fp, site, verdict.target)
        elif verdict.kind == ARGUMENT:
            verdict = self._argument(fp, verdict)
        elif verdict.kind == LAYOUT and verdict.case == "returns_c" and _resolves_width(fp.func.node, self.vocab):
            # `return W` for the tree drafter's input, `return C` for the others: a width resolver.
            verdict = judged(FALLBACK, "resolver")
        if verdict is None or verdict.kind == HARMLESS:
            return
        if via is not None and via.origin is not None:
            # A parameter the caller filled with C: the caller's expression is the finding.
            where = f"`{fp.func.qualname}()` at {fp.model.source.display}:{site.node.lineno}"
            param_uses.setdefault(via.name, []).append(ParamUse(verdict.kind, verdict.what, where))
            return
        if via is not None and any(d.kind == "per_step" for d in fp.reaching(via.name, site.node)):
            verdict = judged(FALLBACK, "fallback")
        source = via.value if via is not None and via.value is not None else site.node
        exact = is_exact_c(source, self.c_attrs_of(fp.model, fp.func.cls, exact=True), self.vocab)
        if verdict.kind == CAPACITY and verdict.case == "startup_size" and source is site.node:
            # a bound fixed at start-up: sized for the largest width the launch verifies, not this step's
            plan, replacement, hint = self._largest_width(fp.model, fp.func, fp, site.node, exact, "the bound")
            self._report(fp, site.node, site.anchor, verdict, fp.model.code(source), exact, hint)
            r = self.reported.get((fp.model.source.relpath, site.node.lineno, site.node.col_offset))
            if r is not None and r.hint == hint:
                r.plan, r.replacement = plan, replacement
            return
        self._report(fp, site.node, site.anchor, verdict, fp.model.code(source), exact)

    def _alias(self, fp: FunctionPass, site: Site, target: str) -> Verdict | None:
        """``x = C`` on the verify path: a fallback when x is rebound per step, else judged by x's reads."""
        defs = fp.defs.get(target, [])
        mine = next((d for d in defs if d.value is not None and any(n is site.node for n in walk(d.value))), None)
        if mine is None:
            return None
        if any(d.kind == "per_step" and d.pos > mine.pos and not fp.exclusive(d.node, mine.node) for d in defs):
            return judged(FALLBACK, "rebound", name=target)
        worst: Verdict | None = None
        for v in self._later_uses(fp, target, mine, lambda v: v.what == DERIVED):
            if v.kind in RANK and (worst is None or RANK[v.kind] > RANK[worst.kind]):
                worst = v
        if worst is None:
            return None
        return layout_of(target) if worst.kind == LAYOUT else worst

    def _derived(self, fp: FunctionPass, site: Site, target: str) -> Verdict | None:
        """``n = <expression of C>`` / ``n += C`` on the verify path, ``n`` a local: a start-up size grown
        by C (``n = self.max_context_len; n += C``) is a bound fixed at start-up (capacity); a value read
        only by size checks, comparisons or log lines lays nothing out; anything else is layout."""
        stmt = _statement_of(fp.model, site.node)
        if stmt is not None and _per_statement(fp.model, "budget", stmt,
                                               lambda: any(names_a_budget(n) for n in every_node(stmt))):
            return None  # sized for the largest width a budget allows (`max(C, budget + 1)`, a fix's output)
        aug = isinstance(stmt, ast.AugAssign)
        layout = judged(LAYOUT, "grows", name=target) if aug else layout_of(target)
        size = self._startup_size(fp, stmt, site.node)
        if size is not None:
            return judged(CAPACITY, "startup_size", value=size, name=target)
        defs = fp.defs.get(target, [])
        mine = next((d for d in defs if d.node is stmt), None)
        if mine is None:
            return layout
        # an alias hands the value on: kept as before, a layout
        verdicts = list(self._later_uses(fp, target, mine, lambda v: True))
        if verdicts and all(v.kind == HARMLESS for v in verdicts):
            return None
        return layout

    def _later_uses(self, fp: FunctionPass, target: str, mine, alias_is_layout):
        """What each read of local ``target`` that binding ``mine`` reaches does: an argument as the
        callee takes it, an alias for which ``alias_is_layout`` holds as a layout."""
        for use in _per_statement(fp.model, "loads", fp.func.node, lambda: _loads_by_name(fp.func.node)).get(target, ()):
            if (use.lineno, use.col_offset) <= mine.pos or mine not in fp.reaching(target, use):
                continue
            v = classify(use, fp.model.parents, self.vocab)
            if v.kind == ARGUMENT:
                v = self._argument(fp, v) or Verdict(HARMLESS)
            elif v.kind == ALIAS and alias_is_layout(v):
                v = layout_of(v.target or "")
            yield v

    def _startup_size(self, fp: FunctionPass, stmt: ast.stmt | None, node: ast.expr) -> str | None:
        """How the start-up size is spelled, when ``stmt`` adds C to one: ``n += C`` where every binding
        of ``n`` that reaches it is made of ``self`` attributes (not C) and constants, or
        ``n = self.max_len + C``; else None."""
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name):
            if stmt.value is not node and not (isinstance(stmt.value, ast.Name) and stmt.value is node):
                return None
            ds = fp.reaching(stmt.target.id, stmt)
            if not ds or any(d.value is None or d.is_c or not self._startup_only(fp, d.value) for d in ds):
                return None
            return " / ".join(dict.fromkeys(fp.model.code(d.value) for d in ds))
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Add):
            sides = [stmt.value.left, stmt.value.right]
            if node not in sides:
                return None
            other = sides[1] if sides[0] is node else sides[0]
            if self._startup_only(fp, other):
                return fp.model.code(other)
        return None

    def _startup_only(self, fp: FunctionPass, value: ast.expr) -> bool:
        """``value`` is made of ``self`` attributes that do not hold C and constants only, with at least
        one attribute (a size fixed at start-up, like ``self.max_context_len``)."""
        c_attrs = self.c_attrs_of(fp.model, fp.func.cls)
        attrs = 0
        for n in ast.walk(value):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                if n.attr in c_attrs or n.attr in self.vocab.c_source_attrs or "metadata" in n.attr:
                    return False
                attrs += 1
            elif isinstance(n, ast.Name) and n.id != "self":
                return False
            elif isinstance(n, (ast.Call, ast.Subscript)):
                return False
        return attrs > 0

    def _argument(self, fp: FunctionPass, verdict: Verdict) -> Verdict | None:
        """C passed to a call: followed into the callee when it resolves, else taken as layout."""
        target = self._resolve(fp, verdict.call)
        name = ast.unparse(verdict.call.func)
        if target is None:
            if verdict.keyword:
                return judged(LAYOUT, "argument", what=layout_of(verdict.keyword).what, name=name)
            return judged(LAYOUT, "passes", name=name)
        model, func, bound = target
        param = _param_for(func, verdict.call, verdict.arg, verdict.keyword, bound)
        if param is None:
            return judged(LAYOUT, "passes", name=f"{func.qualname}()")
        uses = self.run_function(model, func, not self._mode_checked(model, func),
                                 {param: Origin(fp.model, verdict.arg)}).get(param, [])
        if not uses:
            return None
        worst = max(uses, key=lambda u: RANK.get(u.kind, -1))
        return judged(worst.kind, "passed", parameter=param, where=worst.where, what=worst.what)

    def _mode_checked(self, model: ModuleModel, func: FunctionInfo) -> bool:
        """A helper that tests the forward mode itself decides its own verify path."""
        hit = self._mode_checks.get(id(func.node))
        if hit is None:
            # a mode test names a mode (`forward_mode.is_*()`, `ForwardMode.X`): most helpers' text does not
            hit = self._mode_checks[id(func.node)] = model.spans(func.node, "mode", fold=True) \
                and is_mode_check(func.node.body)
        return hit

    # -- calls from the verify path --------------------------------------------------------------

    def _follow_call(self, fp: FunctionPass, call: ast.Call) -> None:
        """A helper called from a verify branch is on the verify path too."""
        if any(is_c_read(a, fp.c_attrs, self.vocab) for a in [*call.args, *(k.value for k in call.keywords)]):
            return  # judged with the taint, through _argument
        target = self._resolve(fp, call, needs_c=True)
        if target is not None:
            model, func, bound = target
            if bound:
                self.callers.setdefault(id(func.node), {})[id(call)] = (fp, call)
            self.run_function(model, func, not self._mode_checked(model, func), {})

    def _resolve(self, fp: FunctionPass, call: ast.Call, needs_c: bool = False) -> tuple[ModuleModel, FunctionInfo, bool] | None:
        model, func = fp.model, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and fp.func.cls:
                hit = self.method_of(model, fp.func.cls, func.attr, needs_c)
                return (hit[0], hit[1], True) if hit else None
            imp = model.imports.get(func.value.id)
            if imp:
                other = self.load_module(imp[0] if imp[1] is None else f"{imp[0]}.{imp[1]}", needs_c)
                f = other.functions.get(func.attr) if other else None
                return (other, f, False) if f else None
            return None
        if isinstance(func, ast.Name):
            local = model.nested(fp.func, func.id)
            if local is not None:
                return (model, local, False)
            if model.functions.get(func.id) is not None:
                return (model, model.functions[func.id], False)
            imp = model.imports.get(func.id)
            if imp and imp[1]:
                other = self.load_module(imp[0], needs_c)
                f = other.functions.get(imp[1]) if other else None
                return (other, f, False) if f else None
        return None

    def _report(self, fp: FunctionPass, node: ast.expr, anchor, verdict: Verdict, c_expr: str, exact: bool,
                hint: Hint | None = None, buffer_line: int = 0) -> None:
        key = (fp.model.source.relpath, node.lineno, node.col_offset)
        old = self.reported.get(key)
        if old is not None and RANK[old.kind] >= RANK[verdict.kind]:
            return
        self.reported[key] = Reported(verdict.kind, verdict.what, fp, node, anchor, c_expr, exact, hint, buffer_line,
                                      case=verdict.case)

    def forget(self, relpath: str) -> None:
        """Drop what was reported in one file (its analysis failed half-way)."""
        for key in [k for k, r in self.reported.items() if r.fp.model.source.relpath == relpath]:
            del self.reported[key]

    # -- findings -----------------------------------------------------------------------------

    def findings(self) -> list[Finding]:
        self._threads.clear()  # threads are planned over everything analysed by now
        return [self._finding(r) for r in self.reported.values()]

    def prepare_threads(self) -> None:
        """Load now what threading W into the helpers reported so far will read of other modules (their
        callers and definers, parsed or outlined), so a worker does it while candidates are still being
        handed out, not all at the end. Decides nothing: findings() plans every thread afresh."""
        for key, r in list(self.reported.items()):
            if key in self._prepared_reports:
                continue
            self._prepared_reports.add(key)
            # the case findings() threads W for (see _finding): no verify input in scope
            if r.hint is None and r.kind != FALLBACK and _verify_input_at(r)[1] is None:
                self._threaded(r)  # memoized per helper until findings() starts afresh

    def _refill(self, r: Reported, spec_info: str | None) -> tuple[str, str] | None:
        """(W expression, "arange" | "fill") for a read of a buffer a refill with W rebuilds (offsets
        stepping by C from 0; every entry C), when the verify input is in scope at the verify block
        (and, for offsets, the module has ``torch`` to rebuild them with)."""
        fp, model = r.fp, r.fp.model
        how = self.facts(model, fp.func.cls).strided.get(buffer_key(r.node))
        if not how or spec_info is None or r.anchor is None or how[0] == "arange" and "torch" not in model.imports:
            return None
        return per_step_value(spec_info, how[1], self.width_api), how[0]

    def _plan(self, r: Reported, value: str, safety: FixSafety, edits: list[Edit] = (), replace_site: bool = True,
              refill: tuple[ast.stmt, str, str] | None = None) -> FixPlan | None:
        """The fix of a finding as text edits: W bound as ``value`` on new lines at the top of its verify
        block and read there instead of C, a buffer refilled before the statement ``refill`` names, and
        the ``edits`` that thread W in; inline, ``(value)``, where there is no statement anchor (a
        verify-guarded conditional expression) or no line to bind on (``def f(self): return C``).
        None when the code around has a shape the edits do not handle."""
        model, func = r.fp.model, r.fp.func
        model.link(func.node)
        try:
            bound = self._bind(model, func, r.anchor, value) if r.anchor is not None else None
            if bound is None:
                if refill is not None or not replace_site:
                    return None
                out = [E.replace(model, r.node, f"({value})")]
            else:
                local, out = bound[0], [bound[1]]
                if replace_site:
                    out.append(E.replace(model, r.node, local))
                if refill is not None:
                    reader, how, buffer = refill
                    out.append(E.refill(model, reader, buffer, local, how))
        except E.EditError:
            return None
        first, last = _top_level_span(model, r.node.lineno)
        return FixPlan(safety=safety, edits=[*out, *edits], block_first=first, block_last=last)

    def _bind(self, model: ModuleModel, func: FunctionInfo, anchor: ast.stmt, value: str) -> tuple[str, Edit] | None:
        """W bound as ``value`` before ``anchor``, under a name free in the function (one per verify block
        and width); None where the block has no line of its own to bind on."""
        names = self._locals.setdefault(id(func.node), {})
        key = (id(anchor), value)
        local = names.get(key) or E.free_name(model.text_of(func.node), set(names.values()), LOCAL)
        try:
            edit = E.bind(model, anchor, local, value)
        except E.EditError:
            return None
        names[key] = local
        return local, edit

    def _threaded(self, r: Reported, named: bool = False) -> tuple[str, Thread] | None:
        """W for a helper with no verify input in scope, threaded in from its callers as ``verify_width``:
        every verify branch that calls it (as a method of its class; every caller in the class when the
        helper tests the forward mode itself) passes its verify input's width, or its own
        ``verify_width`` when it is such a helper too. Other callers pass nothing and the helper keeps C;
        so do calls that hand it a forward mode other than TARGET_VERIFY. None when some caller on the
        way has neither."""
        model, func = r.fp.model, r.fp.func
        if not (r.exact or named) or any(n != "self" for n in _names(r.c_expr)):
            return None
        if id(func.node) not in self._threads:  # every finding in the helper threads the same W
            self._threads[id(func.node)] = self._thread_edits(model, func, frozenset())
        found = self._threads[id(func.node)]
        if found is None:
            return None
        c = r.c_expr if _is_simple(r.c_expr) else f"({r.c_expr})"
        return f"{THREADED} or {c}", found

    def _thread_edits(self, model: ModuleModel, func: FunctionInfo, seen: frozenset) -> Thread | None:
        if id(func.node) in seen or not func.cls or not _free_of(func, model, THREADED):
            return None
        seen = seen | {id(func.node)}
        found = self._callers_of(model, func)
        if found is None:
            return None
        calls, exempt = found
        # A helper that tests the forward mode itself uses W only on its verify branch, where any
        # caller's verify input is this step's: every caller hands it in. Otherwise only the verify
        # branches that call it do; other callers pass nothing and keep C.
        callers = [(cfp, call) for cfp, call, verify in calls if verify or self._mode_checked(model, func)]
        if not callers and not exempt:
            return None
        model.link(func.node)
        try:
            edits = [E.add_parameter(model, func.node, THREADED)]
        except E.EditError:
            return None
        where = []
        for cfp, call in callers:
            if any(k.arg == THREADED or k.arg is None for k in call.keywords):
                return None
            cfp.model.link(cfp.func.node)  # the call's statement, where the caller's verify input must be in scope
            spec_info = cfp.spec_info_expr(_statement_of(cfp.model, call))
            if spec_info is not None:
                value = per_step_or_none(spec_info, self.width_api)
            else:  # a helper itself: it gets W from its own callers and hands it on
                up = self._thread_edits(cfp.model, cfp.func, seen)
                if up is None:
                    return None
                exempt = exempt + up.exempt
                if not up.where:  # no call reaches that caller's verify path: it has nothing to hand on
                    continue
                edits += [e if e.path else replace(e, path=_rel(cfp.model, model)) for e in up.edits]
                value = THREADED
            try:
                keyword = E.add_keyword(cfp.model, call, THREADED, value)
            except E.EditError:
                return None
            edits.append(replace(keyword, path=_rel(cfp.model, model)))
            l1 = call.lineno
            where.append(f"line {l1}" if cfp.model is model else f"{cfp.model.source.relpath}:{l1}")
        exempt = sorted(set(exempt), key=lambda at: (at.rsplit(":", 1)[0], int(at.rsplit(":", 1)[1])))
        return Thread(list(dict.fromkeys(edits)), where, exempt)

    def _callers_of(self, model: ModuleModel, func: FunctionInfo) -> \
            tuple[list[tuple[FunctionPass, ast.Call, bool]], list[str]] | None:
        """Every ``self.<func>(...)`` call in the tree that resolves to ``func`` (from its class, its
        subclasses, classes mixing it in), with a pass over the caller and whether the call is on a
        verify path; and the calls that hand ``func`` a forward mode other than TARGET_VERIFY (which
        need no W), as ``file:line``. None when a subclass overrides ``func``, or the tree calls the
        name on another object without such a mode (that caller could not be handed W)."""
        recorded = self.callers.get(id(func.node), {})
        found, exempt, seen = [], [], set()
        uses = self.method_uses(func.name)
        if uses is None:
            return None
        here = model.outline
        # An override would not take the new parameter.
        for other in model.functions.values():
            if other.name == func.name and other.cls and other.node is not func.node \
                    and self._derives(here, other.cls, here, func.cls):
                return None
        for o in uses.definers:
            if o.relpath != here.relpath and any(self._derives(o, cls, here, func.cls) for cls in o.methods.get(func.name, ())):
                return None
        mode = _mode_parameter(func)
        for module in uses.foreign:
            m = self.load_module(module)
            if m is None:  # a caller on another object that cannot be read: cannot be judged
                return None
            for call in self._other_calls(m, func.name):
                if not _hands_other_mode(func, mode, call):
                    return None
                exempt.append(f"{m.source.relpath}:{call.lineno}")
        for m in [model, *self._deriving(uses.callers, here, func.cls)]:
            if id(m) in seen:
                continue
            seen.add(id(m))
            for caller, calls in self._self_calls(m, func.name).values():
                hit = self.method_of(m, caller.cls, func.name)
                if hit is None or hit[1].node is not func.node:
                    continue
                cfp = None
                for c in calls:
                    if _hands_other_mode(func, mode, c):
                        exempt.append(f"{m.source.relpath}:{c.lineno}")
                        continue
                    if cfp is None:
                        cfp, on_verify = self._caller_pass(m, caller)
                    found.append((cfp, c, id(c) in on_verify or id(c) in recorded))
        found.sort(key=lambda t: (t[0].model.source.relpath, t[1].lineno, t[1].col_offset))
        return found, exempt

    def _other_calls(self, model: ModuleModel, name: str) -> list[ast.Call]:
        """The module's calls of method ``name`` on an object other than ``self``. Only statements
        whose lines hold ``name`` are walked (a class's body statement by statement): a call names it."""
        key = (id(model), name)
        calls = self._other_calls_memo.get(key)
        if calls is None:
            calls = self._other_calls_memo[key] = []
            stack = list(model.tree.body)
            while stack:
                stmt = stack.pop()
                if not model.holds(*statement_lines(stmt), name):
                    continue
                if isinstance(stmt, ast.ClassDef):
                    stack.extend(stmt.body)
                    parts = [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
                else:
                    parts = [stmt]
                for n in (n for part in parts for n in every_node(part)):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name \
                            and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "self"):
                        calls.append(n)
        return calls

    def _caller_pass(self, model: ModuleModel, caller: FunctionInfo) -> tuple[FunctionPass, set[int]]:
        """A pass over a caller (as its own entry point) and the ids of the calls it makes on a verify path."""
        hit = self._caller_passes.get(id(caller.node))
        if hit is None:
            cfp = self._entry_passes.get(id(caller.node))
            if cfp is None:
                facts = self.facts(model, caller.cls)
                cfp = FunctionPass(model, caller, self.vocab.is_verify_function(caller.name), facts.c_attrs,
                                   self.vocab, buffers=facts.buffers, sized=facts.sized, modes=lambda: self.modes).run()
            hit = self._caller_passes[id(caller.node)] = (cfp, {id(c) for c, _ in cfp.verify_calls})
        return hit

    def _self_calls(self, model: ModuleModel, name: str) -> dict[int, tuple[FunctionInfo, list[ast.Call]]]:
        """The ``self.<name>(...)`` calls of each method of the module's classes (by caller). Only
        methods whose source holds ``name`` are walked: a call names it."""
        key = (id(model), name)
        table = self._method_calls.get(key)
        if table is None:
            table = self._method_calls[key] = {}
            for caller in model.functions.values():
                if not caller.cls or "<locals>" in caller.qualname:
                    continue
                if not model.spans(caller.node, name):
                    continue
                for n in walk(caller.node, keep=lambda stmt: model.spans(stmt, name)):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name \
                            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                        table.setdefault(id(caller.node), (caller, []))[1].append(n)
        return table

    def _deriving(self, outlines: list[Outline], base_module: Outline, base: str) -> list[ModuleModel]:
        """The modules, parsed, of those ``outlines`` other than ``base_module`` that have a class
        deriving from ``base``: only there can ``self.<name>(...)`` resolve to ``base``'s method."""
        out = []
        for o in outlines:
            if o.relpath != base_module.relpath and any(self._derives(o, c, base_module, base) for c in o.class_bases):
                m = self.load_module(o.module)
                if m is not None and m.source.relpath == o.relpath:
                    out.append(m)
        return out

    def _outline(self, module: str) -> Outline | None:
        if self.outline_of is not None:
            return self.outline_of(module)
        m = self.load_module(module)
        return m.outline if m is not None else None

    def _derives(self, module: Outline, cls: str, base_module: Outline, base: str, depth: int = 0) -> bool:
        """``cls`` (of ``module``) has ``base`` (of ``base_module``) among its ancestors, within the
        depth :meth:`method_of` looks."""
        if depth > 8:
            return False
        for b in module.class_bases.get(cls, []):
            if b in module.class_bases:
                if (module.relpath == base_module.relpath and b == base) \
                        or self._derives(module, b, base_module, base, depth + 1):
                    return True
                continue
            imp = module.imports.get(b)
            other = self._outline(imp[0]) if imp and imp[1] else None
            if other is not None and ((other.relpath == base_module.relpath and imp[1] == base)
                                      or self._derives(other, imp[1], base_module, base, depth + 1)):
                return True
        return False

    def method_of(self, model: ModuleModel, cls: str, name: str, needs_c: bool = False,
                  depth: int = 0) -> tuple[ModuleModel, FunctionInfo] | None:
        """``cls.name`` as Python finds it: the class, then its bases in order, those imported from
        other modules of the tree included (mixins)."""
        f = model.functions.get(f"{cls}.{name}")
        if f is not None:
            return model, f
        if depth > 8:
            return None
        for base in model.class_bases.get(cls, []):
            if base in model.class_bases:
                hit = self.method_of(model, base, name, needs_c, depth + 1)
            else:
                imp = model.imports.get(base)
                other = self.load_module(imp[0], needs_c) if imp and imp[1] else None
                hit = self.method_of(other, imp[1], name, needs_c, depth + 1) if other is not None else None
            if hit is not None:
                return hit
        return None

    def _finding(self, r: Reported) -> Finding:
        """The finding of a report: its facts and fix gathered here, its words said by its rule."""
        rule = rule_of(RULE_OF_KIND[r.kind])
        model, func = r.fp.model, r.fp.func
        stmt_text, stmt_line = _statement(model, r.node)
        l1, c1, l2, c2 = model.span(r.node)
        symbol = model.code(r.node)
        hint, fix, replacement = self._hint(r, symbol)
        message = rule.message("sized" if r.hint is not None else "buffer" if r.buffer_line else "read",
                               symbol=symbol, what=r.what, buffer_line=r.buffer_line)
        return Finding(rule=rule.id, severity=rule.severity, path=model.source.display, relpath=model.source.relpath,
                       line=l1, column=c1, end_line=l2, end_column=c2, function=func.qualname, symbol=symbol,
                       message=message, replacement=replacement, hint=rule.hint(hint[0], **hint[1]),
                       fix_safety=fix.safety if fix else None, fix=fix, statement=stmt_text, stmt_line=stmt_line,
                       resolver=r.case == "resolver")

    def _hint(self, r: Reported, symbol: str) -> tuple[Hint, FixPlan | None, str | None]:
        """A report's fix (plan and replacement) and the hint case that says it, with its facts."""
        model, func = r.fp.model, r.fp.func
        at, spec_info = _verify_input_at(r)
        unbound = [n for n in _names(r.c_expr) if n != "self" and not r.fp.bound_at(n, at)]
        if r.hint is not None:
            return r.hint, r.plan, r.replacement
        if r.kind == FALLBACK and not (r.case == "resolver" and r.exact and spec_info and not unbound):
            return ("fallback", {}), None, None
        if not r.exact and r.c_expr == symbol and r.buffer_line and \
                (refill := self._refill(r, spec_info)) is not None:
            value, how = refill
            read = _statement_of(model, r.node)  # refilled right before the statement that reads it
            fix = self._plan(r, value, FixSafety.safe, replace_site=False, refill=(read, how, symbol))
            return ("refill_offsets" if how == "arange" else "refill_entries",
                    {"symbol": symbol, "value": value, "buffer_line": r.buffer_line}), fix, None
        if not r.exact and r.c_expr == symbol and r.buffer_line:
            return ("refill_by_hand", {}), None, None
        if not r.exact and r.c_expr == symbol and _names_the_verify_width(symbol) and \
                (spec_info is not None or (threaded := self._threaded(r, named=True)) is not None):
            # Derived from C at start-up (C - 1 for some workers), but named for what the verify path
            # needs: the verify input's width stands in for it. Whether every worker's input carries
            # that same width is for a reviewer: unsafe.
            edits = []
            if spec_info is not None:
                value = per_step_value(spec_info, r.c_expr, self.width_api)
            else:
                value, edits = threaded[0], threaded[1].edits
            replacement = f"({value})"
            fix = self._plan(r, value, FixSafety.unsafe, edits=edits)
            return ("verify_named", {"symbol": symbol, "replacement": replacement}), fix, replacement
        if not r.exact:
            return ("derived", {"symbol": symbol, "c_expr": r.c_expr}), None, None
        if spec_info is None and (threaded := self._threaded(r)) is None:
            return ("no_verify_input", {"function": func.qualname}), None, None
        if spec_info is None and not threaded[1].where:
            # Every call in the tree hands this path a mode other than TARGET_VERIFY: today no verify
            # branch reaches it, so the fix only lets one hand W in. Whether that is wanted is for a reviewer.
            value, thread = threaded
            fix = self._plan(r, value, FixSafety.unsafe, edits=thread.edits)
            replacement = f"({value})"
            return ("unreached", {"function": func.qualname, "calls": _cited(thread.exempt), "parameter": THREADED,
                                  "replacement": replacement}), fix, replacement
        if spec_info is None:
            value, thread = threaded
            fix = self._plan(r, value, _safety(r), edits=thread.edits)
            replacement = f"({value})"
            return ("threaded", {"function": func.qualname, "callers": ", ".join(thread.where),
                                 "parameter": THREADED, "replacement": replacement}), fix, replacement
        if unbound:
            return ("unbound", {"c_expr": r.c_expr, "name": unbound[0]}), None, None
        value = per_step_value(spec_info, r.c_expr, self.width_api)
        replacement = f"({value})"
        return ("per_step", {"replacement": replacement}), self._plan(r, value, _safety(r)), replacement


def _enclosing_function(model: ModuleModel, cls: str | None, node: ast.AST) -> FunctionInfo | None:
    """The method of ``cls`` whose body holds ``node`` (the innermost, nested ones aside)."""
    best = None
    for f in model.functions.values():
        if f.cls == cls and "<locals>" not in f.qualname and f.node.lineno <= node.lineno <= (f.node.end_lineno or 0):
            if best is None or f.node.lineno > best.node.lineno:
                best = f
    return best


def _use_of(model: ModuleModel, fp: FunctionPass, at: ast.expr, vocab: Vocabulary) -> str | None:
    """How the verify path uses a buffer at ``at`` where W tokens per request go into it: slices it to an
    extent read from C or the verify input's width (``buf[: bs * C]``), or, whole, writes into it or hands
    it to a call (a kernel that fills it); None for a use that cannot overflow it (``buf[:bs]``, one entry
    per request; ``buf.shape``; a plain alias, through which a write is found as a fill)."""
    node, parent = at, model.parent(at)
    sliced, whole = False, True
    while isinstance(parent, ast.Subscript) and parent.value is node:
        if any(is_c_read(n, fp.c_attrs, vocab) or isinstance(n, ast.Name) and n.id in fp.c_names
               for n in every_node(parent.slice)) or mentions_per_step(parent.slice, vocab):
            sliced = True
        elif not isinstance(parent.slice, ast.Constant):
            whole = False  # an extent of one entry per request (`[:bs]`), or a stride
            break
        node, parent = parent, model.parent(parent)
    if sliced:
        return said(CAPACITY, "use_slices", value=model.code(node))
    if not whole:
        return None
    if isinstance(parent, (ast.Assign, ast.AugAssign)) and node is not getattr(parent, "value", None):
        return said(CAPACITY, "use_writes")
    if isinstance(parent, ast.Attribute) and parent.attr.endswith("_") and not parent.attr.startswith("_") \
            and isinstance(model.parent(parent), ast.Call):
        return said(CAPACITY, "use_writes_method", name=parent.attr)
    if isinstance(parent, ast.keyword):
        if parent.arg == "out":
            return said(CAPACITY, "use_writes_out")
        parent = model.parent(parent)
    if isinstance(parent, ast.Call) and node is not parent.func:
        name = dotted(parent.func) or ""
        leaf = name.rsplit(".", 1)[-1]
        if leaf not in ("len", "isinstance", "hasattr", "id", "type", "print", "repr", "str") \
                and not leaf.lstrip("_").startswith(("assert", "check")):
            return said(CAPACITY, "use_hands", name=name or "a call")
    return None


def _server_args_in(model: ModuleModel, owner: FunctionInfo, afp: FunctionPass) -> str | None:
    """How server args are spelled in ``owner``: a parameter ``server_args``, ``model_runner.server_args``,
    or a ``self.server_args`` / ``self.model_runner`` the class sets; None where none is in scope (the
    tree's global ``get_global_server_args()`` is not used: it raises until a server has set it)."""
    params = [*owner.params, *owner.kwonly]
    if "server_args" in params:
        return "server_args"
    if "model_runner" in params:
        return "model_runner.server_args"
    cls_attrs = {a for f in model.functions.values() if f.cls == owner.cls for n in walk(f.node)
                 if isinstance(n, ast.Assign) for t in n.targets if (a := _self_attr_name(t))}
    if "server_args" in cls_attrs:
        return "self.server_args"
    if "model_runner" in cls_attrs:
        return "self.model_runner.server_args"
    return None


def _self_attr_name(t: ast.expr) -> str | None:
    return t.attr if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" else None


def _safety(r: Reported) -> FixSafety:
    """A bound or size changed (DD002), or a resolver's `return C` (a choice its author made for some
    inputs) changed: unsafe; a layout: safe."""
    return FixSafety.unsafe if r.kind in (CAPACITY, FALLBACK) else FixSafety.safe


def _names_the_verify_width(symbol: str) -> bool:
    """``self.target_verify_num_draft_tokens``: an attribute whose name says it is the verify width."""
    leaf = symbol.rsplit(".", 1)[-1].lower()
    return symbol.startswith("self.") and "verify" in leaf and any(w in leaf for w in WIDTH_WORDS)


def _rel(where: ModuleModel, finding: ModuleModel) -> str:
    """An edit's file: "" for the finding's own, else its tree relpath."""
    return "" if where is finding else where.source.relpath


def _cited(places: list[str], most: int = 3) -> str:
    return ", ".join(places[:most]) + (f" and {len(places) - most} more" if len(places) > most else "")


def _mode_parameter(func: FunctionInfo) -> str | None:
    """The parameter a method tests its forward mode on (``forward_mode.is_target_verify()``), when it
    tests no other mode."""
    a = func.node.args
    tested = {dotted(n.func.value) for n in walk(func.node) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("is_")
              and (dotted(n.func.value) or "").lower().endswith("mode")}
    param = next(iter(tested)) if len(tested) == 1 else None
    return param if param in [p.arg for p in [*a.posonlyargs, *a.args]][1:] else None


def _hands_other_mode(func: FunctionInfo, mode: str | None, call: ast.Call) -> bool:
    """``call`` hands ``func`` (a method) a forward mode other than TARGET_VERIFY
    (``forward_mode=ForwardMode.DECODE``) for ``mode``, the parameter it tests: its verify branch is
    not taken."""
    if mode is None:
        return False
    a = func.node.args
    params = [p.arg for p in [*a.posonlyargs, *a.args]][1:]  # self is the receiver
    bound = []
    for name, value in zip(params, call.args):
        if isinstance(value, ast.Starred):
            break
        bound.append((name, value))
    bound += [(k.arg, k.value) for k in call.keywords if k.arg]
    member = next(((dotted(v) or "") for n, v in bound if n == mode), "")
    return member.startswith("ForwardMode.") and member.count(".") == 1 and member != f"ForwardMode.{VERIFY_MEMBER}"


def _free_of(func: FunctionInfo, model: ModuleModel, name: str) -> bool:
    return name not in model.text_of(func.node)


def per_step_or_none(spec_info: str, width_api: str) -> str:
    """The verify input's width, or None when it carries none (the callee falls back to C)."""
    if width_api == "num_tokens_per_req":
        return (f"{spec_info}.num_tokens_per_req if {spec_info} is not None "
                f"and {spec_info}.num_tokens_per_req > 0 else None")
    return f'getattr({spec_info}, "draft_token_num", None)'


def per_step_value(spec_info: str, c_expr: str, width_api: str) -> str:
    """W with a fallback to C, for CUDA-graph capture and callers without a verify input."""
    c = c_expr if _is_simple(c_expr) else f"({c_expr})"
    if width_api == "num_tokens_per_req":
        return (f"{spec_info}.num_tokens_per_req if {spec_info} is not None "
                f"and {spec_info}.num_tokens_per_req > 0 else {c}")
    return f'getattr({spec_info}, "draft_token_num", None) or {c}'


@lru_cache(maxsize=1024)  # a tree spells C a few ways, asked of every finding: parsed once each
def _is_simple(expr: str) -> bool:
    try:
        return isinstance(ast.parse(expr, mode="eval").body, (ast.Name, ast.Attribute))
    except SyntaxError:
        return False


@lru_cache(maxsize=1024)
def _names(expr: str) -> tuple[str, ...]:
    try:
        return tuple(n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name))
    except SyntaxError:
        return ()


def _verify_input_at(r: Reported) -> tuple[ast.stmt | None, str | None]:
    """Where a finding's fix binds W (its verify block, else its statement) and how the verify input
    is spelled there (None: not in scope)."""
    at = r.anchor if r.anchor is not None else _statement_of(r.fp.model, r.node)
    return at, r.fp.spec_info_expr(at)


def _statement_of(model: ModuleModel, node: ast.AST) -> ast.stmt | None:
    while node is not None and not isinstance(node, ast.stmt):
        node = model.parent(node)
    return node


def _statement(model: ModuleModel, node: ast.AST) -> tuple[str, int]:
    """Normalized text and first line of the statement around ``node`` (for baselines and suppressions)."""
    stmt = node
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = model.parent(stmt)
    if stmt is None:
        return "", node.lineno
    header = stmt.test if isinstance(stmt, (ast.If, ast.While)) else stmt.iter if isinstance(stmt, ast.For) else stmt
    return _per_statement(model, "text", stmt, lambda: ast.unparse(header)), stmt.lineno


def _per_statement(model: ModuleModel, what: str, stmt: ast.stmt, make):
    """``make()``, once per statement: a statement holding a thousand reads of C (a 2,900-term sum) is
    walked once, not once per read."""
    known = model.__dict__.setdefault("_per_statement", {})
    key = (what, id(stmt))
    if key not in known:
        known[key] = make()
    return known[key]


def _param_for(func: FunctionInfo, call: ast.Call, arg: ast.expr, keyword: str | None, bound: bool) -> str | None:
    if keyword is not None:
        return keyword if keyword in func.params or keyword in func.kwonly else None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    idx = next((i for i, a in enumerate(call.args) if a is arg), None)
    params = func.params[1:] if bound and func.params[:1] == ["self"] else func.params
    return params[idx] if idx is not None and idx < len(params) else None


def _resolves_width(func: ast.FunctionDef, vocab: Vocabulary) -> bool:
    """Some ``return`` of the function gives the verify input's own width."""
    return any(isinstance(n, ast.Return) and n.value is not None and mentions_per_step(n.value, vocab)
               for n in walk(func))


def _loads_by_name(root: ast.AST) -> dict[str, list[ast.Name]]:
    """Every read of a name under ``root``, by name, in ``ast.walk`` order (made once per function)."""
    out: dict[str, list[ast.Name]] = {}
    for n in ast.walk(root):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.setdefault(n.id, []).append(n)
    return out


def _top_level_span(model, line: int) -> tuple[int, int]:
    """(first, last) line of the module-level statement holding ``line``, decorators included."""
    body = model.tree.body
    i = bisect.bisect_right([s.lineno for s in body], line) - 1  # statements are in line order
    for stmt in body[max(0, i - 1): i + 2]:  # a decorated def starts before its `def` line
        first, last = statement_lines(stmt)
        if first <= line <= last:
            return first, last
    return 0, 0
