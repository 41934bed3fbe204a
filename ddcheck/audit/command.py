"""``ddcheck audit``'s body: expand the targets, run (or read a recorded audit), print the format asked."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ddcheck.base.errors import EXIT_INTERRUPTED, UsageError

FORMATS = ("text", "json", "markdown", "html")


def audit_command(targets: list[str], backends: list[str], budgets: list[int], num_draft_tokens: int,
                  launch_file: Path | None, device: str, jobs: int | None, fmt: str, out: Path | None,
                  recorded: Path | None, cache: bool, console, err) -> int:
    from ddcheck.audit.cells import AuditRecord

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if recorded is not None:
        if targets:
            raise UsageError("--from renders a recorded audit: give no targets")
        try:
            record = AuditRecord.model_validate_json(recorded.read_bytes())
        except OSError as exc:
            raise UsageError(f"--from {recorded}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise UsageError(f"--from {recorded}: not an audit record ({str(exc).splitlines()[0]})") from None
    else:
        record = _run(targets, backends, budgets, num_draft_tokens, launch_file, device, jobs, cache, err)
    _emit(record, fmt, out, console)
    return record.exit_code


def _run(targets, backends, budgets, num_draft_tokens, launch_file, device, jobs, cache, err):
    from ddcheck.audit.runner import BUDGETS, Audit, Options, read_launches, runnable
    from ddcheck.audit.targets import expand
    from ddcheck.smoke.api import backend_name, check_device

    if not targets:
        raise UsageError("give targets: a checkout, a wheel, sglang==X or a range 'sglang>=X,<Y' (or --from RECORD)")
    try:
        check_device(device)
        names = list(dict.fromkeys(backend_name(b) for b in backends)) if backends else runnable()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if any(b < 0 for b in budgets or ()) or num_draft_tokens < 1:
        raise UsageError("--budget must be >= 0 and --num-draft-tokens >= 1")
    launches = []
    if launch_file is not None:
        try:
            launches = read_launches(launch_file)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--launch-file {launch_file}: {exc}") from None
        if not launches:
            raise UsageError(f"--launch-file {launch_file}: no launch in it (one command a line)")
    notes: list[str] = []
    expanded = expand(list(targets), notes=notes)
    opts = Options(backends=names, budgets=list(budgets or BUDGETS), num_draft_tokens=num_draft_tokens,
                   launches=launches, device=device, jobs=jobs or os.cpu_count() or 1, cache=cache)
    audit = Audit(expanded, opts)
    t0 = time.perf_counter()
    try:
        with _progress(err) as progress:
            audit.run(progress)
    except KeyboardInterrupt:
        err.print(f"ddcheck audit: interrupted; {audit.kept} unit(s) of work finished and kept in the cache: run "
                  f"the same command again to finish the rest", highlight=False)
        raise SystemExit(EXIT_INTERRUPTED) from None
    record = audit.record(time.perf_counter() - t0, ["ddcheck", "audit", *sys.argv[2:]])
    record.notes = notes
    return record


class _progress:
    """A rich progress bar on a terminal (stderr); nothing elsewhere."""

    def __init__(self, err) -> None:
        self.err, self.bar, self.task = err, None, None

    def __enter__(self):
        if not self.err.is_terminal:
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("[bold]audit[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.description}"), console=self.err, transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("", total=0)
        return self.update

    def update(self, what: str, more: int) -> None:
        task = self.bar.tasks[0]
        self.bar.update(self.task, total=(task.total or 0) + more, description=what,
                        advance=1 if what else 0)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def _emit(record, fmt: str, out: Path | None, console) -> None:
    if fmt == "text" and out is None:
        from ddcheck.audit.text import render

        render(record, console)
        return
    if fmt == "json":
        text = record.model_dump_json(indent=1) + "\n"
    elif fmt == "markdown":
        from ddcheck.audit.markdown import render as md

        text = md(record)
    elif fmt == "html":
        from ddcheck.audit.html import render as page

        text = page(record)
    else:  # text into a file: the table as a terminal would show it, without colour
        from io import StringIO

        from rich.console import Console

        from ddcheck.audit.text import render

        buf = StringIO()
        render(record, Console(file=buf, width=240, color_system=None, soft_wrap=True))
        text = buf.getvalue()
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"-o {out}: {exc.strerror or exc}") from None
