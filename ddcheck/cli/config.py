"""The body of ``ddcheck config``, free of the CLI framework: the launch checked
(:func:`ddcheck.config.check_launch`), where the launch set each finding (:func:`ddcheck.config.report.locate`),
then the one road every command's findings take (:mod:`ddcheck.diagnostics`): suppressions (a launch file's
``# ddcheck: ignore[ID] reason``, ``--suppress``), ``--select``/``--ignore``, the exit code with
``--fail-on``, and every format (text after config's header, JSON with config's report fields, SARIF,
GitHub annotations)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ddcheck.base.errors import UsageError
from ddcheck.base.findings import ScanResult, Severity


def config_command(argv: list[str], file: str | None = None, sglang: str | None = None, fmt: str = "text",
                   draft_config: str | None = None, model_config: str | None = None, gpu: str | None = None,
                   smoke: Callable | None = None, select: list[str] | None = None,
                   ignore: list[str] | None = None, fail_on: Severity | None = None,
                   suppress: list[str] | None = None, tree=None, cache: bool = True,
                   allow_downloads: bool = False) -> int:
    """``ddcheck config``: prints the report and returns the exit code: 1 findings at or above
    ``fail_on`` (default error), else 3 a check that could not run, else 0; a UsageError for bad
    arguments (2). ``tree``: the target already opened (the Python API's, tests'); ``cache``: answer a repeat
    from the result cache and keep a judged result (``--no-cache``: neither); ``allow_downloads``: the
    tree's code may use the network (``--allow-downloads``; else it runs offline)."""
    from ddcheck.cli.scan import console
    from ddcheck.config.api import check_launch, open_sglang, server_argv
    from ddcheck.config.report import footer_lines, header_lines, locate
    from ddcheck.diagnostics import formats, suppressions
    from ddcheck.diagnostics.selection import exit_code, rule_ids, selected

    if fmt not in formats.FORMATS:
        raise UsageError(f"--format must be one of {', '.join(formats.FORMATS)}")
    if not argv and file is None:
        raise UsageError("give the launch command after `--` or --file launch.yaml")
    if file is not None and not os.path.isfile(file):
        raise UsageError(f"{file}: no such file")
    chosen, dropped = rule_ids("--select", select) or None, rule_ids("--ignore", ignore)
    entries = suppressions.launch_file(file) + suppressions.command_line(list(suppress or []))
    tree = tree or open_sglang(sglang)
    report = check_launch(argv, file=file, tree=tree, draft_config=draft_config, model_config=model_config,
                          gpu=gpu, smoke=smoke, cache=cache, allow_downloads=allow_downloads)
    locate(report, server_argv(argv), file, tree)
    # suppressions first: one for a rule the user deselected is still in use, not stale (as for scan)
    report.findings = selected(suppressions.apply_to_launch(report.findings, file, entries), chosen, dropped)
    code = report.command_exit_code = exit_code(report.findings, fail_on or Severity.error,
                                                not_judged=bool(report.not_judged))
    if fmt == "json":
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif fmt == "text":
        formats.render_lines(header_lines(report) + formats.finding_lines(report.findings, {})
                             + footer_lines(report), sys.stdout, console)
    else:
        formats.render(ScanResult(files_scanned=1 if file else 0, findings=report.findings), fmt, sys.stdout,
                       console, exit_code=code, not_judged=report.not_judged)
    return code
