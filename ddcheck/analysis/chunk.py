"""The analysis of some candidate files of a tree, in one process: parses modules on first use
(candidates, the helpers their verify paths reach, a helper's callers and definers) and runs the
engine over the candidates."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ddcheck.base.errors import UsageError
from ddcheck.tree.sources import SourceFile, SourceTree, open_target
from ddcheck.diagnostics.suppressions import MARKER
from ddcheck.analysis.engine import Engine
from ddcheck.analysis.planning import Planning
from ddcheck.analysis.reports import MethodUses, is_test_module
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.parse import SourceError, decode
from ddcheck.analysis.module import ModuleModel
from ddcheck.tree.hierarchy import Outline
from ddcheck.analysis.inputs import built_inputs
from ddcheck.analysis.names import NameIndex, Part
from ddcheck.analysis.vocabulary import VERIFY_STEP_WORD, Vocabulary
from ddcheck.tree.names import (DRAFT_TOKEN_NUM, NUM_TOKENS_PER_REQ, PACKAGE, PREPARE_FOR_VERIFY, SERVER_ARGS_FILE,
                            SPEC_INFO_FILE, SPECULATIVE_NUM_DRAFT_TOKENS)

# Subclasses read `self.num_draft_tokens` that a base class in another module set from C.
INHERITED_C_ATTRS = frozenset({"num_draft_tokens", SPECULATIVE_NUM_DRAFT_TOKENS})
# The verify inputs carry `num_tokens_per_req` (default -1) on the SpecInput base from 0.5.16 on.
WIDTH_FIELD_RE = re.compile(rb"^\s+" + NUM_TOKENS_PER_REQ.encode() + rb"\s*:\s*int\s*=", re.M)
# A tree drafter's budget among the ServerArgs fields (`speculative_ddtree_budget: Optional[int] = None`).
BUDGET_FIELD_RE = re.compile(rb"^    (speculative_\w*tree_budget)\s*:\s*(?:Optional\[int\]|int)", re.M)


def width_api(tree: SourceTree) -> str:
    """``num_tokens_per_req`` when the tree's verify inputs all carry it (newer SGLang), else ``draft_token_num``."""
    f = tree.find(SPEC_INFO_FILE)
    data = None
    try:
        if f is not None:
            data = f.read_bytes()
        elif tree.kind == "file" and tree.root is not None and (tree.root / SPEC_INFO_FILE).is_file():
            data = (tree.root / SPEC_INFO_FILE).read_bytes()
    except OSError:
        data = None
    return NUM_TOKENS_PER_REQ if data and WIDTH_FIELD_RE.search(data) else DRAFT_TOKEN_NUM


def tree_budget_flag(tree: SourceTree) -> str | None:
    """The server argument in which the tree states a tree drafter's budget (``speculative_ddtree_budget``:
    the launch verifies at most budget + 1 tokens per request), or None where its ServerArgs has none."""
    f = tree.find(SERVER_ARGS_FILE)
    try:
        if f is not None:
            data = f.read_bytes()
        elif tree.kind == "file" and tree.root is not None and (tree.root / SERVER_ARGS_FILE).is_file():
            data = (tree.root / SERVER_ARGS_FILE).read_bytes()
        else:
            return None
    except OSError:
        return None
    m = BUDGET_FIELD_RE.search(data)
    return m.group(1).decode() if m else None


def enclosing_package(tree: SourceTree) -> SourceTree | None:
    """The ``sglang`` package on disk that a folder target lies inside (``sglang/srt/layers/attention``;
    SGLang's subpackages are namespace packages, so the nearest ancestor named so with an
    ``__init__.py``), opened as a tree; None for other targets and for a folder that is no part of one."""
    if tree.kind != "dir" or tree.root is None:
        return None
    here = tree.root.resolve()
    top = next((p for p in here.parents if p.name == PACKAGE and (p / "__init__.py").is_file()), None)
    if top is None:
        return None
    try:
        return open_target(str(top))
    except (UsageError, OSError):
        return None


@dataclass
class ChunkResult:
    """What one chunk's analysis found: findings, files it could not analyse, lines to quote."""

    findings: list = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # display -> message
    # of the files with findings, the lines the text report may quote (ScanResult.sources)
    sources: dict[str, dict[int, str]] = field(default_factory=dict)


def _defines(definition: re.Pattern, data: bytes) -> bool:
    """``definition`` matches at a word start (``\\bdef``, checked by hand: a leading ``\\b`` costs the
    regex engine its literal-prefix search, ~5x slower over a large module)."""
    return any(m.start() == 0 or data[m.start() - 1] not in WORD_BYTES for m in definition.finditer(data))


WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


