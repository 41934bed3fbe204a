"""Pairs a launch with ``ddcheck scan``: the error findings in the modules of each attention backend
the launch puts on the target-verify path.

The scan is the source of truth (``ddcheck.analysis.scan.scan_trees``), run per backend module
and cached by content hash. Where that API is missing,
a deliberately small stand-in is used so ``ddcheck config`` still works: a use of the start-up
width (``self.num_draft_tokens`` / ``speculative_num_draft_tokens``) inside a function that
handles target-verify and never reads the per-step ``draft_token_num``. Its findings carry
``rule="config-fallback"``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ddcheck.findings import Finding, Severity
from ddcheck.launch.target import backend_files
from ddcheck.sources import SourceTree, cache_dir, content_hash

_MEMO: dict[str, list[Finding]] = {}
C_NAMES = re.compile(r"\b(self\.num_draft_tokens|speculative_num_draft_tokens)\b")


def _scanner():
    """(scan_trees, engine name, engine fingerprint) - the real scan when importable."""
    try:
        from ddcheck.analysis.scan import scan_trees
    except ImportError:
        return None, "config-fallback", "fallback-1"
    import ddcheck.analysis as pkg

    src = b"".join(p.read_bytes() for p in sorted(Path(pkg.__file__).parent.glob("*.py")))
    return scan_trees, "ddcheck scan", content_hash(src)


def scan_errors(tree: SourceTree, relpaths: list[str] | None = None) -> tuple[list[Finding], str]:
    """Error findings of the scan in ``relpaths`` (default: every attention backend module) and the
    engine that produced them. Each module is scanned on its own and cached on disk by content
    hash, so only the first check of a release pays for the scan."""
    scan, engine, fp = _scanner()
    if relpaths is None:
        relpaths = sorted({m for ms in backend_files(tree).values() for m in ms})
    by_rel = {f.relpath: f for f in tree.files}
    out: list[Finding] = []
    for rel in relpaths:
        f = by_rel.get(rel)
        if f is None:
            continue
        key = content_hash(fp.encode() + rel.encode() + f.read_bytes())
        if key not in _MEMO:
            path = cache_dir() / "config-scan" / f"{key}.json"
            try:
                _MEMO[key] = [Finding.model_validate(d) for d in json.loads(path.read_text())]
            except (OSError, ValueError):
                sub = SourceTree(label=tree.label, kind=tree.kind, files=[f], root=tree.root, wheel=tree.wheel)
                found = [x for x in scan([sub]).findings if x.severity == Severity.error] if scan else _fallback(sub)
                for x in found:
                    x.relpath = x.relpath or rel
                _MEMO[key] = found
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps([dict(x.model_dump(mode="json"), relpath=x.relpath) for x in found]))
                except OSError:
                    pass
        out.extend(_MEMO[key])
    return out, engine


def verify_findings_by_backend(tree: SourceTree, backends: list[str] | None = None) -> dict[str, list[Finding]]:
    """backend name -> scan error findings located in that backend's modules."""
    files = backend_files(tree)
    wanted = backends if backends is not None else list(files)
    out: dict[str, list[Finding]] = {}
    for name in wanted:
        mods = list(files.get(name, ()))
        out[name] = scan_errors(tree, mods)[0] if mods else []
    return out


def _fallback(tree: SourceTree) -> list[Finding]:
    out = []
    for f in tree.files:
        src = f.read_bytes().decode("utf-8", "replace")
        if "num_draft_tokens" not in src:
            continue
        lines = src.splitlines()
        for fn in ast.walk(ast.parse(src)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = "\n".join(lines[fn.lineno - 1: fn.end_lineno])
            if not ("target_verify" in fn.name or "is_target_verify()" in body) or "draft_token_num" in body:
                continue
            for i in range(fn.lineno, fn.end_lineno + 1):
                text = lines[i - 1]
                m = C_NAMES.search(text)
                if m and not text.lstrip().startswith(("#", "def ")) and "self.num_draft_tokens =" not in text:
                    out.append(Finding(
                        rule="config-fallback", severity=Severity.error, path=f.display, relpath=f.relpath,
                        line=i, column=m.start(), end_line=i, end_column=m.end(), function=fn.name,
                        symbol=m.group(1), message="target-verify layout uses the start-up width C"))
                    break
    return out
