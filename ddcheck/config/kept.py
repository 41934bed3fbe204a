"""Launch results kept: a repeat of ``ddcheck config`` on the same launch is answered from disk, without
starting the worker (no torch, no analysis, no tree code: this module imports none of them).

The key is everything known before the run that decides it: ddcheck's code (:func:`ddcheck.scan.cache.code_digest`)
and Python, the tree's content (the scan's content key, :func:`ddcheck.scan.cache.key`), the argv, the ``--file``
YAML's bytes, ``--draft-config``/``--model-config`` as given, the GPU judged for, the whole environment
(offline mode and the Hugging Face cache's location included), the working folder, what each word of the
launch names on disk (a folder, a file, nothing), and the stamps of the folders Python imports from (a
package installed, removed or upgraded, torch and triton included, changes them). What is only known
after the run, the files it read outside the tree and the Python installation (the models' ``config.json``,
Hugging Face cache entries, the ``--*-config`` files), is kept with the entry as a manifest of their
states and checked on a repeat, as ccache's manifests are: any change is a miss.

Entries are JSON validated by pydantic on load (data, never code); a corrupt one is a miss. Only a judged
result is kept: a *could not judge* (exit 3) is run again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from ddcheck.tree.files import write_json
from ddcheck.tree.sources import SourceTree, cache_dir, open_target

VERSION = 1
MAX_ENTRIES = 64
INSTALLED = (".dist-info", ".egg-info", ".pth", ".egg-link")


class Judged(BaseModel):
    """What the worker answers for one launch, and what the result cache keeps."""

    report: str  # the Report's JSON (as ``config --format json`` prints it, before smoke and selection)
    values: dict = Field(default_factory=dict)  # server_args after the tree's start-up (JSON values only)
    checked_to_the_end: bool = False  # the checks ran to the end (where ``config --smoke`` runs)
    judged: bool = False  # the Report was judged (only then is it kept)
    reads: dict[str, str] = Field(default_factory=dict)  # files the run read outside the tree: their state

    def report_model(self):
        from ddcheck.config.report import Report

        report = Report.model_validate_json(self.report)
        if report.settings is not None:
            report.settings.values = dict(self.values)
        return report


def state(path: str) -> str:
    """What ``path`` holds now: ``file:<digest of its bytes>``, ``dir``, or ``none``."""
    try:
        with open(path, "rb") as fh:
            return "file:" + hashlib.blake2b(fh.read(), digest_size=16).hexdigest()
    except IsADirectoryError:
        return "dir"
    except OSError:
        return "dir" if os.path.isdir(path) else "none"


def _kind(word: str) -> str:
    if len(word) > 4096 or "\0" in word:
        return "none"
    try:
        st = os.stat(word)
    except (OSError, ValueError):
        return "none"
    return "dir" if stat.S_ISDIR(st.st_mode) else "file"


def site_stamps() -> list[tuple[str, int]]:
    """The folders on ``sys.path`` that packages are installed into (they hold ``.dist-info``, ``.egg-info``
    or ``.pth`` entries), with their change times: installing, removing or upgrading a package (torch,
    triton, transformers...) adds or renames an entry there. A script's own folder is not one."""
    out = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as listing:
                if any(e.name.endswith(INSTALLED) for e in listing):
                    out.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            continue
    return out


def key(tree: SourceTree, request: dict) -> str | None:
    """The key of a launch on ``tree`` (None: the tree cannot be keyed by content, not kept)."""
    from ddcheck.scan import cache

    tree_key = content_key(tree)
    if tree_key is None:
        return None
    words = list(request["argv"])
    file_bytes = b""
    if request.get("file"):
        try:
            file_bytes = Path(request["file"]).read_bytes()
        except OSError:
            return None
        words += re.split(r"[\s:,\[\]{}\"'=]+", file_bytes.decode("utf-8", "replace"))
    for given in (request.get("file"), request.get("draft_config"), request.get("model_config")):
        if given:
            words.append(given)
    head = {
        "version": VERSION, "python": sys.version, "executable": sys.executable, "code": cache.code_digest(),
        "tree": tree_key, "label": tree.label,
        "request": {k: v for k, v in request.items() if k not in ("env",)},
        "file": hashlib.blake2b(file_bytes, digest_size=16).hexdigest(),
        "env": sorted(request["env"].items()),
        "words": sorted({w: _kind(w) for w in words if w}.items()),
        "site": site_stamps(),
    }
    return hashlib.blake2b(json.dumps(head, sort_keys=True).encode(), digest_size=20).hexdigest()


def content_key(tree: SourceTree) -> str | None:
    """The scan's content key of ``tree`` (None: a tree that cannot be keyed by content)."""
    from ddcheck.scan import cache

    if tree.kind == "dir" and tree.root is not None and any(f.stamp is None for f in tree.files):
        try:  # the scan's key reads each file's stamp: listed again with them (~30 ms on sglang)
            tree = open_target(str(tree.root), stamped=True)
        except Exception:  # noqa: BLE001 - gone or changed kind: not kept
            return None
    return cache.key([tree], "config-tree")


def _path(k: str) -> Path:
    return cache_dir() / "config" / f"{k}.json"


def load(k: str | None):
    """The kept result under ``k`` whose manifest still holds, else None."""
    if k is None:
        return None
    try:
        judged = Judged.model_validate_json(_path(k).read_bytes())
    except Exception:  # noqa: BLE001 - missing, corrupt or from another version: a miss
        return None
    if not judged.judged or any(state(p) != s for p, s in judged.reads.items()):
        return None
    return judged


def store(k: str | None, judged) -> bool:
    """Keep ``judged`` under ``k`` when it was judged (a could-not-judge is never kept)."""
    if k is None or not judged.judged:
        return False
    return write_json(_path(k), json.loads(judged.model_dump_json()), keep=MAX_ENTRIES)
