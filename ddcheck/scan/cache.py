"""Whole-scan result cache: a repeated scan of an unchanged tree is answered from disk.

The key covers ddcheck's own code, the settings, and the *content* of every tree: each Python
file's relpath and a BLAKE2 digest of its bytes, or for a wheel each member's name, size and CRC-32
from the archive's directory. So any edit misses, whatever it does to sizes and times. To avoid
reading every file of an unchanged tree again, digests are remembered per file under its full stat
stamp (size, mtime, ctime, inode: an edit changes ctime, which no user can set back), one small file
per tree under ``scan/digests/``; a file whose stamp changed is read and hashed again. Where no
stamp changed at all, the content key computed last time is found under a key of the stamps
(``scan/stamps/``) and the memo is not read. The source lines the text report quotes are kept
apart (``scan/sources/``). Entries are JSON (a cache restored from elsewhere can hold data, never
code), validated on load (a corrupt entry is a miss and is rewritten), and at most ``MAX_ENTRIES``
of each kind are kept.

Layering: this module stands above :mod:`ddcheck.rules` and :mod:`ddcheck.diagnostics.suppressions` (a cached
result is read back into their findings and comments), and neither imports it. The rule definitions
are kept by :mod:`ddcheck.rules`, which owns them, through :func:`ddcheck.tree.files.kept`; files are
written through :func:`ddcheck.tree.files.write_json`.
"""

from __future__ import annotations

import json
import marshal
import re
import sys
from functools import lru_cache
from pathlib import Path

from ddcheck.tree.files import stamps_digest, write_json
from ddcheck.tree.sources import SourceTree, blake2b, cache_dir, content_hash, lazy_zipfile
from ddcheck.tree.sources import _zip as wheel_archive

VERSION = 7  # 7: only the quoted lines of the sources
MAX_ENTRIES = 32
MAX_DIGESTS = 50_000  # remembered file digests of one tree; beyond it the memo starts afresh


@lru_cache(maxsize=1)
def code_digest() -> str:
    """ddcheck's own code and rule definitions, by each file's path and stat stamp (size, mtime, ctime,
    inode), as the digest memo trusts a tree's files: an edit or a reinstall changes it, and no file is
    read."""
    from ddcheck.rules import rule_roots  # rule definitions and their code decide findings: part of the code

    package = Path(__file__).resolve().parents[1]  # ddcheck/ (this is ddcheck/scan/cache.py)
    rules = [r.resolve() for r in rule_roots()]
    return stamps_digest([package, *(r for r in rules if not r.is_relative_to(package))])


def key(trees: list[SourceTree], settings_json: str) -> str | None:
    """None when a tree cannot be keyed cheaply (a single file: its helpers live elsewhere)."""
    if not trees or any(t.kind not in ("wheel", "dir") for t in trees):
        return None
    head = f"{VERSION}\0{sys.version}\0{code_digest()}\0{settings_json}".encode()
    alias = _Alias.of(trees, head)
    if alias is not None and (known := alias.load()) is not None:
        return known
    k = _content_key(trees, head)
    if k is not None and alias is not None:
        alias.store(k)
    return k


def _content_key(trees: list[SourceTree], head: bytes) -> str | None:
    h = blake2b(head, digest_size=20)
    # zipfile is loaded for wheels only
    bad_zip = (lazy_zipfile().BadZipFile,) if any(t.kind == "wheel" for t in trees) else ()
    try:
        for tree in trees:
            if tree.kind == "wheel" and tree.wheel is not None:
                h.update(f"wheel\0{Path(tree.wheel).resolve()}\n".encode())
                # the archive's directory as the tree was listed from (read once a process, ~25 ms on sglang)
                for info in wheel_archive(Path(tree.wheel)).infolist():
                    h.update(f"{info.filename}\0{info.file_size}\0{info.CRC}\n".encode())
            elif tree.kind == "dir" and tree.root is not None:
                root = Path(tree.root).resolve()
                h.update(f"dir\0{root}\0{tree.label}\0{len(tree.files)}".encode())
                digests = _Digests(root).of(tree.files)
                if digests is None:
                    return None
                for f, digest in zip(tree.files, digests):
                    h.update(f"{f.relpath}\0{digest}\n".encode())
            else:
                return None
    except (OSError, ValueError, *bad_zip):
        return None  # unreadable now: the scan reports it, uncached
    return h.hexdigest()


