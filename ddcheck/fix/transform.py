"""Apply one file's fixes: the text edits the analysis planned (each a span of the file's text and
what takes its place), then a check with libcst that every top-level statement they touched still
parses. Nothing is searched for again: the edits say where they go; every other byte is kept.
"""

from __future__ import annotations

import bisect

import libcst as cst

from ddcheck.tree.parse import SourceError, decode, encoding_of, top_level_spans
from ddcheck.base.findings import Edit, Finding
from ddcheck.tree.sources import split_lines


class FixError(Exception):
    """A fix that could not be applied to one file (reported; the file is left as it was)."""


# Where several edits insert at one place: W is bound before the buffer refilled from it.
ORDER = {"bind": 0, "refill": 1}


# -- rewriting one file ---------------------------------------------------------------------------


def rewrite(source: bytes, findings: list[Finding], extra: list[Edit] = ()) -> bytes:
    """Apply the fixes of ``findings`` (all of one file) and the ``extra`` edits other files' fixes
    make here to ``source``; raises FixError.

    Fixes of one verify block share its binding: an edit planned twice (same span, same text) is made
    once; two edits that overlap otherwise are an error. Only the top-level statements (classes,
    functions) the edits touch are parsed again, with libcst, so a fix to one function of a 20 MB
    file costs what it costs in a small one.
    """
    try:
        encoding = encoding_of(source)
        text = decode(source)
    except SourceError as exc:
        raise FixError(str(exc)) from exc
    lines = split_lines(text)
    edits = list({(e.line, e.column, e.end_line, e.end_column, e.text): e for e in [
        *(e for f in findings for e in f.fix.edits if not e.path or e.path == f.relpath), *extra]}.values())
    new_text = apply_edits(text, edits, lines)
    _check(lines, new_text, findings, edits)
    try:
        if encoding == "utf-8-sig":
            return b"\xef\xbb\xbf" + new_text.encode("utf-8")
        return new_text.encode(encoding)
    except UnicodeError as exc:
        raise FixError(f"the fixed text does not encode as {encoding}: {exc}") from exc


def apply_edits(text: str, edits: list[Edit], lines: list[str] | None = None) -> str:
    """``text`` with ``edits`` made (positions as the analysis gives them, all in the old text);
    raises FixError when one falls outside the text or two overlap."""
    lines = split_lines(text) if lines is None else lines
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        if not 0 < line <= max(len(lines), 1) or col > len(lines[line - 1].rstrip("\r\n") if lines else ""):
            raise FixError(f"{line}:{col + 1}: an edit outside the file (was it changed since the scan?)")
        return starts[line - 1] + col

    placed = sorted(((offset(e.line, e.column), offset(e.end_line, e.end_column), ORDER.get(e.kind, 2), i, e)
                     for i, e in enumerate(edits)), key=lambda t: t[:4])
    for (_, e1, *_, a), (s2, *_, b) in zip(placed, placed[1:]):
        if s2 < e1:
            raise FixError(f"{b.line}:{b.column + 1}: two edits of the fix overlap ({a.kind} and {b.kind})")
    out, at = [], 0
    for start, end, *_, e in placed:
        out += [text[at:start], e.text]
        at = end
    out.append(text[at:])
    return "".join(out)


def _check(lines: list[str], new_text: str, findings: list[Finding], edits: list[Edit]) -> None:
    """Each top-level statement the edits touched, as it reads after them, parses (libcst)."""
    given = [(f.fix.block_first, f.fix.block_last) for f in findings if f.fix.block_first]
    touched = [(e.line, e.end_line) for e in edits]
    if all(any(a <= l1 and l2 <= b for a, b in given) for l1, l2 in touched):
        raw = sorted(set(given))
    else:  # edits other files' fixes make here, or a fix in another statement: find the statements
        try:
            raw = top_level_spans("".join(lines))
        except SourceError as exc:
            raise FixError(str(exc)) from exc
    spans = [list(r) for r in raw if any(r[0] <= l2 and l1 <= r[1] for l1, l2 in touched)]
    merged: list[list[int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    if any(not any(a <= l1 and l2 <= b for a, b in merged) for l1, l2 in touched):
        raise FixError("an edit of the fix is not inside a top-level statement of the file")
    # where each old line starts in the new text: lines added by the edits before it
    added = sorted((e.line, e.text.count("\n") + e.text.count("\r") - e.text.count("\r\n")
                    - (e.end_line - e.line)) for e in edits)
    keys = [a[0] for a in added]
    shifts = [0]
    for _, n in added:
        shifts.append(shifts[-1] + n)
    new_lines = split_lines(new_text)
    for first, last in merged:
        a = first + shifts[bisect.bisect_left(keys, first)]
        b = last + shifts[bisect.bisect_right(keys, last)]
        segment = "".join(new_lines[a - 1:b])
        try:
            cst.parse_module(segment)
        except cst.ParserSyntaxError as exc:
            raise FixError(f"the fixed lines {a}-{b} do not parse: {exc.message} "
                           f"(line {a + exc.raw_line - 1})") from exc
        except RecursionError as exc:
            raise FixError(f"the fixed lines {a}-{b} are too deeply nested to check") from exc
