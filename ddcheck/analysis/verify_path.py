"""The model of the target-verify path inside one function.

A :class:`FunctionPass` walks a function's statements carrying one bit — "this code runs in
TARGET_VERIFY mode" — set by guards (``if ...is_target_verify()``, ``elif``, ``not ... / else``,
early returns, ``== ForwardMode.TARGET_VERIFY``, boolean locals), by the function's name, or by a
caller that reached it from a verify branch. Along the way it records every read of the start-up
width C and the verify block ("anchor": its first statement) it sits in, which is where a fix binds
the per-step width.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from ddcheck.analysis.exprs import (arith_names, buffer_key, children, ends_flow, guard_polarity, is_c_read, is_c_valued, mentions_per_step,
                    every_node, self_attr, walk)
from ddcheck.tree.modes import ModeTable
from ddcheck.analysis.module import FunctionInfo, ModuleModel
from ddcheck.analysis.vocabulary import Vocabulary

REFILLS = frozenset({"copy_", "fill_", "zero_", "index_copy_", "scatter_"})
NO_DESCENT = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Nodes an expression pass has nothing to do with: new scopes, and leaves that are neither a read
# nor a call (constants, Load/Store contexts, operators: a third of the nodes it is handed).
SKIPPED = (*NO_DESCENT, ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


@dataclass(eq=False)
class Def:
    """One binding of a local name; ``kind`` is 'c', 'per_step' or 'other'."""

    name: str
    node: ast.AST  # the statement (or the FunctionDef for a parameter)
    value: ast.expr | None
    is_c: bool
    pos: tuple[int, int]
    in_verify: bool = False
    origin: object = None  # for a parameter the caller filled with C
    vocab: Vocabulary | None = None
    _kind: str | None = None

    @property
    def kind(self) -> str:
        if self._kind is None:
            # Per-step is only asked about for names that also hold C, so it is computed lazily.
            per_step = self.value is not None and not self.is_c and mentions_per_step(self.value, self.vocab)
            self._kind = "c" if self.is_c else "per_step" if per_step else "other"
        return self._kind


@dataclass(eq=False)
class Site:
    """A read of C on the verify path (a C expression, or a local/parameter holding C); reads off the
    path are not recorded: nothing is judged there."""

    node: ast.expr
    anchor: ast.stmt | None  # first statement of the verify block
    via: Def | None = None
    buffer_line: int = 0  # a read of a buffer laid out with C at start-up (that line)


@dataclass(eq=False)
class Fill:
    """Verify-input data written into a buffer allocated with room for C tokens per request."""

    node: ast.expr  # the buffer as spelled at the write (``custom_mask`` or ``self.X``)
    attr: str
    source: ast.expr  # what is written
    anchor: ast.stmt | None


@dataclass
class FunctionPass:
    """One pass over a function: where C flows, and which of its statements are on the verify path."""

    model: ModuleModel
    func: FunctionInfo
    entry_verify: bool
    c_attrs: set[str]
    vocab: Vocabulary
    tainted_params: dict[str, object] = field(default_factory=dict)
    buffers: dict[str, dict[object, int]] = field(default_factory=dict)
    sized: dict[str, int] = field(default_factory=dict)  # self.X allocated with C in its size
    # of those, self.X -> the field of it that holds the buffer (a helper's ``Mask(buffer=zeros(...))``)
    fields: dict[str, str] = field(default_factory=dict)
    modes: Callable[[], ModeTable] = ModeTable  # the target's ForwardMode predicates, loaded on first use

    defs: dict[str, list[Def]] = field(default_factory=dict)
    c_names: set[str] = field(default_factory=set)
    sites: list[Site] = field(default_factory=list)
    verify_calls: list[tuple[ast.Call, ast.stmt | None]] = field(default_factory=list)
    verify_flags: set[str] = field(default_factory=set)
    fills: list[Fill] = field(default_factory=list)
    # verify-path reads of a ``self.X`` allocated with C in its size: (the read, X)
    touches: list[tuple[ast.Attribute, str]] = field(default_factory=list)

    def run(self) -> "FunctionPass":
        start = (self.func.node.lineno, self.func.node.col_offset)
        for name in [*self.func.params, *self.func.kwonly]:
            origin = self.tainted_params.get(name)
            if origin is not None:
                self.c_names.add(name)
            self.defs.setdefault(name, []).append(
                Def(name, self.func.node, None, origin is not None, start, False, origin, self.vocab))
        body = self.func.node.body
        # A fix binds W at the first statement after the docstring.
        first = body[1] if len(body) > 1 and _is_docstring(body[0]) else body[0]
        self._block(body, self.entry_verify, first if self.entry_verify else None)
        return self

    # -- bindings ---------------------------------------------------------------------------

    def _bind(self, target: ast.expr, value: ast.expr | None, stmt: ast.stmt, verify: bool, aug=False) -> None:
        if isinstance(target, ast.Name):
            is_c = False
            if value is not None:
                is_c = self._value_is_c(value, stmt) or aug and target.id in self.c_names and any(
                    d.kind == "c" for d in self.reaching(target.id, stmt))
                if isinstance(value, ast.Call) and guard_polarity(value) == 1:
                    self.verify_flags.add(target.id)
            if is_c:
                self.c_names.add(target.id)
            self.defs.setdefault(target.id, []).append(
                Def(target.id, stmt, value, is_c, (stmt.lineno, stmt.col_offset), verify, vocab=self.vocab))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self._bind(el, None, stmt, verify)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None, stmt, verify)

    def _value_is_c(self, value: ast.expr, stmt: ast.stmt) -> bool:
        if is_c_valued(value, self.c_attrs, self.vocab):
            return True
        for n in arith_names(value):
            if n.id not in self.c_names:
                continue
            ds = self.reaching(n.id, stmt)
            if ds and all(d.kind == "c" for d in ds):
                return True
        return False

    # -- statements ---------------------------------------------------------------------------

    def _block(self, body: list[ast.stmt], verify: bool, anchor: ast.stmt | None) -> None:
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.If):
                if self._if(stmt, verify, anchor) and i + 1 < len(body):
                    # `if not verify: return` — the rest of this block is the verify path.
                    verify, anchor = True, body[i + 1]
            else:
                self._stmt(stmt, verify, anchor)

    def _if(self, node: ast.If, verify: bool, anchor, excluded: bool = True) -> bool:
        """``excluded``: every earlier test of this if/elif chain was a forward-mode test that is false
        in TARGET_VERIFY mode, so a final ``else`` is where verify goes (reached by exclusion)."""
        self._expr(node.test, verify, anchor)
        pol = guard_polarity(node.test, frozenset(self.verify_flags))
        test = node.test
        mentions_mode = self.model.holds(test.lineno, test.end_lineno, "mode", fold=True) and _mentions_mode(test)
        cover = self.modes().cover(test) if mentions_mode else None
        enter = pol == 1 and not verify
        # `if w == C:` — inside, C *is* the step's width (a cached buffer for the common case).
        same = self._width_equality(node.test)
        # A test that cannot hold in TARGET_VERIFY mode leaves the verify path (`if mode.is_decode():`).
        body_verify = (True if enter else verify) and same != 1 and not (verify and cover is False)
        self._block(node.body, body_verify, node.body[0] if enter else anchor)
        if node.orelse:
            excluded = excluded and cover is False
            if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and pol != -1:
                # elif: the chain goes on.
                self._if(node.orelse[0], verify and cover is not True, anchor, excluded)
                return False
            into_else = (pol == -1 or excluded) and not verify
            else_verify = (True if into_else else verify) and same != -1 and not (verify and cover is True)
            self._block(node.orelse, else_verify, node.orelse[0] if into_else else anchor)
        return pol == -1 and not verify and not node.orelse and ends_flow(node.body)

    def _width_equality(self, test: ast.expr) -> int:
        """+1 for ``x == C``, -1 for ``x != C`` (either order), else 0."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return 0
        sides = [test.left, test.comparators[0]]
        is_c = [is_c_read(s, self.c_attrs, self.vocab) or isinstance(s, ast.Name) and s.id in self.c_names
                for s in sides]
        if is_c.count(True) != 1 or any(isinstance(s, ast.Constant) for s in sides):
            return 0
        return 1 if isinstance(test.ops[0], ast.Eq) else -1 if isinstance(test.ops[0], ast.NotEq) else 0

    def _stmt(self, stmt: ast.stmt, verify: bool, anchor) -> None:
        if isinstance(stmt, ast.Assign):
            self._expr(stmt.value, verify, anchor)
            for t in stmt.targets:
                self._target_reads(t, verify, anchor)
                if verify and self.sized and isinstance(t, ast.Subscript):
                    self._fill(t, stmt.value, anchor)
            for t in stmt.targets:
                self._bind(t, stmt.value, stmt, verify)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._expr(stmt.value, verify, anchor)
                self._bind(stmt.target, stmt.value, stmt, verify)
        elif isinstance(stmt, ast.AugAssign):
            self._expr(stmt.value, verify, anchor)
            self._target_reads(stmt.target, verify, anchor)
            self._bind(stmt.target, stmt.value, stmt, verify, aug=True)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._expr(stmt.iter, verify, anchor)
            self._bind(stmt.target, None, stmt, verify)
            self._block(stmt.body, verify, anchor)
            self._block(stmt.orelse, verify, anchor)
        elif isinstance(stmt, ast.While):
            self._expr(stmt.test, verify, anchor)
            self._block(stmt.body, verify, anchor)
            self._block(stmt.orelse, verify, anchor)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._expr(item.context_expr, verify, anchor)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, None, stmt, verify)
            self._block(stmt.body, verify, anchor)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self._block(stmt.body, verify, anchor)
            for h in stmt.handlers:
                self._block(h.body, verify, anchor)
            self._block(stmt.orelse, verify, anchor)
            self._block(stmt.finalbody, verify, anchor)
        elif isinstance(stmt, ast.If):
            self._if(stmt, verify, anchor)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A nested helper runs where it is called; its body inherits the enclosing mode, but
            # its bindings are its own and must not reach the enclosing function's reads.
            saved = ({k: list(v) for k, v in self.defs.items()}, set(self.c_names))
            self._block(stmt.body, verify, anchor)
            self.defs, self.c_names = saved
        elif isinstance(stmt, ast.Match):
            self._expr(stmt.subject, verify, anchor)
            for case in stmt.cases:
                guarded = case.guard is not None and guard_polarity(case.guard, frozenset(self.verify_flags)) == 1
                enter = guarded and not verify
                self._block(case.body, verify or guarded, case.body[0] if enter else anchor)
        elif isinstance(stmt, ast.ClassDef):
            return
        else:
            for child in children(stmt):
                self._expr(child, verify, anchor)

    def _target_reads(self, target: ast.expr, verify: bool, anchor) -> None:
        """Subscript targets (``buf[: bs * C] = ...``) read C in their index."""
        if isinstance(target, ast.Subscript):
            self._expr(target.value, verify, anchor)
            self._expr(target.slice, verify, anchor)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self._target_reads(el, verify, anchor)
        elif isinstance(target, ast.Attribute):
            self._target_reads(target.value, verify, anchor) if isinstance(target.value, ast.Subscript) else None

    # -- expressions ---------------------------------------------------------------------------

    def _expr(self, node: ast.AST, verify: bool, anchor) -> None:
        if isinstance(node, SKIPPED):
            return
        if not verify and not self._may_enter_verify(node):
            return
        if isinstance(node, ast.NamedExpr):
            self._expr(node.value, verify, anchor)
            stmt = self._statement(node)
            if stmt is not None:
                self._bind(node.target, node.value, stmt, verify)
            return
        if isinstance(node, ast.IfExp):
            self._expr(node.test, verify, anchor)
            pol = guard_polarity(node.test, frozenset(self.verify_flags))
            self._expr(node.body, verify or pol == 1, anchor)
            self._expr(node.orelse, verify or pol == -1, anchor)
            return
        if is_c_read(node, self.c_attrs, self.vocab):
            if verify:
                self.sites.append(Site(node, anchor))
            return
        line = self._buffer_read(node) if self.buffers else 0
        if line:
            if verify:
                self.sites.append(Site(node, anchor, buffer_line=line))
            return
        if verify and self.sized and isinstance(node, ast.Attribute):
            attr = self_attr(node)
            if attr in self.sized:
                self.touches.append((node, attr))
        if isinstance(node, ast.Name):
            if verify and node.id in self.c_names and isinstance(node.ctx, ast.Load):
                ds = self.reaching(node.id, node)
                c_defs = [d for d in ds if d.kind == "c"]
                if c_defs:
                    self.sites.append(Site(node, anchor, via=c_defs[-1]))
            return
        if isinstance(node, ast.Call) and verify:
            self.verify_calls.append((node, anchor))
            if self.sized and isinstance(node.func, ast.Attribute) and node.func.attr == "copy_" and node.args:
                self._fill(node.func.value, node.args[0], anchor)
        for child in children(node):
            if not isinstance(child, SKIPPED):
                self._expr(child, verify, anchor)

    def _may_enter_verify(self, node: ast.AST) -> bool:
        """Off the verify path an expression matters only for a conditional expression that tests for
        verify (its branch is on the path) or a ``:=`` binding: neither can be where none of its lines
        holds ``else`` / ``:=``, and three reads in four are off the path."""
        first = getattr(node, "lineno", None)
        if first is None:  # a part without a position (comprehension, arguments): looked into
            return True
        last = node.end_lineno or first
        return self.model.holds(first, last, "else") or self.model.holds(first, last, ":=")

    def _fill(self, target: ast.expr, value: ast.expr, anchor) -> None:
        """``buf[: n] = spec_info.custom_mask`` / ``buf.copy_(spec_info.x)``, ``buf`` being a C-sized
        ``self.X`` or a local bound to one: the verify input's W-sized data may not fit."""
        base = target
        while isinstance(base, ast.Subscript):
            base = base.value
        attr = held_buffer(base, self.fields)
        if attr is None and isinstance(base, ast.Name):
            ds = self.reaching(base.id, base)
            attrs = {held_buffer(d.value, self.fields) for d in ds if d.value is not None} - {None}
            attr = attrs.pop() if len(attrs) == 1 else None
        if attr in self.sized and reads_verify_input(value):
            self.fills.append(Fill(base, attr, value, anchor))

    def _buffer_read(self, node: ast.AST) -> int:
        """Line where the buffer read by ``node`` (``self.X`` or ``self.X["key"]``) was laid out with C;
        0 when this function refills it in place (``.copy_``/``.fill_``/item assignment) per step."""
        key = buffer_key(node)
        line = self.buffers.get(key[0], {}).get(key[1], 0) if key is not None else 0
        # the refills are looked for (a walk of the whole function) only for a read of a C-laid buffer
        return 0 if not line or key in self._refilled else line

    @cached_property
    def _refilled(self) -> set[tuple[str, object]]:
        """(attr, key) of buffers this function writes in place: ``buf[:bs].copy_(...)``, ``buf[i] = ...``."""
        out = set()
        for n in walk(self.func.node):
            target = None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in REFILLS:
                target = n.func.value
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                target = next((t for t in targets if isinstance(t, ast.Subscript)), None)
            chain = []
            while isinstance(target, ast.Subscript):
                chain.append(target)
                target = target.value
            attr = self_attr(target) if target is not None else None
            if attr in self.buffers:
                first = chain[-1] if chain else None  # the subscript applied to self.X itself
                key = first.slice.value if first is not None and isinstance(first.slice, ast.Constant) else None
                if key is not None or first is None or isinstance(first.slice, ast.Slice) or None in self.buffers[attr]:
                    out.add((attr, key))
        return out

    def _statement(self, node: ast.AST) -> ast.stmt | None:
        self.model.link(self.func.node)
        while node is not None and not isinstance(node, ast.stmt):
            node = self.model.parent(node)
        return node

    # -- reaching definitions -------------------------------------------------------------------

    def reaching(self, name: str, use: ast.AST) -> list[Def]:
        """Bindings of ``name`` that may reach ``use``: the last one on every path, plus any in
        branches between it and the use. Bindings in a sibling ``if``/``elif`` branch never reach."""
        ds = self.defs.get(name)
        if not ds:
            return []
        upos = (use.lineno, use.col_offset)
        before = [d for d in ds if d.pos < upos and d.node is not use and not self.exclusive(d.node, use)]
        base = 0
        for i, d in enumerate(before):
            if self._dominates(d.node, use):
                base = i
        return before[base:]

    def _chain(self, node: ast.AST) -> list[tuple[ast.AST, str]]:
        """(ancestor, field the path comes through), innermost first, up to the function."""
        self.model.link(self.func.node)
        out = []
        parents = self.model.parents
        while id(node) in parents and node is not self.func.node:
            parent, fieldname = parents[id(node)]
            out.append((parent, fieldname))
            node = parent
        return out

    def _dominates(self, stmt: ast.AST, use: ast.AST) -> bool:
        if stmt is self.func.node:
            return True
        self.model.link(self.func.node)
        hit = self.model.parents.get(id(stmt))
        if hit is None:
            return False
        parent, fieldname = hit
        return any(p is parent and f == fieldname for p, f in self._chain(use))

    def exclusive(self, a: ast.AST, b: ast.AST) -> bool:
        """True when ``a`` and ``b`` sit in different branches of one ``if``/``elif``/``IfExp``."""
        if a is self.func.node:
            return False
        chain_b = {id(p): f for p, f in self._chain(b)}
        for p, f in self._chain(a):
            if id(p) in chain_b:
                return isinstance(p, (ast.If, ast.IfExp)) and {f, chain_b[id(p)]} == {"body", "orelse"}
        return False

    # -- facts for the fixer -------------------------------------------------------------------

    def bound_at(self, name: str, stmt: ast.stmt | None) -> bool:
        """``name`` is a parameter, or a binding of it reaches ``stmt`` on every path."""
        if name in self.func.params or name in self.func.kwonly:
            return True
        if stmt is None:
            return False
        return any(d.node is not self.func.node and self._dominates(d.node, stmt)
                   for d in self.reaching(name, stmt))

    def spec_info_expr(self, at: ast.stmt | None) -> str | None:
        """How the verify input is spelled where the fix binds W, or None if it is not in scope there."""
        if self.bound_at("spec_info", at):
            return "spec_info"
        for n in ("forward_batch", "batch"):
            if self.bound_at(n, at):
                return f"{n}.spec_info"
        return None


def held_buffer(value: ast.expr, fields: dict[str, str]) -> str | None:
    """X when ``value`` is the buffer ``self.X`` holds: ``self.X``, or its field that holds it
    (``self.X.buffer``), also as a branch of a conditional expression (``self.X.buffer if ... else None``)."""
    while isinstance(value, ast.IfExp):
        branches = [b for b in (value.body, value.orelse) if not (isinstance(b, ast.Constant) and b.value is None)]
        if len(branches) != 1:
            return None
        value = branches[0]
    attr = self_attr(value)
    if attr is not None:
        return None if attr in fields else attr
    if isinstance(value, ast.Attribute):
        attr = self_attr(value.value)
        return attr if attr is not None and fields.get(attr) == value.attr else None
    return None


def reads_verify_input(value: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "spec_info" or isinstance(n, ast.Name) and n.id == "spec_info"
               for n in every_node(value))


def _mentions_mode(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and "mode" in n.attr.lower() or isinstance(n, ast.Name) and "mode" in n.id.lower()
               for n in every_node(test))


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
