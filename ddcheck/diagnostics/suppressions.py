"""``# ddcheck: ignore[DD001] reason`` comments: which findings they silence, and which are broken or stale.

One implementation for every command: a scan's comments cover their line (or the statement that starts
there); a launch's (``ddcheck config``: a comment of its ``--file`` YAML, or ``--suppress ID:reason``)
cover the whole launch. A comment names rules by id or by name.

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
    # a launch's: it covers every finding of the launch; ``argument`` is the command line's words
    # (``--suppress ID:reason``, no file), else it is a line of the launch file
    whole: bool = False
    argument: str = ""


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


# A launch file's comment: after the start of the line or a blank (a YAML comment).
_LINE_RE = re.compile(r"(?:^|\s)" + SUPPRESSION_RE.pattern)


def launch_file(path: str | None, text: str | None = None) -> list[Suppression]:
    """The suppression comments of a launch's ``--config`` YAML file (each covers the whole launch)."""
    if path is None:
        return []
    if text is None:
        from pathlib import Path

        text = Path(path).read_text(encoding="utf-8", errors="replace")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE_RE.search(line)
        if m:
            rules = [r.strip() for r in (m.group("rules") or "").split(",") if r.strip()]
            start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
            out.append(Suppression(n, start, rules, m.group("reason").strip(), end_column=m.end(), whole=True))
    return out


def command_line(values: list[str]) -> list[Suppression]:
    """``--suppress ID:reason`` values (``ID`` a rule id or name), each covering the whole launch."""
    out = []
    for v in values:
        rule, _, reason = v.partition(":")
        out.append(Suppression(0, 0, [rule.strip()] if rule.strip() else [], reason.strip(), whole=True,
                               argument=f"--suppress {v}"))
    return out


def _ids(s: Suppression) -> list[tuple[str, str | None]]:
    """Each rule the comment names, with its id (None: no such rule)."""
    from ddcheck.rules import get_rule

    return [(r, rule.id if (rule := get_rule(r)) is not None else None) for r in s.rules]


def apply(findings: list[Finding], suppressions: dict[str, list[Suppression]],
          relpaths: dict[str, str]) -> list[Finding]:
    """Drop suppressed findings; add DD100 (malformed) and DD101 (unused) findings.

    ``suppressions`` maps a file's display path -> its parsed comments (display, not relpath: two
    targets can share a relpath when pre-commit passes a/backend.py and b/backend.py);
    ``relpaths`` maps display path -> relpath. A comment applies to findings on its line or in the
    statement that starts on its line. A comment without a rule id or a reason, or naming a rule that
    does not exist, is DD100 and suppresses nothing; a rule id that silenced no finding is DD101.
    """
    ids = {id(s): _ids(s) for entries in suppressions.values() for s in entries}
    whole = [s for entries in suppressions.values() for s in entries if s.whole]  # a launch's
    kept = []
    for f in findings:
        entries = [*whole, *(s for s in suppressions.get(f.path, []) if not s.whole)] if whole else \
            suppressions.get(f.path, [])
        hit = next((s for s in entries if (s.whole or s.line in (f.line, f.stmt_line)) and s.reason
                    and any(i == f.rule for _, i in ids[id(s)])), None)
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
            unknown = [r for r, i in ids[id(s)] if i is None]
            if unknown:
                kept.append(_meta("DD100", path, relpath, s, "unknown_rule", rules=", ".join(unknown)))
            unused = [r for r, i in ids[id(s)] if i is not None and i not in s.used]
            if unused:
                kept.append(_meta("DD101", path, relpath, s, "unused", rules=", ".join(unused)))
    return kept


def apply_to_launch(findings: list[Finding], file: str | None, entries: list[Suppression]) -> list[Finding]:
    """:func:`apply` for a launch: each of ``entries`` (:func:`launch_file`'s, written in ``file``, and
    :func:`command_line`'s) covers every finding, wherever it is located."""
    by_path: dict[str, list[Suppression]] = {}
    for s in entries:
        by_path.setdefault(file if file and not s.argument else "", []).append(s)
    return apply(findings, by_path, {})


def _meta(rule_id: str, path: str, relpath: str, s: Suppression, case: str, **facts: str) -> Finding:
    rule = rule_of(rule_id)
    return Finding(rule=rule_id, severity=rule.severity, path=path, relpath=relpath, line=s.line, column=s.column,
                   end_line=s.line, end_column=max(s.end_column, s.column), function=None, symbol="# ddcheck: ignore",
                   message=rule.message(case, **facts), replacement=None, stmt_line=s.line,
                   argument=s.argument or None,
                   statement=f"# ddcheck: ignore[{','.join(s.rules)}] {s.reason}".strip())
