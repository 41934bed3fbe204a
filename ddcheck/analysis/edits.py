"""The text edits a fix makes, computed from the scan's own ``ast`` where the hazard is understood.

Each edit is a span of the file's text (1-based lines, 0-based character columns, as findings give
them) and the text that takes its place; an empty span inserts. The fixer only applies them and
checks the result, so nothing has to be found again in another parser's tree. Layout follows the
code around the edit: a new parameter or keyword takes the separator its list already uses (and its
trailing comma), a bound line takes the indentation and line ending of the statement it precedes.
"""

from __future__ import annotations

import ast
import re

from ddcheck.base.findings import Edit
from ddcheck.analysis.module import ModuleModel

BIND_COMMENT = "# Per-step verify width; C only if the verify input has none (ddcheck fix)."
FILL_COMMENT = "# Filled with C at start-up: refilled with this step's width (ddcheck fix)."
ARANGE_COMMENT = "# Laid out stepping by C at start-up: refilled stepping by this step's width (ddcheck fix)."


class EditError(Exception):
    """A construct the edits do not handle (the finding then has no fix, and says so)."""


def replace(model: ModuleModel, node: ast.AST, text: str) -> Edit:
    l1, c1, l2, c2 = model.span(node)
    return Edit(kind="replace", line=l1, column=c1, end_line=l2, end_column=c2, text=text)


def bind(model: ModuleModel, anchor: ast.stmt, local: str, value: str) -> Edit:
    """``local = value`` (with its comment) on new lines right before the statement that starts the
    verify block."""
    return _before(model, anchor, "bind", [BIND_COMMENT, f"{local} = {value}"])


def refill(model: ModuleModel, reader: ast.stmt, buffer: str, local: str, how: str) -> Edit:
    """Refill ``buffer`` from the per-step width ``local`` right before the statement that reads it."""
    if how == "fill":
        lines = [FILL_COMMENT, f"{buffer}.fill_({local})"]
    else:
        lines = [ARANGE_COMMENT, f"{buffer}.copy_(torch.arange({buffer}.numel(), dtype={buffer}.dtype, "
                                 f"device={buffer}.device) * {local})"]
    return _before(model, reader, "refill", lines)


def _before(model: ModuleModel, stmt: ast.stmt, kind: str, lines: list[str]) -> Edit:
    line, own = _statement_line(model, stmt)
    text = model.lines[own - 1]  # indentation and line ending of the statement itself
    indent = text[: len(text) - len(text.lstrip(" \t\f"))]
    newline = text[len(text.rstrip("\r\n")):] or "\n"
    return Edit(kind=kind, line=line, column=0, end_line=line, end_column=0,
                text="".join(f"{indent}{s}{newline}" for s in lines))


def _statement_line(model: ModuleModel, stmt: ast.stmt) -> tuple[int, int]:
    """The line to insert before so that the new lines run right before ``stmt``: its own line when
    it starts that line in an indented body; else (an ``elif``, a one-line body ``if x: y``, after a
    ``;``) the enclosing statement's, climbing as far as needed; a decorated definition's first
    decorator; and that statement's first line."""
    for _ in range(64):
        line = model.lines[stmt.lineno - 1]
        col = model.column(stmt.lineno, stmt.col_offset)
        parent = model.parent(stmt)
        starts_line = not line[:col].strip()
        is_elif = isinstance(stmt, ast.If) and line[col:].startswith("elif") and isinstance(parent, ast.If)
        if (starts_line and not is_elif) or not isinstance(parent, ast.stmt):
            decorators = getattr(stmt, "decorator_list", None)
            first = min([stmt.lineno, *(d.lineno for d in decorators or ())])
            return _above_own_comments(model, stmt, first), first
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # `def f(self): return C`: before the def would be outside the function
            raise EditError(f"line {stmt.lineno}: a one-line body; no line of its own to bind the width on")
        stmt = parent
    raise EditError(f"line {stmt.lineno}: no line to insert the per-step width before")


