"""One parsed module: its functions, classes, imports, parent links and the attributes that hold C."""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ddcheck.tree.sources import SourceFile, split_lines
from ddcheck.tree.hierarchy import Hierarchy, Outline, outline
from ddcheck.tree.parse import decode, parse_source
from ddcheck.analysis.exprs import call_leaf, every_node, is_c_valued, is_exact_c, self_attr
from ddcheck.analysis.vocabulary import ALLOCATORS, Vocabulary

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Parent links are asked of statements and expressions, never of a load/store context or an operator
# (shared instances), so those fields are not walked; names and constants hold nothing to walk into.
UNLINKED_FIELDS = frozenset({"ctx", "op", "ops"})
LEAVES = frozenset({ast.Name, ast.Constant})


@lru_cache(maxsize=None)
def _link_fields(t: type) -> tuple[str, ...]:
    return tuple(f for f in t._fields if f not in UNLINKED_FIELDS)


def _find(text: str, word: str, start: int, search) -> int:
    if search is None:
        return text.find(word, start)
    m = search(text, start)
    return m.start() if m else -1






@dataclass
class FunctionInfo:
    """A function or method of a module (``cls``: its class, None for a module-level function)."""

    qualname: str
    node: ast.FunctionDef
    cls: str | None

    @property
    def name(self) -> str:
        return self.node.name

    @cached_property
    def params(self) -> list[str]:
        a = self.node.args
        return [x.arg for x in (*a.posonlyargs, *a.args)]

    @cached_property
    def kwonly(self) -> list[str]:
        return [x.arg for x in self.node.args.kwonlyargs]