class _Alias:
    """The content key of directory trees whose every file still has the stat stamp it had when that
    key was computed, stored under a key of the stamps: a repeat scan of an unchanged tree then loads
    no digest memo (on sglang, a JSON of 4,700 digests, each looked up). A stamp changes
    with any edit (its ctime), which is what the digest memo trusts too; a changed stamp falls back
    to the content key, so touching a file still hits the cached result."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def of(cls, trees: list[SourceTree], head: bytes) -> "_Alias | None":
        """None unless every tree is a directory whose files all have stamps."""
        h = blake2b(head, digest_size=20)
        for tree in trees:
            if tree.kind != "dir" or tree.root is None:
                return None
            stamps = [f.stamp for f in tree.files]
            if None in stamps:
                return None
            h.update(f"dir\0{Path(tree.root).resolve()}\0{tree.label}\0{len(tree.files)}\n".encode())
            h.update("\0".join([f.relpath for f in tree.files]).encode() + b"\n")
            # the stamps as marshal writes them (a third of the time of formatting 4,700 tuples as text);
            # version 2 writes no back-references, which depend on how the ints are shared, not on them
            h.update(marshal.dumps(stamps, 2))
        return cls(cache_dir() / "scan" / "stamps" / f"{h.hexdigest()}.json")

    def load(self) -> str | None:
        try:
            k = json.loads(self.path.read_bytes())
        except Exception:  # noqa: BLE001 - missing or corrupt: a miss
            return None
        return k if isinstance(k, str) and KEY_RE.fullmatch(k) else None

    def store(self, k: str) -> None:
        _write(self.path, k)


KEY_RE = re.compile(r"[0-9a-f]{40}")


class _Digests:
    """Content digests of one tree's files, remembered under their stat stamp (one small JSON file
    per tree root under ``scan/digests/``, so a scan loads only its own)."""

    def __init__(self, root: Path):
        name = blake2b(str(root).encode(), digest_size=10).hexdigest()
        self.path = cache_dir() / "scan" / "digests" / f"{name}.json"
        self.changed = False
        try:
            data = json.loads(self.path.read_bytes())
            self.known = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, list)
                          and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], str)}
        except Exception:  # noqa: BLE001 - missing or corrupt: start afresh
            self.known = {}

    def of(self, files) -> list[str] | None:
        """Each file's digest (None when one has no stat stamp); what was hashed anew is remembered."""
        try:
            out = []
            for f in files:
                if f.stamp is None or f.disk is None:
                    return None
                stamp = "/".join(map(str, f.stamp))
                hit = self.known.get(f.relpath)
                if hit is None or hit[0] != stamp:
                    hit = self.known[f.relpath] = [stamp, content_hash(f.read_bytes())]
                    self.changed = True
                out.append(hit[1])
            return out
        finally:
            self.save()

    def save(self) -> None:
        if not self.changed:
            return
        _write(self.path, self.known if len(self.known) <= MAX_DIGESTS else {})


def _path(k: str) -> Path:
    return cache_dir() / "scan" / f"{k}.json"


def _sources_path(k: str) -> Path:
    """The lines the text report quotes, apart: a report other than text does not read them."""
    return cache_dir() / "scan" / "sources" / f"{k}.json"


def load(k: str, sources: bool = True):
    """The result stored under ``k``, None on a miss. ``sources``: with the lines the text report quotes
    (only it reads them)."""
    from ddcheck.base.findings import ScanResult, file_error_from_dict, finding_from_dict
    from ddcheck.diagnostics.suppressions import Suppression

    try:
        data = json.loads(_path(k).read_bytes())
        quoted = {}
        if sources:
            kept = json.loads(_sources_path(k).read_bytes())
            quoted = {d: {n: t for n, t in lines if type(n) is int and type(t) is str} for d, lines in kept.items()}
            if any(len(quoted[d]) != len(lines) for d, lines in kept.items()):
                return None
        return ScanResult(
            files_scanned=int(data["files_scanned"]),
            errors=[file_error_from_dict(e) for e in data["errors"]],
            findings=[finding_from_dict(f) for f in data["findings"]],
            skipped=[file_error_from_dict(e) for e in data["skipped"]],
            suppressions={d: [Suppression(**{**x, "used": set(x["used"])}) for x in v]
                          for d, v in data["suppressions"].items()},
            displays=data["displays"], sources=quoted)
    except Exception:  # noqa: BLE001 - missing, corrupt or from another version: a miss
        return None


def store(k: str, result) -> None:
    from dataclasses import asdict

    data = {
        "files_scanned": result.files_scanned,
        "errors": [asdict(e) for e in result.errors],
        "findings": [asdict(f) for f in result.findings],  # internal fields too: the fixer and baseline read them
        "skipped": [asdict(e) for e in result.skipped],
        "suppressions": {d: [{**asdict(x), "used": sorted(x.used)} for x in v] for d, v in result.suppressions.items()},
        "displays": result.displays,
    }
    quoted = {d: sorted(lines.items()) for d, lines in result.sources.items()}
    if _write(_sources_path(k), quoted):  # the quoted lines first: an entry is never there without them
        _write(_path(k), data)


def _write(path: Path, value) -> bool:
    """``value`` as JSON at ``path``, whole or not at all, then the folder pruned to ``MAX_ENTRIES``;
    False where it could not be written (a read-only cache only costs speed)."""
    return write_json(path, value, keep=MAX_ENTRIES)
