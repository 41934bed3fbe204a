"""What a read of C on the verify path does: lay out the batch (error), bound a capacity (warning),
serve as a fallback (info), or nothing harmful (a comparison, a log line, an alias to follow).

A verdict names its case; the words for it (``what``, quoted by the finding's message) are the rule's
of that kind (``rules/<ID>/rule.toml`` ``[what]``, :func:`said`). The labels of harmless reads are
never reported and stay here."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum

from ddcheck.rules import rule_of_kind
from ddcheck.tree.names import SPEC_INFO_FIELD
from ddcheck.analysis.exprs import ARITH_CALLS, call_leaf, dotted, mentions_per_step
from ddcheck.analysis.vocabulary import (ALLOCATORS, CHECK_CALL_PREFIXES, FILL_ALLOCATORS, REPORTING_CALLS, UPPER_BOUND_NAMES, WIDTH_WORDS,
                         Vocabulary)

class Kind(str, Enum):
    """What a read of C does where it is: the analysis's verdict, before a rule turns it into a finding
    (the rule whose code reports the kind, :func:`ddcheck.rules.rule_of_kind`)."""

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
CHECK_WHAT = "checks a size (an assertion or bound check lays nothing out)"
DERIVED = "derived"  # Verdict.what of an ALIAS whose value is derived from C (``n = bs * C``), not C itself


@dataclass
class Verdict:
    """The judgement of one read of C: the kind of hazard (or none) and the call it feeds."""

    kind: str
    what: str = ""  # the rule's words for the case (a label for a harmless read)
    call: ast.Call | None = None
    arg: ast.expr | None = None  # the argument expression (positional) or keyword value
    keyword: str | None = None
    target: str | None = None
    case: str = ""  # which of the rule's ``[what]`` cases ``what`` says
    rule: str = ""  # the rule that claimed the read (ScanRule.judge); "" for the rule of its kind


def said(kind: Kind, case: str, **facts: object) -> str:
    """The words of the rule of ``kind`` for what a read of C does in ``case``."""
    return rule_of_kind(kind).describe(case, **facts)


def judged(kind: Kind, case: str, **facts: object) -> Verdict:
    """A verdict of ``kind`` in ``case``, said in its rule's words."""
    return Verdict(kind, said(kind, case, **facts), case=case)


def _per_step(node: ast.expr, vocab: Vocabulary) -> bool:
    """:func:`mentions_per_step`, kept on the node: each read of C asks it of every conditional above
    it, and a chain of a thousand `C if t else ...` would walk its branches once per read."""
    known = node.__dict__.get("_ddcheck_per_step")
    if known is not None and known[0] is vocab:
        return known[1]
    value = mentions_per_step(node, vocab)
    node.__dict__["_ddcheck_per_step"] = (vocab, value)
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
                return judged(FALLBACK, "fallback")
            direct = False
        elif isinstance(parent, ast.BoolOp):
            others = [v for v in parent.values if v is not child]
            if isinstance(parent.op, ast.Or) and any(_per_step(o, vocab) for o in others):
                return judged(FALLBACK, "fallback")
            if isinstance(parent.op, ast.Or) and parent.values[-1] is child \
                    and any(_width_parameter(o, parent, parents) for o in others):
                return judged(FALLBACK, "param_fallback")
            if isinstance(parent.op, ast.Or) and parent.values[-1] is child and parent is parent_return(parent, parents) \
                    and any(_asks_the_input(o) for o in others):
                # `return resolver(spec_info) or C`: a resolver's fallback, judged by the inputs that reach it
                return judged(FALLBACK, "resolver")
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
            return judged(LAYOUT, "lays_out")
        elif isinstance(parent, (ast.BinOp, ast.UnaryOp)):
            direct = False
        elif isinstance(parent, ast.Subscript) and fieldname == "slice" or isinstance(parent, ast.Slice):
            return judged(LAYOUT, "slices")
        elif isinstance(parent, (ast.Assert, ast.Raise, ast.If, ast.While)):
            return Verdict(HARMLESS, "condition")
        elif isinstance(parent, (ast.Assign, ast.AnnAssign)):
            return _assignment(parent, direct)
        elif isinstance(parent, ast.AugAssign):
            if isinstance(parent.target, ast.Name):
                # `max_len += C`: judged by what the name then feeds (a copy's extent, a size check)
                return Verdict(ALIAS, DERIVED, target=parent.target.id)
            return judged(LAYOUT, "offsets")
        elif isinstance(parent, ast.Return):
            return judged(LAYOUT, "returns_c")
        elif isinstance(parent, ast.stmt):
            break
        child = parent
    return judged(LAYOUT, "lays_out")


