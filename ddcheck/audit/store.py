"""Audit results kept: each unit of work (a target's scan and fix, one smoke run, one launch) is kept
under ``audit/`` of ddcheck's cache, keyed as ``ddcheck config``'s results are (:mod:`ddcheck.config.kept`):
ddcheck's code and Python, the stamps of the folders Python imports from (torch, triton...), the tree's
content (the scan's content key) and the unit's options. A re-run answers every unchanged unit from
here; an interrupted run keeps the units that finished.

Only what was judged is kept (exit 0 or 1): a unit that could not be judged (a harness failure, a
worker ended by Ctrl-C) runs again next time, as config's could-not-judge does. Entries are JSON read
back through pydantic (data, never code); a corrupt one is a miss.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from ddcheck.tree.files import write_json
from ddcheck.tree.sources import cache_dir

VERSION = 1
MAX_ENTRIES = 4096  # units of each folder: a whole release range with every backend fits


class Kept(BaseModel):
    """One unit's result: its facts (what later units and the cells are made from)."""

    facts: dict = Field(default_factory=dict)
    seconds: float = 0.0


def folder() -> Path:
    return cache_dir() / "audit"


def key(tree_key: str, unit: dict) -> str:
    """The key of one unit (``unit``: its kind and options, JSON values) on a tree of content ``tree_key``."""
    from ddcheck.scan import cache
    from ddcheck.config.kept import site_stamps

    head = {"version": VERSION, "python": sys.version, "executable": sys.executable, "code": cache.code_digest(),
            "site": site_stamps(), "tree": tree_key, "unit": unit}
    return hashlib.blake2b(json.dumps(head, sort_keys=True).encode(), digest_size=20).hexdigest()


def path(k: str) -> Path:
    return folder() / f"{k}.json"


def report_path(k: str) -> Path:
    """Where a unit's whole report (smoke's, config's) is kept, beside its entry."""
    return folder() / "reports" / f"{k}.json"


def load(k: str) -> Kept | None:
    try:
        return Kept.model_validate_json(path(k).read_bytes())
    except Exception:  # noqa: BLE001 - missing, corrupt or from another version: a miss
        return None


def store(k: str, kept: Kept, report: dict | None = None) -> bool:
    """Keep a judged unit (its report first: an entry is never there without it)."""
    if report is not None and not write_json(report_path(k), report, keep=MAX_ENTRIES):
        return False
    return write_json(path(k), json.loads(kept.model_dump_json()), keep=MAX_ENTRIES)
