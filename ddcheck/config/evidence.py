"""Pairs a launch with ``ddcheck scan``: the error findings in the modules of each attention backend
the launch puts on the target-verify path.

Only those modules are analysed, but the whole tree stays visible, so helpers they call in other
modules are followed exactly as ``ddcheck scan`` follows them. The scan is the same pipeline as
``ddcheck scan``'s: the tree's ``[tool.ddcheck]`` settings (the nearest pyproject.toml above a
checkout) and its suppression comments apply, so a read of C suppressed with a reason does not
drive a verdict.
"""

from __future__ import annotations

from pathlib import Path

from ddcheck.base.findings import Finding, Severity
from ddcheck.config.target import backend_files
from ddcheck.tree.sources import SourceTree, content_hash

ENGINE = "ddcheck scan"
_MEMO: dict[tuple, list[Finding]] = {}


def scan_errors(tree: SourceTree, relpaths: list[str] | None = None) -> tuple[list[Finding], str]:
    """Error findings of the scan in ``relpaths`` (default: every attention backend module), and the
    name of the engine that produced them."""
    return [f for f in scan_findings(tree, relpaths) if f.severity == Severity.error], ENGINE


def scan_findings(tree: SourceTree, relpaths: list[str] | None = None) -> list[Finding]:
    """Every finding of the scan in ``relpaths`` (default: every attention backend module)."""
    from ddcheck.scan.api import scan_trees_with_settings

    if relpaths is None:
        relpaths = sorted({m for ms in backend_files(tree).values() for m in ms})
    settings = tree_settings(tree)
    contents = tuple(content_hash(f.read_bytes()) if (f := tree.find(r)) is not None else "" for r in sorted(relpaths))
    key = (tree.label, tree.kind, len(tree.files), tuple(sorted(relpaths)), contents, settings.key())
    if key not in _MEMO:
        _MEMO[key] = scan_trees_with_settings([tree], settings, only=set(relpaths), jobs=1).findings
    return list(_MEMO[key])


def tree_settings(tree: SourceTree):
    """``[tool.ddcheck]`` of the checkout the tree is in (defaults for a wheel, or without one)."""
    from ddcheck.scan.settings import Settings, SettingsError, load_settings

    if tree.kind == "dir" and tree.root is not None:
        try:
            return load_settings(Path(tree.root))
        except SettingsError:
            return Settings()  # `ddcheck scan` reports a broken table; config judges with the defaults
    return Settings()


def verify_findings_by_backend(tree: SourceTree, backends: list[str] | None = None) -> dict[str, list[Finding]]:
    """backend name -> scan error findings located in that backend's modules."""
    files = backend_files(tree)
    wanted = backends if backends is not None else list(files)
    out: dict[str, list[Finding]] = {}
    for name in wanted:
        mods = list(files.get(name, ()))
        out[name] = scan_errors(tree, mods)[0] if mods else []
    return out
