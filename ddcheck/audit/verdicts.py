"""Cells from what the units found: the scan's and the fix's facts of a backend file, a smoke report,
a config report. Each cell's status is the command's own verdict in words, its exit code the contract's,
and its evidence the ``path:line`` places the command named."""

from __future__ import annotations

import re

from ddcheck.audit.cells import Cell, Width
from ddcheck.audit.targets import Target
from ddcheck.base.errors import EXIT_CLEAN, EXIT_FINDINGS, EXIT_NOT_JUDGED

PLACE = re.compile(r"[\w./\\-]+\.py:\d+(?:-\d+)?")  # a file:line (or a line range) in a command's words
SHOWN = 8  # evidence entries of one kind in a cell: the first ones, then how many more


def _cell(t: Target, backend: str, width: Width, column: str, **kw) -> Cell:
    return Cell(target=t.spec, label=t.label, backend=backend, width=width.label, column=column,
                verify_width=width.verify_width, num_draft_tokens=width.num_draft_tokens, **kw)


def _more(items: list[str], n: int) -> list[str]:
    return items[:SHOWN] + ([f"... {n - SHOWN} more"] if n > SHOWN else [])


def scan_cell(t: Target, backend: str, width: Width, facts: dict) -> Cell:
    """The scan's error findings in the backend's file."""
    found = facts.get("scan", [])
    rel = facts["relpath"]
    evidence = _more([f"{rel}:{f['line']}: {f['rule']} {f['symbol']} in {f['function'] or 'module'}" for f in found],
                     len(found))
    errors = facts.get("errors") or []
    if errors:  # the scan could not read the file: a listed finding (scan's exit 1)
        return _cell(t, backend, width, "scan", status="unreadable", exit_code=EXIT_FINDINGS,
                     verdict="; ".join(errors), evidence=[rel], count=len(found))
    if not found:
        return _cell(t, backend, width, "scan", status="right", exit_code=EXIT_CLEAN,
                     verdict=f"no error finding in {rel}", evidence=[rel], count=0)
    rules = sorted({f["rule"] for f in found})
    return _cell(t, backend, width, "scan", status="bug", exit_code=EXIT_FINDINGS, count=len(found),
                 verdict=f"{len(found)} error finding(s) ({', '.join(rules)}), first {rel}:{found[0]['line']}",
                 evidence=evidence)


def fix_cell(t: Target, backend: str, width: Width, facts: dict) -> Cell:
    """The default fix's edits in the backend's file."""
    fix, rel = facts["fix"], facts["relpath"]
    edits = fix.get("edits", [])
    evidence = _more([f"{e['path']}:{e['line']}: {e['kind']} ({e['rule']}) -> {e['text']!r}" for e in edits],
                     len(edits))
    status = fix["status"]
    if status == "nothing to fix":
        return _cell(t, backend, width, "fix", status=status, exit_code=EXIT_CLEAN, count=0, evidence=[rel],
                     verdict=f"the default fix changes nothing in {rel}")
    if status == "no safe fix":
        left = [f"{rel}:{f['line']}: {f['rule']} {f['symbol']}" for f in facts.get("scan", []) if not f["fixable"]]
        return _cell(t, backend, width, "fix", status=status, exit_code=EXIT_FINDINGS, count=0,
                     evidence=_more(left, len(left)),
                     verdict=f"{len(left)} finding(s) in {rel} that the default fix does not rewrite")
    verdict = f"{len(edits)} edit(s) in {rel}"
    if fix.get("also"):
        verdict += f", with {', '.join(fix['also'])} (fixed together)"
    if status == "fix rolled back":
        verdict = f"the fix is not made: {fix.get('why')}"
    return _cell(t, backend, width, "fix", status=status, exit_code=EXIT_FINDINGS, count=len(edits),
                 evidence=evidence, verdict=verdict)


def words(verdict: str) -> str:
    """A smoke verdict's first words: bug, capture width, tree crash, tree mask, refused by the tree..."""
    head = verdict.split(":", 1)[0].strip()
    return "right" if head.startswith("every path correct") else head


def smoke_cell(t: Target, backend: str, width: Width, column: str, facts: dict, scan: dict | None = None,
               report: str | None = None) -> Cell:
    """A smoke run's cell. A bug that smoke places nowhere in the tree carries the scan's places in the
    backend's file (where it lays the batch out with C)."""
    code, verdict = facts["exit_code"], facts["verdict"]
    case = f"W={facts['width']} C={facts['num_draft_tokens']}"
    evidence = [f"{p}: the verdict" for p in dict.fromkeys(PLACE.findall(verdict))]
    g = facts.get("graph_capture", {}).get(case, {})
    if g.get("at"):
        evidence.append(f"{g['at']}: the tree's graph runner captures target verify at {g.get('runner_width')}")
    if g.get("gate_at"):
        evidence.append(f"{g['gate_at']}: its replay gate")
    for what, text in (("verify input", facts.get("verify_inputs", {}).get(case)),
                       ("tree mask", facts.get("tree_masks", {}).get(case))):
        for p in PLACE.findall(text or ""):
            evidence.append(f"{p}: the {what} ({text.split(' ')[0]})")
    if code not in (EXIT_CLEAN, EXIT_FINDINGS):
        why = "; ".join(f"{n['why']} (to judge it: {n['to_judge']})" for n in facts.get("not_judged", [])) or verdict
        return _cell(t, backend, width, column, status="not judged", exit_code=EXIT_NOT_JUDGED, verdict=verdict,
                     evidence=evidence, not_judged=why, report=report, seconds=facts.get("seconds", 0.0))
    status = words(verdict) if code == EXIT_FINDINGS else \
        ("refused by the tree" if verdict.startswith("refused by the tree") else "right")
    if code == EXIT_FINDINGS and not any(": the verdict" in e for e in evidence) and scan:
        found = scan.get("scan", [])
        evidence += _more([f"{scan['relpath']}:{f['line']}: {f['rule']} {f['symbol']} (scan)" for f in found],
                          len(found))
    return _cell(t, backend, width, column, status=status, exit_code=code, verdict=verdict, evidence=evidence,
                 report=report, seconds=facts.get("seconds", 0.0))


