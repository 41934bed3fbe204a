"""What a read of C on the verify path does: lay out the batch (error), bound a capacity (warning),
serve as a fallback (info), or nothing harmful (a comparison, a log line, an alias to follow)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum

from .exprs import ARITH_CALLS, call_leaf, dotted, mentions_per_step
from .vocabulary import (ALLOCATORS, CHECK_CALL_PREFIXES, FILL_ALLOCATORS, REPORTING_CALLS, UPPER_BOUND_NAMES, WIDTH_WORDS,
                         Vocabulary)

class Kind(str, Enum):
    """What a read of C does where it is: the analysis's verdict, before a rule turns it into a finding
    (``engine.RULE_OF_KIND``)."""

    layout = "layout"  # lays out the verify batch with C
    capacity = "capacity"  # sizes a buffer or bound with C
    fallback = "fallback"  # C only where the verify input carries no width
    harmless = "harmless"
    alias = "alias"  # `x = C`: judged by what x is used for
    argument = "argument"  # passed to a call: judged by the callee when it can be resolved


LAYOUT, CAPACITY, FALLBACK = Kind.layout, Kind.capacity, Kind.fallback
HARMLESS, ALIAS, ARGUMENT = Kind.harmless, Kind.alias, Kind.argument
RANK = {LAYOUT: 2, CAPACITY: 1, FALLBACK: 0}
RESHAPES = frozenset({"repeat_interleave", "view", "reshape", "expand", "repeat", "split", "narrow", "unflatten", "arange"})
INSPECTIONS = frozenset({"isinstance", "hasattr", "len", "type", "id"})
FALLBACK_WHAT = "used only when the verify input carries no width"
PARAM_FALLBACK_WHAT = "used only when the caller passes no width"
RETURNS_C = "returns C as the verify width"
CHECK_WHAT = "checks a size (an assertion or bound check lays nothing out)"
DERIVED = "derived"  # Verdict.what of an ALIAS whose value is derived from C (``n = bs * C``), not C itself


@dataclass
class Verdict:
    """The judgement of one read of C: the kind of hazard (or none) and the call it feeds."""

    kind: str
    what: str = ""
    call: ast.Call | None = None
    arg: ast.expr | None = None  # the argument expression (positional) or keyword value
    keyword: str | None = None
    target: str | None = None


def _per_step(node: ast.expr, vocab: Vocabulary) -> bool:
    """:func:`mentions_per_step`, kept on the node: each read of C asks it of every conditional above
    it, and a chain of a thousand `C if t else ...` would walk its branches once per read."""
    known = node.__dict__.get("_ddcheck_per_step")
    if known is not None and known[0] is vocab:
        return known[1]
    value = mentions_per_step(node, vocab)
    node._ddcheck_per_step = (vocab, value)
    return value


def classify(node: ast.expr, parents: dict, vocab: Vocabulary) -> Verdict:
    """Judge one read of C by the expressions around it, up to its statement."""
    child = node
    direct = True  # still the whole value, not yet inside arithmetic
    while id(child) in parents:
        parent, fieldname = parents[id(child)]
        if isinstance(parent, ast.Compare):
            return Verdict(HARMLESS, "comparison")
        if isinstance(parent, (ast.JoinedStr, ast.FormattedValue)):
            return Verdict(HARMLESS, "message text")
        if isinstance(parent, ast.IfExp):
            if fieldname == "test":
                return Verdict(HARMLESS, "condition")
            other = parent.orelse if fieldname == "body" else parent.body
            if _per_step(other, vocab) or _per_step(parent.test, vocab):
                return Verdict(FALLBACK, FALLBACK_WHAT)
            direct = False
        elif isinstance(parent, ast.BoolOp):
            others = [v for v in parent.values if v is not child]
            if isinstance(parent.op, ast.Or) and any(_per_step(o, vocab) for o in others):
                return Verdict(FALLBACK, FALLBACK_WHAT)
            if isinstance(parent.op, ast.Or) and parent.values[-1] is child \
                    and any(_width_parameter(o, parent, parents) for o in others):
                return Verdict(FALLBACK, PARAM_FALLBACK_WHAT)
            if isinstance(parent.op, ast.Or) and parent.values[-1] is child:
                direct = False  # `x or C` is still a value
            else:
                return Verdict(HARMLESS, "condition")
        elif isinstance(parent, ast.keyword):
            call = parents[id(parent)][0]
            verdict = _call_arg(call, child, parent.arg, vocab, direct)
            if verdict is not None:
                return _where_it_lives(verdict, parents)
            direct, child = False, call
            continue
        elif isinstance(parent, ast.Call) and fieldname == "args":
            verdict = _call_arg(parent, child, None, vocab, direct)
            if verdict is not None:
                return _where_it_lives(verdict, parents)
            direct = False
        elif isinstance(parent, ast.Call):
            return Verdict(LAYOUT, "lays out the verify batch with C")
        elif isinstance(parent, (ast.BinOp, ast.UnaryOp)):
            direct = False
        elif isinstance(parent, ast.Subscript) and fieldname == "slice" or isinstance(parent, ast.Slice):
            return Verdict(LAYOUT, "slices a per-token buffer to C tokens per request")
        elif isinstance(parent, (ast.Assert, ast.Raise, ast.If, ast.While)):
            return Verdict(HARMLESS, "condition")
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)):
            return _assignment(parent, direct)
        elif isinstance(parent, ast.AugAssign):
            if isinstance(parent.target, ast.Name):
                # `max_len += C`: judged by what the name then feeds (a copy's extent, a size check)
                return Verdict(ALIAS, DERIVED, target=parent.target.id)
            return Verdict(LAYOUT, "offsets a layout value by C")
        elif isinstance(parent, ast.Return):
            return Verdict(LAYOUT, RETURNS_C)
        elif isinstance(parent, ast.stmt):
            break
        child = parent
    return Verdict(LAYOUT, "lays out the verify batch with C")


def _assignment(parent: ast.Assign | ast.AnnAssign, direct: bool) -> Verdict:
    targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
    names = [(dotted(t) or "").rsplit(".", 1)[-1] for t in targets]
    bound = next((n for n in names if n in UPPER_BOUND_NAMES), None)
    if bound is not None:
        # Computed in the verify step, it is this step's bound, not a start-up size: the kernel reads
        # keys (and the page table is sliced) up to it.
        return Verdict(LAYOUT, step_bound_what(bound))
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        # `x = C` is judged by what x feeds; so is `n = bs * C` (a size check's total, or a layout)
        return Verdict(ALIAS, "" if direct else DERIVED, target=targets[0].id)
    return Verdict(LAYOUT, layout_what(names[0] if names else ""))


def _where_it_lives(verdict: Verdict, parents: dict) -> Verdict:
    """An allocation sized with C on the verify path: a tensor made in this step (bound to a local, a
    metadata field, passed on) is this step's layout; one kept on ``self`` past the step is a capacity
    the later steps must fit into."""
    call = verdict.call
    if verdict.kind != CAPACITY or call is None:
        return verdict
    node = call
    while id(node) in parents and not isinstance(node, ast.stmt):
        parent = parents[id(node)][0]
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            kept = next((dotted(t) for t in targets if (dotted(t) or "").startswith("self.")), None)
            if kept is not None:
                return Verdict(CAPACITY, f"sizes the buffer `{kept}`, kept past this step, for C tokens per "
                                         f"request (too small when W > C)")
            break
        if not isinstance(parent, (ast.Call, ast.Attribute, ast.Subscript)) or isinstance(parent, ast.stmt):
            break
        node = parent
    return Verdict(LAYOUT, "sizes a tensor made in this step for C tokens per request")


def step_bound_what(name: str) -> str:
    return (f"sets this step's key bound `{name}` from C: the kernel reads keys, and the page table is sliced, "
            f"only up to it, so the last W - C keys of the longest request are cut off when W > C")


def layout_what(name: str) -> str:
    if "mask" in name:
        return f"computes the tree-mask offsets `{name}` with C"
    if "indptr" in name or "cu_seqlens" in name:
        return f"lays out the query tokens (`{name}`) with C per request"
    if any(w in name for w in ("page", "block_table", "cols")):
        return f"sets the page/block-table width `{name}` with C (columns past it are never read)"
    if name.startswith("max_"):
        return f"sets `{name}` to C (the kernel's query extent)"
    if "seq_len" in name or "seqlens" in name:
        return f"computes the per-request lengths `{name}` with C"
    if name:
        return f"computes `{name}` from C"
    return "lays out the verify batch with C"




def is_check_call(name: str) -> bool:
    """``assert_buffer_fits(...)``, ``self._check_bounds(...)``, ``torch._assert(...)``: a call that only
    checks its arguments."""
    leaf = name.rsplit(".", 1)[-1].lstrip("_").lower()
    return leaf.startswith(CHECK_CALL_PREFIXES)


def _width_parameter(node: ast.expr, at: ast.AST, parents: dict) -> bool:
    """``num_draft_tokens`` in ``num_draft_tokens or C`` is a parameter of the enclosing function named
    as a width, with no default or a None one: the caller hands the width in, C is its fallback."""
    if not isinstance(node, ast.Name) or not any(w in node.id.lower() for w in WIDTH_WORDS):
        return False
    fn = at
    while id(fn) in parents and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        fn = parents[id(fn)][0]
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults))
    defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    names = {p.arg for p in [*positional, *a.kwonlyargs]}
    if node.id not in names:
        return False
    default = defaults.get(node.id)
    return default is None or (isinstance(default, ast.Constant) and default.value is None)


def _call_arg(call: ast.Call, arg: ast.expr, keyword: str | None, vocab: Vocabulary, direct: bool) -> Verdict | None:
    name = dotted(call.func) or ""
    leaf = call_leaf(call)
    if leaf in REPORTING_CALLS or name.startswith(("logger.", "logging.", "log.")):
        return Verdict(HARMLESS, "log message")
    if leaf == "getattr" and len(call.args) == 3 and call.args[2] is arg:
        return Verdict(FALLBACK, "default " + FALLBACK_WHAT)
    if leaf in INSPECTIONS:
        return Verdict(HARMLESS, "inspection")
    if is_check_call(name):
        return Verdict(HARMLESS, CHECK_WHAT)
    if leaf in ALLOCATORS:
        is_fill = keyword == "fill_value" or (keyword is None and leaf in FILL_ALLOCATORS
                                              and len(call.args) > 1 and call.args[1] is arg)
        if is_fill:
            return Verdict(LAYOUT, "fills a per-request length buffer with C")
        return Verdict(CAPACITY, f"sizes a buffer (`{name}`) for C tokens per request (too small when W > C)", call=call)
    if leaf == "arange":
        return Verdict(LAYOUT, "builds the query offsets (qo_indptr / cu_seqlens_q) with C tokens per request")
    if leaf in RESHAPES:
        return Verdict(LAYOUT, f"reshapes per-request verify data with C (`{leaf}`)")
    if leaf in ARITH_CALLS:
        return None  # arithmetic wrapper: keep walking up
    if keyword is not None:
        if keyword in UPPER_BOUND_NAMES:
            return Verdict(LAYOUT, step_bound_what(keyword))
        if keyword == "step":
            return Verdict(LAYOUT, "steps the query offsets by C")
    if direct:
        return Verdict(ARGUMENT, call=call, arg=arg, keyword=keyword)
    if keyword is not None:
        return Verdict(LAYOUT, layout_what(keyword))
    return None
