"""What an audit records: one :class:`Cell` per target x backend x width x column, and the
:class:`AuditRecord` that holds them. These pydantic models define the JSON schema the package ships
(``schema.json``, :func:`schema`); ``ddcheck audit --format json`` prints an :class:`AuditRecord`.

The columns, per row (a target, a backend, a width):

* ``scan``: ``ddcheck scan``'s error findings in the backend's file (the same for every width);
* ``smoke``: ``ddcheck smoke``'s verdict on the tree as shipped, graphs captured at W (the backend alone);
* ``fix``: the edits the default ``ddcheck fix`` (no unsafe fixes) makes in the backend's file;
* ``fixed``: smoke's verdict after that fix (the shipped run where the fix changes nothing);
* ``capture``: smoke's verdict with graphs captured where the tree's graph runner captures them (C where
  ddcheck reads none), on the fixed file: is the runner's capture width right at W;
* ``config``: for a launch of ``--launch-file``, ``ddcheck config``'s verdict on it.

Every cell has an exit code by the one contract (0 judged and right, 1 a bug or a pending fix, 3 not
judged, with why) and its evidence: ``path:line`` in the tree, as scan, smoke and config report it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, Field

from ddcheck.base.errors import EXIT_CLEAN, EXIT_FINDINGS, EXIT_NOT_JUDGED

SCHEMA_VERSION = 1
COLUMNS = ("scan", "smoke", "fix", "fixed", "capture", "config")
Column = Literal["scan", "smoke", "fix", "fixed", "capture", "config"]


class Width(BaseModel):
    """A width the backend is judged at: a ``--budget`` (W = budget + 1 against C) or a launch."""

    label: str  # "budget 16", "launch 2"
    budget: Optional[int] = None
    verify_width: Optional[int] = Field(None, description="W, tokens verified per request")
    num_draft_tokens: Optional[int] = Field(None, description="C, speculative_num_draft_tokens")
    launch: Optional[list[str]] = Field(None, description="the launch's argv (a line of --launch-file)")

    @property
    def relation(self) -> str:
        w, c = self.verify_width, self.num_draft_tokens
        if w is None or c is None:
            return ""
        return "W > C" if w > c else "W < C" if w < c else "W = C"


class Cell(BaseModel):
    """One verdict of the matrix, with its evidence."""

    target: str = Field(description="the target as given (sglang==X, a path)")
    label: str = Field(description="its short name: the release, the checkout's folder")
    backend: str
    width: str = Field(description="Width.label of the row")
    column: Column
    verify_width: Optional[int] = Field(None, description="W of the row")
    num_draft_tokens: Optional[int] = Field(None, description="C of the row")
    status: str = Field(description="the verdict in words: right, bug, capture width, tree crash, tree mask, "
                                    "refused by the tree, pending fix, nothing to fix, not judged, ...")
    exit_code: Literal[0, 1, 3] = Field(description="0 judged and right, 1 a bug or a pending fix, 3 not judged")
    verdict: str = Field("", description="the command's own words (smoke's verdict, config's findings)")
    evidence: list[str] = Field(default_factory=list, description="path:line in the tree, each with what is there")
    not_judged: Optional[str] = Field(None, description="why the cell could not be judged, and what would judge it")
    count: Optional[int] = Field(None, description="scan: error findings; fix: edits")
    report: Optional[str] = Field(None, description="the command's whole JSON report, kept in ddcheck's cache")
    seconds: float = 0.0
    cached: bool = Field(False, description="answered from ddcheck's cache in this run")

    @property
    def row(self) -> tuple[str, str, str]:
        return self.label, self.backend, self.width


class AuditRecord(BaseModel):
    """An audit: its options, the widths, every cell, and the exit code by the one contract."""

    schema_version: Literal[1] = SCHEMA_VERSION
    ddcheck: str = ""
    command: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    device: str = "cpu"
    jobs: int = 1
    seconds: float = 0.0
    targets: list[str] = Field(default_factory=list, description="labels, in order")
    backends: list[str] = Field(default_factory=list)
    widths: list[Width] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list, description="'label backend': the tree has no such file")
    notes: list[str] = Field(default_factory=list, description="how the targets were found (an offline range)")
    cells: list[Cell] = Field(default_factory=list)
    computed: int = Field(0, description="units of work (a scan and fix, a smoke run, a launch) computed in this run")
    exit_code: Literal[0, 1, 3] = 0

    def judge(self) -> "AuditRecord":
        """Set ``exit_code``: 1 any bug or pending fix, else 3 any cell not judged, else 0."""
        codes = {c.exit_code for c in self.cells}
        self.exit_code = EXIT_FINDINGS if EXIT_FINDINGS in codes else EXIT_NOT_JUDGED if EXIT_NOT_JUDGED in codes \
            else EXIT_CLEAN
        return self

    def unjudged(self) -> list[Cell]:
        return [c for c in self.cells if c.exit_code == EXIT_NOT_JUDGED]


SCHEMA_FILE = Path(__file__).with_name("schema.json")


def schema() -> dict:
    """The JSON schema of an :class:`AuditRecord` (what ``schema.json`` holds)."""
    out = AuditRecord.model_json_schema()
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = "ddcheck-audit.schema.json"
    return out


def write_schema(path: Path = SCHEMA_FILE) -> None:
    path.write_text(json.dumps(schema(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
