"""The audit as one self-contained HTML page (no script, no external asset: it opens offline): the grid
coloured by exit code, each cell opening (``<details>``) its verdict, its evidence and its report."""

from __future__ import annotations

from html import escape

from ddcheck.audit import grid
from ddcheck.audit.cells import AuditRecord, Cell

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { border: 1px solid #bbb; padding: 4px 6px; vertical-align: top; text-align: left; }
th { background: #eee; font-weight: 600; }
td.cell { min-width: 7em; }
td.x0 { background: #d9f2d9; } td.x1 { background: #f7d4d4; } td.x3 { background: #e9dcf5; }
details summary { cursor: pointer; font-weight: 600; }
details p, details ul { margin: .4em 0; font-size: 12px; max-width: 40em; }
code { font-size: 12px; }
"""


def _cell(c: Cell) -> str:
    items = "".join(f"<li><code>{escape(e)}</code></li>" for e in c.evidence)
    why = f"<p>not judged: {escape(c.not_judged)}</p>" if c.not_judged else ""
    report = f"<p>report: <code>{escape(c.report)}</code></p>" if c.report else ""
    return (f'<td class="cell x{c.exit_code}" data-column="{escape(c.column)}" data-width="{escape(c.width)}">'
            f"<details><summary>{escape(grid.short(c))}</summary><p>{escape(c.verdict)}</p>{why}"
            f'<ul class="evidence">{items}</ul>{report}</details></td>')


def render(record: AuditRecord) -> str:
    cols = grid.columns(record)
    head = "".join(f"<th>{escape(h)}</th>" for h in ["target", "backend"] + [h for _, _, h in cols])
    body = []
    for label, backend, cells in grid.rows(record):
        tds = "".join(_cell(cells[(w, c)]) if (w, c) in cells else "<td></td>" for w, c, _ in cols)
        body.append(f"<tr><th>{escape(label)}</th><th>{escape(backend)}</th>{tds}</tr>")
    notes = "".join(f"<li>{escape(x)}</li>" for x in grid.summary(record))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ddcheck audit</title>"
            f"<style>{CSS}</style></head><body><h1>ddcheck audit</h1><p>{escape(grid.environment(record))}; "
            f"{escape(' '.join(record.command))}</p><p>Green: judged and right (0); red: a bug or a pending fix (1); "
            f"purple: not judged (3). Open a cell for its verdict and evidence.</p>"
            f"<table class=\"grid\"><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<ul>{notes}</ul></body></html>\n")
