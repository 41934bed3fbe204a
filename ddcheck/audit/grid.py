"""The matrix as every renderer lays it out: a row per target and backend; the scan's and the fix's
columns (the backend's file, whatever the width), then per width smoke as shipped, after the fix and at
the runner's capture width (and, for a launch, ``ddcheck config``'s verdict first). Each cell of the
record is one cell of the grid."""

from __future__ import annotations

from ddcheck.audit.cells import AuditRecord, Cell, Width

PER_WIDTH = ("smoke", "fixed", "capture")
TITLES = {"scan": "scan", "fix": "default fix", "smoke": "smoke", "fixed": "smoke, fixed", "capture": "capture width",
          "config": "config"}


def width_title(w: Width) -> str:
    """``W = 17 > C = 8`` for a budget, the launch's label for a launch."""
    if w.launch is not None or w.verify_width is None:
        return w.label
    return f"W = {w.verify_width} {w.relation[2]} C = {w.num_draft_tokens}"


def columns(record: AuditRecord) -> list[tuple[str, str, str]]:
    """(width label, column, header) of each grid column, in order."""
    out = [("all widths", "scan", "scan"), ("all widths", "fix", TITLES["fix"])]
    for w in record.widths:
        cols = (("config",) if w.launch is not None else ()) + PER_WIDTH
        out += [(w.label, c, f"{TITLES[c]}, {width_title(w)}") for c in cols]
    return out


def rows(record: AuditRecord) -> list[tuple[str, str, dict[tuple[str, str], Cell]]]:
    """(target label, backend, (width, column) -> cell) per row, in the record's order."""
    out: dict[tuple[str, str], dict[tuple[str, str], Cell]] = {}
    for c in record.cells:
        out.setdefault((c.label, c.backend), {})[(c.width, c.column)] = c
    return [(label, backend, cells) for (label, backend), cells in out.items()]


def short(cell: Cell | None) -> str:
    """A cell in a few words: its exit code and status, and for scan and fix how many and where first."""
    if cell is None:
        return ""
    same = "= " if cell.verdict.startswith("= the shipped run") else ""
    text = f"{same}{cell.exit_code} {cell.status}"
    if cell.column == "scan" and cell.count:
        first = cell.evidence[0].split(": ", 1)[0].rsplit("/", 1)[-1] if cell.evidence else ""
        text += f" x{cell.count}, first {first}"
    elif cell.column == "fix" and cell.count:
        text += f" ({cell.count} edits)"
    return text


def summary(record: AuditRecord) -> list[str]:
    """The lines after the grid: what was not judged and why, what is absent, the exit code."""
    lines = list(record.notes)
    for c in record.unjudged():
        lines.append(f"not judged: {c.label} {c.backend} {c.width} {c.column}: {c.not_judged}")
    if record.absent:
        lines.append("not in the tree (no cells): " + ", ".join(record.absent))
    n, cached = len(record.cells), sum(c.cached for c in record.cells)
    lines.append(f"{n} cells ({n - cached} computed, {cached} from the cache): "
                 f"{sum(c.exit_code == 0 for c in record.cells)} right, {sum(c.exit_code == 1 for c in record.cells)} "
                 f"a bug or a pending fix, {len(record.unjudged())} not judged; exit {record.exit_code}")
    return lines


def environment(record: AuditRecord) -> str:
    env = record.environment
    return (f"{env.get('gpu', 'CPU')}, torch {env.get('torch', '-')}, triton {env.get('triton', '-')}; device "
            f"{record.device}, {record.jobs} jobs, {record.seconds} s")
