"""The audit as a terminal table (rich): the grid coloured by exit code, then what was not judged."""

from __future__ import annotations

from ddcheck.audit import grid
from ddcheck.audit.cells import AuditRecord

STYLE = {0: "green", 1: "red", 3: "magenta"}


def render(record: AuditRecord, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"ddcheck audit: {grid.environment(record)}", show_lines=False)
    cols = grid.columns(record)
    table.add_column("target")
    table.add_column("backend")
    for _, _, header in cols:
        table.add_column(header)
    for label, backend, cells in grid.rows(record):
        row = []
        for width, column, _ in cols:
            c = cells.get((width, column))
            row.append("" if c is None else f"[{STYLE.get(c.exit_code, '')}]{escape(grid.short(c))}[/]")
        table.add_row(escape(label), escape(backend), *row)
    console.print(table)
    for line in grid.summary(record):
        console.print(escape(line), highlight=False)
