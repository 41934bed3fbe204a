"""Print findings: rich text for people, JSON, SARIF 2.1.0 and GitHub annotations for tools. Every command's
findings (:class:`ddcheck.base.findings.Finding`) are printed here: a scan's :class:`ScanResult`, and
``ddcheck config``'s, after its own header (:func:`render_lines`, :func:`finding_lines`)."""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from ddcheck.base import __version__
from ddcheck.base.findings import Finding, FixSafety, ScanResult, Severity

TYPE_CHECKING = False  # read by type checkers as typing.TYPE_CHECKING; a scan does not load typing
if TYPE_CHECKING:
    from typing import IO

    from rich.console import Console

STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "cyan"}
FORMATS = ("text", "json", "sarif", "github")


def render(result: ScanResult, fmt: str, stream: IO[str], console: Callable[[], Console], source_texts=None,
           exit_code: int | None = None, not_judged: list[str] = ()) -> None:
    """Machine formats go straight to ``stream``; so does text for a reader that is not a terminal,
    where rich would write the same characters (see :func:`plain`); else text goes through the rich
    ``console()`` (made, and rich loaded, only then). ``exit_code``: the command's, a field of the JSON
    and the SARIF invocation. ``not_judged``: what the verdict could not cover, and why (SARIF: a run
    whose execution did not succeed, with a notification each; GitHub: an annotation each)."""
    if fmt == "json":
        stream.write(to_json(result, exit_code) + "\n")
    elif fmt == "sarif":
        stream.write(json.dumps(to_sarif(result, exit_code, not_judged), indent=1) + "\n")
    elif fmt == "github":
        stream.write(to_github(result, not_judged))
    else:
        render_lines(text_lines(result, source_texts or {}), stream, console)


def render_lines(lines: list[Line], stream: IO[str], console: Callable[[], Console]) -> None:
    """Text lines to ``stream`` as they are where rich would print them so (:func:`plain`), else through
    the rich ``console()``."""
    if plain(stream, lines):
        stream.write("".join("".join(t for t, _ in line) + "\n" for line in lines))
    else:
        text(lines, console())


def to_json(result: ScanResult, exit_code: int | None = None) -> str:
    if exit_code is None:
        return result.to_json(indent=1)
    return json.dumps({**result.to_dict(), "exit_code": exit_code}, indent=1, ensure_ascii=False)


Line = list[tuple[str, str]]  # one line of the text report: (text, rich style) spans


def text_lines(result: ScanResult, source_texts: dict[str, dict[int, str]]) -> list[Line]:
    """The text report, line by line, with the styles a terminal shows (``source_texts``: the lines it
    quotes, as :attr:`ScanResult.sources` holds them)."""
    out: list[Line] = [[(note, "dim")] for note in result.notes]
    out += finding_lines(result.findings, source_texts)
    for e in result.errors:
        out.append([(f"{e.path}: ", "bold"), ("cannot scan: ", "bold magenta"), (e.message, "")])
    for e in result.skipped:
        out.append([(f"{e.path}: ", "bold"), ("skipped, not valid Python: ", "magenta"), (e.message, "")])
    counts = {s: sum(1 for f in result.findings if f.severity == s) for s in Severity}
    fixable = sum(1 for f in result.findings if f.fix_safety is FixSafety.safe)
    summary = (f"{result.files_scanned} files scanned: {counts[Severity.error]} errors, "
               f"{counts[Severity.warning]} warnings, {counts[Severity.info]} info"
               + (f", {len(result.errors)} files could not be scanned" if result.errors else "")
               + (f", {len(result.skipped)} files skipped: not valid Python" if result.skipped else "")
               + (f"; {fixable} fixable with `ddcheck fix`" if fixable else ""))
    out.append([(summary, "bold")])
    return out


