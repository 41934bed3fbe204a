"""What an instance of one of the tree's classes has, read from the class itself.

The smoke harness hands a backend objects it builds (a model runner, a forward batch, a KV
allocator) holding the values of its batch. For a name it was not handed, the tree's own class
answers, as an instance of it would: a dataclass field's default, a class-level value, its method
or property (bound to the object, so the tree's own code runs on the harness's values), or the
value its own initializer builds (``ModelRunner.init_kv_index_translator``: a method of no other
parameter that assigns ``self.NAME``). A name the class never declares (no field, annotation,
slot, class value or ``self.NAME = ...`` in its methods) is absent, as on a real instance.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

from ddcheck.tree.standins import ABSENT, is_stand_in

UNDECLARED = object()  # a name the tree's class does not declare at all


@dataclasses.dataclass(frozen=True)
class _Declared:
    names: frozenset[str]
    initializers: dict[str, tuple[str, ...]]  # attribute -> methods of no other parameter that assign it
    # attribute -> (its ``__init__``'s parameters, the expression a top-level statement of that
    # ``__init__`` assigns it) where the expression only reads names (``server_args.dcp_size``)
    from_init: dict[str, tuple[tuple[str, ...], Any]]


_PLAIN = (ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Load,
          ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.IfExp)


def _plain(expr: ast.expr) -> bool:
    """An expression of reads and arithmetic only: no calls, no subscripts, no comprehensions."""
    return all(isinstance(n, _PLAIN) for n in ast.walk(expr))


_CACHE: dict[type, _Declared] = {}


def _declared(cls: type) -> _Declared:
    hit = _CACHE.get(cls)
    if hit is not None:
        return hit
    names: set[str] = set()
    initializers: dict[str, list[str]] = {}
    from_init: dict[str, tuple[tuple[str, ...], Any]] = {}
    for klass in cls.__mro__:
        names |= set(getattr(klass, "__annotations__", {})) | set(getattr(klass, "__slots__", ()))
        if klass.__module__ in ("builtins", "abc", "typing"):
            continue
        try:
            parsed = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError, ValueError, RecursionError):
            continue
        body = parsed.body[0].body if parsed.body and isinstance(parsed.body[0], ast.ClassDef) else []
        for fn in body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = fn.args
            only_self = len(a.args) == 1 and not a.posonlyargs and not a.vararg and not a.kwonlyargs
            if fn.name == "__init__":
                params = tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))
                for stmt in fn.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _plain(stmt.value):
                        t = stmt.targets[0]
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            from_init.setdefault(t.attr, (params, compile(ast.Expression(stmt.value),
                                                                          f"<{klass.__name__}.__init__>", "eval")))
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    for leaf in ast.walk(t):
                        if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) \
                                and leaf.value.id == "self":
                            names.add(leaf.attr)
                            if only_self and fn.name != "__init__" and isinstance(fn, ast.FunctionDef):
                                initializers.setdefault(leaf.attr, []).append(fn.name)
    _CACHE[cls] = _Declared(frozenset(names), {k: tuple(dict.fromkeys(v)) for k, v in initializers.items()},
                            from_init)
    return _CACHE[cls]


class _Reads(dict):
    """``__init__``'s parameters and ``self``, as the object's attributes of the same names."""

    def __init__(self, instance: Any, params: tuple[str, ...]):
        super().__init__()
        self.instance, self.params = instance, params

    def __missing__(self, key: str) -> Any:
        if key == "self":
            return self.instance
        if key not in self.params:  # a module global of the tree: not this object's to answer
            raise KeyError(key)
        return getattr(self.instance, key)


def init_value(cls: type, name: str, instance: Any) -> Any:
    """``name`` as the tree's ``__init__`` computes it from its parameters, read as ``instance``'s
    attributes of the same names (``self.dcp_size = server_args.dcp_size``); ``ABSENT`` when
    ``__init__`` does not assign it by such an expression, or the expression fails here."""
    hit = _declared(cls).from_init.get(name)
    if hit is None:
        return ABSENT
    params, code = hit
    try:
        value = eval(code, {"__builtins__": {}}, _Reads(instance, params))  # noqa: S307 - the tree's own expression
    except Exception:  # noqa: BLE001 - it needs what this object was not handed
        return ABSENT
    return ABSENT if is_stand_in(value) else value


def declared_names(cls: type) -> frozenset[str]:
    """The instance attributes ``cls`` declares: annotations, slots, and every ``self.NAME = ...`` its
    methods (and its bases') write, read from their source."""
    return _declared(cls).names


def initializers(cls: type, name: str) -> tuple[str, ...]:
    """The methods of ``cls`` taking only ``self`` that assign ``self.name`` (besides ``__init__``)."""
    return _declared(cls).initializers.get(name, ())


def class_member(cls: type, name: str, instance: Any) -> Any:
    """What an instance of the tree's class ``cls`` has for ``name`` when it was not handed a value:
    its dataclass field default, a class-level value, or its method or property bound to ``instance``;
    ``ABSENT`` when the class declares it without a value, ``UNDECLARED`` when it does not declare it."""
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name:
                if f.default is not dataclasses.MISSING:
                    return f.default
                if f.default_factory is not dataclasses.MISSING:
                    return f.default_factory()
                return ABSENT
    try:
        member = inspect.getattr_static(cls, name)
    except AttributeError:
        return ABSENT if name in declared_names(cls) else UNDECLARED
    if is_stand_in(member) or isinstance(member, type):
        return ABSENT
    if hasattr(type(member), "__get__"):  # a method, property, cached_property...: bound to the object
        return member.__get__(instance, cls)
    return member if not callable(member) else ABSENT
