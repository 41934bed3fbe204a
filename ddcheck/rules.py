"""Rule metadata, read from the declarative definitions under ``rules/`` (shipped as ``ddcheck._rules``).

This module owns the rule definitions, and keeps them read as JSON (:func:`all_rules`, through
:func:`ddcheck.files.kept`). A rule owns its findings' words too, as a Ruff violation owns its message:
the analysis gathers a finding's facts and names its case, the rule's ``[messages]`` and ``[hints]``
templates say it (:meth:`Rule.message`, :meth:`Rule.hint`), and its ``[what]`` table what the read of C
does there (:meth:`Rule.describe`). It imports only the ground floor
(:mod:`ddcheck.findings`, :mod:`ddcheck.files`): :mod:`ddcheck.suppressions` and :mod:`ddcheck.cache`
stand above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .findings import Severity


@dataclass(frozen=True)
class Rule:
    """One rule's definition (``rules/<id>/rule.toml`` with its examples); a key the definition does not
    know, or one it lacks, is a TypeError when the rules are loaded."""

    id: str
    name: str
    severity: Severity
    fix: str
    summary: str
    what_it_does: str
    why_bad: str
    fix_text: str
    bad_example: str = ""
    good_example: str = ""
    # good.py is exactly what `ddcheck fix --unsafe-fixes` makes of bad.py (its `# expect:` markers
    # dropped), unless the rule says why not
    good_is_fix: bool = True
    good_differs: str = ""
    # case -> template (str.format, named fields): the words of this rule's findings
    messages: dict[str, str] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)
    # case -> template: what a read of C does, as this rule's messages quote it (``{what}``)
    what: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))

    def message(self, case: str, **facts: object) -> str:
        """The message of a finding of this rule in ``case``, filled with its facts."""
        return self.messages[case].format(**facts)

    def hint(self, case: str, **facts: object) -> str:
        """The hint (how to fix it) of a finding of this rule in ``case``, filled with its facts."""
        return self.hints[case].format(**facts)

    def describe(self, case: str, **facts: object) -> str:
        """What a read of C does in ``case`` (this rule's kind of hazard), filled with its facts."""
        return self.what[case].format(**facts)

    def doc(self) -> str:
        """Markdown: what it does, why it is bad, example, fix (the Ruff rule-doc shape)."""
        return (
            f"# {self.id} {self.name} ({self.severity.value})\n\n{self.summary}\n\n"
            f"## What it does\n{self.what_it_does.strip()}\n\n## Why is this bad?\n{self.why_bad.strip()}\n\n"
            f"## Example\n```python\n{self.bad_example.rstrip()}\n```\n\n"
            + ("Use instead (what `ddcheck fix --unsafe-fixes` writes):" if self.good_is_fix else
               f"Use instead (written by hand: {self.good_differs}):")
            + "\n```python\n"
            f"{self.good_example.rstrip()}\n```\n\n## Fix ({self.fix})\n{self.fix_text.strip()}\n"
        )


def rules_dir() -> Path:
    # The package's folder from its spec: importlib.resources would cost a scan ~4 ms to import, and
    # the folder is read as files on disk in any case.
    from importlib.util import find_spec

    try:
        spec = find_spec("ddcheck._rules")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:  # a checkout that was not installed
        return Path(__file__).resolve().parents[1] / "rules"
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def all_rules() -> dict[str, Rule]:
    """Every rule by id. The definitions are read from TOML once and kept as JSON in the cache folder
    (:func:`ddcheck.files.kept`), under the stamps of what they are made from: the rule folders and this
    module (which reads them). So a scan does not load the TOML reader, nor stat the rest of ddcheck."""
    from .files import kept

    return kept("rules", [rules_dir(), Path(__file__)], _definitions, _read)


def _definitions() -> list[dict]:
    import tomllib

    out = []
    for folder in sorted(p for p in rules_dir().iterdir() if (p / "rule.toml").is_file()):
        data = tomllib.loads((folder / "rule.toml").read_text(encoding="utf-8"))
        for name, key in (("bad.py", "bad_example"), ("good.py", "good_example")):
            if (folder / name).is_file():
                data[key] = (folder / name).read_text(encoding="utf-8")
        out.append(data)
    return out


def _read(value) -> dict[str, Rule]:
    """Kept definitions as rules: text, flags and tables of text only, each a rule as Rule accepts it
    (else a TypeError or ValueError, and they are read from the TOML again, the copy rewritten)."""
    if not (isinstance(value, list) and all(
            isinstance(d, dict) and all(_plain(v) for v in d.values()) for d in value)):
        raise TypeError("not rule definitions")
    return _by_id(value)


def _plain(v) -> bool:
    return isinstance(v, (str, bool)) or isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(t, str) for k, t in v.items())


def _by_id(definitions: list[dict]) -> dict[str, Rule]:
    rules = [Rule(**d) for d in definitions]
    return {r.id: r for r in rules}


def get_rule(rule_id: str) -> Rule | None:
    rules = all_rules()
    key = rule_id.strip().upper()
    if key in rules:
        return rules[key]
    return next((r for r in rules.values() if r.name == rule_id.strip()), None)


def rule_of(rule_id: str) -> Rule:
    """A finding's rule, by exact id: its severity and words (the analysis asks, never decides)."""
    return all_rules()[rule_id]