@dataclass
class ModuleModel:
    """A parsed module: its text, syntax tree, functions, class bases and imports."""

    source: SourceFile
    text: str
    tree: ast.Module
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, None] = field(default_factory=dict)  # every class with a body indexed, nested ones too

    @classmethod
    def parse(cls, source: SourceFile, data: bytes | None = None, syntax: ast.Module | None = None) -> "ModuleModel":
        """The module of ``source`` (its bytes ``data`` when read already); ``syntax``: its syntax tree,
        parsed by the tree model (:meth:`ddcheck.tree.modules.TreeModules.syntax`), else parsed here."""
        raw = source.read_bytes() if data is None else data
        text = decode(raw)
        return cls(source=source, text=text, tree=syntax if syntax is not None else parse_source(raw, source.display))

    def __post_init__(self) -> None:
        self._index()

    @property
    def name(self) -> str:
        return self.source.module

    @cached_property
    def outline(self) -> Outline:
        """What the module declares (classes and their bases, aliases, imports, methods), from the tree
        model's one reading of it; small enough for a worker to hand to the others."""
        return outline(self.source.relpath, self.name, self.tree, lambda stmt: self.spans(stmt, "import"))

    @property
    def imports(self) -> dict[str, tuple[str, str | None]]:
        """Local name -> (module, name there; None for ``import x``) of the module's top-level imports."""
        return self.outline.imports

    @cached_property
    def lines(self) -> list[str]:
        """Physical lines as Python's tokenizer counts them (:func:`ddcheck.tree.sources.split_lines`)."""
        return split_lines(self.text)

    def line(self, n: int) -> str | None:
        """Physical line ``n`` (1-based) with its ending, as in :attr:`lines` (without splitting them
        all); None past the last."""
        starts = self._line_starts
        return self.text[starts[n - 1]:starts[n]] if 0 < n < len(starts) else None

    @cached_property
    def parents(self) -> dict[int, tuple[ast.AST, str]]:
        """id(child) -> (parent, field name), filled per function on demand (see :meth:`link`)."""
        return {}

    def link(self, root: ast.AST) -> None:
        """Record parent links under ``root`` once; only analysed functions pay for it."""
        out = self.parents
        if id(root) in self._linked:
            return
        self._linked.add(id(root))
        stack, AST = [root], ast.AST
        pop, push = stack.pop, stack.append
        while stack:
            node = pop()
            for name in _link_fields(type(node)):
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, AST):
                            out[id(item)] = (node, name)
                            if type(item) not in LEAVES:
                                push(item)
                elif isinstance(value, AST):
                    out[id(value)] = (node, name)
                    if type(value) not in LEAVES:
                        push(value)

    @cached_property
    def _linked(self) -> set[int]:
        return set()

    def parent(self, node: ast.AST) -> ast.AST | None:
        hit = self.parents.get(id(node))
        return hit[0] if hit else None

    def lines_with(self, word: str, fold: bool = False) -> list[int]:
        """The numbers of the lines that hold ``word`` (any case, with ``fold``; in order; memoized)."""
        hit = self._lines_with.get((word, fold))
        if hit is None:
            # found in the text and mapped to lines: most words are on few lines of a large module
            text, starts, hit, find = self.text, self._line_starts, [], None
            if fold:
                folded = text.lower()
                if len(folded) == len(text):  # each character lowered to one: offsets hold
                    text, word = folded, word.lower()
                else:
                    find = re.compile(re.escape(word), re.IGNORECASE).search
            at = _find(text, word, 0, find)
            while at >= 0:
                line = bisect.bisect_right(starts, at)
                hit.append(line)
                at = _find(text, word, starts[line], find)  # on from the next line
            self._lines_with[(word, fold)] = hit
        return hit

    @cached_property
    def _line_starts(self) -> list[int]:
        """Offset in ``text`` of each line's start, then of its end."""
        if "\r" in self.text or "lines" in self.__dict__:
            return list(itertools.accumulate(map(len, self.lines), initial=0))
        # Only \n ends lines: found without making the list of lines most modules never need.
        starts = [0]
        starts.extend(itertools.accumulate(len(line) + 1 for line in self.text.split("\n")))
        if self.text.endswith("\n") or not self.text:
            starts.pop()  # no line after the last newline
        else:
            starts[-1] -= 1  # the last line has no newline
        return starts

    def spans(self, node: ast.AST, word: str, fold: bool = False) -> bool:
        """Whether a line from ``node``'s first to its last holds ``word`` (in any case, with ``fold``)."""
        return self.holds(node.lineno, node.end_lineno, word, fold)

    def holds(self, first: int, last: int, word: str, fold: bool = False) -> bool:
        """Whether a line from ``first`` to ``last`` holds ``word`` (in any case, with ``fold``)."""
        hits = self.lines_with(word, fold)
        i = bisect.bisect_left(hits, first)
        return i < len(hits) and hits[i] <= last

    @cached_property
    def _lines_with(self) -> dict[tuple[str, bool], list[int]]:
        return {}

    def text_of(self, node: ast.AST) -> str:
        """The lines ``node`` spans, whole."""
        starts = self._line_starts
        last = min(node.end_lineno or node.lineno, len(starts) - 1)
        return self.text[starts[node.lineno - 1] : starts[last]]

    def column(self, line: int, byte_col: int) -> int:
        """ast columns are UTF-8 byte offsets; findings use characters."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        return (node.lineno, self.column(node.lineno, node.col_offset),
                node.end_lineno, self.column(node.end_lineno, node.end_col_offset))

    def code(self, node: ast.AST) -> str:
        l1, c1, l2, c2 = self.span(node)
        if l1 == l2:
            return self.lines[l1 - 1][c1:c2]
        return ast.unparse(node)

    def _index(self) -> None:
        for stmt in self.tree.body:
            self._index_stmt(stmt, cls=None, prefix="")

    def _index_stmt(self, stmt: ast.stmt, cls: str | None, prefix: str) -> None:
        if isinstance(stmt, FUNCS):
            q = f"{prefix}{stmt.name}"
            self.functions.setdefault(q, FunctionInfo(q, stmt, cls))
        elif isinstance(stmt, ast.ClassDef):
            self.classes[stmt.name] = None
            for s in stmt.body:
                self._index_stmt(s, cls=stmt.name, prefix=f"{stmt.name}.")

    def nested(self, outer: FunctionInfo, name: str) -> FunctionInfo | None:
        """A helper defined inside ``outer`` (``def call_fn(...)`` in a method), found on demand."""
        defs = self._nested.get(id(outer.node))
        if defs is None:
            defs = self._nested[id(outer.node)] = {
                n.name: FunctionInfo(f"{outer.qualname}.<locals>.{n.name}", n, outer.cls)
                for n in every_node(outer.node, BLOCK_FIELDS) if isinstance(n, FUNCS) and n is not outer.node}
        return defs.get(name)

    @cached_property
    def _nested(self) -> dict[int, dict[str, FunctionInfo]]:
        return {}

    def method(self, cls: str, name: str) -> FunctionInfo | None:
        """``cls``'s method ``name``, its own or a base's of this module (the tree's one resolver, over
        this module alone)."""
        owner = self._local_classes.method(self._local_classes.ref(self.outline, cls), name)
        return self.functions.get(f"{owner.name}.{name}") if owner is not None else None

    @cached_property
    def _local_classes(self) -> Hierarchy:
        return Hierarchy(lambda module: self.outline if module == self.name else None)

    def class_c_attrs(self, vocab: Vocabulary, inherited: frozenset[str],
                      load: Callable[[str], "ModuleModel | None"] | None = None) -> dict[str, "ClassFacts"]:
        """Per class, the ``self.X`` attributes that hold C or a value derived from it arithmetically,
        the subset that are exact copies of C (the only ones a fix may replace by W), and the buffers
        laid out with C at start-up. ``load``: a dotted module name -> its model, for the helpers of
        other modules of the tree that a class hands C to."""
        result: dict[str, ClassFacts] = {}
        tokens = set(vocab.c_source_attrs) | set(vocab.extra_c_attrs) | set(inherited)
        for cls in self.classes:
            assigns: list[tuple[str, ast.expr]] = []
            keyed: list[tuple[str, object, ast.expr]] = []  # self.X["key"] = value
            unpacked: list[tuple[str, int, ast.expr]] = []  # (self.X, self.Y) = value: (attr, its index, value)
            sized_locals: dict[int, set[str]] = {}  # id of an assigned value -> locals of its method derived from C
            for f in self.functions.values():
                if f.cls != cls:
                    continue
                text = self.text_of(f.node)
                if not any(t in text for t in tokens):
                    continue  # cannot bind C (derived attributes mention a C name too)
                derived: set[str] = set()
                for n in _statements(f.node.body):
                    # C, or a local bound from it, as the value (`C or 0`, `1 if C is None else C`), not only tested
                    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                            and _carries_c(n.value, tokens, vocab, derived):
                        derived.add(n.targets[0].id)
                    if derived and isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                        values = n.value.values if isinstance(n.value, ast.Dict) else [n.value]
                        for v in values:
                            sized_locals[id(v)] = set(derived)
                for n in _statements(f.node.body):
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            if self_attr(t):
                                assigns.append((self_attr(t), n.value))
                            elif isinstance(t, ast.Subscript) and self_attr(t.value) and isinstance(t.slice, ast.Constant):
                                keyed.append((self_attr(t.value), t.slice.value, n.value))
                            elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(n.value, ast.Call):
                                unpacked.extend((self_attr(e), i, n.value) for i, e in enumerate(t.elts) if self_attr(e))
                    elif isinstance(n, ast.AnnAssign) and n.value is not None and self_attr(n.target):
                        assigns.append((self_attr(n.target), n.value))
            own = {a for a, _ in assigns}
            attrs = set(vocab.extra_c_attrs) | {a for a in {*inherited, *vocab.c_source_attrs} if a not in own}
            changed = True
            while changed:
                changed = False
                for attr, value in assigns:
                    if attr not in attrs and is_c_valued(value, attrs, vocab):
                        attrs.add(attr)
                        changed = True
            # An attribute also bound to a value that owes nothing to C (a budget, a per-step maximum)
            # is not C; one bound to a start-up function of C (`resolve(..., num_draft_tokens=C)`) still is.
            for attr, value in assigns:
                if attr in attrs and attr not in vocab.extra_c_attrs and not is_c_valued(value, attrs, vocab) \
                        and not _placeholder(value) and not _mentions_c(value, attrs, vocab):
                    attrs.discard(attr)
            # An attribute sized for the largest width a budget allows (`max(C, budget + 1)`) is not C either.
            for attr, value in assigns:
                if attr in attrs and attr not in vocab.extra_c_attrs and any(names_a_budget(n) for n in every_node(value)):
                    attrs.discard(attr)
            # Re-resolved at start-up (`X = resolve(..., num_draft_tokens=int(X))`), X still stands for the
            # verify width: exact when some assignment is C itself and the others hand C to a resolver.
            exact = {a for a in attrs if a in vocab.extra_c_attrs or a in inherited and a not in own
                     or all(is_exact_c(v, attrs, vocab) or _placeholder(v) or _resolves_c(v, attrs, vocab)
                            for at, v in assigns if at == a)
                     and any(is_exact_c(v, attrs, vocab) for at, v in assigns if at == a)}
            buffers: dict[str, dict[object, int]] = {}
            strided: dict[tuple[str, object], str] = {}
            length_only: set[tuple[str, object]] = set()

            def laid_out(attr: str, key: object, value: ast.expr) -> None:
                buffers.setdefault(attr, {})[key] = value.lineno
                refill = _strided_by_c(value, attrs, vocab) or _filled_with_c(value, attrs, vocab)
                if refill:
                    strided[(attr, key)] = refill
                elif _length_only(value, attrs, vocab):
                    length_only.add((attr, key))

            for attr, value in assigns:
                if _lays_out_with_c(value, attrs, vocab):
                    laid_out(attr, None, value)
                elif isinstance(value, ast.Dict):
                    for k, v in zip(value.keys, value.values):
                        if isinstance(k, ast.Constant) and _lays_out_with_c(v, attrs, vocab):
                            laid_out(attr, k.value, v)
            for attr, key, value in keyed:
                if _lays_out_with_c(value, attrs, vocab):
                    laid_out(attr, key, value)
            sized, allocations, through = {}, {}, {}
            # self.X = alloc(...), self.X = {"key": alloc(...)}, self.X["key"] = alloc(...); a size may read a
            # local of the same method derived from C (`n = max_bs * C; torch.zeros(n)`, `n = C or 0`)
            allocated = [(attr, None, None, value) for attr, value in assigns]
            allocated += [(attr, key, None, value) for attr, key, value in keyed]
            allocated += [(attr, k.value, None, v) for attr, value in assigns if isinstance(value, ast.Dict)
                          for k, v in zip(value.keys, value.values) if isinstance(k, ast.Constant)]
            allocated += [(attr, None, index, value) for attr, index, value in unpacked]  # a helper's tuple
            for attr, key, index, value in allocated:
                derived = sized_locals.get(id(value), ())
                made = None
                if index is None and _sized_with_c(value, attrs, vocab, derived):
                    made = value
                elif (made := self._helper_sized(value, cls, attrs, vocab, derived, index, load)) is not None:
                    through.setdefault((attr, key), made)
                if made is not None:
                    sized.setdefault(attr, value.lineno)
                    allocations.setdefault((attr, key), value)
            accessors = _accessors(self, cls, {a for a, _ in allocations})
            result[cls] = ClassFacts(attrs, exact, buffers, sized, strided, length_only, allocations, through, accessors)
        return result


    def _helper_sized(self, value: ast.expr, cls: str, c_attrs, vocab: Vocabulary, derived=(), index: int | None = None,
                      load: Callable[[str], "ModuleModel | None"] | None = None) -> "Through | None":
        """``self.mask = self._make_mask(max_bs, C)`` / ``make_metadata(bs, max_seqlen_qo=C)`` / ``(self.a, self.b)
        = self._make(n)`` with ``n = C or 0``: C (or a local of ``derived``, bound from it) handed to a
        helper (a method of the class, a function of this module or, through ``load``, of another module of
        the tree it imports) whose parameter sizes an allocation it makes: capacity made with C, through the
        helper. ``index``: the element of the helper's returned tuple that is kept. The helper and what it
        allocates, or None."""
        if not isinstance(value, ast.Call) or call_leaf(value) in HELPER_SKIPS:
            return None

        def handed_c(a: ast.expr) -> bool:  # `max(C, budget + 1)`, a fix's output, is sized for the budget
            return _carries_c(a, c_attrs, vocab, derived) and not any(names_a_budget(n) for n in every_node(a))

        carried = [a for a in value.args if handed_c(a)] + [k.value for k in value.keywords if k.arg and handed_c(k.value)]
        if not carried:
            return None  # asked first: most calls hand no C, and resolving a helper may parse its module
        f = value.func
        model = self
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            helper, bound = self.method(cls, f.attr), True
        elif isinstance(f, ast.Name):
            helper, bound = self.functions.get(f.id), False
            if helper is None and load is not None:
                model, helper = _imported(self, f.id, None, load)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and load is not None:
            model, helper = _imported(self, f.value.id, f.attr, load)  # `module.helper(...)`
            bound = False
        else:
            return None
        if helper is None or model is None:
            return None
        params = [p for p in helper.params if p not in ("self", "cls")] if bound else helper.params
        handed = {params[i]: a for i, a in enumerate(value.args) if i < len(params) and any(a is c for c in carried)}
        handed.update({k.arg: k.value for k in value.keywords if k.arg and any(k.value is c for c in carried)})
        handed = {p: a for p, a in handed.items() if p in helper.params or p in helper.kwonly}
        if not handed:
            return None
        made = _sized_by(helper, set(handed), vocab, index)
        if made is None:
            return None
        alloc, param, field_name = made
        return Through(helper.qualname, f"{model.source.display.rsplit('/', 1)[-1]}:{alloc.lineno}", model.code(alloc),
                       param, handed[param], field_name)


@dataclass
class ClassFacts:
    """What a class holds of C: the attributes that carry it and the buffers laid out with it."""

    c_attrs: set[str]
    exact: set[str]
    # self.X (key None) or self.X["key"] -> line where it is laid out with C (arange(step=C), ...)
    buffers: dict[str, dict[object, int]]
    # self.X -> line where it is allocated with C in its size (room for C tokens per request)
    sized: dict[str, int] = field(default_factory=dict)
    # (attr, key) of those buffers a refill with W can rebuild -> (how, C's spelling ``self.X``):
    # "arange": offsets stepping by C from 0, refilled as ``arange(numel) * W``; "fill": every entry C
    # (``full(n, C)``), refilled with ``fill_(W)``
    strided: dict[tuple[str, object], tuple[str, str]] = field(default_factory=dict)
    # (attr, key) of those whose contents owe nothing to C, only their length (``arange(0, n * C + 1)``):
    # too short when W > C, not laid out with C
    length_only: set[tuple[str, object]] = field(default_factory=set)
    # (attr, key) -> the allocation call sized with C (key None: ``self.X = alloc(...)``; else the
    # ``self.X["key"]`` entry); the first in source order of the class's methods
    allocations: dict[tuple[str, object], ast.Call] = field(default_factory=dict)
    # (attr, key) of those allocations made by a helper handed C -> what the helper makes (:class:`Through`)
    through: dict[tuple[str, object], "Through"] = field(default_factory=dict)
    # self.X of those allocations -> a method that hands it out (``def verify_mask(self): return self.X``)
    accessors: dict[str, str] = field(default_factory=dict)

    @property
    def fields(self) -> dict[str, str]:
        """self.X -> the field of it that holds the buffer a helper made (``Mask(buffer=zeros(...))``)."""
        return {attr: t.field for (attr, _), t in self.through.items() if t.field}


@dataclass(frozen=True)
class Through:
    """A buffer a helper allocates with a parameter the class hands C to."""

    helper: str  # its qualified name
    where: str  # file:line of the allocation in the helper
    alloc: str  # the allocation as spelled there
    param: str  # the parameter handed C
    arg: ast.expr  # what the call hands it (C, or a local bound from C)
    field: str | None = None  # the field of the helper's result that holds the buffer (``buffer=zeros(...)``)


LAYOUT_CALLS = frozenset({"arange", "repeat_interleave", "full"})


def _lays_out_with_c(value: ast.expr, c_attrs, vocab: Vocabulary) -> bool:
    """``torch.arange(0, n * C + 1, step=C)`` and the like: a buffer whose *contents* are the layout."""
    from ddcheck.analysis.exprs import c_occurrences, call_leaf

    if not (isinstance(value, ast.Call) and call_leaf(value) in LAYOUT_CALLS):
        return False
    args = [*value.args, *(k.value for k in value.keywords if k.arg not in ("dtype", "device", "out"))]
    if call_leaf(value) == "full":
        args = args[1:2]  # the fill value; the size is capacity
    return any(any(True for _ in c_occurrences(a, c_attrs, vocab)) for a in args)


def _arange_parts(value: ast.expr) -> tuple[ast.expr | None, ast.expr | None] | None:
    """(start, step) of a ``torch.arange(...)`` call, each None where it is left out; else None."""
    from ddcheck.analysis.exprs import call_leaf

    if not (isinstance(value, ast.Call) and call_leaf(value) == "arange"):
        return None
    kw = {k.arg: k.value for k in value.keywords}
    pos = value.args
    return kw.get("start") or (pos[0] if len(pos) > 1 else None), kw.get("step") or (pos[2] if len(pos) > 2 else None)


def _length_only(value: ast.expr, c_attrs, vocab: Vocabulary) -> bool:
    """``torch.arange(0, n * C + 1)``: C only in the end, the step 1: C sets the length, not the values."""
    parts = _arange_parts(value)
    if parts is None:
        return False
    start, step = parts
    unit = step is None or isinstance(step, ast.Constant) and step.value == 1
    return unit and (start is None or not _mentions_c(start, c_attrs, vocab))


def _filled_with_c(value: ast.expr, c_attrs, vocab: Vocabulary) -> tuple[str, str] | None:
    """("fill", ``self.X``) when ``value`` is ``torch.full(size, self.X)`` with ``self.X`` exactly C."""
    from ddcheck.analysis.exprs import call_leaf, is_exact_c

    if not (isinstance(value, ast.Call) and call_leaf(value) == "full"):
        return None
    fill = {k.arg: k.value for k in value.keywords}.get("fill_value") or (value.args[1] if len(value.args) > 1 else None)
    if fill is not None and self_attr(fill) and is_exact_c(fill, c_attrs, vocab):
        return "fill", f"self.{self_attr(fill)}"
    return None


def _strided_by_c(value: ast.expr, c_attrs, vocab: Vocabulary) -> tuple[str, str] | None:
    """("arange", ``self.X``) when ``value`` is ``torch.arange(0, stop, step=self.X)`` (or
    ``arange(0, stop, self.X)``, ``arange(stop, step=self.X)``) with ``self.X`` exactly C."""
    from ddcheck.analysis.exprs import is_exact_c

    parts = _arange_parts(value)
    if parts is None:
        return None
    start, step = parts
    zero = start is None or isinstance(start, ast.Constant) and start.value == 0
    if zero and self_attr(step) and is_exact_c(step, c_attrs, vocab):
        return "arange", f"self.{self_attr(step)}"
    return None


def _statements(body: list[ast.stmt]):
    """Every statement in a body, nested blocks included (not nested functions or classes)."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(stmt, name, None)
            if block and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for item in reversed(block):
                    if isinstance(item, (ast.excepthandler, ast.match_case)):
                        stack.extend(reversed(item.body))
                    else:
                        stack.append(item)


