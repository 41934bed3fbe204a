"""Ties the per-function verify model together across functions and modules: follows each verify path
into its helpers and judges every read of C on it (layout, capacity, fallback), where C came from.

The facts it asks, a provider each in the module named by its role: which function a call runs
(``classes.py``), who calls a helper (``callers.py``), what a class holds of C (``c_attrs.py``), the
forward modes (``mode_checks.py``); each report's fix and finding is ``planning.py``'s, over the
engine's public interface; what they share is in ``reports.py``."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from ddcheck.base.findings import FixPlan, FixSafety
from ddcheck.analysis.exprs import (buffer_key, call_leaf, dotted, every_node, is_c_read, is_exact_c, mentions_per_step, self_attr,
                    walk)
from ddcheck.analysis.hazards import (ALIAS, ARGUMENT, CAPACITY, DERIVED, FALLBACK, HARMLESS, LAYOUT, RANK, Verdict,
                      classify, judged, layout_of, said)
from ddcheck.tree.modes import ModeTable
from ddcheck.analysis.module import FunctionInfo, ModuleModel, names_a_budget
from ddcheck.tree.hierarchy import Outline
from ddcheck.analysis.verify_path import FunctionPass, Site, reads_verify_input
from ddcheck.analysis.c_attrs import ClassAttrs
from ddcheck.analysis.callers import Callers
from ddcheck.analysis.classes import Classes
from ddcheck.analysis.mode_checks import Modes
from ddcheck.analysis.reports import Hint, MethodUses, Origin, ParamUse, Reported, _per_statement, _statement_of, _top_level_span
from ddcheck.analysis import edits as E
from ddcheck.analysis.vocabulary import ALLOCATORS, VERIFY_STEP_WORD, Vocabulary
from ddcheck.tree.evaluate import truth
from ddcheck.analysis.inputs import Built, Reach, expression_reach
from ddcheck.rules import rule_of, scan_codes
from ddcheck.tree.names import (DRAFT_TOKEN_NUM, PREPARE_FOR_VERIFY, SPEC_INFO_FIELD, VERIFY_MARKERS as VERIFY_TEXT,
                                WIDTH_FIELDS)


@dataclass
class Engine:
    """The analysis of a tree's verify paths: follows each into its helpers and reports hazards.

    The fields are what the tree gives it; the facts it asks of the tree are declared below (after
    libcst's metadata providers): each a provider built on first use, whose answers are worked out when
    asked and kept, shared by whoever asks them (the caller finder asks the class resolver; the fix
    planning, :class:`~ddcheck.analysis.planning.Planning`, asks them all)."""

    vocab: Vocabulary
    load_module: Callable[..., ModuleModel | None]  # (dotted module name, needs_c=False) -> model (lazy)
    width_api: str = DRAFT_TOKEN_NUM  # or NUM_TOKENS_PER_REQ, read from the target tree
    inherited_c_attrs: frozenset[str] = frozenset()
    reported: dict[tuple, Reported] = field(default_factory=dict)
    # method name -> where the tree uses it, for threading W into helpers
    method_uses: Callable[[str], MethodUses | None] = lambda name: MethodUses()
    # dotted module name -> its outline, which another process may have parsed; None: from load_module
    outline_of: Callable[[str], Outline | None] | None = None
    # the target's ForwardMode table, from the tree model; None (an engine without a tree): from its
    # module, loaded here
    mode_table: Callable[[], ModeTable | None] | None = None
    # the server argument in which the tree states a tree drafter's budget (read on first use), or None
    budget_flag: Callable[[], str | None] = lambda: None
    # the verify inputs the tree builds (read on first use, :mod:`.inputs`)
    built_inputs: Callable[[], list[Built]] = lambda: []
    _memo: dict[tuple, dict[str, list[ParamUse]]] = field(default_factory=dict)
    _alloc_passes: dict[int, FunctionPass] = field(default_factory=dict)  # allocating function id -> its pass
    # the modules of the tree that may read an attribute of another object by that name, test code aside
    # (``<obj>.verify_mask``): where a buffer a class hands out is written
    readers: Callable[[str], list[str]] = lambda name: []
    _capacity_used: set[tuple] = field(default_factory=set)  # (relpath, class, attr) of capacity reported
    _handed_out_pending: list[ModuleModel] = field(default_factory=list)  # analysed, their accessors not yet followed
    _accessor_memo: dict[tuple, tuple[str, str, str] | None] = field(default_factory=dict)
    _producers: dict[tuple[str, str], bool] = field(default_factory=dict)  # (relpath, class) -> _builds_at_c

    # -- the facts the engine declares -------------------------------------------------------------

    @cached_property
    def classes(self) -> Classes:
        """Which function a call runs, over the tree's classes (:mod:`.classes`)."""
        return Classes(self.load_module, self.outline_of)

    @cached_property
    def attrs(self) -> ClassAttrs:
        """What each class holds of C (:mod:`.c_attrs`)."""
        return ClassAttrs(self.vocab, self.inherited_c_attrs, self.load_module)

    @cached_property
    def modes(self) -> Modes:
        """The tree's ForwardMode table, and which helpers test the forward mode (:mod:`.mode_checks`)."""
        return Modes(self.load_module, self.mode_table)

    @cached_property
    def callers(self) -> Callers:
        """Who calls a helper (:mod:`.callers`)."""
        return Callers(self.vocab, self.load_module, self.method_uses, self.classes, self.attrs, self.modes)

    @cached_property
    def budget(self) -> str | None:
        """The server argument in which the tree states a tree drafter's budget, or None."""
        return self.budget_flag()

    @cached_property
    def verify_inputs(self) -> list[Built]:
        """The verify inputs the tree builds (:mod:`.inputs`)."""
        return self.built_inputs()

    # -- the verify paths ----------------------------------------------------------------------------

    def analyze(self, model: ModuleModel) -> None:
        for f in list(model.functions.values()):
            if "<locals>" in f.qualname:
                continue
            # Only functions that read C or test for verification can start a verify path.
            text = model.text_of(f.node)
            tokens = self.attrs.c_attrs_of(model, f.cls) | self.vocab.c_source_attrs
            if any(m in text for m in VERIFY_TEXT) or any(t in text for t in tokens):
                self.run_function(model, f, self.vocab.is_verify_function(f.name), {})
        self._handed_out_pending.append(model)

    def run_function(self, model: ModuleModel, func: FunctionInfo, entry_verify: bool,
                     tainted: dict[str, Origin]) -> dict[str, list[ParamUse]]:
        key = (model.source.relpath, func.qualname, entry_verify, tuple(sorted(tainted)))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = {}  # recursion guard
        facts = self.attrs.facts(model, func.cls)
        fp = FunctionPass(model, func, entry_verify, facts.c_attrs, self.vocab,
                          tainted_params=dict(tainted), buffers=facts.buffers, sized=facts.sized, fields=facts.fields,
                          modes=lambda: self.modes.table).run()
        if not tainted and entry_verify == self.vocab.is_verify_function(func.name):
            self.callers.entry_pass(func, fp)
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
        facts = self.attrs.facts(fp.model, fp.func.cls)
        model = fp.model
        model.link(fp.func.node)
        parent = model.parent(at)
        key = parent.slice.value if isinstance(parent, ast.Subscript) and parent.value is at \
            and isinstance(parent.slice, ast.Constant) else None
        if facts.allocations.get((attr, key)) is None:
            return
        through = facts.through.get((attr, key))
        use = (how, at.lineno) if how else \
            _use_of(model, fp, at if key is None else parent, self.vocab, through.field if through else None)
        if use is None:
            return
        where = f"{model.source.display.rsplit('/', 1)[-1]}:{use[1]}"
        self._capacity(model, fp.func.cls, attr, key, use[0], where, fp.func.qualname)

    def _capacity(self, model: ModuleModel, cls: str | None, attr: str, key: object, use: str, where: str,
                  function: str) -> None:
        """DD002 at the allocation of ``self.<attr>`` (``key``: its entry) in ``cls``, which the verify path
        uses at ``where`` (in ``function``) as ``use`` says; at the C a helper that allocates it is handed,
        where one does."""
        facts = self.attrs.facts(model, cls)
        call = facts.allocations.get((attr, key))
        owner = _enclosing_function(model, cls, call) if call is not None else None
        if owner is None:
            return
        self._capacity_used.add((model.source.relpath, cls, attr))
        afp = self._alloc_passes.get(id(owner.node))
        if afp is None:
            afp = self._alloc_passes[id(owner.node)] = FunctionPass(
                model, owner, False, facts.c_attrs, self.vocab, modes=lambda: self.modes.table).run()
        model.link(owner.node)
        through = facts.through.get((attr, key))
        symbol = f"self.{attr}" if key is None else f"self.{attr}[{key!r}]"
        if through is not None:
            # C handed to a helper: the C in what the call hands it (`C`, `C or 0`), else the call
            sizes = [through.arg]
        else:
            helper = call_leaf(call) not in ALLOCATORS  # sized through a helper: C is any argument handed to it
            sizes = [*call.args, *(k.value for k in call.keywords if k.arg == "size" or helper)]
        node = next((n for a in sizes for n in every_node(a) if is_c_read(n, facts.c_attrs, self.vocab)),
                    call if through is None else through.arg)  # a local bound from C: where it is handed over
        if through is not None:
            what = said(CAPACITY, "sized_through", parameter=through.param, name=through.helper, value=through.alloc,
                        made=through.where, symbol=symbol + (f".{through.field}" if through.field else ""),
                        what=use, where=where, function=function)
        else:
            what = said(CAPACITY, "sized_at_startup", symbol=symbol, what=use, where=where, function=function)
        exact = node is not call and is_exact_c(node, self.attrs.c_attrs_of(model, cls, exact=True), self.vocab)
        plan, replacement, hint = self._largest_width(model, owner, afp, node, exact, f"`{symbol}`")
        verdict = Verdict(CAPACITY, what, case="sized_through" if through is not None else "sized_at_startup")
        self._report(afp, node, None, verdict, model.code(node), exact=False, hint=hint)
        reported = self.reported.get((model.source.relpath, node.lineno, node.col_offset))
        if reported is not None and reported.hint == hint and reported.plan is None:
            reported.plan, reported.replacement = plan, replacement

    def report_handed_out(self) -> None:
        """A buffer sized with C that a class hands out through an accessor (``def verify_mask(self): return
        self._verify_mask``) and does not use on its own verify path: DD002 where the tree's code named for
        the verify step writes into it through that accessor (``backend.verify_mask.buffer`` handed to the
        kernel that packs the verify mask). Done once everything is analysed: finding the writers asks the
        whole tree's name index, which a worker has only by then."""
        pending, self._handed_out_pending = self._handed_out_pending, []
        for model in pending:
            self._handed_out(model)

    def _handed_out(self, model: ModuleModel) -> None:
        for cls in model.classes:
            facts = self.attrs.facts(model, cls)
            for attr, accessor in facts.accessors.items():
                if (model.source.relpath, cls, attr) in self._capacity_used:
                    continue
                through = facts.through.get((attr, None))
                found = self._accessor_write(accessor, through.field if through else None)
                if found is not None:
                    self._capacity(model, cls, attr, None, *found)

    def _accessor_write(self, accessor: str, field_name: str | None) -> tuple[str, str, str] | None:
        """(the use, file:line, function) of the first write into what ``<obj>.<accessor>`` hands out (its
        ``field_name``) in a function of another module named for the verify step; None where none."""
        key = (accessor, field_name)
        if key in self._accessor_memo:
            return self._accessor_memo[key]
        self._accessor_memo[key] = None
        for module in self.readers(accessor):
            m = self.load_module(module)
            if m is None:
                continue
            lines = m.lines_with(f".{accessor}")
            for f in m.functions.values():
                if VERIFY_STEP_WORD not in f.name.lower() or not m.holds(f.node.lineno, f.node.end_lineno, f".{accessor}"):
                    continue
                m.link(f.node)
                reads = [n for n in walk(f.node) if isinstance(n, ast.Attribute) and n.attr == accessor
                         and n.lineno in lines and isinstance(n.ctx, ast.Load) and self_attr(n) is None]
                if not reads:
                    continue
                fp = FunctionPass(m, f, True, set(), self.vocab, modes=lambda: self.modes.table).run()
                for n in reads:
                    use = _use_of(m, fp, n, self.vocab, field_name)
                    if use is not None:
                        found = (use[0], f"{m.source.display.rsplit('/', 1)[-1]}:{use[1]}", f.qualname)
                        self._accessor_memo[key] = found
                        return found
        return None

    def _largest_width(self, model: ModuleModel, owner: FunctionInfo, afp: FunctionPass, node: ast.expr, exact: bool,
                       sized: str) -> tuple[FixPlan | None, str | None, Hint]:
        """The fix and hint of a capacity fixed at start-up: C at ``node`` (in ``owner``) becomes the largest
        width the launch can verify where the tree states it (its tree-budget server argument, read from
        server args in scope there); elsewhere no fix, and the hint says what the size must cover (``sized``:
        how the hint names it)."""
        plan, replacement = None, None
        flag = self.budget
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
            if buffer_key(site.node) in self.attrs.facts(fp.model, fp.func.cls).length_only:
                self._report(fp, site.node, site.anchor, judged(CAPACITY, "length_only", buffer_line=site.buffer_line),
                             fp.model.code(site.node), exact=False, hint=("length_only", {}))
                return
            self._report(fp, site.node, site.anchor, judged(LAYOUT, "buffer_layout", buffer_line=site.buffer_line),
                         fp.model.code(site.node), exact=False, buffer_line=site.buffer_line)
            return
        direct = verdict.kind not in (ALIAS, ARGUMENT)
        if verdict.kind == ALIAS and verdict.what == DERIVED:
            # `n = bs * C`, `max_len += C`: a start-up size grown by C is a capacity; otherwise the value
            # is judged by what it feeds (nothing, when it only feeds size checks).
            verdict = self._derived(fp, site, verdict.target)
        elif verdict.kind == ALIAS:
            # `x = C` (or `y = x` with x holding C from outside the block): judged by what x feeds.
            verdict = self._alias(fp, site, verdict.target)
        elif verdict.kind == ARGUMENT:
            verdict = self._argument(fp, verdict)
        if verdict is None:
            return
        verdict = self._claimed(Read(verdict.kind, verdict.case, verdict.what, site.node, fp.func.qualname, direct,
                                     fp, site, self.vocab), verdict)
        if verdict.kind == HARMLESS:
            return
        if via is not None and via.origin is not None:
            # A parameter the caller filled with C: the caller's expression is the finding.
            where = f"`{fp.func.qualname}()` at {fp.model.source.display}:{site.node.lineno}"
            param_uses.setdefault(via.name, []).append(ParamUse(verdict.kind, verdict.what, where))
            return
        source = via.value if via is not None and via.value is not None else site.node
        exact = is_exact_c(source, self.attrs.c_attrs_of(fp.model, fp.func.cls, exact=True), self.vocab)
        if verdict.kind == CAPACITY and verdict.case == "startup_size" and source is site.node:
            # a bound fixed at start-up: sized for the largest width the launch verifies, not this step's
            plan, replacement, hint = self._largest_width(fp.model, fp.func, fp, site.node, exact, "the bound")
            self._report(fp, site.node, site.anchor, verdict, fp.model.code(source), exact, hint)
            r = self.reported.get((fp.model.source.relpath, site.node.lineno, site.node.col_offset))
            if r is not None and r.hint == hint:
                r.plan, r.replacement = plan, replacement
            return
        self._report(fp, site.node, site.anchor, verdict, fp.model.code(source), exact)
        r = self.reported.get((fp.model.source.relpath, site.node.lineno, site.node.col_offset))
        if via is None and r is not None and r.kind in (FALLBACK, LAYOUT) and r.case == verdict.case:
            r.by_inputs = True

    @staticmethod
    def _claimed(read: Read, verdict: Verdict) -> Verdict:
        """The verdict once the rules have judged the read (:meth:`ScanRule.judge`): the first that claims
        it says it in its words."""
        for code in scan_codes():
            claim = code.judge(read)
            if claim is not None:
                return Verdict(claim.kind, rule_of(code.id).describe(claim.case, **claim.facts), case=claim.case,
                               rule=code.id)
        return verdict

    def judge_by_inputs(self) -> None:
        """Each read of C reported as a layout or a fallback, judged by the verify inputs the tree builds
        (:meth:`_by_inputs`). Done once everything is analysed: finding the inputs asks the whole tree's
        name index, which a worker has only by then."""
        for key, r in list(self.reported.items()):
            if not r.by_inputs:
                continue
            r.by_inputs = False
            verdict = self._by_inputs(r.fp, r.node, Verdict(r.kind, r.what, case=r.case))
            if verdict is None:
                del self.reported[key]
            elif (verdict.kind, verdict.case) != (r.kind, r.case):
                r.kind, r.what, r.case, r.rule = verdict.kind, verdict.what, verdict.case, verdict.rule

    # -- judged by the verify inputs the tree builds ------------------------------------------------

    def _by_inputs(self, fp: FunctionPass, node: ast.expr, verdict: Verdict) -> Verdict | None:
        """A read of C judged by the verify inputs the tree builds (:mod:`.inputs`). A fallback's C that an
        input of another width than C reaches is this step's layout (DD001); one that no verify input
        reaches is never taken on the verify path (not reported). A layout read of C that only inputs
        of width C reach, past a test that sends every input of another width elsewhere (``if
        is_tree(spec_info): ... else: <C>``), is a fallback. Where the tree builds none, as before."""
        if verdict.kind == FALLBACK and verdict.case == "param_fallback":
            return None if self._callers_hand_width(fp, node) else verdict
        fallback = verdict.kind == FALLBACK and verdict.case in ("fallback", "default_fallback", "resolver")
        # a value that is bound and then used (``w = W if tree(spec_info) else C``) is decided by where it is
        # used, for the launch's input (``ddcheck config``): only a C the step itself is handed converts
        convertible = verdict.case in ("default_fallback", "resolver") or \
            isinstance(_statement_of(fp.model, node), ast.Return)  # `return resolver(spec_info) or C`
        if not fallback and verdict.kind != LAYOUT:
            return verdict
        inputs = self.verify_inputs
        others = [b for b in inputs if b.other_width]
        if not inputs or (not fallback and not others):
            return verdict
        reach = {id(b): self._reach(fp, node, b) for b in (inputs if fallback else others)}
        if fallback:
            hit = next((b for b in others if reach[id(b)] is True), None) if convertible else None
            if hit is not None:
                if verdict.case == "resolver":
                    return judged(LAYOUT, "resolver_reached", name=hit.cls, where=hit.where)
                return judged(LAYOUT, "fallback_reached", name=hit.cls, where=hit.where)
            if all(r is False for r in reach.values()):
                return None
            return verdict
        if all(reach[id(b)] is False for b in others):
            return judged(FALLBACK, "dispatch", name=others[0].cls, where=others[0].where)
        return verdict

    def _callers_hand_width(self, fp: FunctionPass, node: ast.expr) -> bool:
        """``width or C`` in a helper, ``width`` its parameter: every verify-path call of the helper in the
        tree hands it a value that is a width for every verify input the tree builds (``getattr(spec_info,
        "draft_token_num", None)``, each input carrying one), so no verify input reaches C; calls off the
        verify path are no verify input's."""
        inputs = self.verify_inputs
        parent = fp.model.parents.get(id(node), (None,))[0]
        name = parent.values[0].id if isinstance(parent, ast.BoolOp) and isinstance(parent.values[0], ast.Name) else None
        if not inputs or name is None or not fp.func.cls:
            return False
        found = self.callers.callers_of(fp.model, fp.func)
        calls = [(cfp, call) for cfp, call, verify in (found[0] if found else ()) if verify]
        if not calls:
            return False
        params = [p for p in fp.func.params if p != "self"]
        for cfp, call in calls:
            value = next((k.value for k in call.keywords if k.arg == name), None)
            if value is None and name in params and params.index(name) < len(call.args):
                value = call.args[params.index(name)]
            if value is None:
                return False
            if isinstance(value, ast.Name) and value.id == name and cfp.func.cls:
                return False  # handed on from the caller's own parameter: judged there
            for b in inputs:
                r = Reach(b, lambda n, at: None, lambda m: None)
                if truth(r.eval(value)) is not True:
                    return False
        return True

    def _reach(self, fp: FunctionPass, node: ast.expr, b: Built) -> bool | None:
        """Does the built input ``b`` reach this read of C, for some launch (True, False, None: unknown)."""
        model, func = fp.model, fp.func

        def local(name: str, at: ast.AST) -> ast.expr | None:
            ds = fp.reaching(name, at)
            return ds[0].value if len(ds) == 1 and isinstance(ds[0].node, (ast.Assign, ast.AnnAssign)) else None

        def method(name: str) -> ast.FunctionDef | None:
            f = model.functions.get(f"{func.cls}.{name}") if func.cls else None
            return f.node if f is not None else None

        r = Reach(b, local, method)
        stmt = _statement_of(model, node)
        s = r.reaches(func.node.body, stmt) if stmt is not None else None
        if s is False:
            return False
        e = expression_reach(r, node, model.parents)
        if e is False:
            return False
        return True if s and e else None

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
        c_attrs = self.attrs.c_attrs_of(fp.model, fp.func.cls)
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
        target = self.classes.resolve(fp, verdict.call)
        name = ast.unparse(verdict.call.func)
        if target is None:
            if verdict.keyword:
                return judged(LAYOUT, "argument", what=layout_of(verdict.keyword).what, name=name)
            return judged(LAYOUT, "passes", name=name)
        model, func, bound = target
        param = _param_for(func, verdict.call, verdict.arg, verdict.keyword, bound)
        if param is None:
            return judged(LAYOUT, "passes", name=f"{func.qualname}()")
        uses = self.run_function(model, func, not self.modes.checked(model, func),
                                 {param: Origin(fp.model, verdict.arg)}).get(param, [])
        if not uses:
            return None
        worst = max(uses, key=lambda u: RANK.get(u.kind, -1))
        return judged(worst.kind, "passed", parameter=param, where=worst.where, what=worst.what)

    # -- calls from the verify path --------------------------------------------------------------

    def _follow_call(self, fp: FunctionPass, call: ast.Call) -> None:
        """A helper called from a verify branch is on the verify path too."""
        if any(is_c_read(a, fp.c_attrs, self.vocab) for a in [*call.args, *(k.value for k in call.keywords)]):
            return  # judged with the taint, through _argument
        target = self.classes.resolve(fp, call, needs_c=True)
        if target is not None:
            model, func, bound = target
            if bound:
                self.callers.verify_call(func, fp, call)
            self.run_function(model, func, not self.modes.checked(model, func), {})

    def _report(self, fp: FunctionPass, node: ast.expr, anchor, verdict: Verdict, c_expr: str, exact: bool,
                hint: Hint | None = None, buffer_line: int = 0) -> None:
        if fp.func.cls and self._builds_at_c(fp.model, fp.func.cls):
            return
        key = (fp.model.source.relpath, node.lineno, node.col_offset)
        old = self.reported.get(key)
        if old is not None and RANK[old.kind] >= RANK[verdict.kind]:
            return
        self.reported[key] = Reported(verdict.kind, verdict.what, fp, node, anchor, c_expr, exact, hint, buffer_line,
                                      case=verdict.case, rule=verdict.rule)

    def _builds_at_c(self, model: ModuleModel, cls: str) -> bool:
        """``cls`` builds the step's verify input itself, at C, wherever it is built: every construction of
        a verify-input class in its methods hands it C as the width (``NgramVerifyInput(...,
        draft_token_num=self.draft_token_num)``), and no class of the tree deriving from it defines a
        method of that name again (which may build another width). Then W is C for whatever that class
        lays out: its C is the step's width, as inside ``if w == C:``."""
        key = (model.source.relpath, cls)
        if key in self._producers:
            return self._producers[key]
        self._producers[key] = False
        methods = [f for f in model.functions.values() if f.cls == cls and "<locals>" not in f.qualname]
        # a class that names no width keyword (``draft_token_num=``) in its text builds no verify input
        if not methods or not any(model.holds(min(f.node.lineno for f in methods),
                                              max(f.node.end_lineno or f.node.lineno for f in methods), f"{field}=")
                                  for field in WIDTH_FIELDS):
            return False
        c_attrs = self.attrs.c_attrs_of(model, cls)
        makers, at_c = set(), True
        for f in methods:
            nodes = list(every_node(f.node))
            handed = {id(n.value) for n in nodes if isinstance(n, ast.Assign) and _sets_spec_info(n)}
            for call in nodes:
                if not isinstance(call, ast.Call):
                    continue
                width = next((k.value for k in call.keywords if k.arg in WIDTH_FIELDS), None)
                if width is not None and (id(call) in handed or self._verify_input_class(model, call)):
                    makers.add(f.name)
                    at_c = at_c and is_c_read(width, c_attrs, self.vocab)
        here = model.outline
        self._producers[key] = bool(makers) and at_c and not any(
            other.name in makers and other.cls and other.cls != cls and self.classes.derives(here, other.cls, here, cls)
            for other in model.functions.values()) and not any(
            o.relpath != here.relpath and any(self.classes.derives(o, sub, here, cls) for sub in o.methods.get(m, ()))
            for m in makers for o in (self.method_uses(m) or MethodUses()).definers)
        return self._producers[key]

    def _verify_input_class(self, model: ModuleModel, call: ast.Call) -> bool:
        """``call`` constructs a class of the tree that the worker prepares a verify step with (it has
        ``prepare_for_verify``, itself or through a base), defined in ``model`` or imported into it (a
        class of the tree the worker hands the batch otherwise: :func:`_sets_spec_info`)."""
        if not isinstance(call.func, ast.Name):
            return False
        imp = model.imports.get(call.func.id)
        other = model if imp is None else self.load_module(imp[0]) if imp[1] else None
        name = call.func.id if imp is None else imp[1]
        return other is not None and name is not None and \
            self.classes.method_of(other, name, PREPARE_FOR_VERIFY) is not None

    def forget(self, relpath: str) -> None:
        """Drop what was reported in one file (its analysis failed half-way)."""
        for key in [k for k, r in self.reported.items() if r.fp.model.source.relpath == relpath]:
            del self.reported[key]


def _sets_spec_info(stmt: ast.Assign) -> bool:
    """``batch.spec_info = Cls(...)``: what the call builds is the batch's verify input."""
    return isinstance(stmt.value, ast.Call) and any(
        isinstance(t, ast.Attribute) and t.attr == SPEC_INFO_FIELD for t in stmt.targets)


def _enclosing_function(model: ModuleModel, cls: str | None, node: ast.AST) -> FunctionInfo | None:
    """The method of ``cls`` whose body holds ``node`` (the innermost, nested ones aside)."""
    best = None
    for f in model.functions.values():
        if f.cls == cls and "<locals>" not in f.qualname and f.node.lineno <= node.lineno <= (f.node.end_lineno or 0):
            if best is None or f.node.lineno > best.node.lineno:
                best = f
    return best


def _use_of(model: ModuleModel, fp: FunctionPass, at: ast.expr, vocab: Vocabulary, field_name: str | None = None,
            depth: int = 0) -> tuple[str, int] | None:
    """How the verify path uses a buffer at ``at`` where W tokens per request go into it: slices it to an
    extent read from C or the verify input's width (``buf[: bs * C]``), or, whole, writes into it or hands
    it to a call (a kernel that fills it); also through its field that holds the buffer (``field_name``:
    ``mask.buffer``), a conditional expression (``mask.buffer if fits else None``) and locals bound to it
    (``kv_indices = self.cuda_graph_kv_indices``, then handed to the kernel). None for a use that cannot
    overflow it (``buf[:bs]``, one entry per request; ``buf.shape``; a test ``buf is None``). With the line of
    the use (of the local, for a local bound to it)."""
    node, parent = at, model.parent(at)
    if field_name is not None:
        if _binds_local(parent, node):
            return _local_use(model, fp, parent, vocab, field_name, depth)
        if not (isinstance(parent, ast.Attribute) and parent.attr == field_name):
            return None  # another field (`mask.mode`), a test, a method (`mask.fits(bs)`)
        node, parent = parent, model.parent(parent)
    while isinstance(parent, ast.IfExp) and node is not parent.test:
        node, parent = parent, model.parent(parent)
    sliced, whole = False, True
    while isinstance(parent, ast.Subscript) and parent.value is node:
        if any(is_c_read(n, fp.c_attrs, vocab) or isinstance(n, ast.Name) and n.id in fp.c_names
               for n in every_node(parent.slice)) or mentions_per_step(parent.slice, vocab) \
                or _per_step_local(fp, parent.slice):
            sliced = True
        elif not isinstance(parent.slice, ast.Constant):
            whole = False  # an extent of one entry per request (`[:bs]`), or a stride
            break
        node, parent = parent, model.parent(parent)
    if sliced:
        return said(CAPACITY, "use_slices", value=model.code(node)), node.lineno
    if not whole:
        return None
    if isinstance(parent, (ast.Assign, ast.AugAssign)) and node is not getattr(parent, "value", None):
        return said(CAPACITY, "use_writes"), node.lineno
    if _binds_local(parent, node):
        return _local_use(model, fp, parent, vocab, None, depth)
    if isinstance(parent, ast.Attribute) and parent.attr.endswith("_") and not parent.attr.startswith("_") \
            and isinstance(model.parent(parent), ast.Call):
        return said(CAPACITY, "use_writes_method", name=parent.attr), node.lineno
    if isinstance(parent, ast.keyword):
        if parent.arg == "out":
            return said(CAPACITY, "use_writes_out"), node.lineno
        parent = model.parent(parent)
    if isinstance(parent, ast.Call) and node is not parent.func:
        func = parent.func.value if isinstance(parent.func, ast.Subscript) else parent.func  # `kernel[grid](...)`
        name = dotted(func) or ""
        leaf = name.rsplit(".", 1)[-1]
        if leaf not in ("len", "isinstance", "hasattr", "id", "type", "print", "repr", "str") \
                and not leaf.lstrip("_").startswith(("assert", "check")):
            return said(CAPACITY, "use_hands", name=name or "a call"), node.lineno
    return None


ALIAS_DEPTH = 3  # locals followed from a buffer to its use (`mask = backend.mask`, `buf = mask.buffer if ...`)


def _binds_local(parent: ast.AST | None, node: ast.expr) -> bool:
    return isinstance(parent, ast.Assign) and node is parent.value and len(parent.targets) == 1 \
        and isinstance(parent.targets[0], ast.Name)


def _local_use(model: ModuleModel, fp: FunctionPass, stmt: ast.Assign, vocab: Vocabulary, field_name: str | None,
               depth: int) -> tuple[str, int] | None:
    """A local bound to the buffer (or to what holds it in ``field_name``) by ``stmt``: judged by what the
    step does with the local where that binding reaches."""
    if depth >= ALIAS_DEPTH:
        return None
    name = stmt.targets[0].id
    loads = _per_statement(model, "loads", fp.func.node, lambda: _loads_by_name(fp.func.node)).get(name, ())
    for use in sorted(loads, key=lambda n: (n.lineno, n.col_offset)):
        if (use.lineno, use.col_offset) > (stmt.lineno, stmt.col_offset) \
                and any(d.node is stmt for d in fp.reaching(name, use)):
            how = _use_of(model, fp, use, vocab, field_name, depth + 1)
            if how is None and field_name is None and _stored_verify_input(model, use):
                how = said(CAPACITY, "use_fill", value=model.code(model.parent(model.parent(use)).value)), use.lineno
            if how is not None:
                return how
    return None


def _stored_verify_input(model: ModuleModel, use: ast.Name) -> bool:
    """``use[...] = <the verify input's data>``: a local bound to the buffer, written the verify input's
    data (``custom_mask[: n] = spec_info.custom_mask``)."""
    sub = model.parent(use)
    stmt = model.parent(sub) if isinstance(sub, ast.Subscript) and sub.value is use else None
    return isinstance(stmt, ast.Assign) and sub in stmt.targets and reads_verify_input(stmt.value)


def _per_step_local(fp: FunctionPass, node: ast.expr, depth: int = 0) -> bool:
    """``node`` reads a local bound from the verify input's width (``w = spec_info.draft_token_num``), or
    from such a local (``cols = seq_lens.max() + w``)."""
    for n in every_node(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            for d in fp.reaching(n.id, n):
                if d.kind == "per_step" or depth < 2 and d.value is not None and d.value is not node \
                        and _per_step_local(fp, d.value, depth + 1):
                    return True
    return False


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


def _param_for(func: FunctionInfo, call: ast.Call, arg: ast.expr, keyword: str | None, bound: bool) -> str | None:
    if keyword is not None:
        return keyword if keyword in func.params or keyword in func.kwonly else None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    idx = next((i for i, a in enumerate(call.args) if a is arg), None)
    params = func.params[1:] if bound and func.params[:1] == ["self"] else func.params
    return params[idx] if idx is not None and idx < len(params) else None


@dataclass
class Read:
    """A read of C on the verify path as the analysis judged it (``kind``, ``case``, ``what``), offered to
    the rules' :meth:`~ddcheck.rules.ScanRule.judge`; the facts a rule may ask are its methods."""

    kind: str
    case: str
    what: str  # the rule's words for the case (for a harmless read, the analysis's label: "log message")
    node: ast.expr
    function: str  # the qualified name of the function it is in
    direct: bool  # the verdict is of the read itself, not of a local or a callee it feeds
    _fp: FunctionPass
    _site: Site
    _vocab: Vocabulary

    def resolves_width(self) -> bool:
        """The function is a width resolver: some ``return`` gives the verify input's own width."""
        return _resolves_width(self._fp.func.node, self._vocab)

    def rebound_per_step(self) -> bool:
        """The read is through a local of the function that is bound from the verify input's width where
        it is read (``w = C``, then ``if spec_info ...: w = spec_info.draft_token_num``)."""
        via = self._site.via
        return via is not None and via.origin is None and \
            any(d.kind == "per_step" for d in self._fp.reaching(via.name, self._site.node))

    @property
    def code(self) -> str:
        """The read's source text."""
        return self._fp.model.code(self.node)


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