def finding_lines(findings: list[Finding], source_texts: dict[str, dict[int, str]]) -> list[Line]:
    """The findings, by where they are (a file, a launch argument, the launch): each its location,
    rule, severity and message, the source line it quotes, its hint; then, where the finding has them,
    the lines of the checked tree it rests on and where the launch set it."""
    out: list[Line] = []
    by_place: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_place[f.path or f.where()].append(f)
    for place, items in by_place.items():
        out.append([(place, "bold underline")])
        quoted = source_texts.get(place, {})
        for f in items:
            out.append([(f"{f.where()}: ", "bold"), (f"{f.rule} ", "bold"),
                        (f"[{f.severity.value}] ", STYLE[f.severity])]
                       + ([(f"{f.consequence}: ", "bold")] if f.consequence else []) + [(f.message, "")])
            if f.line in quoted:
                src = quoted[f.line]
                out.append([(f"    {f.line:>5} | {src}", "dim")])
                width = max(1, (f.end_column - f.column) if f.end_line == f.line else len(src) - f.column)
                out.append([("          | " + " " * f.column + "^" * width, STYLE[f.severity])])
            if f.hint:
                out.append([(f"      hint: {f.hint}", "green")])
            for e in f.evidence:
                out.append([(f"      at {e}" + (f"  {e.text}" if e.text else ""), "dim")])
            if f.set_at:
                out.append([(f"      set by the launch: {', '.join(f.set_at)}", "dim")])
        out.append([])
    return out


def text(lines: list[Line], console: Console) -> None:
    from rich.text import Text

    for line in lines:
        console.print(Text.assemble(*line))


# What rich changes in the text it prints: it drops these control characters, expands tabs and
# drops trailing whitespace past the console's width.
_REWRITTEN = re.compile(r"[\a\b\v\f\r\t\n]|\s\Z")


def plain(stream: IO[str], lines: list[Line]) -> bool:
    """Whether rich would print ``lines`` to ``stream`` as their characters alone: no styles (not a
    terminal, as rich decides it, colours not forced) and nothing rich rewrites. Then rich is not
    loaded (the pre-commit hook's scan of a file reports to a pipe)."""
    if os.environ.get("FORCE_COLOR") is not None or os.environ.get("TTY_COMPATIBLE") == "1":
        return False
    try:
        if stream.isatty():
            return False
    except (AttributeError, ValueError):  # no isatty, or closed: rich calls it no terminal either
        pass
    return not any(_REWRITTEN.search("".join(t for t, _ in line)) for line in lines)


def to_github(result: ScanResult, not_judged: list[str] = ()) -> str:
    """GitHub workflow commands; ``col`` is 1-based there."""
    level = {Severity.error: "error", Severity.warning: "warning", Severity.info: "notice"}
    out = []
    for f in result.findings:
        msg = _gh_escape((f"{f.argument}: " if f.argument and not f.path else "") + f"{f.message}"
                         + (f" {f.hint}" if f.hint else ""))
        if not f.path:  # a launch's finding with no file to point at (a launch argument, the launch)
            out.append(f"::{level[f.severity]} title={f.rule}::{msg}\n")
            continue
        if not f.line:  # a file as a whole (smoke's judgement of a backend's verify path)
            out.append(f"::{level[f.severity]} file={_gh_prop(f.path)},title={f.rule}::{msg}\n")
            continue
        out.append(f"::{level[f.severity]} file={_gh_prop(f.path)},line={f.line},col={f.column + 1},"
                   f"endLine={f.end_line},endColumn={f.end_column + 1},title={f.rule}::{msg}\n")
    for e in result.errors:
        out.append(f"::error file={_gh_prop(e.path)},title=ddcheck::{_gh_escape(e.message)}\n")
    for why in not_judged:
        out.append(f"::warning title=ddcheck not judged::{_gh_escape(why)}\n")
    return "".join(out)


