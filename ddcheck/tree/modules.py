"""The target tree's modules, each file parsed at most once: what config, smoke and the start-up readers
ask of the tree's code without running it.

One model per :class:`~ddcheck.tree.sources.SourceTree` (:meth:`TreeModules.of`), kept with the tree; a
tree is a snapshot of its files, so a file is read and parsed once. A file that cannot be read or parsed
is None (its error kept for who must name it). Imports resolve as Python resolves them for that module,
relative ones included (``from .ddtree_info import X`` in a package's ``__init__`` or in a plain module).
The scan hands in the bytes it has read (:meth:`TreeModules.syntax`) and finds modules through
:attr:`TreeModules.index`; the tree's ForwardMode table (:meth:`TreeModules.mode_table`), its functions
by qualified name and their callers are answered here too. Classes, their bases and the method a call
runs are the one resolver's (:mod:`ddcheck.tree.hierarchy`), over the modules' outlines.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ddcheck.tree.sources import SourceFile, SourceTree, _disk_file
from ddcheck.tree.hierarchy import FUNCS, ClassRef, Hierarchy, Outline, outline
from ddcheck.tree.imports import absolute, package_of
from ddcheck.tree.modes import ModeTable, read_mode_table
from ddcheck.tree.parse import SourceError, decode, parse_kept, parse_source
from ddcheck.tree.names import FORWARD_BATCH_MODULE as FORWARD_MODE_MODULE


@dataclass
class TreeIndex:
    """Module name -> file as the scan finds it in any folder it is given: by the dotted name of the file's
    relpath, else (a git checkout keeps the package under ``python/``) the shortest name ending with
    it, else, for a lone file (pre-commit), the sibling module on disk. (:meth:`TreeModules.module`
    finds a module as Python imports it, under the package's root.)"""

    tree: SourceTree
    by_module: dict[str, SourceFile] = field(default_factory=dict)
    # last dotted part -> the names of by_module with it, in order (a name ending with ".x.y" ends with
    # ".y"), for the first _indexed names (by_module only grows)
    _by_last: dict[str, list[str]] = field(default_factory=dict)
    _indexed: int = 0

    def __post_init__(self) -> None:
        for f in self.tree.files:
            self.by_module.setdefault(f.module, f)

    def _ending_with(self, suffix: str) -> list[str]:
        """The names in ``by_module`` (files and remembered lookups) that end with ``suffix``, in order:
        read from those with its last dotted part, not by asking each of thousands of names."""
        if len(self.by_module) != self._indexed:
            for m in itertools.islice(self.by_module, self._indexed, None):
                self._by_last.setdefault(m.rpartition(".")[2], []).append(m)
            self._indexed = len(self.by_module)
        return [m for m in self._by_last.get(suffix.rpartition(".")[2], ()) if m.endswith(suffix)]

    def lookup(self, module: str) -> SourceFile | None:
        if module in self.by_module:
            return self.by_module[module]
        hit = None
        if self.tree.kind == "dir":
            # A git checkout keeps the package under python/: `sglang.srt.x` is `python.sglang.srt.x`.
            hits = self._ending_with("." + module)
            hit = self.by_module[min(hits, key=len)] if hits else None
            self.by_module[module] = hit
        if hit is not None or self.tree.root is None or self.tree.kind != "file":
            return hit
        # A single file passed by pre-commit: find its sibling modules on disk, lazily.
        base = self.tree.root / Path(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                f = _disk_file(candidate, str(candidate), candidate.relative_to(self.tree.root).as_posix())
                self.by_module[module] = f
                return f
        return None




class TreeModules:
    """A tree's modules parsed with ``ast``, by relpath and by dotted name."""

    def __init__(self, tree: SourceTree, package: str = "sglang"):
        self.tree, self.package = tree, package
        root = tree.package_root(package)
        self.prefix = f"{root}/" if root else ""
        self._parsed: dict[str, ast.Module | None] = {}
        self.errors: dict[str, BaseException] = {}  # relpath -> why it has no syntax tree
        self._modes: ModeTable | None = None
        self._outlines: dict[str, Outline | None] = {}
        # scope's id -> (scope, names it imports): the step walk asks each function's imports many times
        self._imports_in: dict[int, tuple[ast.AST, dict[str, str], str]] = {}
        self._froms: dict[int, tuple[ast.Module, list[ast.ImportFrom]]] = {}

    @classmethod
    def of(cls, tree: SourceTree) -> "TreeModules":
        """The tree's one model. Kept in the tree's own instance dict (SourceTree is not hashable), so
        it goes with the tree; a global table would keep every tree alive."""
        model = tree.__dict__.get("_ddcheck_modules")
        if model is None:
            model = tree.__dict__["_ddcheck_modules"] = cls(tree)
        return model

    # ------------------------------------------------------------------------ files

    @cached_property
    def index(self) -> TreeIndex:
        """Module -> file as the scan finds it (any folder, a lone file's siblings)."""
        return TreeIndex(self.tree)

    def parsed(self, relpath: str) -> ast.Module | None:
        """The syntax tree of the file at ``relpath``; None where there is no such file or it cannot be
        read or parsed. Shared, also with other trees whose file has the same bytes (:func:`parse_kept`):
        a caller that rewrites nodes copies them first."""
        if relpath not in self._parsed:
            f = self.tree.file_at(relpath)
            try:
                data = f.read_bytes() if f is not None else None
            except OSError as exc:
                self.errors[relpath], data = exc, None
            self._parse(relpath, data, kept=True)
        return self._parsed[relpath]

    def files_matching(self, pattern: "re.Pattern[bytes]") -> list[str]:
        """The tree's ``.py`` files whose bytes ``pattern`` finds, in the tree's order; read once per
        pattern (:meth:`SourceTree.read_once`). Unreadable files match nothing."""
        def read() -> list[str]:
            found = []
            for f in self.tree.files:
                try:
                    if f.relpath.endswith(".py") and pattern.search(f.read_bytes()):
                        found.append(f.relpath)
                except OSError:
                    continue
            return found

        return self.tree.read_once(("matching", pattern), read)

    def syntax(self, relpath: str, data: bytes, display: str | None = None) -> ast.Module:
        """The syntax tree of the tree's file ``relpath``, whose bytes (``data``) the caller has read:
        parsed once for every reader of the tree (the scan hands its bytes in, config and smoke ask
        :meth:`parsed`); SourceError, naming ``display``'s problem, where it does not parse."""
        if relpath not in self._parsed:
            self._parse(relpath, data, display)
        mod = self._parsed[relpath]
        if mod is None:
            exc = self.errors.get(relpath)
            raise exc if isinstance(exc, SourceError) else SourceError(f"cannot be read: {exc}")
        return mod

    def _parse(self, relpath: str, data: bytes | None, display: str | None = None, kept: bool = False) -> None:
        mod = None
        if data is not None:
            try:
                mod = (parse_kept if kept else parse_source)(data, display or relpath)
            except SourceError as exc:
                self.errors[relpath] = exc
        self._parsed[relpath] = mod

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        """(relpath, syntax tree) of the module ``dotted``, or None."""
        hit = self.tree.module_file(dotted)
        mod = self.parsed(hit[0]) if hit is not None else None
        return (hit[0], mod) if mod is not None else None

    def dotted(self, relpath: str) -> str:
        """The module a tree file is imported as ("" for none of the package)."""
        return self.tree.module_name(relpath, self.package)

    def mode_table(self) -> ModeTable:
        """The tree's ForwardMode table (which mode tests hold in TARGET_VERIFY), read once: from its
        module's syntax tree where that is parsed already, else from the class's own lines; upstream's
        table where the tree has no ForwardMode."""
        if self._modes is None:
            f = self.index.lookup(FORWARD_MODE_MODULE)  # a lone file's sibling on disk too
            table = None
            if f is not None and self._parsed.get(f.relpath) is not None:
                table = ModeTable.from_module(self._parsed[f.relpath], f.display)
            elif f is not None:
                try:
                    table = read_mode_table(decode(f.read_bytes()), f.display)
                except (OSError, SourceError):  # unreadable or undecodable: no table of the tree's
                    table = None
            self._modes = table or ModeTable()
        return self._modes

    # ------------------------------------------------------------------------ imports

    def imported(self, module: str, node: ast.ImportFrom) -> str | None:
        """The tree module ``node`` (in ``module``) imports from, relative imports resolved; None for
        a module outside the tree's package."""
        if node.level:
            hit = self.tree.module_file(module)
            name = absolute(package_of(module, bool(hit and hit[1])), node.level, node.module)
        else:
            name = node.module or ""
        return name if name == self.package or name.startswith(self.package + ".") else None

    def imports_in(self, module: str, scope: ast.AST) -> dict[str, str]:
        """Local name -> tree module, for each ``from ... import`` anywhere in ``scope`` of ``module``."""
        kept = self._imports_in.get(id(scope))
        if kept is not None and kept[0] is scope and kept[2] == module:
            return dict(kept[1])
        out = self._imports_in_uncached(module, scope)
        self._imports_in[id(scope)] = (scope, out, module)
        return dict(out)

    def _imports_in_uncached(self, module: str, scope: ast.AST) -> dict[str, str]:
        out: dict[str, str] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.ImportFrom):
                source = self.imported(module, node)
                if source is not None:
                    for a in node.names:
                        out[a.asname or a.name] = source
        return out

    def imports_of(self, module: str) -> dict[str, str]:
        """Local name -> tree module, for every ``from ... import`` of ``module`` (functions' own too)."""
        hit = self.module(module)
        return self.imports_in(module, hit[1]) if hit is not None else {}

    # ------------------------------------------------------------------------ definitions

    def outline(self, module: str) -> Outline | None:
        """What the module ``dotted`` declares (classes, their bases, aliases, imports, methods), or None."""
        if module not in self._outlines:
            hit = self.module(module)
            self._outlines[module] = outline(hit[0], module, hit[1]) if hit is not None else None
        return self._outlines[module]

    @cached_property
    def classes(self) -> Hierarchy:
        """The tree's classes, resolved as the scan resolves them (:mod:`ddcheck.tree.hierarchy`)."""
        return Hierarchy(self.outline)

    def find_class(self, name: str, module: str) -> tuple[str, ast.ClassDef, str] | None:
        """(relpath, ClassDef, module) for ``name`` defined in, imported into, or aliased in ``module``
        (``Worker = WorkerV2``)."""
        ref = self.classes.find(name, module)
        return self._class_at(ref) if ref is not None else None

    def class_chain(self, name: str, module: str) -> list[tuple[str, ast.ClassDef, str]]:
        """The class ``name`` as ``module`` sees it, then its bases the tree defines, in method
        resolution order, followed across modules: (relpath, ClassDef, module), subclass first. A fork's
        ``class EagleVerifyInput(EagleVerifyInput)`` goes on to the class it imported."""
        ref = self.classes.find(name, module)
        return [hit for r in self.classes.mro(ref) if (hit := self._class_at(r)) is not None] if ref else []

    def outside_bases(self, name: str, module: str) -> list[tuple[str, str, str]]:
        """(module, class, base as written) for each base of the class ``name`` (as ``module`` sees it) and
        of its tree ancestors that the tree does not define."""
        ref = self.classes.find(name, module)
        return [(r.module, r.name, b) for r, b in self.classes.outside_bases(ref)] if ref is not None else []

    def method(self, cls: str, module: str, name: str) -> tuple[ast.FunctionDef, str] | None:
        """The method ``name`` a call on a ``cls`` runs (its own or its bases', in method resolution
        order), and the module of the class that defines it."""
        ref = self.classes.find(cls, module)
        owner = self.classes.method(ref, name) if ref is not None else None
        hit = self._class_at(owner) if owner is not None else None
        fn = next((f for f in hit[1].body if isinstance(f, FUNCS) and f.name == name), None) if hit else None
        return (fn, owner.module) if fn is not None else None

    def _class_at(self, ref: ClassRef) -> tuple[str, ast.ClassDef, str] | None:
        mod = self.parsed(ref.relpath)
        node = next((c for c in mod.body if isinstance(c, ast.ClassDef) and c.name == ref.name), None) if mod else None
        return (ref.relpath, node, ref.module) if node is not None else None

    def find_function(self, name: str, module: str, _depth: int = 0) -> tuple[ast.FunctionDef, str] | None:
        """A module-level function ``name`` of ``module`` or imported into it from the tree."""
        hit = self.module(module)
        if hit is None or _depth > 4:
            return None
        for node in hit[1].body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node, module
        source, original = self._import_of(name, module, hit[1])
        return self.find_function(original, source, _depth + 1) if source else None

    def defined(self, relpath: str, qualname: str) -> ast.FunctionDef | ast.ClassDef | None:
        """The class or function ``qualname`` (``Class.method``) defined in the file ``relpath``."""
        node: ast.AST | None = self.parsed(relpath)
        for part in qualname.split(".") if node is not None else ():
            node = next((n for n in getattr(node, "body", []) if isinstance(n, (ast.ClassDef, ast.FunctionDef))
                         and n.name == part), None)
            if node is None:
                return None
        return node if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else None

    def callers(self, relpath: str, names: Iterable[str]) -> Iterator[tuple[str | None, ast.FunctionDef, ast.stmt]]:
        """(class or None, function, statement) for each function of the file ``relpath`` (module-level
        ones first, then each top-level class's methods, in the file's order) with a top-level statement
        that names one of ``names`` (calls it, or hands it on): its first such statement. The functions
        named ``names`` themselves are left out."""
        mod = self.parsed(relpath)
        names = set(names)
        if mod is None:
            return
        scopes = [(None, mod.body)] + [(c.name, c.body) for c in mod.body if isinstance(c, ast.ClassDef)]
        for owner, body in scopes:
            for fn in body:
                if not isinstance(fn, ast.FunctionDef) or fn.name in names:
                    continue
                hit = next((s for s in fn.body if _names_one_of(s, names)), None)
                if hit is not None:
                    yield owner, fn, hit

    def _import_of(self, name: str, module: str, mod: ast.Module) -> tuple[str | None, str]:
        """(tree module, name there) of the first import that binds ``name`` in ``module``."""
        kept = self._froms.get(id(mod))
        if kept is None or kept[0] is not mod:
            kept = self._froms[id(mod)] = (mod, [n for n in ast.walk(mod) if isinstance(n, ast.ImportFrom)])
        froms = kept[1]
        for node in froms:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        source = self.imported(module, node)
                        if source is not None:
                            return source, a.name
        return None, name


def _names_one_of(stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names or isinstance(n, ast.Attribute) and n.attr in names
               for n in ast.walk(stmt))


def tree_class(tree: SourceTree, relpath: str, name: str) -> ast.ClassDef | None:
    """The top-level class ``name`` of the tree file ending in ``relpath``."""
    f = tree.find(relpath)
    mod = TreeModules.of(tree).parsed(f.relpath) if f is not None else None
    return next((c for c in mod.body if isinstance(c, ast.ClassDef) and c.name == name), None) if mod else None
