"""The audit as Markdown (a pull-request comment, a docs page): the grid, then what was not judged;
:func:`write_between` puts it into a page between its markers."""

from __future__ import annotations

from pathlib import Path

from ddcheck.audit import grid
from ddcheck.audit.cells import AuditRecord


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(record: AuditRecord) -> str:
    cols = grid.columns(record)
    head = ["target", "backend"] + [h for _, _, h in cols]
    lines = [grid.environment(record) + ". A cell is the exit code (0 right, 1 a bug or a pending fix, 3 not "
             "judged) and the verdict's words; '=' after the fix: the fix changes nothing (the shipped run).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, backend, cells in grid.rows(record):
        row = [label, backend] + [grid.short(cells.get((w, c))) for w, c, _ in cols]
        lines.append("| " + " | ".join(_md(x) for x in row) + " |")
    lines.append("")
    lines += [f"* {_md(x)}" if x.startswith(("not judged", "not in")) else _md(x) for x in grid.summary(record)]
    return "\n".join(lines) + "\n"


def write_between(doc: Path, begin: str, end: str, text: str, new_page: str = "") -> None:
    """Replace what stands between ``begin`` and ``end`` in ``doc`` with ``text``; a page without the
    markers gets them at its end (a missing page is ``new_page`` followed by them)."""
    page = doc.read_text(encoding="utf-8") if doc.is_file() else new_page
    if begin not in page:
        page += ("\n" if page and not page.endswith("\n\n") else "") + f"{begin}\n{end}\n"
    head, _, rest = page.partition(begin)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{begin}\n{text.rstrip(chr(10))}\n{end}{tail}", encoding="utf-8")
