"""Scan source trees: prefilter bytes, triage with ``ast``, analyse the rest with libcst."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from .. import suppressions
from ..findings import FileError, ScanResult
from ..sources import SourceFile, SourceTree
from .engine import Engine
from .module import ModuleModel, SourceError
from .vocabulary import DEFAULT_VOCABULARY, Vocabulary

VERIFY_MARKER = b"verify"


@dataclass
class TreeIndex:
    """Module name -> file for one tree, plus the on-disk package root for single-file targets."""

    tree: SourceTree
    by_module: dict[str, SourceFile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.tree.files:
            self.by_module.setdefault(f.module, f)

    def lookup(self, module: str) -> SourceFile | None:
        hit = self.by_module.get(module)
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
    if VERIFY_MARKER not in data:
        return False
    if vocab.extra_c_attrs:
        return True
    tokens = vocab.prefilter_tokens
    if not any(t in data for t in tokens):
        return False
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
               wants_path: Callable[[str], bool] = lambda relpath: True,
               only: set[str] | None = None) -> ScanResult:
    """Analyse every tree (or only the files whose relpath is in ``only``; the others are still
    there for helper lookups); suppression comments are applied by :mod:`ddcheck.api`, which also
    filters rules, so the result here is the raw model plus ``suppressions`` per file."""
    result = ScanResult()
    for tree in trees:
        index = TreeIndex(tree)
        models: dict[str, ModuleModel | None] = {}
        errors: dict[str, str] = {}

        def load(module: str, _index=index, _models=models, _errors=errors) -> ModuleModel | None:
            """Helper modules reached from a verify branch, parsed on first use."""
            if module in _models:
                return _models[module]
            f = _index.lookup(module)
            _models[module] = None
            if f is not None:
                try:
                    _models[module] = ModuleModel.parse(f)
                except (SourceError, OSError) as exc:
                    _errors[f.display] = str(exc)
            return _models[module]

        engine = Engine(vocab=vocab, load_module=load, width_api=width_api(tree),
                        inherited_c_attrs=INHERITED_C_ATTRS)
        explicit = tree.kind == "file"
        for f in tree.files:
            if not wants_path(f.relpath) or only is not None and f.relpath not in only:
                continue
            result.files_scanned += 1
            try:
                data = f.read_bytes()
            except OSError as exc:
                errors[f.display] = f"cannot be read: {exc.strerror or exc}"
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                errors[f.display] = f"not UTF-8: {exc.reason} at byte {exc.start}"
                continue
            if suppressions.MARKER in data:
                result.suppressions[f.relpath] = suppressions.parse(text)
                result.displays[f.relpath] = f.display
            if not needs_analysis(data, vocab):
                if explicit:
                    _syntax_check(f, data, errors)
                continue
            if f.module not in models:
                try:
                    models[f.module] = ModuleModel.parse(f, data)
                except SourceError as exc:
                    models[f.module] = None
                    errors[f.display] = str(exc)
            if models[f.module] is not None:
                engine.analyze(models[f.module])
        result.errors.extend(FileError(path=p, message=m) for p, m in errors.items())
        result.findings.extend(engine.findings())
        for r in engine.reported.values():
            result.sources.setdefault(r.fp.model.source.display, r.fp.model.lines)
    result.findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    return result


# Subclasses read `self.num_draft_tokens` that a base class in another module set from C.
INHERITED_C_ATTRS = frozenset({"num_draft_tokens", "speculative_num_draft_tokens"})


def _syntax_check(f: SourceFile, data: bytes, errors: dict[str, str]) -> None:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno}, column {exc.offset})" if isinstance(exc, SyntaxError) else ""
        errors[f.display] = f"does not parse: {getattr(exc, 'msg', exc)}{where}"
