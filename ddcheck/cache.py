"""Whole-scan result cache: a repeated scan of an unchanged tree is answered from disk.

The key covers ddcheck's own code, the settings, and for every tree either the wheel's
(path, size, mtime) or each Python file's (relpath, size, mtime): touching any file misses.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path

from .sources import SourceTree, cache_dir

VERSION = 1


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
            h.update(f"wheel\0{Path(tree.wheel).resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        elif tree.kind == "dir" and tree.root is not None:
            h.update(f"dir\0{Path(tree.root).resolve()}\0{tree.label}\0{len(tree.files)}".encode())
            for f in tree.files:
                if f.stamp is None:
                    return None
                h.update(f"{f.relpath}\0{f.stamp[0]}\0{f.stamp[1]}\n".encode())
        else:
            return None
    return h.hexdigest()


def _path(k: str) -> Path:
    return cache_dir() / "scan" / f"{k}.pickle"


def load(k: str):
    try:
        with open(_path(k), "rb") as fh:
            return pickle.load(fh)
    except Exception:  # noqa: BLE001 - a cache written by another version is just a miss
        return None


def store(k: str, result) -> None:
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs speed