# Where statements live: a definition is a statement, so finding one needs no walk of expressions.
BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _sized_with_c(value: ast.expr, c_attrs, vocab: Vocabulary, derived=()) -> bool:
    """``torch.zeros(max_num_tokens * (ctx + C))``: an allocation whose *size* involves C (directly, or
    through a local of ``derived``, bound from C earlier in its method)."""
    from ddcheck.analysis.exprs import call_leaf
    from ddcheck.analysis.vocabulary import ALLOCATORS, FILL_ALLOCATORS

    leaf = call_leaf(value) if isinstance(value, ast.Call) else ""
    if leaf not in ALLOCATORS or leaf.endswith("_like"):
        return False
    sizes = (value.args[:1] if leaf in FILL_ALLOCATORS else value.args) + [k.value for k in value.keywords if k.arg == "size"]
    if any(names_a_budget(n) for a in sizes for n in every_node(a)):
        return False  # sized for the largest width a budget allows (`max(C, budget + 1)`, a fix's output)
    return any(_mentions_c(a, c_attrs, vocab) or any(isinstance(n, ast.Name) and n.id in derived for n in every_node(a))
               for a in sizes)


def _carries_c(value: ast.expr, c_attrs, vocab: Vocabulary, derived=()) -> bool:
    """``value`` is C (or a local of ``derived``) where speculative decoding is on: C, ``C or 0``, ``1 if
    C is None else C``, arithmetic of it; not where C is only tested (``C is None``, ``C > 1``, ``not C``,
    the test of a conditional expression)."""
    from ddcheck.analysis.exprs import is_c_read

    if not any(is_c_read(n, c_attrs, vocab) or isinstance(n, ast.Name) and n.id in derived for n in every_node(value)):
        return False  # most values: no C anywhere, the common case asked first
    stack = [value]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Compare) or isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            continue
        if is_c_read(n, c_attrs, vocab) or isinstance(n, ast.Name) and n.id in derived:
            return True
        if isinstance(n, ast.IfExp):
            stack.extend((n.body, n.orelse))
        elif isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And):
            stack.append(n.values[-1])  # `x and C`: the others are tests
        else:
            stack.extend(ast.iter_child_nodes(n))
    return False


