"""What a launch check finds, as data: a finding with its rule's name, consequence, fix and the tree's
evidence. Apart from the checks, so that reading a kept report (:mod:`ddcheck.config.kept`) loads none of
them."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field, model_validator


class Evidence(BaseModel):
    path: str
    line: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class Consequence(str, Enum):
    REJECT = "REJECT"
    CRASH = "CRASH"
    CORRUPT = "CORRUPT"
    PERF = "PERF"
    PARSE = "PARSE"
    NONE = "NONE"  # about ddcheck's own input (a suppression), not the launch


class ConfigFinding(BaseModel):
    id: str  # the check's name for it, which is its rule's name (rules/DD2xx): kept for JSON consumers
    level: str = "error"  # error | warning | info
    consequence: Consequence
    message: str
    fix: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    backend: str | None = None
    rule: str | None = None  # the rule's id (DD2xx), from the rule registry by ``id``
    decided_at: str | None = None  # where the tree decided it (file:line: the first evidence)
    set_at: list[str] = Field(default_factory=list)  # where the launch set it (flags, or --file YAML lines)
    judged: bool = True  # False: the check could not run (a could-not-judge, exit 3, never a 0)

    @model_validator(mode="after")
    def _named_rule(self):
        from ddcheck.rules import rule_named

        rule = rule_named(self.id)
        self.rule = rule.id if rule is not None else None
        if self.decided_at is None and self.evidence:
            self.decided_at = str(self.evidence[0])
        return self


def _f(id, consequence, message, fix="", evidence=(), level=None, backend=None, judged=True) -> ConfigFinding:
    level = level or ("warning" if consequence == Consequence.PERF else "error")
    return ConfigFinding(id=id, level=level, consequence=consequence, message=message, fix=fix,
                         evidence=[e for e in evidence if e is not None], backend=backend, judged=judged)
