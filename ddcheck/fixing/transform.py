"""The libcst step of ``ddcheck fix``: apply one file's fixes (the edits the analysis planned) and
nothing else. The scan's model says where each verify block starts (the fix's anchor) and how the
verify input is spelled there; this binds ``num_tokens_per_req = <W, falling back to C>`` once at that
anchor, replaces every fixable read in the block with the local, and makes the plan's other edits
(a helper's new parameter, its callers' keyword, a buffer refilled before it is read). Only the
top-level statements holding a fix go through libcst; every other byte is kept as it was.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from ..analysis.module import LINE_RE, SourceError, decode, encoding_of, statement_lines
from ..analysis.vocabulary import FIX_LOCAL as LOCAL
from ..findings import Edit, Finding


class FixError(Exception):
    """A fix that could not be applied to one file (reported; the file is left as it was)."""



# -- rewriting one file ---------------------------------------------------------------------------


def rewrite(source: bytes, findings: list[Finding], extra: list[Edit] = ()) -> bytes:
    """Apply the fixes of ``findings`` (all of one file) and the ``extra`` edits other files' fixes
    make here to ``source``; raises FixError.

    Only the top-level statements (classes, functions) that hold a fix go through libcst; the rest
    of the file is kept as its bytes are. That keeps a fix to one function of a 20 MB file (or next
    to a megabyte literal) as fast as in a small one, and every other byte untouched by construction.
    """
    try:
        encoding = encoding_of(source)
        text = decode(source)
    except SourceError as exc:
        raise FixError(str(exc)) from exc
    lines = LINE_RE.findall(text)
    findings = [f.model_copy(update={"fix": f.fix.model_copy(update={
        "edits": [e for e in f.fix.edits if not e.path or e.path == f.relpath]})}) for f in findings]
    spans = _top_level_spans(text, findings, bool(extra))
    groups: dict[int, list[Finding]] = defaultdict(list)
    extras: dict[int, list[Edit]] = defaultdict(list)

    def span_of(at: list[int]) -> int | None:
        return next((i for i, (a, b) in enumerate(spans) if a <= min(at) and max(at) <= b), None)

    for f in findings:
        at = [f.line, f.end_line] + ([f.fix.anchor_line] if f.fix.anchor_line else []) + \
            [n for e in f.fix.edits for n in (e.line, e.end_line or e.line)]
        index = span_of(at)
        if index is None:
            raise FixError(f"{f.line}:{f.column + 1}: `{f.symbol}` is not inside one statement of the file")
        groups[index].append(f)
    for e in extra:
        index = span_of([e.line, e.end_line or e.line])
        if index is None:
            raise FixError(f"{e.line}:{e.column + 1}: the `{e.name}` edit is not inside one statement of the file")
        extras[index].append(e)
    out_lines = list(lines)
    for index in sorted(set(groups) | set(extras), reverse=True):  # from the end: earlier lines stay valid
        first, last = spans[index]
        shift = first - 1
        segment = "".join(lines[first - 1:last])
        moved = [f.model_copy(update={"line": f.line - shift, "end_line": f.end_line - shift,
                                      "fix": f.fix.model_copy(update={
                                          "anchor_line": f.fix.anchor_line - shift if f.fix.anchor_line else 0,
                                          "edits": [e.model_copy(update={
                                              "line": e.line - shift,
                                              "end_line": e.end_line - shift if e.end_line else 0})
                                              for e in f.fix.edits]})})
                 for f in groups[index]]
        here = [e.model_copy(update={"line": e.line - shift, "end_line": e.end_line - shift if e.end_line else 0})
                for e in extras[index]]
        new = _rewrite_text(segment, moved, text, here)
        if segment.endswith(("\r", "\n")) and not new.endswith(("\r", "\n")):
            new += segment[-2:] if segment.endswith("\r\n") else segment[-1]  # libcst drops a bare CR's
        out_lines[first - 1:last] = [new]
    out_text = "".join(out_lines)
    try:
        if encoding == "utf-8-sig":
            return b"\xef\xbb\xbf" + out_text.encode("utf-8")
        return out_text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise FixError(f"the fixed text does not encode as {encoding}: {exc}") from exc


def _top_level_spans(text: str, findings: list[Finding], parse: bool = False) -> list[list[int]]:
    """[first, last] lines of the top-level statements, merged where they share a line. The analysis
    gives each fix its statement's span; only a finding without one (or ``parse``: edits other files'
    fixes make here) costs a parse of the file."""
    given = [[f.fix.block_first, f.fix.block_last] for f in findings if f.fix.block_first]
    if len(given) == len(findings) and not parse:
        raw = sorted(given)
    else:  # a plan made without spans (not by this version's analysis): find them
        try:
            raw = [list(statement_lines(s)) for s in ast.parse(text).body]
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise FixError(f"does not parse: {exc}") from exc
    spans: list[list[int]] = []
    for first, last in raw:
        if spans and first <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    return spans


def _rewrite_text(text: str, findings: list[Finding], whole: str, extra: list[Edit] = ()) -> str:
    """The fixes applied to ``text`` (top-level statements of the file, positions relative to it), and
    the ``extra`` edits of other files' fixes; ``whole`` is the file's full text, for names chosen at
    module level."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    by_span: dict[tuple[int, int, int, int], cst.CSTNode] = {}
    block_stmts: list[tuple[cst.CSTNode, tuple, tuple]] = []  # statements directly in a body
    for node, rng in positions.items():
        if isinstance(node, (cst.Attribute, cst.Name)):
            by_span.setdefault((rng.start.line, rng.start.column, rng.end.line, rng.end.column), node)
        elif isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) \
                and isinstance(parents.get(node), (cst.IndentedBlock, cst.Module)):
            block_stmts.append((node, (rng.start.line, rng.start.column), (rng.end.line, rng.end.column)))

    replace: dict[cst.CSTNode, cst.BaseExpression] = {}
    bind: dict[cst.CSTNode, list[tuple[str, str]]] = defaultdict(list)  # anchor statement -> bindings
    taken: dict[cst.CSTNode, set[str]] = defaultdict(set)
    # reading statement -> {buffer: (W local, "arange" | "fill")}
    refills: dict[cst.CSTNode, dict[str, tuple[str, str]]] = defaultdict(dict)
    groups: dict[tuple[int, int, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.fix.anchor_line, f.fix.anchor_column, f.fix.expression)].append(f)
    for (line, col, expression), group in groups.items():
        if line == 0:  # verify-guarded conditional expression: replaced inline
            for f in group:
                if f.fix.replace_site:
                    replace[_site(by_span, f)] = cst.parse_expression(f"({expression})")
            continue
        anchor = _block_statement(block_stmts, (line, col))
        if anchor is None:
            raise FixError(f"no statement at {line}:{col + 1} to bind the per-step width at")
        func = _enclosing_function(parents, anchor)
        local = _free_name(module.code_for_node(func) if func is not None else whole, taken[func])
        taken[func].add(local)
        bind[anchor].append((local, expression))
        for f in group:
            if f.fix.replace_site:
                replace[_site(by_span, f)] = cst.Name(local)
            for e in f.fix.edits:
                if e.kind == "refill":
                    reader = _block_statement(block_stmts, (e.line, e.column))
                    if reader is None:
                        raise FixError(f"{e.line}:{e.column + 1}: no statement to refill `{e.value}` before")
                    refills[reader].setdefault(e.value, (local, e.name))
    params, keywords = _edits(findings, positions, extra)
    rewriter = _Rewriter(replace, bind, params, keywords, refills)
    new = wrapper.module.visit(rewriter)
    if rewriter.inserted != set(bind):
        raise FixError("the per-step width could not be bound at the top of every verify block")
    if rewriter.edited != set(params) | set(keywords):
        raise FixError("a function or call the fix threads the width through is not where the scan saw it")
    return new.code