def _imported(model: ModuleModel, name: str, attr: str | None, load) -> tuple[ModuleModel | None, FunctionInfo | None]:
    """The function ``name`` (``name.attr``: of the module imported as ``name``) that ``model`` imports from
    another module of the tree, with that module's model; one re-export (a package's ``__init__``) is
    followed."""
    for _ in range(2):
        imp = _import_of(model, name)
        if imp is None:
            return None, None
        module, orig = imp
        if orig is None:  # `import pkg.mod as m`: `m.helper(...)`
            if attr is None:
                return None, None
            orig, attr = attr, None
        elif attr is not None:  # `from pkg import mod`: `mod.helper(...)`
            target = load(f"{module}.{orig}")
            if target is not None:
                return target, target.functions.get(attr)
        target = load(module)
        if target is None:
            return None, None
        helper = target.functions.get(orig)
        if helper is not None:
            return target, helper
        model, name = target, orig
    return None, None


# Calls no helper of the tree is named by: allocators (their sizes are read as such) and the arithmetic ones.
HELPER_SKIPS = ALLOCATORS | {"arange", "min", "max", "int", "getattr", "len"}
TARGET_FIELDS = frozenset({"elts", "value"})  # the names an assignment binds, nested tuples and starred too


def _import_of(model: ModuleModel, name: str) -> tuple[str, str | None] | None:
    """(module, name there) that ``model`` imports as ``name`` at its top level (in a ``try``/``if`` there
    too), as its outline says; read off the statements where the outline is not made yet (most modules
    never need it)."""
    if "outline" in model.__dict__:
        return model.imports.get(name)
    from ddcheck.tree.imports import absolute, package_of

    package = package_of(model.name, model.source.relpath.endswith("__init__.py"))
    stack = list(model.tree.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.If, ast.Try)):
            stack.extend([*stmt.body, *stmt.orelse, *(x for h in getattr(stmt, "handlers", ()) for x in h.body)])
        elif isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if (a.asname or a.name) == name:
                    return absolute(package, stmt.level, stmt.module), a.name
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    return (a.name if a.asname else name), None
    return None


