"""The body of ``ddcheck scan`` and what every command shares (usage errors, consoles, settings from
flags), free of the CLI framework: the typer command (:mod:`ddcheck.cli.app`) and the fast entry
(:mod:`ddcheck.entry`) both run :func:`scan_command`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ddcheck.base.errors import EXIT_USAGE, UsageError
from ddcheck.base.findings import Severity

# No command uses pydantic plugins; looking them up costs a sixth of a cache-hit scan. Set here, the
# module both entry points load before pydantic.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


# rich is loaded when something is printed through it, not for a JSON scan or a cache hit.
from ddcheck.diagnostics.console import console, escape  # noqa: E402 - every command's console


def usage_failure(exc: UsageError) -> int:
    console(stderr=True).print(f"[bold red]ddcheck:[/bold red] {escape(str(exc))}")
    return EXIT_USAGE


def internal_failure(exc: Exception) -> int:
    """The last line of defence for scripts: a message and exit 2, a traceback only on request."""
    if os.environ.get("DDCHECK_DEBUG"):
        raise exc
    from rich.markup import escape

    console(stderr=True).print(f"[bold red]ddcheck: internal error:[/bold red] {type(exc).__name__}: "
                               f"{escape(str(exc))} (set DDCHECK_DEBUG=1 for a traceback)")
    return EXIT_USAGE


def resolve_settings(target: str | None, config: Path | None, select, ignore, fail_on):
    """``[tool.ddcheck]`` (found from the first target, or ``config``) with the command line's
    ``--select``/``--ignore``/``--fail-on`` on top."""
    from ddcheck.scan.settings import SettingsError, load_settings

    start = Path(target) if target and Path(target).exists() else Path.cwd()
    try:
        settings = load_settings(start, config)
    except SettingsError as exc:
        raise UsageError(str(exc)) from exc
    from ddcheck.diagnostics.selection import rule_ids

    select, ignore = rule_ids("--select", select), rule_ids("--ignore", ignore)
    if select:
        settings.select = select
    if ignore:
        settings.ignore = [*settings.ignore, *ignore]
    if fail_on:
        settings.fail_on = fail_on
    return settings


def scan_command(targets: list[str] | None, fmt: str = "text", fail_on: Severity | None = None,
                 select: list[str] | None = None, ignore: list[str] | None = None, config: Path | None = None,
                 baseline: Path | None = None, write_baseline: Path | None = None, no_cache: bool = False,
                 check_syntax: bool = False) -> int:
    """``ddcheck scan``: prints the result and returns the exit code (0 clean, 1 findings at or above
    fail-on or files that could not be scanned); a UsageError for bad arguments and for a named target
    that cannot be obtained (a missing path, an unknown version, no Python files)."""
    from ddcheck.scan.api import scan as run_scan
    from ddcheck.diagnostics.formats import FORMATS, render

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    for t in targets or []:
        if "==" not in t and not Path(t).exists():
            raise UsageError(f"{t}: no such file or directory")
    settings = resolve_settings((targets or [None])[0], config, select, ignore, fail_on)
    settings.check_syntax = settings.check_syntax or check_syntax
    result = run_scan(list(targets or []), settings=settings, use_cache=not no_cache, quoted=fmt == "text",
                      strict=True)
    if write_baseline or baseline:
        from ddcheck.diagnostics import baseline as bl
    if write_baseline:
        try:
            n = bl.write(write_baseline, result.findings)
        except bl.BaselineError as exc:
            raise UsageError(str(exc)) from exc
        console(stderr=True).print(f"wrote {n} findings to baseline {escape(str(write_baseline))}")
        return 0
    if baseline:
        try:
            result.findings = bl.new_findings(result.findings, bl.load(baseline))
        except bl.BaselineError as exc:
            raise UsageError(str(exc)) from exc
    from ddcheck.diagnostics.selection import exit_code

    # A scan judges every file it reads or lists it as an error: it has no could-not-judge (3).
    code = exit_code(result.findings, settings.fail_on, errors=bool(result.errors))
    render(result, fmt, sys.stdout, console, result.sources, code)
    return code
