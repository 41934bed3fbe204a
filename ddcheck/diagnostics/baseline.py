"""Baselines: today's findings recorded by a fingerprint that survives line shifts, so a fork with
known hazards can adopt the hook now and be told only about new ones.

A fingerprint is rule + file + function + normalized statement + symbol, never a line number. The
file is named relative to the baseline's own directory when it is on disk, so a baseline written
by ``ddcheck scan .`` still matches when pre-commit passes ``pkg/backend.py`` (or a CI job scans
from another working directory); wheel members are named by their path inside the wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from ddcheck.base.findings import Finding

FORMAT_VERSION = 1


class BaselineError(Exception):
    pass


class Baseline(Counter):
    """Recorded fingerprint counts, plus the directory that file names are relative to."""

    def __init__(self, counts=None, root: Path | None = None):
        super().__init__(counts or {})
        self.root = root


def _content(f: Finding) -> list[str]:
    return [f.rule, f.function or "", " ".join(f.statement.split()), f.symbol]


def _hash(parts: list[str]) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:20]


def location(f: Finding, root: Path | None = None) -> str:
    """The file part of the fingerprint: relative to ``root`` for files on disk, else the
    tree-relative path (wheel members, or no root given)."""
    if root is not None and "!" not in f.path:
        p = Path(f.path)
        if p.is_file():
            try:
                return Path(os.path.relpath(p.resolve(), Path(root).resolve())).as_posix()
            except ValueError:  # another drive (Windows)
                pass
    return f.relpath or f.path


def fingerprint(f: Finding, root: Path | None = None) -> str:
    """rule + file + function + normalized statement + symbol; no line numbers."""
    return _hash([location(f, root), *_content(f)])


def content_fingerprint(f: Finding) -> str:
    """The same without the file: for SARIF ``partialFingerprints`` (the consumer adds the file)."""
    return _hash(_content(f))


def write(path: Path, findings: list[Finding]) -> int:
    """Write the baseline; entries carry the rule, file, function and statement for review."""
    path = Path(path)
    root = path.resolve().parent
    entries: dict[str, dict] = {}
    for f in findings:
        fp = fingerprint(f, root)
        if fp in entries:
            entries[fp]["count"] += 1
        else:
            entries[fp] = {"fingerprint": fp, "count": 1, "rule": f.rule, "path": location(f, root),
                           "function": f.function, "statement": " ".join(f.statement.split())}
    ordered = sorted(entries.values(), key=lambda e: (e["path"], e["rule"], e["function"] or "", e["fingerprint"]))
    text = json.dumps({"version": FORMAT_VERSION, "tool": "ddcheck", "findings": ordered}, indent=1) + "\n"
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write the baseline: {exc.strerror or exc}") from exc
    return len(findings)


def load(path: Path) -> Baseline:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported baseline version {data.get('version')!r}")
        counts = Counter()
        for e in data["findings"]:
            count = e["count"]
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(f"count {count!r} of {e.get('fingerprint')!r} is not a whole number >= 0")
            counts[str(e["fingerprint"])] += count
    except RecursionError as exc:
        raise BaselineError(f"{path}: not a ddcheck baseline (nested too deeply to read)") from exc
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BaselineError(f"{path}: not a ddcheck baseline ({exc})") from exc
    return Baseline(counts, root=path.resolve().parent)


def new_findings(findings: list[Finding], known: Counter) -> list[Finding]:
    """Findings beyond the recorded count of their fingerprint (two identical lines count twice)."""
    root = getattr(known, "root", None)
    left = Counter(known)
    out = []
    for f in findings:
        fp = fingerprint(f, root)
        if left[fp] > 0:
            left[fp] -= 1
        else:
            out.append(f)
    return out