def _edits(findings: list[Finding], positions, extra: list[Edit] = ()) -> tuple[dict, dict]:
    """The fixes' edits, by the libcst node they change: {FunctionDef: {names}}, {Call: {name: value}}."""
    wanted = {(e.kind, e.line, e.column, e.end_line, e.end_column, e.name, e.value)
              for e in [*(e for f in findings for e in f.fix.edits), *extra] if e.kind != "refill"}
    if not wanted:
        return {}, {}
    defs, calls = {}, {}
    for node, rng in positions.items():
        if isinstance(node, cst.FunctionDef):
            at = positions[node.name].start
            defs[(at.line, at.column)] = node
        elif isinstance(node, cst.Call):
            calls[(rng.start.line, rng.start.column, rng.end.line, rng.end.column)] = node
    params: dict[cst.CSTNode, set[str]] = defaultdict(set)
    keywords: dict[cst.CSTNode, dict[str, str]] = defaultdict(dict)
    for kind, line, col, end_line, end_col, name, value in wanted:
        if kind == "add_parameter":
            node = defs.get((line, col))
            if node is None:
                raise FixError(f"{line}:{col + 1}: no function starts here to take `{name}`")
            params[node].add(name)
        else:
            node = calls.get((line, col, end_line, end_col))
            if node is None:
                raise FixError(f"{line}:{col + 1}: no call here to pass `{name}` to")
            if keywords[node].setdefault(name, value) != value:
                raise FixError(f"{line}:{col + 1}: two different widths for `{name}` in one call")
    return dict(params), dict(keywords)


def _site(by_span, f: Finding) -> cst.CSTNode:
    node = by_span.get((f.line, f.column, f.end_line, f.end_column))
    if node is None:
        raise FixError(f"{f.line}:{f.column + 1}: `{f.symbol}` is not where the scan saw it")
    return node


def _block_statement(block_stmts, pos: tuple[int, int]) -> cst.CSTNode | None:
    """The innermost statement of a block (body) that starts at or encloses ``pos``: the anchor
    itself normally; the whole ``if`` when the verify block is an ``elif`` or a one-line body."""
    around = [(start, end, node) for node, start, end in block_stmts if start <= pos <= end]
    return max(around, key=lambda t: t[0])[2] if around else None