class ChunkAnalysis:
    """One engine over the candidates :meth:`add`-ed, then :meth:`finish`-ed into a result.

    ``texts`` holds the bytes of the tree's files already read (by position in ``tree.files``); the
    rest are read on demand. Which files may call or define a method name is answered by a name
    index: the whole tree's, built on the first question, unless :meth:`use_index` gives one."""

    def __init__(self, tree: SourceTree, vocab: Vocabulary, texts: dict[int, bytes] | None = None) -> None:
        self.tree, self.vocab = tree, vocab
        self.texts = {} if texts is None else texts
        self.positions = {id(f): i for i, f in enumerate(tree.files)}
        self.trees = TreeModules.of(tree)  # the tree's one parse of each file, shared with config and smoke
        self.index = self.trees.index
        self.use_index([], list(range(len(tree.files))))
        self.models: dict[str, ModuleModel | None] = {}
        self.outlines: dict[str, Outline] = {}  # relpath -> outline of a module another process parsed
        # Set by a forked worker: ``share`` hands the outline of each module parsed here to the others as
        # soon as it is parsed (not once its analysis is done: another worker that needs it meanwhile
        # would parse the module again); ``catch_up`` takes in what the others have sent so far.
        self.share: Callable[[Outline], None] | None = None
        self.catch_up: Callable[[], None] | None = None
        self.uses: dict[str, MethodUses | None] = {}
        self._readers: dict[str, list[str]] = {}
        self.out = ChunkResult()
        self.engine = Engine(vocab=vocab, load_module=self.load, width_api=width_api(tree),
                             inherited_c_attrs=INHERITED_C_ATTRS, method_uses=self.method_uses,
                             outline_of=self.outline_of, mode_table=self.trees.mode_table,
                             budget_flag=lambda: tree_budget_flag(tree),
                             built_inputs=self._built_inputs, readers=self.readers)
        self.planning = Planning(self.engine)

    def use_index(self, parts: list[Part], unindexed: list[int]) -> None:
        """Answer name questions from these index parts (and index ``unindexed`` on the first one)."""
        self.names = NameIndex(parts, unindexed, self.read_at, self.vocab.prefilter_tokens)

    def read(self, f: SourceFile) -> bytes:
        pos = self.positions.get(id(f))
        data = self.texts.get(pos) if pos is not None else None
        return f.read_bytes() if data is None else data

    def read_at(self, pos: int) -> bytes | None:
        try:
            return self.read(self.tree.files[pos])
        except OSError:
            return None

    def _texts(self):
        """(relpath, bytes) of every readable file of the tree."""
        for pos, f in enumerate(self.tree.files):
            data = self.read_at(pos)
            if data is not None:
                yield f.relpath, data

    def _built_inputs(self) -> list:
        """The verify inputs the tree builds; for a folder inside a package on disk (``sglang/srt/layers``),
        those of the whole package it belongs to, read from disk (the workers and the verify-input
        classes live outside the folder)."""
        tree, outer = self.tree, enclosing_package(self.tree)
        if outer is None:
            # the classes define `prepare_for_verify` (or a base of theirs does, and a worker calls it):
            # the name index says which files may, without reading the others
            def class_texts():
                for pos in self.names.files(PREPARE_FOR_VERIFY):
                    data = self.read_at(pos)
                    if data is not None:
                        yield self.tree.files[pos].relpath, data
            return built_inputs(self.trees, self._texts, tree_budget_flag(tree) is not None, class_texts)

        def texts():
            for f in outer.files:
                try:
                    yield f.relpath, f.read_bytes()
                except OSError:
                    continue
        return built_inputs(TreeModules.of(outer), texts, tree_budget_flag(outer) is not None)

    def load(self, module: str, needs_c: bool = False) -> ModuleModel | None:
        """Modules are parsed on first use: entry files and the helpers reached from them. A helper
        called without C in its arguments matters only if it can read C itself."""
        if module in self.models:
            return self.models[module]
        f = self.index.lookup(module)
        if f is not None and needs_c:
            try:
                if not any(t in self.read(f) for t in self.vocab.prefilter_tokens) and not self.vocab.extra_c_attrs:
                    return None
            except OSError:
                return None
        self.models[module] = None
        if f is not None:
            try:
                data = self.read(f)
                decode(data)  # an undecodable file is said as such, before the parser's words for it
                self.models[module] = ModuleModel.parse(f, data, self.trees.syntax(f.relpath, data, f.display))
            except (SourceError, OSError) as exc:
                self.out.errors[f.display] = str(exc)
            else:
                if self.share is not None:
                    self.share(self.models[module].outline)
        return self.models[module]

    def outline_of(self, module: str) -> Outline | None:
        """The module's outline: from its model here, else as another process sent it, else parsed."""
        if module not in self.models:
            f = self.index.lookup(module)
            if f is not None and f.relpath not in self.outlines and self.catch_up is not None:
                self.catch_up()  # another worker may have parsed it since
            if f is not None and f.relpath in self.outlines:
                return self.outlines[f.relpath]
        m = self.load(module)
        return m.outline if m is not None else None

    def method_uses(self, name: str) -> MethodUses | None:
        """The tree's modules that call ``self.<name>(`` and define a ``<name>`` (outlined), and those
        that call it on another object (``other.<name>(``, ``super().<name>(``; test code aside, which
        is not on a serving path; named, for the engine to parse as it checks them); None when one of
        those cannot be outlined or read as its module. Memoized per name."""
        if name not in self.uses:
            self.uses[name] = self._method_uses(name)
        return self.uses[name]

    def _method_uses(self, name: str) -> MethodUses | None:
        word = name.encode()
        own, any_call = b"self." + word + b"(", b"." + word + b"("
        definition = re.compile(rb"def\s+" + re.escape(word) + rb"\s*\(")
        uses, foreign_callers = MethodUses(), []
        for pos in self.names.files(name):
            f = self.tree.files[pos]
            data = self.read_at(pos)
            if data is None or word not in data:
                continue
            foreign = data.count(any_call) != data.count(own) and not is_test_module(f.relpath)
            calls, defines = own in data, _defines(definition, data)
            if not (calls or foreign or defines):
                continue
            if foreign:
                if self.index.lookup(f.module) is not f:
                    return None  # a caller on another object that cannot be read as its module: cannot be judged
                foreign_callers.append((len(data), f.relpath, f.module))
            if not (calls or defines):
                continue
            o = self.outline_of(f.module)
            if o is None or o.relpath != f.relpath:
                if foreign:
                    return None
                continue
            if calls:
                uses.callers.append(o)
            if defines:
                uses.definers.append(o)
        # smallest first: one call there that W cannot be handed through settles the question, and the
        # larger modules need not be parsed (an order of the tree alone, so each process asks alike)
        uses.foreign = [module for _, _, module in sorted(foreign_callers)]
        return uses

    def readers(self, name: str) -> list[str]:
        """The modules, smallest first, of the files that name C, define or call a function named for the
        verify step and read ``<obj>.<name>`` on an object other than ``self`` (test code aside): where a
        buffer a class hands out through an accessor ``name`` may be written for the verify step. Memoized
        per name."""
        if name not in self._readers:
            read = re.compile(rb"(?<!\bself)\." + re.escape(name.encode()) + rb"\b")
            found = []
            # only functions named for the verify step are searched: files that define or call none are not read
            named = self.names.naming(VERIFY_STEP_WORD)
            for pos in (p for p in self.names.naming_c() if p in named):
                f = self.tree.files[pos]
                data = self.read_at(pos)
                if data is None or is_test_module(f.relpath) or not read.search(data) or self.index.lookup(f.module) is not f:
                    continue
                found.append((len(data), f.module))
            self._readers[name] = [module for _, module in sorted(found)]
        return self._readers[name]

    def add(self, pos: int) -> None:
        """Analyse the candidate ``tree.files[pos]``."""
        f = self.tree.files[pos]
        model = self.load(f.module) if self.index.by_module.get(f.module) is f else None
        if model is None and f.module not in self.models:
            try:
                model = ModuleModel.parse(f, self.read(f))
            except (SourceError, OSError) as exc:
                self.out.errors[f.display] = str(exc)
        if model is not None:
            try:
                self.engine.analyze(model)
            except (RecursionError, MemoryError) as exc:
                # One pathological file is that file's error; the run goes on without its findings.
                self.out.errors[model.source.display] = f"too deeply nested to analyse ({type(exc).__name__})"
                self.engine.forget(model.source.relpath)

    def prepare_findings(self) -> None:
        """With the whole name index at hand (:meth:`use_index`), between candidates: load what the
        findings of the helpers reported so far will need (:meth:`Planning.prepare_threads`)."""
        self.planning.prepare_threads()

    def finish(self) -> ChunkResult:
        self.out.findings = self.planning.findings()
        at: dict[str, set[int]] = {}
        for f in self.out.findings:
            at.setdefault(f.path, set()).add(f.line)
        models = {id(r.fp.model): r.fp.model for r in self.engine.reported.values()}
        for model in models.values():
            # the findings' lines, and the suppression comments' (a finding about one is quoted there)
            lines = at.get(model.source.display, set()) | set(model.lines_with(MARKER.decode()))
            quoted = self.out.sources.setdefault(model.source.display, {})
            quoted.update((n, text.rstrip("\n")) for n in sorted(lines) if (text := model.line(n)) is not None)
        return self.out
