"""Which findings the user asked for (``--select``/``--ignore``, by rule id or name) and the exit code
they make with ``--fail-on``: one implementation for every command that reports findings (scan,
config). Suppressions are :mod:`ddcheck.diagnostics.suppressions`'s."""

from __future__ import annotations

from ddcheck.base.errors import UsageError, verdict
from ddcheck.base.findings import Finding, Severity


def rule_ids(flag: str, values) -> list[str]:
    """The rule ids of ``values`` (ids in any case, or rule names); a UsageError names the unknown ones."""
    from ddcheck.rules import get_rule

    found = [(v, get_rule(v)) for v in values or []]
    unknown = [v for v, rule in found if rule is None]
    if unknown:
        raise UsageError(f"{flag}: unknown rule id(s) {', '.join(unknown)}; see `ddcheck rules`")
    return [rule.id for _, rule in found]


def wants(finding: Finding, select: list[str] | None, ignore: list[str]) -> bool:
    """Whether ``finding`` is reported: not ignored, and selected (every rule when ``select`` is None)."""
    if finding.rule in ignore:
        return False
    return select is None or finding.rule in select


def selected(findings: list[Finding], select: list[str] | None, ignore: list[str]) -> list[Finding]:
    return [f for f in findings if wants(f, select, ignore)]


def exit_code(findings: list[Finding], fail_on: Severity, errors: bool = False, not_judged: bool = False) -> int:
    """The contract's code (:mod:`ddcheck.base.errors`): 1 for a finding at or above ``fail_on`` (or an
    error the command counts as one: a file a scan could not read), else 3 where something could not be
    judged (decided before any selection: no filter turns a 3 into a 0), else 0."""
    return verdict(errors or any(f.severity.rank >= fail_on.rank for f in findings), not_judged)
