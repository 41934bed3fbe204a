"""Which forward-mode tests can be true in TARGET_VERIFY mode, read from the target's ``ForwardMode``.

Forks add modes and predicates (``is_draft_extend_v2``, ``is_dllm_extend``...) and change what the
old ones cover (``is_extend`` includes TARGET_VERIFY in SGLang), so the answer comes from the tree's
own ``ForwardMode`` class when it is there: each ``is_*`` method's return expression is evaluated for
``self == ForwardMode.TARGET_VERIFY`` in three-valued logic (True / False / None = cannot tell).
Without the tree (a single fixture file), a small table of the upstream predicates stands in.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ddcheck.tree.names import FORWARD_MODE as FORWARD_MODE_CLASS, IS_TARGET_VERIFY
from ddcheck.tree.names import TARGET_VERIFY as VERIFY_MEMBER
from ddcheck.tree.syntax import dotted

# Upstream SGLang's predicates, for targets without their own ForwardMode.
DEFAULT_COVERS: dict[str, bool] = {
    IS_TARGET_VERIFY: True, "is_extend": True, "is_prefill": True, "is_cuda_graph": True,
    "is_decode": False, "is_idle": False, "is_decode_or_idle": False, "is_mixed": False,
    "is_draft_extend": False, "is_draft_extend_v2": False, "is_extend_or_draft_extend_or_mixed": False,
    "is_split_prefill": False, "is_prebuilt": False, "is_dllm_extend": False, "is_cpu_graph": False,
    "is_extend_without_speculative": False, "is_context_parallel_extend": False,
}


@dataclass
class ModeTable:
    """``covers[name]``: can ``mode.name()`` be true when the mode is TARGET_VERIFY."""

    covers: dict[str, bool | None] = field(default_factory=lambda: dict(DEFAULT_COVERS))
    source: str = "default"

    @classmethod
    def from_module(cls, tree: ast.Module, label: str) -> "ModeTable | None":
        node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == FORWARD_MODE_CLASS), None)
        return None if node is None else cls.from_class(node, label)

    @classmethod
    def from_class(cls, node: ast.ClassDef, label: str) -> "ModeTable":
        methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef) and f.name.startswith("is_")}
        table = cls(covers={}, source=label)
        for name in methods:
            table.covers[name] = _method_cover(name, methods, set())
        return table

    def cover(self, test: ast.expr) -> bool | None:
        """Three-valued: is ``test`` (a test on the forward mode) true in TARGET_VERIFY mode?
        None when ``test`` is not purely about the forward mode, or the answer is unknown."""
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
            if _is_mode_receiver(test.func.value) and test.func.attr.startswith("is_"):
                return self.covers.get(test.func.attr)
            return None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.cover(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            vals = [self.cover(v) for v in test.values]
            return _and(vals) if isinstance(test.op, ast.And) else _or(vals)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            members = _members(test.comparators[0]) if _is_mode_receiver(test.left) else None
            if members is None:
                return None
            hit = VERIFY_MEMBER in members
            if isinstance(test.ops[0], (ast.Eq, ast.Is, ast.In)):
                return hit
            if isinstance(test.ops[0], (ast.NotEq, ast.IsNot, ast.NotIn)):
                return not hit
        return None


def _is_mode_receiver(node: ast.expr) -> bool:
    name = (dotted(node) or "").rsplit(".", 1)[-1].lower()
    return name.endswith("mode") and name != "capture_hidden_mode"


def _members(node: ast.expr) -> set[str] | None:
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    out = set()
    for e in elts:
        d = dotted(e) or ""
        if not d.startswith("ForwardMode."):
            return None
        out.add(d.rsplit(".", 1)[-1])
    return out


def _and(vals: list[bool | None]) -> bool | None:
    if False in vals:
        return False
    return None if None in vals else True


def _or(vals: list[bool | None]) -> bool | None:
    if True in vals:
        return True
    return None if None in vals else False


def _method_cover(name: str, methods: dict[str, ast.FunctionDef], seen: set[str]) -> bool | None:
    if name in seen:
        return None
    fn = methods.get(name)
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] if fn else []
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    a = fn.args
    defaults = dict(zip([x.arg for x in a.args][len(a.args) - len(a.defaults):], a.defaults))
    defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return _eval(body[0].value, methods, defaults, seen | {name})


def _eval(node: ast.expr, methods, defaults, seen) -> bool | None:
    """The value of a predicate's return expression when ``self`` is TARGET_VERIFY."""
    if isinstance(node, ast.Constant):
        return bool(node.value) if isinstance(node.value, (bool, int)) or node.value is None else None
    if isinstance(node, ast.Name):
        d = defaults.get(node.id)
        return _eval(d, methods, defaults, seen) if d is not None else None
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, methods, defaults, seen) for v in node.values]
        return _and(vals) if isinstance(node.op, ast.And) else _or(vals)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _eval(node.operand, methods, defaults, seen)
        return None if v is None else not v
    if isinstance(node, ast.IfExp):
        t = _eval(node.test, methods, defaults, seen)
        if t is None:
            a, b = _eval(node.body, methods, defaults, seen), _eval(node.orelse, methods, defaults, seen)
            return a if a == b else None
        return _eval(node.body if t else node.orelse, methods, defaults, seen)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.left, ast.Name) \
            and node.left.id == "self":
        members = _members(node.comparators[0])
        if members is None:
            return None
        hit = VERIFY_MEMBER in members
        op = node.ops[0]
        return hit if isinstance(op, (ast.Eq, ast.Is, ast.In)) else (not hit) if isinstance(
            op, (ast.NotEq, ast.IsNot, ast.NotIn)) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "self" and not node.args and not node.keywords:
        return _method_cover(node.func.attr, methods, seen)
    return None


_COLUMN0_CODE = re.compile(r"^[^\s#]", re.M)


def parse_class(text: str, name: str) -> ast.ClassDef | None:
    """The module-level class ``name`` parsed from its own lines (numbered as in the module): from its
    ``class`` line to the next line of code at column 0. None where that is not the class alone - the
    name at column 0 twice, a decorator, a string or bracket reaching past the cut (then the cut does
    not parse), ``\r`` line ends - for the caller to parse the whole module."""
    if "\r" in text:
        return None
    heads = list(re.finditer(rf"^class[ \t]+{re.escape(name)}\b", text, re.M))
    if len(heads) != 1:
        return None
    start = heads[0].start()
    before = text[:start].rstrip().rpartition("\n")[2]
    if before.startswith("@"):
        return None
    body = text.find("\n", start)
    nxt = _COLUMN0_CODE.search(text, body + 1) if body >= 0 else None
    block = text[start : nxt.start() if nxt else len(text)]
    try:
        tree = ast.parse("\n" * text.count("\n", 0, start) + block)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.ClassDef) or tree.body[0].name != name:
        return None
    return tree.body[0]


def read_mode_table(text: str, label: str) -> ModeTable | None:
    """The table of the ``ForwardMode`` class in a module's text: from the class's own lines where they
    parse alone (the module is ~100 KB, the class a few), else from the module parsed whole; None where
    the module holds no such class or does not parse."""
    node = parse_class(text, FORWARD_MODE_CLASS)
    if node is not None:
        return ModeTable.from_class(node, label)
    try:
        return ModeTable.from_module(ast.parse(text), label)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
