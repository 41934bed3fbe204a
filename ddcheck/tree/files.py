"""Files ddcheck writes, each whole or not at all, and values kept under the stamps of the files they
are made from. The ground floor (imports only :mod:`ddcheck.tree.sources`, for the cache folder): the
result cache (:mod:`ddcheck.scan.cache`), the rule definitions (:mod:`ddcheck.rules`), the flag tables
(:mod:`ddcheck.config.flags`) and the fixed sources (:func:`ddcheck.fix.runner.write_atomic`)
all write through :func:`replace`.

No ``tempfile``: a scan that writes its cache would pay for loading it; the temporary file's name is
made unique by the process id and a counter, and created exclusively.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from itertools import count
from pathlib import Path

from ddcheck.tree.sources import blake2b, cache_dir

_SERIAL = count()
TMP_SUFFIX = ".ddcheck-tmp"


def replace(path: Path, data: bytes, *, mode: int | None = None, durable: bool = False,
            before_rename: Callable[[], None] | None = None) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``: a reader sees the
    old file or the new one, never part of either. ``mode``: the new file's permissions (default: a new
    file's, as ``open`` makes it); ``durable``: fsync before the rename; ``before_rename``: called just
    before it, to abandon the write by raising. On any failure the temporary file is removed and the
    error raised (OSError where the folder cannot be written)."""
    path = Path(path)
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_SERIAL)}{TMP_SUFFIX}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is not None else 0o666)
            break
        except FileExistsError:  # left by a process that had this id before: take the next name
            continue
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: Path, value, keep: int | None = None) -> bool:
    """``value`` as JSON at ``path``, whole or not at all, its folder made; then, with ``keep``, only the
    newest ``keep`` JSON files of the folder kept. False where it could not be written (a read-only
    cache costs only speed)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace(path, json.dumps(value).encode("utf-8"))
        if keep is not None:
            _prune(path.parent, keep)
    except (OSError, TypeError, ValueError):
        return False
    return True


def _prune(folder: Path, keep: int) -> None:
    """Keep the newest ``keep`` entries (and no pickles of older versions). Another process may prune the
    same folder at once: an entry gone before its turn is passed over."""
    dated = []
    for entry in folder.glob("*.json"):
        try:
            dated.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    entries = [entry for _, entry in sorted(dated, key=lambda d: d[0], reverse=True)]
    for old in entries[keep:] + list(folder.glob("*.pickle")):
        try:
            old.unlink()
        except OSError:
            pass


# ------------------------------------------------------------------ values kept under files' stamps

MAX_KEPT = 32  # of each name's folder


def stamps_digest(roots: list[Path]) -> str:
    """A digest of the path and stat stamp of every ``.py`` and ``.toml`` file under ``roots`` (a root
    that is a file stands for itself)."""
    h = blake2b(digest_size=16)
    for root in roots:
        h.update(f"{root}\n".encode())
        for rel, st in sorted(_walk(str(root), "") if root.is_dir() else _stat(root)):
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n".encode())
    return h.hexdigest()


def _stat(path: Path):
    try:
        yield "", path.stat()
    except OSError:  # gone: not in the digest
        return


def _walk(folder: str, rel: str):
    """(relpath, stat) of the code and rule files under ``folder`` (not the bytecode caches)."""
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:  # gone: its files are simply not in the digest
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name != "__pycache__":
                yield from _walk(e.path, f"{rel}{e.name}/")
        elif e.name.endswith((".py", ".toml")):
            yield f"{rel}{e.name}", e.stat()


def kept(name: str, sources: list[Path], make: Callable[[], object], read: Callable[[object], object]):
    """``read(make())``, where ``make()`` is a JSON value that depends only on the files at or under
    ``sources``: kept under the digest of their stamps (``scan/code/`` of the cache folder), and made
    again where what is kept does not read (``read`` raises for a value that does not fit)."""
    path = cache_dir() / "scan" / "code" / f"{name}-{stamps_digest(sources)}.json"
    try:
        return read(json.loads(path.read_bytes()))
    except Exception:  # noqa: BLE001 - missing, corrupt or not fit to read: made again
        pass
    value = make()
    write_json(path, value, keep=MAX_KEPT)
    return read(value)
