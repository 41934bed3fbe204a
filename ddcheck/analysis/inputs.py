"""The verify inputs a tree builds, and which of them reach a given read of C.

A verify-input class is a class of the tree that declares the per-step width field (``draft_token_num``)
and, itself or through its bases, the method the worker prepares the verify step with
(``prepare_for_verify``; a backend's metadata class may carry a ``draft_token_num`` too). Each place the tree constructs one (its workers, its graph runners) is a
:class:`Built`: the fields that instance carries and, where the constructor or the class states them,
their values; and whether it is verified at a width other than C: its width, or another of its
arguments, owes to a tree drafter's budget (``draft_token_num=self.max_tree_nodes`` with
``self.max_tree_nodes = self.tree_budget + 1``). The other inputs are verified at the width C was set
for (EAGLE's draft-token count, a DFlash block).

:class:`Reach` decides, three-valued, whether one such input reaches a read of C: the function's
statements are walked with the tests on the way evaluated, by the tree's one evaluator, for the input as an
object with exactly its fields (``hasattr``, ``getattr`` with a default, ``isinstance``,
``spec_input_type ==``, ``is None``, locals bound from them, the class's own methods), then the
conditional expressions, ``or``/``and`` and ``getattr`` defaults around the read. Anything else is unknown.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ddcheck.tree.evaluate import UNKNOWN, Evaluator, Hooks, Obj, Span, Sym
from ddcheck.tree.modules import TreeModules
from ddcheck.tree.names import (DRAFT_TOKEN_NUM, PREPARE_FOR_VERIFY, SPEC_INFO_FIELD, SPEC_INPUT_TYPE_CLASS, SPEC_INPUT_TYPE_FIELD,
                            WIDTH_FIELDS)
from ddcheck.analysis.module import names_a_budget
from ddcheck.analysis.reports import is_test_module

MAX_DEPTH = 4
FIELD_RE = re.compile(rb"^[ \t]+" + DRAFT_TOKEN_NUM.encode() + rb"\s*:", re.M)
WIDTH = Span(lo=1)  # a per-step width: a positive number


@dataclass(eq=False)
class Built:
    """One construction of a verify-input class by the tree: the fields it carries and, where the
    constructor or the class states them, their values (UNKNOWN: carried, value not known)."""

    cls: str
    chain: frozenset[str]  # the class and its bases, by name
    where: str  # relpath:line of the construction
    fields: frozenset[str]
    values: dict[str, object] = field(default_factory=dict)
    other_width: bool = False

    def value(self) -> Obj:
        """The input as the evaluator reads it: an object with exactly these fields."""
        attrs: dict[str, object] = dict.fromkeys(self.fields, UNKNOWN)
        attrs.update(self.values)
        return Obj(self.cls, attrs, closed=True, kinds=self.chain)


def built_inputs(mods: TreeModules, texts: Callable[[], Iterable[tuple[str, bytes]]],
                 constructions: bool, class_texts: Callable[[], Iterable[tuple[str, bytes]]] | None = None) -> list[Built]:
    """The verify inputs the tree builds (test modules aside); ``texts`` yields (relpath, bytes) of the
    tree's files (``class_texts``, where given, those that may define the verify-input classes: a
    superset, read first). Where the tree states a tree drafter's budget (``constructions``: its server
    arguments do; or a verify-input class declares one), each place the tree constructs one; elsewhere
    every input is built at C, and one stands for each verify-input class, with the fields it declares."""
    word = DRAFT_TOKEN_NUM.encode()
    classes: dict[str, tuple[str, ast.ClassDef]] = {}
    for rel, data in (class_texts or texts)():
        if is_test_module(rel):
            continue
        if word not in data or not FIELD_RE.search(data):
            continue
        mod = mods.parsed(rel)
        for node in mod.body if mod is not None else ():
            if isinstance(node, ast.ClassDef) and _declares(node, DRAFT_TOKEN_NUM):
                classes.setdefault(node.name, (rel, node))
    classes = {n: c for n, c in classes.items()
               if mods.method(n, mods.dotted(c[0]), PREPARE_FOR_VERIFY) is not None}
    if not classes:
        return []
    kinds: dict[tuple[str, str], tuple] = {}
    # a tree drafter's input declares its budget (``tree_budget: int``): then some input may be built at
    # another width than C, and where the tree builds each one matters
    constructions = constructions or any(
        isinstance(i, ast.AnnAssign) and names_a_budget(i.target) for _, c in classes.values() for i in c.body)
    if not constructions:
        return [_built(mods, rel, mods.dotted(rel), classes, kinds, None, None, None, name)
                for name, (rel, _) in classes.items()]
    words = [n.encode() + b"(" for n in sorted(classes)]
    out: list[Built] = []
    for rel, data in texts():
        if is_test_module(rel):
            continue
        hits = [w for w in words if w in data]
        if not hits:
            continue
        mod = mods.parsed(rel)
        if mod is None:
            continue
        lines = {data.count(b"\n", 0, m.start()) + 1 for w in hits for m in re.finditer(re.escape(w), data)}
        module = mods.dotted(rel)
        for owner, fn in _functions(mod):
            if not any(fn.lineno <= n <= (fn.end_lineno or fn.lineno) for n in lines):
                continue
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and _callee(call) in classes:
                    out.append(_built(mods, rel, module, classes, kinds, owner, fn, call, _callee(call)))
    return out


def _declares(cls: ast.ClassDef, name: str) -> bool:
    return any(isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name) and i.target.id == name for i in cls.body)


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _functions(mod: ast.Module):
    for node in mod.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node, item


def _class_facts(mods: TreeModules, name: str, module: str, classes) -> tuple:
    """(bases' and own names, fields, values) a verify-input class declares."""
    chain = mods.class_chain(name, module) or [(classes[name][0], classes[name][1], module)]
    fields: set[str] = set()
    values: dict[str, object] = {}
    for _, node, _ in reversed(chain):  # base first: a subclass's default wins
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields.add(item.target.id)
                values.pop(item.target.id, None)
                if item.value is not None and (v := _constant(item.value)) is not UNKNOWN:
                    values[item.target.id] = v
                elif item.target.id in WIDTH_FIELDS and item.value is None:
                    values[item.target.id] = WIDTH  # a required width: every instance carries one
    from ddcheck.tree.worker import class_input_type  # the worker model (and typing) only when a class is read

    kind = class_input_type(mods, name, module)
    if kind is not None:
        values[SPEC_INPUT_TYPE_FIELD] = Sym(f"{SPEC_INPUT_TYPE_CLASS}.{kind}")
        fields.add(SPEC_INPUT_TYPE_FIELD)
    return frozenset(n.name for _, n, _ in chain), fields, values


def _built(mods: TreeModules, rel: str, module: str, classes, kinds: dict, owner: ast.ClassDef | None, fn,
           call: ast.Call | None, name: str) -> Built:
    key = (name, classes[name][0])
    if key not in kinds:
        kinds[key] = _class_facts(mods, name, mods.dotted(classes[name][0]), classes)
    chain, fields, values = kinds[key][0], set(kinds[key][1]), dict(kinds[key][2])
    if call is None:
        return Built(name, chain, f"{classes[name][0]}:{classes[name][1].lineno}", frozenset(fields), values)
    other = False
    for stored in _stored_after(fn, call):  # `verify_input.field = ...` where it is built
        fields.add(stored)
        values[stored] = UNKNOWN
    for k in call.keywords:
        if k.arg is None:
            continue
        fields.add(k.arg)
        v = _constant(k.value)
        values[k.arg] = WIDTH if k.arg in WIDTH_FIELDS and v is UNKNOWN else v
        other = other or _owes_to_budget(k.value, owner, fn, 0)
    return Built(name, chain, f"{rel}:{call.lineno}", frozenset(fields), values, other)


def _stored_after(fn, call: ast.Call) -> set[str]:
    """Fields set on the constructed input in the function that builds it (``x = Cls(...)``, then
    ``x.field = ...``)."""
    names = {t.id for a in ast.walk(fn) if isinstance(a, ast.Assign) and a.value is call
             for t in a.targets if isinstance(t, ast.Name)}
    return {t.attr for a in ast.walk(fn) if isinstance(a, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in _targets(a) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
            and t.value.id in names} if names else set()


def _constant(node: ast.expr) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id[:1].isupper():
        return Sym(f"{node.value.id}.{node.attr}")
    return UNKNOWN


def _owes_to_budget(value: ast.expr, owner: ast.ClassDef | None, fn, depth: int) -> bool:
    """``value`` names a budget, itself or through the locals of ``fn`` and the ``self`` attributes of
    ``owner`` it reads (as they are bound anywhere in the class)."""
    if depth > MAX_DEPTH:
        return False
    for n in ast.walk(value):
        if names_a_budget(n):
            return True
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if any(_owes_to_budget(b, owner, fn, depth + 1) for b in _bindings(fn).get(n.id, ())):
                return True
        if owner is not None and isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            if any(_owes_to_budget(b, owner, m, depth + 1) for m, b in _self_bindings(owner).get(n.attr, ())):
                return True
    return False


def _bindings(fn: ast.AST) -> dict[str, list[ast.expr]]:
    """Local name -> the values bound to it in ``fn`` (kept on the node)."""
    known = fn.__dict__.get("_ddcheck_bindings")
    if known is None:
        known = fn.__dict__["_ddcheck_bindings"] = {}
        for a in ast.walk(fn):
            if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                for t in _targets(a):
                    if isinstance(t, ast.Name):
                        known.setdefault(t.id, []).append(a.value)
    return known


def _self_bindings(owner: ast.ClassDef) -> dict[str, list[tuple[ast.AST, ast.expr]]]:
    """``self`` attribute -> (method, value) for each binding of it in the class (kept on the node)."""
    known = owner.__dict__.get("_ddcheck_self_bindings")
    if known is None:
        known = owner.__dict__["_ddcheck_self_bindings"] = {}
        for method in owner.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in ast.walk(method):
                    if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None:
                        for t in _targets(a):
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                known.setdefault(t.attr, []).append((method, a.value))
    return known


def _targets(a: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[ast.expr]:
    return a.targets if isinstance(a, ast.Assign) else [a.target]


# ---------------------------------------------------------------------------------- reaching a read


class Reach:
    """Reads a function's tests for one built input, through the tree's one evaluator
    (:class:`~ddcheck.tree.evaluate.Evaluator`): the input is an object whose attributes are the fields it
    carries (``spec_info``, ``x.spec_info``); ``local`` answers the expression bound to a local name where
    it is read (None: unknown); ``method`` the FunctionDef a ``self.m(...)`` call runs."""

    def __init__(self, b: Built, local: Callable[[str, ast.AST], ast.expr | None],
                 method: Callable[[str], ast.FunctionDef | None]):
        self.b, self.input = b, b.value()
        self.ev = Evaluator({})
        self.ev.hooks = Hooks(names={SPEC_INFO_FIELD: self.input}, attrs={SPEC_INFO_FIELD: self.input},
                              methods=method, binding=local, watch=self.input)

    def test(self, n: ast.expr, at: ast.AST | None = None) -> bool | None | str:
        """A test's truth for the input; "free" where it is unknown and does not read the input at all
        (a launch's setting, the forward mode: some launch takes either branch)."""
        self.ev.hooks.touched, self.ev.at = False, at
        t = self.ev.test(n)
        return t if t is not UNKNOWN else None if self.ev.hooks.touched else "free"

    def eval(self, n: ast.expr, at: ast.AST | None = None) -> object:
        self.ev.at = at
        return self.ev(n)

    # -- statements

    def reaches(self, body: list[ast.stmt], target: ast.AST) -> bool | None:
        """Does the input's run of ``body`` reach ``target``: True, False, or None (unknown)."""
        sure = True
        for stmt in body:
            if _contains(stmt, target):
                if stmt is target:
                    return sure or None
                if isinstance(stmt, ast.If) and not _contains(stmt.test, target):
                    t = self.test(stmt.test)
                    in_body = any(_contains(s, target) for s in stmt.body)
                    if t == "free":
                        t = in_body
                    if t is not None and t != in_body:
                        return False
                    r = self.reaches(stmt.body if in_body else stmt.orelse, target)
                    if r is False:
                        return False
                    return True if (r and sure and t is not None) else None
                for name in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, name, None)
                    if isinstance(inner, list) and any(_contains(s, target) for s in inner):
                        r = self.reaches(inner, target)
                        loops = isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) or name != "body"
                        return False if r is False else (True if r and sure and not loops else None)
                return sure or None
            e = self.exits(stmt)
            if e is True:
                return False
            if e is None:
                sure = False
        return False

    def exits(self, stmt: ast.stmt) -> bool | None:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return True
        if isinstance(stmt, ast.If):
            t = self.test(stmt.test)
            if t == "free":  # some launch takes the branch that does not exit, if either does not
                a, b = self._block_exits(stmt.body), self._block_exits(stmt.orelse)
                return True if a is True and b is True else False if False in (a, b) else None
            a = self._block_exits(stmt.body) if t is not False else None
            b = self._block_exits(stmt.orelse) if t is not True else None
            if t is True:
                return a
            if t is False:
                return b
            return a if a == b else None
        if any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(stmt)):
            return None
        return False

    def _block_exits(self, body: list[ast.stmt]) -> bool | None:
        sure = True
        for stmt in body:
            e = self.exits(stmt)
            if e is True:
                return True if sure else None
            if e is None:
                sure = False
        return False if sure else None


