"""The results of a scan: findings, per-file errors, and the scan result that reporters print."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Schemas are built on first validation, not at import: a cached scan never needs them.
LAZY = ConfigDict(defer_build=True)


class Severity(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class FixSafety(str, Enum):
    """A fix that keeps every size and choice as it was is *safe*; one that changes a buffer size, a
    bound or a resolver's choice is *unsafe* (applied only with ``--unsafe-fixes``)."""

    safe = "safe"
    unsafe = "unsafe"


class Edit(BaseModel):
    """One text edit of a fix, made where the analysis understood the hazard: the span from
    ``line``/``column`` to ``end_line``/``end_column`` of the file at ``path`` ("" for the finding's own;
    else its tree relpath) becomes ``text``; an empty span inserts. Lines are 1-based, columns are
    characters from 0, as in :class:`Finding`. ``kind`` says what the edit is for: ``replace`` (the read
    of C), ``bind`` (W bound at the top of the verify block), ``refill`` (a start-up buffer refilled
    before it is read), ``add_parameter`` / ``add_keyword`` (W threaded into a helper from its callers)."""

    model_config = LAZY

    kind: Literal["replace", "bind", "refill", "add_parameter", "add_keyword"]
    line: int
    column: int
    end_line: int
    end_column: int
    text: str
    path: str = ""


class FixPlan(BaseModel):
    """A finding's fix: its safety and the text edits that make it, applied together."""

    model_config = LAZY

    safety: FixSafety
    edits: list[Edit] = Field(default_factory=list)
    # Lines of the top-level statement (class or function, decorators included) holding the fix: the
    # fixer checks only that part of the file. 0 when not known (the fixer finds it itself).
    block_first: int = 0
    block_last: int = 0


class Finding(BaseModel):
    """One verify-path use of the start-up width C.

    ``line``/``column`` point at the C expression itself (1-based line, 0-based column).
    ``replacement`` is the per-step expression that can stand there, or None when none is known.
    """

    model_config = LAZY

    rule: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    function: str | None = None
    symbol: str
    message: str
    replacement: str | None = None
    hint: str | None = None
    fix_safety: FixSafety | None = None  # None when no fix is known
    # Internal: for the fixer, baseline and suppressions; not part of the JSON schema.
    relpath: str = Field(default="", exclude=True)
    fix: FixPlan | None = Field(default=None, exclude=True)
    statement: str = Field(default="", exclude=True)
    stmt_line: int = Field(default=0, exclude=True)  # first line of the enclosing statement
    resolver: bool = Field(default=False, exclude=True)  # a width resolver's C return (DD003)


class FileError(BaseModel):

    model_config = LAZY
    path: str
    message: str


class ScanResult(BaseModel):

    model_config = LAZY
    version: int = 1
    files_scanned: int = 0
    errors: list[FileError] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    # Internal: suppression comments and relpaths per display path, applied by ddcheck.api.
    suppressions: dict = Field(default_factory=dict, exclude=True)
    displays: dict[str, str] = Field(default_factory=dict, exclude=True)
    notes: list[str] = Field(default_factory=list, exclude=True)
    sources: dict[str, list[str]] = Field(default_factory=dict, exclude=True)  # lines of files with findings

    def at_or_above(self, severity: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity.rank >= severity.rank]
