"""Baselines: today's findings recorded by a fingerprint that survives line shifts, so a fork with
known hazards can adopt the hook now and be told only about new ones."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from .findings import Finding

FORMAT_VERSION = 1


def fingerprint(f: Finding) -> str:
    """rule + file (tree-relative) + function + normalized statement + symbol; no line numbers."""
    key = "\x1f".join([f.rule, f.relpath or f.path, f.function or "", " ".join(f.statement.split()), f.symbol])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def write(path: Path, findings: list[Finding]) -> int:
    counts = Counter(fingerprint(f) for f in findings)
    entries = [{"fingerprint": fp, "count": n} for fp, n in sorted(counts.items())]
    path.write_text(json.dumps({"version": FORMAT_VERSION, "findings": entries}, indent=1) + "\n", encoding="utf-8")
    return len(findings)


class BaselineError(Exception):
    pass


def load(path: Path) -> Counter:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Counter({e["fingerprint"]: int(e["count"]) for e in data["findings"]})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BaselineError(f"{path}: not a ddcheck baseline ({exc})") from exc


def new_findings(findings: list[Finding], known: Counter) -> list[Finding]:
    """Findings beyond the recorded count of their fingerprint (two identical lines count twice)."""
    left = Counter(known)
    out = []
    for f in findings:
        fp = fingerprint(f)
        if left[fp] > 0:
            left[fp] -= 1
        else:
            out.append(f)
    return out