def _contains(outer: ast.AST, target: ast.AST) -> bool:
    if outer is target:
        return True
    first, last = getattr(outer, "lineno", None), getattr(outer, "end_lineno", None)
    if first is None or not first <= target.lineno <= (last or first):
        return False
    return any(n is target for n in ast.walk(outer))


def expression_reach(r: Reach, node: ast.expr, parents: dict) -> bool | None:
    """Does the input reach ``node`` inside its statement: the conditional expressions, ``or``/``and``
    and ``getattr`` defaults on the way up, evaluated for it."""
    child, sure = node, True
    while id(child) in parents:
        parent, fieldname = parents[id(child)]
        if isinstance(parent, ast.stmt):
            break
        need: list[tuple[ast.expr, bool]] = []
        if isinstance(parent, ast.IfExp) and fieldname != "test":
            need = [(parent.test, fieldname == "body")]
        elif isinstance(parent, ast.BoolOp):
            before = parent.values[:next(i for i, v in enumerate(parent.values) if v is child)]
            need = [(v, isinstance(parent.op, ast.And)) for v in before]
        elif isinstance(parent, ast.Call) and _callee(parent) == "getattr" and len(parent.args) == 3 \
                and parent.args[2] is child and isinstance(parent.args[1], ast.Constant):
            if r.eval(parent.args[0], at=node) is r.input:
                if parent.args[1].value in r.input.attrs:
                    return False
            else:
                sure = False
        for test, want in need:
            t = r.test(test, at=node)
            if t is None or t == "free":  # a branch of this very expression: known for the input, or unsure
                sure = False
            elif t != want:
                return False
        child = parent
    return True if sure else None
