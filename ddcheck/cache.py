"""Whole-scan result cache: a repeated scan of an unchanged tree is answered from disk.

The key covers ddcheck's own code, the settings, and for every tree either the wheel's
(path, size, mtime, ctime, inode) or each Python file's (relpath, size, mtime, ctime, inode):
touching any file misses, also an edit that puts back the old size and mtime (that sets ctime).
Entries are JSON (a cache restored from elsewhere can hold data, never code), validated on load
(a corrupt entry is a miss and is rewritten), and at most ``MAX_ENTRIES`` are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

from .sources import SourceTree, cache_dir

VERSION = 2
MAX_ENTRIES = 32


@lru_cache(maxsize=1)
def _code_digest() -> str:
    h = hashlib.blake2b(digest_size=16)
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def key(trees: list[SourceTree], settings_json: str) -> str | None:
    """None when a tree cannot be keyed cheaply (a single file: its helpers live elsewhere)."""
    if not trees or any(t.kind not in ("wheel", "dir") for t in trees):
        return None
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{VERSION}\0{sys.version}\0{_code_digest()}\0{settings_json}".encode())
    for tree in trees:
        if tree.kind == "wheel" and tree.wheel is not None:
            st = os.stat(tree.wheel)
            h.update(f"wheel\0{Path(tree.wheel).resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
                     f"\0{st.st_ino}".encode())
        elif tree.kind == "dir" and tree.root is not None:
            h.update(f"dir\0{Path(tree.root).resolve()}\0{tree.label}\0{len(tree.files)}".encode())
            for f in tree.files:
                if f.stamp is None:
                    return None
                h.update(f"{f.relpath}\0{chr(0).join(map(str, f.stamp))}\n".encode())
        else:
            return None
    return h.hexdigest()


def _path(k: str) -> Path:
    return cache_dir() / "scan" / f"{k}.json"


def load(k: str):
    from .findings import FileError, Finding, FixPlan, ScanResult
    from .suppressions import Suppression

    try:
        data = json.loads(_path(k).read_bytes())
        findings = []
        for raw in data["findings"]:
            internal = raw.pop("_internal")
            fix = internal.pop("fix")
            findings.append(Finding(**raw, **internal, fix=FixPlan(**fix) if fix else None))
        return ScanResult(
            files_scanned=data["files_scanned"], errors=[FileError(**e) for e in data["errors"]], findings=findings,
            suppressions={d: [Suppression(**{**x, "used": set(x["used"])}) for x in v]
                          for d, v in data["suppressions"].items()},
            displays=data["displays"], sources=data["sources"])
    except Exception:  # noqa: BLE001 - missing, corrupt or from another version: a miss
        return None


def store(k: str, result) -> None:
    from dataclasses import asdict

    internal_fields = ("relpath", "statement", "stmt_line", "resolver")
    data = {
        "files_scanned": result.files_scanned,
        "errors": [e.model_dump(mode="json") for e in result.errors],
        "findings": [{**f.model_dump(mode="json"), "_internal": {
            **{n: getattr(f, n) for n in internal_fields},
            "fix": f.fix.model_dump(mode="json") if f.fix else None}} for f in result.findings],
        "suppressions": {d: [{**asdict(x), "used": sorted(x.used)} for x in v] for d, v in result.suppressions.items()},
        "displays": result.displays,
        "sources": result.sources,  # the lines the text reporter quotes
    }
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
        _prune(path.parent)
    except (OSError, TypeError, ValueError):
        pass  # a read-only cache only costs speed


def _prune(folder: Path) -> None:
    """Keep the newest ``MAX_ENTRIES`` entries (and no pickles of older versions)."""
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[MAX_ENTRIES:] + list(folder.glob("*.pickle")):
        try:
            old.unlink()
        except OSError:
            pass