def _sized_by(helper: FunctionInfo, handed: set[str], vocab: Vocabulary, index: int | None) -> \
        tuple[ast.Call, str, str | None] | None:
    """What ``helper`` allocates with a size read from a parameter of ``handed`` (or a local bound from
    one: ``per_req = n * (ctx + n)``, ``(size, dtype) = info(bs, n)``): (the allocation, the parameter,
    the field of the result that holds it, ``buffer=zeros(...)``; None for the result itself). With
    ``index``: the element of a returned tuple; otherwise a returned allocation first, else any."""
    derived: dict[str, str] = {p: p for p in handed}  # local -> the parameter it is bound from
    bound: dict[str, ast.expr] = {}
    for n in _statements(helper.node.body):
        if isinstance(n, ast.Assign):
            names = [e.id for t in n.targets for e in every_node(t, TARGET_FIELDS) if isinstance(e, ast.Name)]
            source = next((derived[x.id] for x in every_node(n.value) if isinstance(x, ast.Name) and x.id in derived), None)
            for name in names:
                bound[name] = n.value
                if source is not None:
                    derived[name] = source
                else:
                    derived.pop(name, None)

    def sized(call: ast.AST) -> str | None:
        if isinstance(call, ast.Name):
            call = bound.get(call.id)
        if isinstance(call, ast.Call) and _sized_with_c(call, set(), vocab, derived):
            leaf = call.args[:1] if call_leaf(call) in ("full", "new_full") else call.args
            for a in [*leaf, *(k.value for k in call.keywords if k.arg == "size")]:
                for x in every_node(a):
                    if isinstance(x, ast.Name) and x.id in derived:
                        return derived[x.id]
        return None

    for ret in (n for n in every_node(helper.node) if isinstance(n, ast.Return) and n.value is not None):
        value = ret.value
        if index is not None:
            if not (isinstance(value, ast.Tuple) and index < len(value.elts)):
                continue
            value = value.elts[index]
        resolved = bound.get(value.id, value) if isinstance(value, ast.Name) else value
        if (param := sized(resolved)) is not None:
            return resolved, param, None
        if isinstance(resolved, ast.Call):  # a result that holds the buffer in a field: `Mask(buffer=zeros(...))`
            for k in resolved.keywords:
                inner = bound.get(k.value.id, k.value) if isinstance(k.value, ast.Name) else k.value
                if k.arg and (param := sized(inner)) is not None:
                    return inner, param, k.arg
    if index is not None:
        return None
    for n in every_node(helper.node):
        if isinstance(n, ast.Call) and (param := sized(n)) is not None:
            return n, param, None
    return None


