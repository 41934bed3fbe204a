"""Scan source trees: triage every file (read once, byte prefilter), analyse the candidates with
``ast``; a large tree is triaged and analysed in forked workers (:mod:`.workers`)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

from ddcheck.base import deep
from ddcheck.base.findings import FileError, ScanResult
from ddcheck.tree.sources import SourceTree
from ddcheck.analysis.chunk import ChunkAnalysis, ChunkResult
from ddcheck.analysis.triage import Triage, triage
from ddcheck.analysis.vocabulary import DEFAULT_VOCABULARY, Vocabulary

# Forking pays for itself from a few hundred files on (an sglang tree has ~4,700).
PARALLEL_MIN_FILES = 400


def scan_trees(trees: list[SourceTree], vocab: Vocabulary = DEFAULT_VOCABULARY,
               wants_path: Callable[..., bool] = lambda relpath, disk_path=None: True,
               only: set[str] | None = None, jobs: int | None = None, check_syntax: bool = False) -> ScanResult:
    """Analyse every tree (or only the files whose relpath is in ``only``; the others are still
    there for helper lookups); with ``check_syntax``, parse the files the analysis does not need
    too, and list those that do not parse as skipped. Suppression comments are collected here and applied by
    :mod:`ddcheck.scan.api`, which also filters rules. ``jobs``: worker processes for a large tree
    (default: one per CPU, at most 8). Run where the walks have room for any nesting Python parses
    (:func:`ddcheck.base.deep.run`)."""
    return deep.run(_scan_trees, trees, vocab, wants_path, only, jobs, check_syntax)


def _scan_trees(trees: list[SourceTree], vocab: Vocabulary, wants_path, only, jobs, check_syntax) -> ScanResult:
    result = ScanResult()
    # The cyclic GC would rescan every AST already built on each collection; nothing here makes cycles
    # that need it during the scan.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for tree in trees:
            _scan_tree(result, tree, vocab, wants_path, only, jobs, check_syntax)
    finally:
        if gc_was_enabled:
            gc.enable()
    result.findings = _dedup(result.findings)  # sorted once, by the caller, after suppressions
    return result


def _scan_tree(result: ScanResult, tree: SourceTree, vocab: Vocabulary, wants_path, only, jobs,
               check_syntax: bool) -> None:
    positions = [i for i, f in enumerate(tree.files)
                 if wants_path(f.relpath, f.disk) and (only is None or f.relpath in only)]
    result.files_scanned += len(positions)
    jobs = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    triaged = set(positions)
    unread = [i for i in range(len(tree.files)) if i not in triaged]  # indexed on demand, for lookups only
    pooled = None
    if jobs > 1 and len(positions) >= PARALLEL_MIN_FILES:
        from ddcheck.analysis import forked

        pooled = forked.run(tree, positions, unread, vocab, jobs, check_syntax)
    if pooled is None:
        found = triage(tree, positions, vocab, check_syntax)
        analysis = ChunkAnalysis(tree, vocab, found.texts)
        analysis.use_index([found.index], unread)
        for pos, _ in found.candidates:
            analysis.add(pos)
        pooled = found, [analysis.finish()]
    _collect(result, tree, *pooled)


def _collect(result: ScanResult, tree: SourceTree, found: Triage, chunks: list[ChunkResult]) -> None:
    """Triage's errors and suppressions in tree order, then what the analysis found."""
    errors = {tree.files[pos].display: message for pos, message in sorted(found.errors.items())}
    result.skipped.extend(FileError(path=tree.files[pos].display, message=message)
                          for pos, message in sorted(found.skipped.items()))
    for pos, comments in sorted(found.suppressions.items()):
        f = tree.files[pos]
        result.suppressions[f.display] = comments
        result.displays[f.display] = f.relpath
    for chunk in chunks:
        errors.update(chunk.errors)
        for display, quoted in chunk.sources.items():  # workers that both reached a file quote it alike
            result.sources.setdefault(display, {}).update(quoted)
        result.findings.extend(chunk.findings)
    result.errors.extend(FileError(path=p, message=m) for p, m in errors.items())


def _dedup(findings: list) -> list:
    """Workers may both reach a shared helper: keep one finding per place, the most severe."""
    best: dict[tuple, object] = {}
    for f in findings:
        key = (f.path, f.line, f.column)
        # the most severe; then one with a fix (a worker that also parsed the helper's callers found it)
        if key not in best or (f.severity.rank, f.fix is not None) > (best[key].severity.rank,
                                                                       best[key].fix is not None):
            best[key] = f
    return list(best.values())
