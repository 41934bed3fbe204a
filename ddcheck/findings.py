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
    """A change a fix needs away from the finding itself, made where the hazard was understood.

    ``add_parameter``: the function whose name starts at ``line``/``column`` gains the keyword parameter
    ``name=None``. ``add_keyword``: the call spanning ``line``/``column`` to ``end_line``/``end_column``
    gains ``name=value``. ``refill``: right after the fix binds W at its anchor, the buffer ``value``
    (offsets laid out stepping by C from 0) is refilled in place stepping by W. Columns are characters,
    as in :class:`Finding`."""

    model_config = LAZY

    kind: Literal["add_parameter", "add_keyword", "refill"]
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0
    name: str
    value: str = ""
    path: str = ""  # the tree relpath of the file it changes; "" for the finding's own file


class FixPlan(BaseModel):
    """What the fixer needs from the analysis: where the verify block starts and how W is spelled."""

    model_config = LAZY

    safety: FixSafety
    anchor_line: int  # first statement of the verify block, where the per-step width is bound
    anchor_column: int
    expression: str  # W with its fallback to C, e.g. getattr(spec_info, "draft_token_num", None) or C
    # Lines of the top-level statement (class or function, decorators included) holding the fix: the
    # fixer rewrites only that part of the file. 0 when not known (the fixer finds it itself).
    block_first: int = 0
    block_last: int = 0
    edits: list[Edit] = Field(default_factory=list)  # e.g. W threaded in from the callers of a helper
    replace_site: bool = True  # False: the finding's own expression stays (a buffer refilled before it)


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
