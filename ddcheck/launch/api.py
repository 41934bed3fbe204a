"""``ddcheck config``: check an SGLang speculative-decoding launch before it runs.

``check_launch`` never imports sglang (that pulls in torch, and SGLang's own checks need a GPU and
the model config); it reads the target's sources instead.
"""

from __future__ import annotations

import os
import re
import sys

from ddcheck.launch.checks import ALL_CHECKS, Consequence, ConfigFinding
from ddcheck.launch.evidence import scan_errors
from ddcheck.launch.flags import ParseError, flag_table, merge_config_file, parse
from ddcheck.launch.report import Report, render_json, render_text
from ddcheck.launch.settings import resolve
from ddcheck.sources import SourceTree, TargetError, installed_sglang, open_target

_LAUNCHERS = re.compile(r"(^|[./])launch_server(\.py)?$|^serve$")


class UsageError(Exception):
    """Bad invocation of ddcheck itself (exit 2)."""


def server_argv(argv: list[str]) -> list[str]:
    """The server's own arguments: drops ``ENV=x``, ``python -m sglang.launch_server``,
    ``sglang serve`` and the like in front of them."""
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    for i, tok in enumerate(argv):
        if tok.startswith("-") and tok != "-m":
            break
        if _LAUNCHERS.search(tok):
            return argv[i + 1:]
    return argv


def launch_env(argv: list[str]) -> dict[str, str]:
    """``NAME=value`` assignments in front of the launcher (``SGLANG_ENABLE_SPEC_V2=True python ...``)."""
    env = {}
    for tok in argv[1:] if argv[:1] == ["--"] else argv:
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", tok)
        if not m:
            break
        env[m.group(1)] = m.group(2)
    return env


def open_sglang(sglang: str | None) -> SourceTree:
    if sglang is None:
        path = installed_sglang()
        if path is None:
            raise UsageError("no installed sglang found; pass --sglang PATH|WHEEL|sglang==VER")
        sglang = str(path)
    try:
        return open_target(sglang)
    except TargetError as exc:
        raise UsageError(str(exc)) from exc


def check_launch(argv: list[str], sglang: str | None = None, file: str | None = None,
                 tree: SourceTree | None = None) -> Report:
    """Check a launch (``argv`` as the script runs it, and/or an SGLang ``--config`` YAML ``file``)
    against the target SGLang (installed by default; ``sglang`` = path, wheel or ``sglang==VER``)."""
    tree = tree or open_sglang(sglang)
    table = flag_table(tree)
    args = server_argv(argv)
    if file is not None:
        args = ["--config", str(file)] + args
    report = Report(target=tree.label, release=table.release, argv=args)
    rel = f"SGLang {table.release}"
    try:
        if "--config" in args and table.supports_config_file:
            args = report.argv = merge_config_file(table, args)
        ns = parse(table, args)
    except ParseError as exc:
        msg = str(exc)
        kind = ("parse-unknown-flag" if "unrecognized arguments" in msg else
                "parse-ambiguous-flag" if "ambiguous option" in msg else
                "unknown-algorithm" if "--speculative-algorithm" in msg and "invalid choice" in msg else
                "parse-invalid-value")
        fix = {"parse-unknown-flag": f"remove the flag or target a release that has it (see `--help` of {rel})",
               "parse-ambiguous-flag": "spell the flag out in full: abbreviations match several flags here",
               "unknown-algorithm": "use an algorithm this release ships, or a build that adds it"}
        report.findings.append(ConfigFinding(id=kind, consequence=Consequence.PARSE,
                                             message=f"{rel} argparse: {msg} (exit 2)",
                                             fix=fix.get(kind, "fix the value")))
        return report
    algo = ns.get("speculative_algorithm")
    if algo is not None and table.algorithms is not None and algo.upper() not in table.algorithms:
        report.findings.append(ConfigFinding(
            id="unknown-algorithm", consequence=Consequence.REJECT,
            message=f"{rel} does not know --speculative-algorithm {algo} (it knows {', '.join(table.algorithms)})",
            fix="use an algorithm this release ships, or a build that adds it (DDTREE lives in open PRs)"))
        return report
    s = report.settings = resolve(ns, table)
    s.env = launch_env(argv)
    if s.algorithm is None:
        return report
    for check in ALL_CHECKS:
        report.findings.extend(check(s, tree))
    if any(f.id == "verify-width" for f in report.findings):
        report.scan_engine = scan_errors(tree, [])[1]
    return report


def config_main(argv: list[str], file: str | None = None, sglang: str | None = None, fmt: str = "text") -> int:
    """CLI body: prints the report (rich text or JSON); 0 clean, 1 error findings, 2 usage."""
    if fmt not in ("text", "json"):
        print(f"ddcheck config: unknown format {fmt!r} (text|json)", file=sys.stderr)
        return 2
    if not argv and file is None:
        print("ddcheck config: give the launch command after `--` or --file launch.yaml", file=sys.stderr)
        return 2
    if file is not None and not os.path.exists(file):
        print(f"ddcheck config: {file}: no such file", file=sys.stderr)
        return 2
    try:
        report = check_launch(argv, sglang=sglang, file=file)
    except UsageError as exc:
        print(f"ddcheck config: {exc}", file=sys.stderr)
        return 2
    if fmt == "json":
        print(render_json(report))
    else:
        render_text(report)
    return report.exit_code