def _assignment(parent: ast.Assign | ast.AnnAssign, direct: bool) -> Verdict:
    targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
    names = [(dotted(t) or "").rsplit(".", 1)[-1] for t in targets]
    bound = next((n for n in names if n in UPPER_BOUND_NAMES), None)
    if bound is not None:
        # Computed in the verify step, it is this step's bound, not a start-up size: the kernel reads
        # keys (and the page table is sliced) up to it.
        return judged(LAYOUT, "step_bound", name=bound)
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        # `x = C` is judged by what x feeds; so is `n = bs * C` (a size check's total, or a layout)
        return Verdict(ALIAS, "" if direct else DERIVED, target=targets[0].id)
    return layout_of(names[0] if names else "")


def parent_return(node: ast.expr, parents: dict) -> ast.expr | None:
    """``node`` itself when it is the whole value of a ``return``, else None."""
    up = parents.get(id(node))
    return node if up is not None and isinstance(up[0], ast.Return) else None


def _asks_the_input(node: ast.expr) -> bool:
    """A call handed the verify input (``self._tree_width(spec_info)``): it resolves the width from it."""
    return isinstance(node, ast.Call) and any(
        isinstance(a, ast.Name) and a.id == SPEC_INFO_FIELD or isinstance(a, ast.Attribute) and a.attr == SPEC_INFO_FIELD
        for a in [*node.args, *(k.value for k in node.keywords)])


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
                return judged(CAPACITY, "buffer_kept", name=kept)
            break
        if not isinstance(parent, (ast.Call, ast.Attribute, ast.Subscript)) or isinstance(parent, ast.stmt):
            break
        node = parent
    return judged(LAYOUT, "tensor_in_step")


def layout_of(name: str) -> Verdict:
    """A layout value bound to (or passed as) ``name``: said by what the name says it is."""
    if "mask" in name:
        return judged(LAYOUT, "mask_offsets", name=name)
    if "indptr" in name or "cu_seqlens" in name:
        return judged(LAYOUT, "query_tokens", name=name)
    if any(w in name for w in ("page", "block_table", "cols")):
        return judged(LAYOUT, "table_width", name=name)
    if name.startswith("max_"):
        return judged(LAYOUT, "query_extent", name=name)
    if "seq_len" in name or "seqlens" in name:
        return judged(LAYOUT, "lengths", name=name)
    if name:
        return judged(LAYOUT, "computes", name=name)
    return judged(LAYOUT, "lays_out")




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
        return judged(FALLBACK, "default_fallback")
    if leaf in INSPECTIONS:
        return Verdict(HARMLESS, "inspection")
    if is_check_call(name):
        return Verdict(HARMLESS, CHECK_WHAT)
    if leaf in ALLOCATORS:
        is_fill = keyword == "fill_value" or (keyword is None and leaf in FILL_ALLOCATORS
                                              and len(call.args) > 1 and call.args[1] is arg)
        if is_fill:
            return judged(LAYOUT, "fills_lengths")
        return Verdict(CAPACITY, said(CAPACITY, "buffer", name=name), call=call, case="buffer")
    if leaf == "arange":
        return judged(LAYOUT, "query_offsets")
    if leaf in RESHAPES:
        return judged(LAYOUT, "reshapes", name=leaf)
    if leaf in ARITH_CALLS:
        return None  # arithmetic wrapper: keep walking up
    if keyword is not None:
        if keyword in UPPER_BOUND_NAMES:
            return judged(LAYOUT, "step_bound", name=keyword)
        if keyword == "step":
            return judged(LAYOUT, "steps_offsets")
    if direct:
        return Verdict(ARGUMENT, call=call, arg=arg, keyword=keyword)
    if keyword is not None:
        return layout_of(keyword)
    return None
