"""Pairs a launch with ``ddcheck scan``: the error findings in the modules of each attention backend
the launch puts on the target-verify path.

Only those modules are analysed, but the whole tree stays visible, so helpers they call in other
modules are followed exactly as ``ddcheck scan`` follows them.
"""

from __future__ import annotations

from ddcheck.analysis.scan import scan_trees
from ddcheck.findings import Finding, Severity
from ddcheck.launch.target import backend_files
from ddcheck.sources import SourceTree

ENGINE = "ddcheck scan"
_MEMO: dict[tuple, list[Finding]] = {}


def scan_errors(tree: SourceTree, relpaths: list[str] | None = None) -> tuple[list[Finding], str]:
    """Error findings of the scan in ``relpaths`` (default: every attention backend module), and the
    name of the engine that produced them."""
    return [f for f in scan_findings(tree, relpaths) if f.severity == Severity.error], ENGINE


def scan_findings(tree: SourceTree, relpaths: list[str] | None = None) -> list[Finding]:
    """Every finding of the scan in ``relpaths`` (default: every attention backend module)."""
    if relpaths is None:
        relpaths = sorted({m for ms in backend_files(tree).values() for m in ms})
    key = (tree.label, tree.kind, len(tree.files), tuple(sorted(relpaths)))
    if key not in _MEMO:
        _MEMO[key] = scan_trees([tree], only=set(relpaths), jobs=1).findings
    return list(_MEMO[key])


def verify_findings_by_backend(tree: SourceTree, backends: list[str] | None = None) -> dict[str, list[Finding]]:
    """backend name -> scan error findings located in that backend's modules."""
    files = backend_files(tree)
    wanted = backends if backends is not None else list(files)
    out: dict[str, list[Finding]] = {}
    for name in wanted:
        mods = list(files.get(name, ()))
        out[name] = scan_errors(tree, mods)[0] if mods else []
    return out