def _enclosing_function(parents, node: cst.CSTNode) -> cst.FunctionDef | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, cst.FunctionDef):
            return node
    return None


def _free_name(code: str, taken: set[str]) -> str:
    """``num_tokens_per_req`` unless the function already uses that name for something else."""
    for name in (LOCAL, f"verify_{LOCAL}", *(f"{LOCAL}_{i}" for i in range(2, 100))):
        if name not in taken and not re.search(rf"(?<![\w.]){re.escape(name)}\b", code):
            return name
    raise FixError("no free name for the per-step width")


class _Rewriter(cst.CSTTransformer):
    def __init__(self, replace, bind, params=None, keywords=None, refills=None):
        self.replace = replace
        self.bind = bind
        self.refills = refills or {}
        self.params, self.keywords = params or {}, keywords or {}
        self.inserted: set[cst.CSTNode] = set()
        self.edited: set[cst.CSTNode] = set()

    def leave_FunctionDef(self, original, updated):
        names = self.params.get(original)
        if not names:
            return updated
        self.edited.add(original)
        p = updated.params
        tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        for n in sorted(names):
            new = cst.Param(name=cst.Name(n), default=cst.Name("None"), equal=tight)
            if p.star_kwarg is not None:  # before **kwargs: one more item followed by a comma
                new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                key = "kwonly_params" if p.star_arg is not cst.MaybeSentinel.DEFAULT else "params"
                p = p.with_changes(**{key: [*getattr(p, key), new]})
            elif p.kwonly_params or isinstance(p.star_arg, cst.Param):  # after *args: keyword-only
                if p.kwonly_params:
                    p = p.with_changes(kwonly_params=_append(p.kwonly_params, new, "whitespace_after_param"))
                else:
                    star = p.star_arg
                    p = p.with_changes(star_arg=star.with_changes(
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                        whitespace_after_param=cst.SimpleWhitespace("")),
                        kwonly_params=[new.with_changes(whitespace_after_param=star.whitespace_after_param)])
            else:
                p = p.with_changes(params=_append(p.params, new, "whitespace_after_param"))
        return updated.with_changes(params=p)

    def leave_Call(self, original, updated):
        names = self.keywords.get(original)
        if not names:
            return updated
        self.edited.add(original)
        tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        args = list(updated.args)
        for n, v in sorted(names.items()):
            args = _append(args, cst.Arg(keyword=cst.Name(n), value=cst.parse_expression(v), equal=tight),
                           "whitespace_after_arg")
        return updated.with_changes(args=args)

    def leave_Attribute(self, original, updated):
        return self.replace.get(original, updated)

    def leave_Name(self, original, updated):
        return self.replace.get(original, updated)

    def _with_bindings(self, original, updated):
        if not any(s in self.bind or s in self.refills for s in original.body):
            return updated
        body = []
        for orig, upd in zip(original.body, updated.body):
            for local, expr in self.bind.get(orig, ()):
                body.append(cst.parse_statement(
                    f"# Per-step verify width; C only if the verify input has none (ddcheck fix).\n"
                    f"{local} = {expr}\n"))
                self.inserted.add(orig)
            for buffer, (local, how) in self.refills.get(orig, {}).items():
                if how == "fill":
                    body.append(cst.parse_statement(
                        f"# Filled with C at start-up: refilled with this step's width (ddcheck fix).\n"
                        f"{buffer}.fill_({local})\n"))
                    continue
                body.append(cst.parse_statement(
                    f"# Laid out stepping by C at start-up: refilled stepping by this step's width (ddcheck fix).\n"
                    f"{buffer}.copy_(torch.arange({buffer}.numel(), dtype={buffer}.dtype, device={buffer}.device)"
                    f" * {local})\n"))
            body.append(upd)
        return updated.with_changes(body=body)

    leave_IndentedBlock = _with_bindings
    leave_Module = _with_bindings


def _append(items, new, closing_attr: str) -> list:
    """``items`` (parameters or arguments) with ``new`` last, laid out as the list is: the separator
    of the items before it, and the whitespace that closed the list (or its trailing comma) kept at
    the end. ``closing_attr``: where an item without a trailing comma keeps the whitespace before ``)``."""
    items = list(items)
    if not items:
        return [new]
    last = items[-1]
    before = items[-2].comma if len(items) > 1 else cst.MaybeSentinel.DEFAULT
    sep = before.whitespace_after if isinstance(before, cst.Comma) else cst.SimpleWhitespace(" ")
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new item gets one, and the closing space
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=sep))
        return items + [new.with_changes(comma=cst.Comma(whitespace_after=last.comma.whitespace_after))]
    items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep), **{closing_attr: cst.SimpleWhitespace("")})
    return items + [new.with_changes(**{closing_attr: getattr(last, closing_attr)})]
