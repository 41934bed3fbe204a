"""From reports to findings: each report's fix planned (the per-step width bound, or threaded into a
helper from its verify callers), its hint case and facts, its words said by its rule. Planning asks
the engine's public interface only: its reports and the facts it declares."""

from __future__ import annotations

import ast
from dataclasses import replace
from functools import lru_cache

from ddcheck.base.findings import Edit, Finding, FixPlan, FixSafety
from ddcheck.rules import code_of, rule_of, rule_of_kind
from ddcheck.analysis.engine import Engine
from ddcheck.analysis.exprs import buffer_key
from ddcheck.analysis.hazards import CAPACITY, FALLBACK
from ddcheck.analysis.module import FunctionInfo, ModuleModel
from ddcheck.analysis.reports import Hint, Reported, Thread, _per_statement, _statement_of, _top_level_span
from ddcheck.analysis import edits as E
from ddcheck.analysis.vocabulary import FIX_LOCAL as LOCAL, FIX_PARAMETER as THREADED, WIDTH_WORDS


class Planning:
    """Plans the fixes of an :class:`~ddcheck.analysis.engine.Engine`'s reports and makes its findings."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._threads: dict[int, object] = {}  # helper node id -> _thread_edits, per findings()
        self._prepared: set[tuple] = set()  # reported keys prepare_threads() has seen
        self._locals: dict[int, dict[tuple[int, str], str]] = {}  # function -> (anchor, W) -> name

    def findings(self) -> list[Finding]:
        self._threads.clear()  # threads are planned over everything analysed by now
        self._engine.report_handed_out()
        self._engine.judge_by_inputs()
        return [self._finding(r) for r in self._engine.reported.values()]

    def prepare_threads(self) -> None:
        """Load now what threading W into the helpers reported so far will read of other modules (their
        callers and definers, parsed or outlined), so a worker does it while candidates are still being
        handed out, not all at the end. Decides nothing: findings() plans every thread afresh."""
        for key, r in list(self._engine.reported.items()):
            if key in self._prepared:
                continue
            self._prepared.add(key)
            # the case findings() threads W for (see _finding): no verify input in scope
            if r.hint is None and r.kind != FALLBACK and _verify_input_at(r)[1] is None:
                self._threaded(r)  # memoized per helper until findings() starts afresh

    def _refill(self, r: Reported, spec_info: str | None) -> tuple[str, str] | None:
        """(W expression, "arange" | "fill") for a read of a buffer a refill with W rebuilds (offsets
        stepping by C from 0; every entry C), when the verify input is in scope at the verify block
        (and, for offsets, the module has ``torch`` to rebuild them with)."""
        fp, model = r.fp, r.fp.model
        how = self._engine.attrs.facts(model, fp.func.cls).strided.get(buffer_key(r.node))
        if not how or spec_info is None or r.anchor is None or how[0] == "arange" and "torch" not in model.imports:
            return None
        return per_step_value(spec_info, how[1], self._engine.width_api), how[0]

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
        found = self._engine.callers.callers_of(model, func)
        if found is None:
            return None
        calls, exempt = found
        # A helper that tests the forward mode itself uses W only on its verify branch, where any
        # caller's verify input is this step's: every caller hands it in. Otherwise only the verify
        # branches that call it do; other callers pass nothing and keep C.
        callers = [(cfp, call) for cfp, call, verify in calls if verify or self._engine.modes.checked(model, func)]
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
                value = per_step_or_none(spec_info, self._engine.width_api)
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

    def _finding(self, r: Reported) -> Finding:
        """The finding of a report: its facts and fix gathered here, its words said by its rule."""
        rule = rule_of(r.rule) if r.rule else rule_of_kind(r.kind)
        model, func = r.fp.model, r.fp.func
        stmt_text, stmt_line = _statement(model, r.node)
        l1, c1, l2, c2 = model.span(r.node)
        symbol = model.code(r.node)
        case, facts, fix, replacement = code_of(rule.id).hint(Report(self, r, symbol))
        hint = case, facts
        message = rule.message("sized" if r.hint is not None else "buffer" if r.buffer_line else "read",
                               symbol=symbol, what=r.what, buffer_line=r.buffer_line)
        return Finding(rule=rule.id, severity=rule.severity, path=model.source.display, relpath=model.source.relpath,
                       line=l1, column=c1, end_line=l2, end_column=c2, function=func.qualname, symbol=symbol,
                       message=message, replacement=replacement, hint=rule.hint(hint[0], **hint[1]),
                       fix_safety=fix.safety if fix else None, fix=fix, statement=stmt_text, stmt_line=stmt_line,
                       resolver=r.case in ("resolver", "resolver_reached"))

    def to_width(self, r: Reported, symbol: str) -> tuple[Hint, FixPlan | None, str | None]:
        """A report's fix to the per-step width (plan and replacement) and the hint case that says it, with
        its facts: the one planned where the report was made, else W in C's place (bound at the top of
        the verify block, threaded in from the helper's verify callers, a buffer refilled)."""
        model, func = r.fp.model, r.fp.func
        at, spec_info = _verify_input_at(r)
        unbound = _unbound(r, at)
        if r.hint is not None:
            return r.hint, r.plan, r.replacement
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
                value = per_step_value(spec_info, r.c_expr, self._engine.width_api)
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
        value = per_step_value(spec_info, r.c_expr, self._engine.width_api)
        replacement = f"({value})"
        return ("per_step", {"replacement": replacement}), self._plan(r, value, _safety(r)), replacement


class Report:
    """A report on its way to a finding, offered to its rule's :meth:`~ddcheck.rules.ScanRule.hint`: what
    the analysis knows of it, and its fix to the per-step width (:meth:`to_width`)."""

    def __init__(self, planning: Planning, r: Reported, symbol: str) -> None:
        self._planning, self._r, self.symbol = planning, r, symbol
        self.kind, self.case, self.exact = r.kind, r.case, r.exact

    def verify_input(self) -> str | None:
        """How the verify input is spelled where the fix binds W (None: not in scope)."""
        return _verify_input_at(self._r)[1]

    def spelled_in_scope(self) -> bool:
        """Every name C is spelled with (``self`` aside) is bound where the fix binds W."""
        return not _unbound(self._r, _verify_input_at(self._r)[0])

    def to_width(self) -> tuple[str, dict, FixPlan | None, str | None]:
        (case, facts), fix, replacement = self._planning.to_width(self._r, self.symbol)
        return case, facts, fix, replacement


def _unbound(r: Reported, at: ast.stmt | None) -> list[str]:
    """The names C is spelled with (``self`` aside) that are not bound at ``at``."""
    return [n for n in _names(r.c_expr) if n != "self" and not r.fp.bound_at(n, at)]


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


def _statement(model: ModuleModel, node: ast.AST) -> tuple[str, int]:
    """Normalized text and first line of the statement around ``node`` (for baselines and suppressions)."""
    stmt = node
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = model.parent(stmt)
    if stmt is None:
        return "", node.lineno
    header = stmt.test if isinstance(stmt, (ast.If, ast.While)) else stmt.iter if isinstance(stmt, ast.For) else stmt
    return _per_statement(model, "text", stmt, lambda: ast.unparse(header)), stmt.lineno
