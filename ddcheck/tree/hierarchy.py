"""The tree's classes, one resolver for every face (scan, config, smoke): what a name binds in a module
(a class, an alias ``Worker = WorkerV2``, an import, one inside a function), a class's bases in the
order Python looks methods up (C3), and the class whose method a call on an instance runs.

It reads outlines (:class:`Outline`): small and picklable, so the scan's workers hand them to each
other; :func:`outline` makes one from a module's syntax tree, for the tree model
(:class:`~ddcheck.tree.modules.TreeModules`) and the scan's module model alike. A module without an
outline (outside the tree, or one a caller chose not to read) is opaque: its classes have no methods
here and their bases are not followed.
"""

from __future__ import annotations

import ast
from collections import namedtuple
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ddcheck.tree.imports import absolute, package_of
from ddcheck.tree.syntax import dotted

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Outline:
    """What a module declares, for questions of inheritance without its syntax tree."""

    relpath: str
    module: str
    # top-level class -> its bases as written (``X``, ``mod.X``), in order; a class defined twice: the first
    class_bases: dict[str, tuple[str, ...]]
    aliases: dict[str, str]  # module-level ``A = B`` (B a name or dotted name): A -> B, the first binding
    # names the module binds by import at its top level (``if``/``try`` blocks included): local ->
    # (module, name there), name None for ``import x``; the first binding
    imports: dict[str, tuple[str, str | None]]
    # ``from x import y`` inside functions and classes: local -> (module, name), the first found
    local_imports: dict[str, tuple[str, str]]
    methods: dict[str, list[str]]  # method name -> the top-level classes defining it, in definition order

    def ref(self, name: str) -> "ClassRef":
        return ClassRef(self.relpath, self.module, name)


# A class of the tree: the file and module that define it, and its name there. (collections' namedtuple:
# typing's would cost the one-file scan the import of typing.)
ClassRef = namedtuple("ClassRef", "relpath module name")


def outline(relpath: str, module: str, tree: ast.Module,
            spans_import: Callable[[ast.stmt], bool] | None = None) -> Outline:
    """The outline of the module ``module`` (file ``relpath``) whose syntax tree is ``tree``.
    ``spans_import``: whether a statement's lines hold the word ``import`` (where the caller has the
    text at hand): the others hold no import statement, so their bodies are not walked."""
    package = package_of(module, relpath.endswith("__init__.py"))
    classes: dict[str, tuple[str, ...]] = {}
    aliases: dict[str, str] = {}
    imports: dict[str, tuple[str, str | None]] = {}
    local: dict[str, tuple[str, str]] = {}
    methods: dict[str, list[str]] = {}
    nested: list[ast.stmt] = []  # function and class bodies, for the imports inside them
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            if stmt.name not in classes:
                classes[stmt.name] = tuple(dotted(b) or "" for b in stmt.bases)
                for s in stmt.body:
                    if isinstance(s, FUNCS):
                        names = methods.setdefault(s.name, [])
                        if stmt.name not in names:
                            names.append(stmt.name)
            nested.append(stmt)
        elif isinstance(stmt, FUNCS):
            nested.append(stmt)
        elif isinstance(stmt, ast.Assign) and dotted(stmt.value) and not isinstance(stmt.value, ast.Call):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    aliases.setdefault(t.id, dotted(stmt.value))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _bind(stmt, package, imports)
        elif isinstance(stmt, (ast.If, ast.Try)):
            # `if TYPE_CHECKING:` / `try: from x import y` blocks still bind names
            for n in ast.walk(stmt):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    _bind(n, package, imports)
    for node in _statements(nested, spans_import):
        if isinstance(node, ast.ImportFrom):
            base = absolute(package, node.level, node.module)
            for a in node.names:
                if a.name != "*":
                    local.setdefault(a.asname or a.name, (base, a.name))
    return Outline(relpath, module, classes, aliases, imports, local, methods)


def _bind(node: ast.Import | ast.ImportFrom, package: str, out: dict[str, tuple[str, str | None]]) -> None:
    if isinstance(node, ast.Import):
        for a in node.names:
            top = a.name.split(".")[0]
            out.setdefault(a.asname or top, (a.name if a.asname else top, None))
    else:
        base = absolute(package, node.level, node.module)
        for a in node.names:
            if a.name != "*":
                out.setdefault(a.asname or a.name, (base, a.name))


def _statements(roots: list[ast.stmt], keep: Callable[[ast.stmt], bool] | None) -> Iterator[ast.stmt]:
    """The statements inside ``roots``' bodies, breadth first (imports are statements: no expression
    is walked), those of a statement ``keep`` refuses left out."""
    level = roots
    while level:
        nxt: list[ast.stmt] = []
        for stmt in level:
            if keep is not None and not keep(stmt):
                continue
            for name in BLOCKS:
                for item in getattr(stmt, name, None) or ():
                    if isinstance(item, (ast.excepthandler, ast.match_case)):
                        nxt.extend(item.body)
                    else:
                        nxt.append(item)
        yield from nxt
        level = nxt


