"""The body of ``ddcheck config``, free of the CLI framework: the launch checked
(:func:`ddcheck.config.check_launch`), its findings as rules (where the launch set each one,
``--select``/``--ignore``, suppressions with a reason, ``--fail-on``: :mod:`ddcheck.config.report`) and
printed in one of the formats: config's own text and JSON, or the scan's SARIF and GitHub reporters."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ddcheck.base.errors import UsageError
from ddcheck.base.findings import ScanResult, Severity

FORMATS = ("text", "json", "sarif", "github")


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
    from ddcheck.config.api import check_launch, open_sglang, server_argv
    from ddcheck.config.report import (as_findings, command_line_suppressions, exit_code, launch_suppressions, locate,
                                render_json, render_text, select as select_findings)
    from ddcheck.rules import get_rule

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}")
    if not argv and file is None:
        raise UsageError("give the launch command after `--` or --file launch.yaml")
    if file is not None and not os.path.isfile(file):
        raise UsageError(f"{file}: no such file")
    for flag, values in (("--select", select), ("--ignore", ignore)):
        unknown = [v for v in values or [] if get_rule(v) is None]
        if unknown:
            raise UsageError(f"{flag}: unknown rule(s) {', '.join(unknown)}; see `ddcheck rules`")
    suppressions = launch_suppressions(file) + command_line_suppressions(suppress or [])
    tree = tree or open_sglang(sglang)
    report = check_launch(argv, file=file, tree=tree, draft_config=draft_config, model_config=model_config,
                          gpu=gpu, smoke=smoke, cache=cache, allow_downloads=allow_downloads)
    before = list(report.findings)
    locate(report, server_argv(argv), file)
    select_findings(report, list(select or []), list(ignore or []), suppressions)
    code = report.command_exit_code = exit_code(report, fail_on or Severity.error, before)
    if fmt == "json":
        print(render_json(report))
    elif fmt in ("sarif", "github"):
        from ddcheck.diagnostics.formats import to_github, to_sarif

        result = ScanResult(files_scanned=1 if file else 0, findings=as_findings(report, tree, file))
        if fmt == "sarif":
            import json

            sys.stdout.write(json.dumps(to_sarif(result), indent=1) + "\n")
        else:
            sys.stdout.write(to_github(result))
    else:
        render_text(report)
    return code
