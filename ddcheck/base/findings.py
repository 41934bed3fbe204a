"""The results of a scan: findings, per-file errors, and the scan result that reporters print.

Plain dataclasses: a scan builds them and reporters print them, both from trusted code, so nothing
here needs a validation library on the hot path. Data from outside (the result cache) comes in
through ``finding_from_dict`` / ``file_error_from_dict``, which check every field's type and raise
``ValueError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import Enum

TYPE_CHECKING = False  # read by type checkers as typing.TYPE_CHECKING; a scan does not load typing
if TYPE_CHECKING:
    from typing import Any


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


EDIT_KINDS = ("replace", "bind", "refill", "add_parameter", "add_keyword")
INTERNAL = {"internal": True}  # field metadata: kept for the fixer, baseline and cache, not in the JSON schema


@dataclass(frozen=True)
class Edit:
    """One text edit of a fix, made where the analysis understood the hazard: the span from
    ``line``/``column`` to ``end_line``/``end_column`` of the file at ``path`` ("" for the finding's own;
    else its tree relpath) becomes ``text``; an empty span inserts. Lines are 1-based, columns are
    characters from 0, as in :class:`Finding`. ``kind`` says what the edit is for: ``replace`` (the read
    of C), ``bind`` (W bound at the top of the verify block), ``refill`` (a start-up buffer refilled
    before it is read), ``add_parameter`` / ``add_keyword`` (W threaded into a helper from its callers)."""

    kind: str  # one of EDIT_KINDS
    line: int
    column: int
    end_line: int
    end_column: int
    text: str
    path: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EDIT_KINDS:
            raise ValueError(f"unknown edit kind {self.kind!r}")


@dataclass
class FixPlan:
    """A finding's fix: its safety and the text edits that make it, applied together."""

    safety: FixSafety
    edits: list[Edit] = field(default_factory=list)
    # Lines of the top-level statement (class or function, decorators included) holding the fix: the
    # fixer checks only that part of the file. 0 when not known (the fixer finds it itself).
    block_first: int = 0
    block_last: int = 0


@dataclass(frozen=True)
class Evidence:
    """A line of the checked tree that a finding rests on: where the tree decided it (its relpath, 1-based
    line, and what the line says)."""

    path: str
    line: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text}


@dataclass
class Finding:
    """One diagnostic of any command: a rule's, with the rule's severity.

    A scan's finding is one verify-path use of the start-up width C: ``line``/``column`` point at the C
    expression itself (1-based line, 0-based column); ``replacement`` is the per-step expression that
    can stand there, or None when none is known. A launch's finding (``ddcheck config``) is located in
    the launch's ``--file`` YAML (``path``, ``line``), else at the launch ``argument`` that set it, else
    in the tree where the tree decided it, and carries its ``evidence`` (the tree's lines), its
    ``consequence`` (what the launch does when it runs), the ``backend`` it concerns and ``set_at``
    (where the launch set each flag the rule concerns). Those fields are in the JSON only when set, so a
    scan's JSON keeps its published schema.
    """

    rule: str
    severity: Severity
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    symbol: str
    message: str
    function: str | None = None
    replacement: str | None = None
    hint: str | None = None
    fix_safety: FixSafety | None = None  # None when no fix is known
    argument: str | None = None  # the launch argument it is located at (no file: path "")
    consequence: str | None = None  # REJECT, CRASH, CORRUPT, PERF, PARSE: what the launch does when it runs
    backend: str | None = None  # the attention backend a launch finding concerns
    set_at: list[str] = field(default_factory=list)  # where the launch set the rule's flags
    evidence: list[Evidence] = field(default_factory=list)  # the tree's lines it rests on
    relpath: str = field(default="", metadata=INTERNAL)
    fix: FixPlan | None = field(default=None, metadata=INTERNAL)
    statement: str = field(default="", metadata=INTERNAL)
    stmt_line: int = field(default=0, metadata=INTERNAL)  # first line of the enclosing statement
    resolver: bool = field(default=False, metadata=INTERNAL)  # a width resolver's C return (DD003)

    # The JSON schema's order (public fields only), kept as it was published.
    PUBLIC = ("rule", "severity", "path", "line", "column", "end_line", "end_column", "function", "symbol",
              "message", "replacement", "hint", "fix_safety")
    # Public fields a scan never sets: in the JSON only where set.
    OPTIONAL = ("argument", "consequence", "backend", "set_at", "evidence")

    def to_dict(self) -> dict[str, Any]:
        out = {name: _plain(getattr(self, name)) for name in self.PUBLIC}
        for name in self.OPTIONAL:
            value = getattr(self, name)
            if value:
                out[name] = [e.to_dict() for e in value] if name == "evidence" else \
                    list(value) if isinstance(value, list) else value
        return out

    def where(self) -> str:
        """Its location as a reader names it: ``path:line:col`` (``path`` for a file as a whole: line 0), else
        the launch argument, else the launch."""
        if self.path:
            return f"{self.path}:{self.line}:{self.column + 1}" if self.line else self.path
        return self.argument or "the launch"