def _accessors(model: ModuleModel, cls: str, attrs: set[str]) -> dict[str, str]:
    """``self.X`` of ``attrs`` -> a method of ``cls`` that only hands it out (``return self.X``, a property
    or not): the buffer leaves the class through it."""
    out: dict[str, str] = {}
    if not attrs:
        return out
    for f in model.functions.values():
        if f.cls != cls or [p for p in f.params if p != "self"] or f.kwonly:
            continue
        body = f.node.body[1:] if len(f.node.body) > 1 and isinstance(f.node.body[0], ast.Expr) else f.node.body
        if len(body) == 1 and isinstance(body[0], ast.Return) and (attr := self_attr(body[0].value)) in attrs:
            out.setdefault(attr, f.name)
    return out


def names_a_budget(n: ast.AST) -> bool:
    name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
        n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else ""
    return "budget" in name.lower()


def _mentions_c(value: ast.expr, c_attrs, vocab: Vocabulary) -> bool:
    from ddcheck.analysis.exprs import is_c_read

    return any(is_c_read(n, c_attrs, vocab) for n in every_node(value))


# Calls whose result is arithmetic on their arguments, not a resolution of one width.
_ARITHMETIC_CALLS = frozenset({"min", "max", "sum", "abs", "round", "pow", "len"})


def _resolves_c(value: ast.expr, c_attrs, vocab: Vocabulary) -> bool:
    """A call of a tree function handed C itself as an argument (a start-up resolver of the width)."""
    from ddcheck.analysis.exprs import call_leaf, is_exact_c

    if not isinstance(value, ast.Call) or call_leaf(value) in _ARITHMETIC_CALLS:
        return False
    args = [*value.args, *(k.value for k in value.keywords)]
    return any(is_exact_c(a, c_attrs, vocab) for a in args)


def _placeholder(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) or isinstance(value, ast.Name)