def graph_ran(facts: dict) -> bool:
    """Whether the W != C case's graph path ran in this smoke run."""
    return any(p["case"] == "ddtree" and p["path"] == "graph" for p in facts.get("paths", []))


def capture_cell(t: Target, backend: str, width: Width, facts: dict, report: str | None = None) -> Cell:
    """The capture width: the smoke run with graphs captured where the tree's graph runner captures them."""
    if facts["exit_code"] in (EXIT_CLEAN, EXIT_FINDINGS) and not graph_ran(facts):
        case = f"W={facts['width']} C={facts['num_draft_tokens']}"
        if facts.get("graph_capture", {}).get(case, {}).get("source") == "off":
            return _cell(t, backend, width, "capture", status="no CUDA graphs", exit_code=EXIT_CLEAN,
                         verdict="the launch runs target verify without CUDA graphs: no graph keeps a width",
                         report=report)
        why = next((n for n in facts.get("limitations", []) if "graph path" in n),
                   "the graph path did not run in this smoke run")
        g = facts.get("graph_capture", {}).get(case, {})
        if g.get("gate_at") and g.get("runner_width") not in (None, facts["width"]):
            # the tree's own replay gate sends a batch of this width to the eager path, which smoke judged
            return _cell(t, backend, width, "capture", status="runs eagerly", exit_code=facts["exit_code"],
                         verdict=why, evidence=[f"{g['at']}: the tree's graph runner captures target verify at "
                                                f"{g['runner_width']}", f"{g['gate_at']}: its replay gate"],
                         report=report)
        return _cell(t, backend, width, "capture", status="not judged", exit_code=EXIT_NOT_JUDGED,
                     verdict=why, not_judged=why, report=report)
    return smoke_cell(t, backend, width, "capture", facts, report=report)


def unjudged(t: Target, backend: str, width: Width, column: str, why: str) -> Cell:
    return _cell(t, backend, width, column, status="not judged", exit_code=EXIT_NOT_JUDGED, verdict=why,
                 not_judged=why)


def same_as(cell: Cell, column: str) -> Cell:
    """The ``fixed`` cell where the default fix changes nothing: the shipped run's verdict, said so."""
    return cell.model_copy(update={"column": column, "verdict": f"= the shipped run (the fix changes nothing): "
                                                                 f"{cell.verdict}"})


def _name(finding: dict) -> str:
    """A config finding's rule, by name (as the verdicts say it)."""
    from ddcheck.rules import get_rule

    rule = get_rule(finding.get("rule") or "")
    return rule.name if rule is not None else str(finding.get("rule"))


def config_cell(t: Target, width: Width, backend: str, report: dict, path: str | None) -> Cell:
    """``ddcheck config``'s verdict on a launch: its error findings (each with where), or why not judged."""
    code = report.get("exit_code", EXIT_NOT_JUDGED)
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    evidence = []
    for f in report.get("findings", []):
        for e in f.get("evidence", []):
            evidence.append(f"{e['path']}:{e['line']}: {_name(f)}" + (f" ({e['text']})" if e.get("text") else ""))
    s = report.get("settings") or {}
    for k in ("verify_input_at", "capture_at", "replay_gate_at"):
        if s.get(k):
            evidence.append(f"{s[k]}: {k.removesuffix('_at').replace('_', ' ')}")
    if code == EXIT_FINDINGS:
        return _cell(t, backend, width, "config", status="bug", exit_code=EXIT_FINDINGS, report=path,
                     verdict="; ".join(f"{_name(f)}: {f.get('message')}" for f in errors), evidence=evidence)
    if code != EXIT_CLEAN:
        why = "; ".join(report.get("not_judged") or []) or "ddcheck config could not judge the launch"
        return _cell(t, backend, width, "config", status="not judged", exit_code=EXIT_NOT_JUDGED, verdict=why,
                     not_judged=why, evidence=evidence, report=path)
    return _cell(t, backend, width, "config", status="right", exit_code=EXIT_CLEAN, report=path, evidence=evidence,
                 verdict=f"judged: W = {s.get('verify_width')}, C = {s.get('num_draft_tokens')}, no error finding")