def _above_own_comments(model: ModuleModel, stmt: ast.stmt, line: int) -> int:
    """``line`` moved up over the comment and blank lines right above it (they go with the statement),
    never into the statement before it."""
    parent = model.parent(stmt)
    floor = getattr(parent, "lineno", 0)  # a match_case has none: its pattern's line is as good
    floor = floor or getattr(getattr(parent, "pattern", None), "lineno", 0)
    for name in ("body", "orelse", "finalbody", "handlers"):
        body = getattr(parent, name, None)
        if isinstance(body, list) and stmt in body:
            i = body.index(stmt)
            if i:
                floor = body[i - 1].end_lineno
            break
    while line - 1 > floor and model.lines[line - 2].strip(" \t\f\r\n")[:1] in ("", "#"):
        line -= 1
    return line


# -- a new parameter, a new keyword --------------------------------------------------------------


def add_parameter(model: ModuleModel, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> Edit:
    """``name=None`` as the function's last parameter (before ``**kwargs``; keyword-only after ``*args``)."""
    a = func.args
    if a.kwarg is not None:
        line, col = model.span(a.kwarg)[:2]
        col = model.lines[line - 1].rindex("**", 0, col + 1)
        return _insert(line, col, "add_parameter", f"{name}=None, ")
    items: list[ast.AST] = []
    if a.kwonlyargs:
        items = [_with_default(model, p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        sep = None
    elif a.vararg is not None:
        items, sep = [a.vararg], " "  # ``*args, name=None``
    else:
        positional = [*a.posonlyargs, *a.args]
        if a.posonlyargs and not a.args:
            raise EditError(f"line {func.lineno}: a parameter list ending in `/`")
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        items = [_with_default(model, p, d) for p, d in zip(positional, defaults)]
        sep = None
    if not items:
        line, col = _after_open_paren(model, func.lineno, model.column(func.lineno, func.col_offset))
        return _insert(line, col, "add_parameter", f"{name}=None")
    return _append(model, items, sep, f"{name}=None", "add_parameter", closing=None)


def add_keyword(model: ModuleModel, call: ast.Call, name: str, value: str) -> Edit:
    """``name=value`` as the call's last argument."""
    items = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    end = model.span(call)[2:]
    closing = (end[0], end[1] - 1)  # the call's own ``)``
    if not items:
        line, col = _after_open_paren(model, *model.span(call.func)[2:])
        return _insert(line, col, "add_keyword", f"{name}={value}")
    return _append(model, items, None, f"{name}={value}", "add_keyword", closing=closing)


def _with_default(model: ModuleModel, param: ast.arg, default: ast.expr | None) -> ast.AST:
    return param if default is None else _Span(model, param, default)


class _Span:
    """A parameter with its default: from the name to the end of the default, past the ``)`` of
    parentheses around the default (``x: int = (0)``)."""

    def __init__(self, model: ModuleModel, first: ast.AST, last: ast.AST):
        self.lineno, self.col_offset = first.lineno, first.col_offset
        self.end_lineno, self.end_col_offset = last.end_lineno, last.end_col_offset
        before = _text(model, model.span(first)[:2], model.span(last)[:2])
        line, col = model.span(last)[2:]
        for _ in range(max(0, before.count("(") - before.count(")"))):
            hit = _next_char(model, line, col)
            if hit is None or hit[2] != ")":
                break
            line, col = hit[0], hit[1] + 1
        text = model.lines[line - 1]
        self.end_lineno, self.end_col_offset = line, len(text[:col].encode("utf-8"))


def _append(model: ModuleModel, items: list, sep: str | None, new: str, kind: str,
            closing: tuple[int, int] | None) -> Edit:
    last = items[-1]
    line, col = model.span(last)[2:]
    comma = _comma_after(model, line, col, closing)
    if sep is None:
        sep = _separator(model, items)
    if comma is not None:  # a trailing comma: the new item after it, with one of its own
        return _insert(comma[0], comma[1] + 1, kind, f"{sep}{new},")
    end = _past_parens(model, line, col, closing)
    return _insert(end[0], end[1], kind, f",{sep}{new}")


def _separator(model: ModuleModel, items: list) -> str:
    """What separates the list's last two items after the comma (``" "``, or a newline and indent)."""
    if len(items) < 2:  # an item on its own line: the next one on a line of its own too
        line, col = model.span(items[-1])[:2]
        text = model.lines[line - 1]
        if not text[:col].strip():
            return text[len(text.rstrip("\r\n")):] + text[:col]
        return " "
    comma = _comma_after(model, *model.span(items[-2])[2:], None)
    start = model.span(items[-1])[:2]
    if comma is None:
        return " "
    between = _text(model, (comma[0], comma[1] + 1), start)
    if not between.strip():
        return between
    if "\n" in between or "\r" in between:  # a comment in between: the last item's line indent
        text = model.lines[start[0] - 1]
        return text[len(text.rstrip("\r\n")):] + text[: len(text) - len(text.lstrip(" \t"))]
    return " "


def _text(model: ModuleModel, start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return model.lines[start[0] - 1][start[1]:end[1]]
    out = [model.lines[start[0] - 1][start[1]:]]
    out += model.lines[start[0]:end[0] - 1]
    out.append(model.lines[end[0] - 1][:end[1]])
    return "".join(out)


def _next_char(model: ModuleModel, line: int, col: int, skip: str = "", keep: tuple[int, int] | None = None):
    """(line, col, char) of the first character at or after ``line:col`` that is not blank, a comment,
    a line continuation, or one of ``skip`` (except at ``keep``); None at the end of the file."""
    while line <= len(model.lines):
        text = model.lines[line - 1]
        while col < len(text):
            ch = text[col]
            if ch in " \t\f\r\n\\" or (ch in skip and (line, col) != keep):
                col += 1
                continue
            if ch == "#":
                break
            return line, col, ch
        line, col = line + 1, 0
    return None


def _scan(model: ModuleModel, line: int, col: int, closing: tuple[int, int] | None):
    """What follows an item of a list: blanks, comments and (when the list's own ``)`` is known) the
    ``)`` of a parenthesized item skipped."""
    return _next_char(model, line, col, ")" if closing is not None else "", closing)


def _comma_after(model: ModuleModel, line: int, col: int, closing) -> tuple[int, int] | None:
    hit = _scan(model, line, col, closing)
    return (hit[0], hit[1]) if hit and hit[2] == "," else None


def _past_parens(model: ModuleModel, line: int, col: int, closing) -> tuple[int, int]:
    """Right after the item's last character, past the ``)`` of its own parentheses."""
    while closing is not None:
        hit = _next_char(model, line, col)
        if hit is None or hit[2] != ")" or (hit[0], hit[1]) == closing:
            break
        line, col = hit[0], hit[1] + 1
    return line, col


def _after_open_paren(model: ModuleModel, line: int, col: int) -> tuple[int, int]:
    """Right after the first ``(`` at or after ``line:col`` (a call's or a definition's list)."""
    for n in range(line, min(line + 50, len(model.lines)) + 1):
        text = model.lines[n - 1]
        at = text.find("(", col if n == line else 0)
        if at >= 0:
            return n, at + 1
    raise EditError(f"line {line}: no `(` to add to")


def _insert(line: int, col: int, kind: str, text: str) -> Edit:
    return Edit(kind=kind, line=line, column=col, end_line=line, end_column=col, text=text)


# -- the name of the bound width -----------------------------------------------------------------


def free_name(code: str, taken: set[str], base: str) -> str:
    """``base`` unless the function already uses that name (or another verify block of it took it)."""
    for name in (base, f"verify_{base}", *(f"{base}_{i}" for i in range(2, 100))):
        if name not in taken and not re.search(rf"(?<![\w.]){re.escape(name)}\b", code):
            return name
    raise EditError("no free name for the per-step width")
