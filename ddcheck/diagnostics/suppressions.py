"""``# ddcheck: ignore[DD001] reason`` comments: which findings they silence, and which are broken or stale.

Stands above :mod:`ddcheck.rules` (which owns the rule definitions: the ids a comment may name, the
severity and words of DD100/DD101) and below :mod:`ddcheck.scan.cache`, which stores the parsed comments.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from ddcheck.base.findings import Finding
from ddcheck.rules import rule_of

MARKER = b"ddcheck:"
# The reason runs to the end of the comment or up to a following `#` comment.
SUPPRESSION_RE = re.compile(r"#\s*ddcheck:\s*ignore(?:\[(?P<rules>[^\]]*)\])?(?P<reason>[^#]*)")


@dataclass
class Suppression:
    """A ``# ddcheck: ignore[...]`` comment: where it is, the rules it names, its reason."""

    line: int
    column: int
    rules: list[str]
    reason: str
    end_column: int = 0  # end of the suppression text in the comment (0-based, exclusive)
    used: set[str] = field(default_factory=set)


def parse(text: str) -> list[Suppression]:
    out = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        m = SUPPRESSION_RE.search(tok.string)
        if not m:
            continue
        rules = [r.strip().upper() for r in (m.group("rules") or "").split(",") if r.strip()]
        start = tok.start[1] + m.start()
        out.append(Suppression(tok.start[0], start, rules, m.group("reason").strip(),
                               end_column=start + len(m.group(0).rstrip())))
    return out


def apply(findings: list[Finding], suppressions: dict[str, list[Suppression]],
          relpaths: dict[str, str]) -> list[Finding]:
    """Drop suppressed findings; add DD100 (malformed) and DD101 (unused) findings.

    ``suppressions`` maps a file's display path -> its parsed comments (display, not relpath: two
    targets can share a relpath when pre-commit passes a/backend.py and b/backend.py);
    ``relpaths`` maps display path -> relpath. A comment applies to findings on its line or in the
    statement that starts on its line. A comment without a rule id or a reason, or naming a rule that
    does not exist, is DD100 and suppresses nothing; a rule id that silenced no finding is DD101.
    """
    from ddcheck.rules import all_rules

    known = all_rules()
    kept = []
    for f in findings:
        entries = suppressions.get(f.path, [])
        hit = next((s for s in entries if s.line in (f.line, f.stmt_line) and f.rule in s.rules and s.reason), None)
        if hit:
            hit.used.add(f.rule)
        else:
            kept.append(f)
    for path, entries in suppressions.items():
        relpath = relpaths.get(path, path)
        for s in entries:
            if not s.rules or not s.reason:
                kept.append(_meta("DD100", path, relpath, s, "no_rule_id" if not s.rules else "no_reason"))
                continue
            unknown = [r for r in s.rules if r not in known]
            if unknown:
                kept.append(_meta("DD100", path, relpath, s, "unknown_rule", rules=", ".join(unknown)))
            unused = [r for r in s.rules if r not in s.used and r in known]
            if unused:
                kept.append(_meta("DD101", path, relpath, s, "unused", rules=", ".join(unused)))
    return kept


def _meta(rule_id: str, path: str, relpath: str, s: Suppression, case: str, **facts: str) -> Finding:
    rule = rule_of(rule_id)
    return Finding(rule=rule_id, severity=rule.severity, path=path, relpath=relpath, line=s.line, column=s.column,
                   end_line=s.line, end_column=max(s.end_column, s.column), function=None, symbol="# ddcheck: ignore",
                   message=rule.message(case, **facts), replacement=None, stmt_line=s.line,
                   statement=f"# ddcheck: ignore[{','.join(s.rules)}] {s.reason}".strip())