@dataclass
class FileError:
    """A file that could not be scanned, and why."""

    path: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "message": self.message}


@dataclass
class ScanResult:
    """A scan's outcome: how many files it read, their findings and the files it could not scan."""

    version: int = 1
    files_scanned: int = 0
    errors: list[FileError] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # files that could hold no finding and are not valid Python (``--check-syntax``): said, not failed
    skipped: list[FileError] = field(default_factory=list)
    # Internal: suppression comments and relpaths per display path, applied by ddcheck.scan.api.
    suppressions: dict = field(default_factory=dict, metadata=INTERNAL)
    displays: dict[str, str] = field(default_factory=dict, metadata=INTERNAL)
    notes: list[str] = field(default_factory=list, metadata=INTERNAL)
    # The lines the text report quotes, of the files with findings: display path -> {line number: that
    # line without its "\n"}.
    sources: dict[str, dict[int, str]] = field(default_factory=dict, metadata=INTERNAL)

    def at_or_above(self, severity: Severity) -> list[Finding]:
        return [f for f in self.findings if f.severity.rank >= severity.rank]

    def to_dict(self) -> dict[str, Any]:
        """The published JSON schema (``ddcheck scan --format json``)."""
        out = {"version": self.version, "files_scanned": self.files_scanned,
               "errors": [e.to_dict() for e in self.errors], "findings": [f.to_dict() for f in self.findings]}
        if self.skipped:  # only --check-syntax finds any; every other document keeps its shape
            out["skipped"] = [e.to_dict() for e in self.skipped]
        return out

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# -- from JSON (the result cache): every field's type is checked; any mismatch is a ValueError --------

def _check(cls: type, raw: Any, convert: dict[str, Any] | None = None) -> Any:
    if not isinstance(raw, dict):
        raise ValueError(f"{cls.__name__}: not an object")
    convert = convert or {}
    allowed = _allowed(cls)
    values = {}
    for name, value in raw.items():
        if name in convert:
            value = convert[name](value)
        elif name not in allowed:
            raise ValueError(f"{cls.__name__}: unknown field {name!r}")
        elif type(value) not in allowed[name]:  # exact types: True is not an int here
            raise ValueError(f"{cls.__name__}.{name}: {value!r} is not {' | '.join(t.__name__ for t in allowed[name])}")
        values[name] = value
    return cls(**values)


_TYPES = {"int": int, "str": str, "bool": bool, "None": type(None)}
_ALLOWED: dict[type, dict[str, tuple[type, ...]]] = {}


def _allowed(cls: type) -> dict[str, tuple[type, ...]]:
    """Per field, the exact types its annotation (``int``, ``str | None`` ...) admits; fields of
    other annotations admit none (a converter must read them)."""
    if cls not in _ALLOWED:
        _ALLOWED[cls] = {f.name: tuple(_TYPES[p.strip()] for p in str(f.type).split("|") if p.strip() in _TYPES)
                         for f in fields(cls)}
    return _ALLOWED[cls]


def _list(item) -> Any:
    def convert(value: Any) -> list:
        if not isinstance(value, list):
            raise ValueError(f"{value!r} is not a list")
        return [item(v) for v in value]
    return convert


def _optional(convert) -> Any:
    return lambda value: None if value is None else convert(value)


def edit_from_dict(raw: Any) -> Edit:
    return _check(Edit, raw, {"kind": lambda value: value})  # Edit itself rejects an unknown kind


def fix_plan_from_dict(raw: Any) -> FixPlan:
    return _check(FixPlan, raw, {"safety": FixSafety, "edits": _list(edit_from_dict)})


def evidence_from_dict(raw: Any) -> Evidence:
    return _check(Evidence, raw)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a str")
    return value


def finding_from_dict(raw: Any) -> Finding:
    return _check(Finding, raw, {"severity": Severity, "fix_safety": _optional(FixSafety),
                                 "fix": _optional(fix_plan_from_dict), "set_at": _list(_text),
                                 "evidence": _list(evidence_from_dict)})


def file_error_from_dict(raw: Any) -> FileError:
    return _check(FileError, raw)