def _gh_escape(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_escape(s).replace(":", "%3A").replace(",", "%2C")


def to_sarif(result: ScanResult, exit_code: int | None = None, not_judged: list[str] = ()) -> dict:
    """SARIF 2.1.0, with a ``fixes`` entry wherever a fix is known (the hoisted form is the
    fixer's; here each site is replaced by the self-contained per-step expression).

    Relative paths are relative to ``%SRCROOT%`` (the working directory, as GitHub code scanning
    expects), absolute ones are ``file:`` URIs; columns are code points, like ``ddcheck``'s own."""
    from ddcheck.diagnostics.baseline import content_fingerprint
    from ddcheck.rules import all_rules

    rules = list(all_rules().values())
    index = {r.id: i for i, r in enumerate(rules)}
    level = {Severity.error: "error", Severity.warning: "warning", Severity.info: "note"}
    results = []
    seen: dict[tuple[str, str], int] = {}
    for f in result.findings:
        # GitHub-style "hash:occurrence": identical reads in one file stay distinct alerts, and
        # neither lines nor columns take part, so alerts survive code moving up or down.
        fp = content_fingerprint(f)
        seen[(f.path, fp)] = n = seen.get((f.path, fp), 0) + 1
        region = {"startLine": f.line, "startColumn": f.column + 1, "endLine": f.end_line, "endColumn": f.end_column + 1}
        res = {
            "ruleId": f.rule, "level": level[f.severity],
            "message": {"text": f.message + (f" {f.hint}" if f.hint else "")},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(f.path), "region": region}}],
            "partialFingerprints": {"ddcheckFingerprint/v1": f"{fp}:{n}"},
        }
        if not f.path:  # a launch's finding with no file to point at: its argument, else the launch
            res["locations"] = [{"logicalLocations": [{"name": f.argument, "kind": "parameter"}]}] \
                if f.argument else []
        elif not f.line:  # a file as a whole (smoke's judgement of a backend's verify path)
            del res["locations"][0]["physicalLocation"]["region"]
        elif not f.end_column:  # a whole line (a launch file's key, the tree's decision)
            res["locations"][0]["physicalLocation"]["region"] = {"startLine": f.line}
        if f.rule in index:
            res["ruleIndex"] = index[f.rule]
        facts = {k: v for k, v in (("consequence", f.consequence), ("backend", f.backend), ("setAt", f.set_at),
                                   ("evidence", [e.to_dict() for e in f.evidence])) if v}
        if facts:  # a launch's finding: what it does, and the tree's lines it rests on
            res["properties"] = facts
        if f.function:
            res["locations"][0]["logicalLocations"] = [{"fullyQualifiedName": f.function, "kind": "function"}]
        if f.replacement:
            res["fixes"] = [{
                "description": {"text": f"Use the per-step verify width ({f.fix_safety.value} fix)"},
                "artifactChanges": [{"artifactLocation": _artifact(f.path),
                                     "replacements": [{"deletedRegion": dict(region),
                                                       "insertedContent": {"text": f.replacement}}]}],
            }]
        results.append(res)
    driver = {
        "name": "ddcheck", "version": __version__, "semanticVersion": __version__,
        "informationUri": "https://pypi.org/project/ddcheck/",
        "rules": [{
            "id": r.id, "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.what_it_does.strip()},
            "help": {"text": r.doc(), "markdown": r.doc()},
            "defaultConfiguration": {"level": level[r.severity]},
            "properties": {"fix": r.fix, "severity": r.severity.value},
        } for r in rules],
    }
    # A run that could not judge all it covers did not complete its analysis: SARIF's "not successful",
    # each reason a notification (the exit code, 3 or 1, is the invocation's too).
    invocation = {"executionSuccessful": not not_judged, "toolExecutionNotifications": [
        {"level": "error", "message": {"text": e.message},
         "locations": [{"physicalLocation": {"artifactLocation": _artifact(e.path)}}]} for e in result.errors]
        + [{"level": "error", "message": {"text": f"not judged: {why}"}} for why in not_judged]}
    if exit_code is not None:
        invocation["exitCode"] = exit_code
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
            "invocations": [invocation],
        }],
    }


def _artifact(path: str) -> dict:
    """A SARIF artifactLocation: ``file:`` URI for absolute paths, ``%SRCROOT%``-relative otherwise.
    A wheel member ``x.whl!sglang/a.py`` is not a file on disk; it stays a readable relative
    reference (``x.whl/!/sglang/a.py``)."""
    path = path.replace("\\", "/")
    if "!" in path:
        path = path.replace("!", "/!/")
    p = PurePosixPath(path)
    if p.is_absolute():
        return {"uri": "file://" + quote(str(p), safe="/!")}
    return {"uri": quote(str(p), safe="/!"), "uriBaseId": "%SRCROOT%"}
