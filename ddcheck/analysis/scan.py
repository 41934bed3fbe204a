"""Scan source trees: prefilter bytes, triage with ``ast``, analyse the rest with libcst."""

from __future__ import annotations

import ast
import gc
import os
import re
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from .. import suppressions
from ..findings import FileError, ScanResult
from ..sources import SourceFile, SourceTree
from .engine import Engine, MethodUses, is_test_module
from .module import ModuleModel, SourceError, check_decodes, decode
from .vocabulary import DEFAULT_VOCABULARY, Vocabulary

# A file can start a verify path only if it tests for it or names a function for it; helper
# modules reached from such a file are loaded on demand whatever they contain.
VERIFY_MARKERS = (b"target_verify", b"TARGET_VERIFY")


def _markers(vocab: Vocabulary) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(VERIFY_MARKERS + tuple(m.encode() for m in vocab.verify_function_markers)))


@dataclass
class TreeIndex:
    """Module name -> file for one tree, plus the on-disk package root for single-file targets."""

    tree: SourceTree
    by_module: dict[str, SourceFile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.tree.files:
            self.by_module.setdefault(f.module, f)

    def lookup(self, module: str) -> SourceFile | None:
        if module in self.by_module:
            return self.by_module[module]
        hit = None
        if self.tree.kind == "dir":
            # A git checkout keeps the package under python/: `sglang.srt.x` is `python.sglang.srt.x`.
            hits = [m for m in self.by_module if m.endswith("." + module)]
            hit = self.by_module[min(hits, key=len)] if hits else None
            self.by_module[module] = hit
        if hit is not None or self.tree.root is None or self.tree.kind != "file":
            return hit
        # A single file passed by pre-commit: find its sibling modules on disk, lazily.
        base = self.tree.root / Path(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                from ..sources import _disk_file

                f = _disk_file(candidate, str(candidate), candidate.relative_to(self.tree.root).as_posix())
                self.by_module[module] = f
                return f
        return None


# The verify inputs carry `num_tokens_per_req` (default -1) on the SpecInput base from 0.5.16 on.
WIDTH_FIELD_RE = re.compile(rb"^\s+num_tokens_per_req\s*:\s*int\s*=", re.M)


def width_api(tree: SourceTree) -> str:
    """``num_tokens_per_req`` when the tree's verify inputs all carry it (newer SGLang), else ``draft_token_num``."""
    suffix = "srt/speculative/spec_info.py"
    f = tree.find(suffix)
    data = None
    try:
        if f is not None:
            data = f.read_bytes()
        elif tree.kind == "file" and tree.root is not None and (tree.root / "sglang" / suffix).is_file():
            data = (tree.root / "sglang" / suffix).read_bytes()
    except OSError:
        data = None
    return "num_tokens_per_req" if data and WIDTH_FIELD_RE.search(data) else "draft_token_num"


def needs_analysis(data: bytes, vocab: Vocabulary) -> bool:
    """Byte prefilter: C must be read somewhere other than the ``self.X = ...`` that stores it,
    in a file that talks about verification at all. Over-approximates; the analysis decides."""
    tokens = vocab.prefilter_tokens
    # C's name first: it is in fewer files than the verify markers, so most files cost one search
    if not vocab.extra_c_attrs and not any(t in data for t in tokens):
        return False
    if not any(m in data for m in _markers(vocab)):
        return False
    if vocab.extra_c_attrs:
        return True
    names: set[bytes] = set()
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not any(t in line for t in tokens):
            continue
        m = STORE_RE.match(line) or (i and STORE_OPEN_RE.match(lines[i - 1]))
        if m:
            names.add(m.group(1))
        elif not line.lstrip().startswith(b"#"):
            return True
    return any(re.search(rb"self\." + re.escape(n) + rb"\b(?!\s*(?::[^=\n]*)?=(?!=))", data) for n in names)


STORE_RE = re.compile(rb"\s*self\.(\w+)\s*(?::[^=]*)?=(?!=)")
STORE_OPEN_RE = re.compile(rb"\s*self\.(\w+)\s*(?::[^=]*)?=\s*\(?\s*$")


def scan_trees(trees: list[SourceTree], vocab: Vocabulary = DEFAULT_VOCABULARY,
               wants_path: Callable[..., bool] = lambda relpath, disk_path=None: True,
               only: set[str] | None = None, jobs: int | None = None) -> ScanResult:
    """Analyse every tree (or only the files whose relpath is in ``only``; the others are still
    there for helper lookups). Suppression comments are collected here and applied by
    :mod:`ddcheck.api`, which also filters rules.

    Reading and the byte prefilter run here; parsing and analysis of the candidate files run in
    ``jobs`` forked workers when there are enough of them to pay for the fork.
    """
    result = ScanResult()
    # The cyclic GC would rescan every AST already built on each collection; nothing here makes cycles
    # that need it during the scan.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _scan_into(result, trees, vocab, wants_path, only, jobs)
    finally:
        if gc_was_enabled:
            gc.enable()
    result.findings = _dedup(result.findings)  # sorted once, by the caller, after suppressions
    return result


def _scan_into(result: ScanResult, trees, vocab, wants_path, only, jobs) -> None:
    for tree in trees:
        errors: dict[str, str] = {}
        candidates: list[str] = []
        sizes: dict[str, int] = {}
        # Every file's bytes, read once here and kept for the analysis (helper lookups, method
        # searches): forked workers share them instead of reading (a wheel: inflating) the tree again.
        texts: dict[int, bytes] = {}  # by id() of the tree's SourceFile
        explicit = tree.kind == "file"
        for f in tree.files:
            if not wants_path(f.relpath, f.disk) or only is not None and f.relpath not in only:
                continue
            result.files_scanned += 1
            try:
                data = texts[id(f)] = f.read_bytes()
            except OSError as exc:
                errors[f.display] = f"cannot be read: {exc.strerror or exc}"
                continue
            try:
                check_decodes(data)
            except SourceError as exc:
                errors[f.display] = str(exc)
                continue
            if suppressions.MARKER in data:
                result.suppressions[f.display] = suppressions.parse(decode(data))
                result.displays[f.display] = f.relpath
            # A file given on its own (pre-commit) is analysed whenever it tests for verify: it may
            # pass the verify path to a helper that reads C, which a tree scan's prefilter skips.
            if needs_analysis(data, vocab) or explicit and any(m in data for m in _markers(vocab)):
                candidates.append(f.relpath)
                sizes[f.relpath] = len(data)
            elif explicit:
                _syntax_check(f, data, errors)
        for chunk in _analyse(tree, candidates, vocab, jobs, sizes, texts):
            errors.update(chunk.errors)
            result.sources.update(chunk.sources)
            result.findings.extend(chunk.findings)
        result.errors.extend(FileError(path=p, message=m) for p, m in errors.items())


@dataclass
class ChunkResult:
    findings: list = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)


PARALLEL_MIN_FILES = 16
_FORKED: tuple | None = None  # (tree, vocab) handed to forked workers


def _analyse(tree: SourceTree, relpaths: list[str], vocab: Vocabulary, jobs: int | None,
             sizes: dict[str, int] | None = None, texts: dict[int, bytes] | None = None) -> list[ChunkResult]:
    jobs = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(relpaths) < PARALLEL_MIN_FILES:
        return [_analyse_chunk(tree, relpaths, vocab, texts)]
    import multiprocessing as mp  # a pool only for trees large enough to pay for it
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    if "fork" not in mp.get_all_start_methods():
        return [_analyse_chunk(tree, relpaths, vocab, texts)]
    sizes = sizes or {}
    chunks: list[list[str]] = [[] for _ in range(jobs)]
    load = [0] * jobs
    # Largest first, each to the least loaded worker: parse and analysis time follow file size.
    for rel in sorted(relpaths, key=lambda r: -sizes.get(r, 0)):
        i = load.index(min(load))
        chunks[i].append(rel)
        load[i] += sizes.get(rel, 1)
    global _FORKED
    _FORKED = (tree, vocab, texts)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork")) as pool:
            return list(pool.map(_forked_chunk, chunks))
    except (OSError, BrokenProcessPool):
        return [_analyse_chunk(tree, relpaths, vocab, texts)]
    finally:
        _FORKED = None


def _forked_chunk(relpaths: list[str]) -> ChunkResult:
    tree, vocab, texts = _FORKED
    return _analyse_chunk(tree, relpaths, vocab, texts)


def _analyse_chunk(tree: SourceTree, relpaths: list[str], vocab: Vocabulary,
                   known: dict[int, bytes] | None = None) -> ChunkResult:
    """Analyse ``relpaths``; ``known`` holds the bytes of the tree's files already read (by id() of
    their SourceFile), the rest is read on demand."""
    out = ChunkResult()
    known = {} if known is None else known

    def read(f: SourceFile) -> bytes:
        data = known.get(id(f))
        return f.read_bytes() if data is None else data

    index = TreeIndex(tree)
    models: dict[str, ModuleModel | None] = {}

    def load(module: str, needs_c: bool = False) -> ModuleModel | None:
        """Modules are parsed on first use: entry files and the helpers reached from them. A helper
        called without C in its arguments matters only if it can read C itself."""
        if module in models:
            return models[module]
        f = index.lookup(module)
        if f is not None and needs_c:
            try:
                if not any(t in read(f) for t in vocab.prefilter_tokens) and not vocab.extra_c_attrs:
                    return None
            except OSError:
                return None
        models[module] = None
        if f is not None:
            try:
                models[module] = ModuleModel.parse(f, read(f))
            except (SourceError, OSError) as exc:
                out.errors[f.display] = str(exc)
        return models[module]

    calling: dict[str, MethodUses | None] = {}
    texts: list[tuple[SourceFile, bytes]] = []  # every file's bytes, read once (a wheel's are inflated)

    def tree_texts() -> list[tuple[SourceFile, bytes]]:
        if not texts:
            for f in tree.files:
                try:
                    texts.append((f, read(f)))
                except OSError:
                    continue
        return texts

    def method_uses(name: str) -> MethodUses | None:
        """The tree's modules that call ``self.<name>(``, define a ``<name>``, and call it on another
        object (``other.<name>(``, ``super().<name>(``; test code aside, which is not on a serving
        path), parsed; None when one of those cannot be parsed. Memoized per name."""
        if name not in calling:
            own, any_call = f"self.{name}(".encode(), f".{name}(".encode()
            definition = re.compile(rb"\bdef\s+" + re.escape(name.encode()) + rb"\s*\(")
            uses = MethodUses()
            for f, data in tree_texts():
                if name.encode() not in data:
                    continue
                foreign = data.count(any_call) != data.count(own) and not is_test_module(f.relpath)
                lists = [hits for wanted, hits in ((own in data, uses.callers), (foreign, uses.foreign),
                                                   (definition.search(data) is not None, uses.definers)) if wanted]
                if not lists:
                    continue
                m = load(f.module)
                if m is None or m.source.relpath != f.relpath:
                    if foreign:  # a caller on another object that cannot be read: cannot be judged
                        calling[name] = None
                        return None
                    continue
                for hits in lists:
                    hits.append(m)
            calling[name] = uses
        return calling[name]

    engine = Engine(vocab=vocab, load_module=load, width_api=width_api(tree), inherited_c_attrs=INHERITED_C_ATTRS,
                    method_uses=method_uses)
    by_rel = {f.relpath: f for f in tree.files}
    for rel in relpaths:
        model = load(by_rel[rel].module) if index.by_module.get(by_rel[rel].module) is by_rel[rel] else None
        if model is None and by_rel[rel].module not in models:
            try:
                model = ModuleModel.parse(by_rel[rel], read(by_rel[rel]))
            except (SourceError, OSError) as exc:
                out.errors[by_rel[rel].display] = str(exc)
        if model is not None:
            try:
                engine.analyze(model)
            except (RecursionError, MemoryError) as exc:
                # One pathological file is that file's error; the run goes on without its findings.
                out.errors[model.source.display] = f"too deeply nested to analyse ({type(exc).__name__})"
                engine.forget(model.source.relpath)
    out.findings = engine.findings()
    for r in engine.reported.values():
        out.sources.setdefault(r.fp.model.source.display, r.fp.model.lines)
    return out


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


# Subclasses read `self.num_draft_tokens` that a base class in another module set from C.
INHERITED_C_ATTRS = frozenset({"num_draft_tokens", "speculative_num_draft_tokens"})


def _syntax_check(f: SourceFile, data: bytes, errors: dict[str, str]) -> None:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno}, column {exc.offset})" if isinstance(exc, SyntaxError) else ""
        errors[f.display] = f"does not parse: {getattr(exc, 'msg', exc)}{where}"
    except (RecursionError, MemoryError) as exc:
        errors[f.display] = f"too deeply nested or too large to parse ({type(exc).__name__})"
