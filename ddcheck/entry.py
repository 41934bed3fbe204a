"""The ``ddcheck`` console script.

``ddcheck scan`` with plain arguments (the pre-commit and CI case) runs without loading the CLI
framework: typer converts every parameter through pydantic, ~0.1 s before any work, most of a scan
of one file. So does ``ddcheck config OPTIONS -- LAUNCH`` (a deployment script's gate before each
launch: a repeat is answered from the result cache in a fraction of a second, typer's share included).
Everything else - ``--help``, the other commands, any argument these parsers would not read exactly
as typer does - goes to the typer app in :mod:`ddcheck.cli.app`, which owns the command line and its
help. tests/cli/test_workflow.py holds the two to the same options and the same output.
``DDCHECK_FAST_ENTRY=0`` sends every command through typer. ``main`` is the process: a plain scan
ends it with ``os._exit`` once the output is flushed.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path


class _NotPlain(Exception):
    """Arguments this parser leaves to typer (its errors and help are typer's)."""


# What `ddcheck scan` reads when an option is not given (typer's defaults, tests/cli/test_workflow.py).
DEFAULTS = {"fmt": "text", "fail_on": None, "select": None, "ignore": None, "config": None, "baseline": None,
            "write_baseline": None, "no_cache": False, "check_syntax": False}


def scan_parser():
    """``ddcheck scan``'s options as :func:`ddcheck.cli.scan` declares them (no help: typer's); an
    ``argparse.ArgumentParser``, loaded only where an argument is an option."""
    import argparse

    from ddcheck.base.findings import Severity

    class Formatter(argparse.HelpFormatter):
        """A width of its own: argparse's default asks the terminal through shutil (~3 ms to load) each
        time it checks an argument, and this parser's help and usage are never shown (typer's are)."""

        def __init__(self, prog: str) -> None:
            super().__init__(prog, width=100)

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # noqa: D102 - argparse would print and exit
            raise _NotPlain(message)

    p = Parser(prog="ddcheck scan", usage="ddcheck scan [OPTIONS] [TARGETS]...", add_help=False,
               allow_abbrev=False, formatter_class=Formatter)
    p.add_argument("targets", nargs="*")
    p.add_argument("--format", "-f", dest="fmt")
    p.add_argument("--fail-on", dest="fail_on", choices=[s.value for s in Severity])
    p.add_argument("--select", action="append")
    p.add_argument("--ignore", action="append")
    p.add_argument("--config")
    p.add_argument("--baseline")
    p.add_argument("--write-baseline", dest="write_baseline")
    p.add_argument("--no-cache", dest="no_cache", action="store_true")
    p.add_argument("--check-syntax", dest="check_syntax", action="store_true")
    p.set_defaults(**DEFAULTS)
    return p


def parse_scan(args: list[str]) -> dict | None:
    """Keyword arguments of :func:`ddcheck.cli.scan.scan_command`, or None to leave ``args`` to typer."""
    from ddcheck.base.findings import Severity

    if not any(a.startswith("-") for a in args):
        # targets alone, as pre-commit passes them: what the parser would read, without loading it
        kw = {"targets": list(args), **DEFAULTS}
    else:
        try:
            kw = vars(scan_parser().parse_intermixed_args(args))
        except _NotPlain:
            return None
    kw["fail_on"] = Severity(kw["fail_on"]) if kw["fail_on"] else None
    for name in ("config", "baseline", "write_baseline"):
        kw[name] = Path(kw[name]) if kw[name] is not None else None
    return kw


def config_parser():
    """``ddcheck config``'s options as :func:`ddcheck.cli.config` declares them (no help: typer's)."""
    import argparse

    from ddcheck.base.findings import Severity

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # noqa: D102 - argparse would print and exit
            raise _NotPlain(message)

    p = Parser(prog="ddcheck config", add_help=False, allow_abbrev=False)
    for option in ("--file", "--sglang", "--draft-config", "--model-config", "--gpu", "--device"):
        p.add_argument(option)
    p.add_argument("--format", "-f", dest="fmt", default="text")
    p.add_argument("--fail-on", dest="fail_on", choices=[s.value for s in Severity])
    for option in ("--select", "--ignore", "--suppress"):
        p.add_argument(option, action="append")
    for flag in ("--smoke", "--no-cache", "--allow-downloads"):
        p.add_argument(flag, action="store_true")
    return p


def parse_config(args: list[str]) -> dict | None:
    """Keyword arguments of :func:`ddcheck.cli.config.config_command` for ``OPTIONS -- LAUNCH``, or
    None to leave ``args`` to typer (no ``--``, an option it does not know or a bad value, ``--smoke``)."""
    if "--" not in args:
        return None
    at = args.index("--")
    try:
        ns = config_parser().parse_args(args[:at])
    except _NotPlain:
        return None
    if ns.smoke:  # composed in ddcheck.cli.app (above both config and smoke), and never the quick path
        return None
    from ddcheck.base.findings import Severity

    def path(value):  # typer hands these over as Path: str(Path(x)) is what config receives
        return str(Path(value)) if value is not None else None

    return {"argv": args[at + 1:], "file": path(ns.file), "sglang": ns.sglang, "fmt": ns.fmt,
            "draft_config": path(ns.draft_config), "model_config": path(ns.model_config), "gpu": ns.gpu,
            "select": ns.select or [], "ignore": ns.ignore or [], "suppress": ns.suppress or [],
            "fail_on": Severity(ns.fail_on) if ns.fail_on else None, "cache": not ns.no_cache,
            "allow_downloads": ns.allow_downloads}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["config"] and os.environ.get("DDCHECK_FAST_ENTRY", "1") != "0":
        kw = parse_config(args[1:])
        if kw is not None:
            sys.exit(_run("config", kw))  # not os._exit: the config worker and its folder end at exit
    if args[:1] == ["scan"] and os.environ.get("DDCHECK_FAST_ENTRY", "1") != "0":
        # A scan makes few reference cycles and ends soon after; the cyclic GC would walk every module
        # and syntax tree loaded, again and again (~10 ms of a one-file scan). The analysis itself runs
        # with it off in any case (ddcheck.analysis.scan).
        gc.disable()
        kw = parse_scan(args[1:])
        if kw is not None:
            _exit(_run("scan", kw))
    from ddcheck.cli.app import main as typer_main

    typer_main()


def _exit(code: int) -> None:
    """End the process as soon as the output is out: the interpreter's teardown frees everything a
    scan built and collects garbage once more (~20 ms of a whole-tree scan), for nothing."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # the reader went away (`ddcheck scan | head`): nothing left to tell it
        pass
    os._exit(code)


def _run(command: str, kw: dict) -> int:
    """``ddcheck scan`` or ``ddcheck config``'s body with ``kw``, failures said as the typer app says them."""
    from ddcheck.base.errors import EXIT_INTERRUPTED, UsageError
    from ddcheck.cli.scan import internal_failure, usage_failure  # first: it sets the environment pydantic reads

    try:
        if command == "config":
            from ddcheck.cli.config import config_command as body
        else:
            from ddcheck.cli.scan import scan_command as body
        return body(**kw)
    except UsageError as exc:
        return usage_failure(exc)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the last line of defence for scripts, as in ddcheck.cli.app
        return internal_failure(exc)