class Hierarchy:
    """The tree's classes, resolved over the outlines ``outline_of`` gives (dotted module name ->
    outline, or None: not in the tree, or not to be read). Everything asked is kept."""

    def __init__(self, outline_of: Callable[[str], Outline | None]):
        self._outline_of = outline_of
        self._by_module: dict[str, Outline | None] = {}
        self._by_path: dict[str, Outline] = {}
        self._mro: dict[ClassRef, list[ClassRef]] = {}

    def outline(self, module: str) -> Outline | None:
        if module not in self._by_module:
            o = self._by_module[module] = self._outline_of(module)
            if o is not None:
                self._by_path.setdefault(o.relpath, o)
        return self._by_module[module]

    def ref(self, o: Outline, name: str) -> ClassRef:
        """``o``'s class ``name`` (the outline is kept: a ref is followed through its own file's outline)."""
        self._by_path.setdefault(o.relpath, o)
        return o.ref(name)

    # ------------------------------------------------------------------------ names

    def find(self, name: str, module: str) -> ClassRef | None:
        """The tree class ``name`` (``X``, or ``mod.X`` through an imported module) means in ``module``:
        a class it defines, an alias of one, one it imports (at its top level, else inside a function)."""
        return self._find(name, module, None, set())

    def _find(self, name: str, module: str, skip: ClassRef | None, seen: set) -> ClassRef | None:
        if (name, module) in seen or not name:
            return None
        seen.add((name, module))
        o = self.outline(module)
        if o is None:
            return None
        head, _, rest = name.partition(".")
        if rest:  # `mod.X`: a module imported whole (`import a.b as mod`, `from a import mod`)
            imp = o.imports.get(head)
            if imp is None:
                return None
            full = f"{imp[0]}.{rest}" if imp[1] is None else f"{imp[0]}.{imp[1]}.{rest}"
            where, _, cls = full.rpartition(".")
            return self._find(cls, where, None, seen)
        if name in o.class_bases and o.ref(name) != skip:
            return self.ref(o, name)
        if name in o.aliases:
            hit = self._find(o.aliases[name], module, skip, seen)
            if hit is not None:
                return hit
        imp = o.imports.get(name) or o.local_imports.get(name)
        if imp is not None and imp[1] is not None:
            return self._find(imp[1], imp[0], None, seen)
        return None

    # ------------------------------------------------------------------------ inheritance

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        """``ref``'s bases that the tree defines, in order. ``class X(X)`` derives from the X bound
        before it (imported, or an alias), not from itself."""
        o = self._by_path.get(ref.relpath) or self.outline(ref.module)
        out: list[ClassRef] = []
        for b in o.class_bases.get(ref.name, ()) if o is not None else ():
            hit = self._find(b, ref.module, ref, set())
            if hit is not None and hit != ref and hit not in out:
                out.append(hit)
        return out

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        """``ref`` and its ancestors the tree defines, in the order Python looks methods up (C3; where
        the tree's bases admit no such order, depth first)."""
        hit = self._mro.get(ref)
        if hit is None:
            self._mro[ref] = [ref]  # a cycle (a tree that could not import) ends here
            bases = self.bases(ref)
            hit = self._mro[ref] = [ref, *_merge([[c for c in self.mro(b) if c != ref] for b in bases] + [bases])]
        return hit

    def outside_bases(self, ref: ClassRef) -> list[tuple[ClassRef, str]]:
        """The bases of ``ref`` and of its tree ancestors that the tree does not define (``nn.Module``,
        ``object``; "" for one that is no dotted name, ``Generic[T]``), each as written, with the class
        that names it, in method resolution order."""
        out: list[tuple[ClassRef, str]] = []
        for r in self.mro(ref):
            o = self._by_path.get(r.relpath) or self.outline(r.module)
            for b in o.class_bases.get(r.name, ()) if o is not None else ():
                if (self._find(b, r.module, r, set()) if b else None) is None:
                    out.append((r, b))
        return out

    def method(self, ref: ClassRef, name: str) -> ClassRef | None:
        """The class whose ``name`` a call on an instance of ``ref`` runs: ``ref``'s own, else the first
        of its ancestors' in method resolution order."""
        if self._defines(ref, name):  # the usual answer, found without reading a base
            return ref
        return next((c for c in self.mro(ref)[1:] if self._defines(c, name)), None)

    def derives(self, ref: ClassRef, base: ClassRef) -> bool:
        """``ref`` has ``base`` among its ancestors (itself not)."""
        return base in self.mro(ref)[1:]

    def subclasses(self, o: Outline, base: ClassRef) -> list[str]:
        """The classes of ``o`` that derive from ``base``."""
        return [c for c in o.class_bases if self.derives(self.ref(o, c), base)]

    def _defines(self, ref: ClassRef, name: str) -> bool:
        o = self._by_path.get(ref.relpath)
        return o is not None and ref.name in o.methods.get(name, ())


def _merge(seqs: list[list[ClassRef]]) -> list[ClassRef]:
    """C3's merge: the next class is the first head no list has in its tail; where none is, the
    first head (depth first), so an inconsistent tree still gets an order."""
    seqs = [list(s) for s in seqs if s]
    out: list[ClassRef] = []
    while seqs:
        tails = {c for s in seqs for c in s[1:]}
        head = next((s[0] for s in seqs if s[0] not in tails), seqs[0][0])
        out.append(head)
        seqs = [s for s in ([c for c in s if c != head] for s in seqs) if s]
    return out
