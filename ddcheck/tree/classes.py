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
import sys
import textwrap
from typing import Any

from ddcheck.tree.standins import ABSENT, is_stand_in

UNDECLARED = object()  # a name the tree's class does not declare at all


@dataclasses.dataclass(frozen=True)
class _Declared:
    names: frozenset[str]
    initializers: dict[str, tuple[str, ...]]  # attribute -> methods of no other parameter that assign it
    # attribute -> (its ``__init__``'s parameters, the expression a top-level statement of that
    # ``__init__`` assigns it, the module that defines it) where the expression reads names and calls what
    # they name (``server_args.dcp_size``, ``SpeculativeAlgorithm.from_string(server_args.x)``); else, for an
    # attribute only one statement of the class's methods assigns, that one's (over ``self`` alone)
    from_init: dict[str, tuple[tuple[str, ...], Any, str]]


_PLAIN = (ast.Name, ast.Attribute, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Load,
          ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.IfExp, ast.Call, ast.keyword)


def _assigned_attr(stmt: ast.AST) -> str | None:
    """``X`` of a statement ``self.X = expr`` (or ``self.X: T = expr``) whose expression is plain."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target = stmt.target
    else:
        return None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self" \
            and _plain(stmt.value):
        return target.attr
    return None


# the builtins such an expression may call: reads and conversions, nothing that acts
_BUILTINS = {f.__name__: f for f in (hasattr, getattr, isinstance, len, min, max, bool, int, float, str, tuple,
                                     any, all, abs)}


def _plain(expr: ast.expr) -> bool:
    """An expression of reads, arithmetic and calls only: no subscripts, no comprehensions, no lambdas."""
    return all(isinstance(n, _PLAIN) for n in ast.walk(expr))


_CACHE: dict[type, _Declared] = {}


def _declared(cls: type) -> _Declared:
    hit = _CACHE.get(cls)
    if hit is not None:
        return hit
    names: set[str] = set()
    initializers: dict[str, list[str]] = {}
    from_init: dict[str, tuple[tuple[str, ...], Any, str]] = {}
    assigned: dict[str, int] = {}  # attribute -> how many statements of the class's methods assign it
    sole: dict[str, tuple[Any, str]] = {}  # attribute -> (the first plain ``self.X = expr`` of it, module)
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
                    attr = _assigned_attr(stmt)
                    if attr is not None:
                        code = compile(ast.Expression(stmt.value), f"<{klass.__name__}.__init__>", "eval")
                        from_init.setdefault(attr, (params, code, klass.__module__))
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                attr = _assigned_attr(node)
                if attr is not None and attr not in sole:
                    sole[attr] = (compile(ast.Expression(node.value), f"<{klass.__name__}.{fn.name}>", "eval"),
                                  klass.__module__)
                for t in targets:
                    for leaf in ast.walk(t):
                        if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) \
                                and leaf.value.id == "self":
                            names.add(leaf.attr)
                            assigned[leaf.attr] = assigned.get(leaf.attr, 0) + 1
                            if only_self and fn.name != "__init__" and isinstance(fn, ast.FunctionDef):
                                initializers.setdefault(leaf.attr, []).append(fn.name)
    # an attribute one statement of the class assigns, in whichever method: that expression, over ``self``
    # and the module's names (``self.prefill_aware_swa = hasattr(self.model, ...) and ...`` in load_model)
    for attr, (code, module) in sole.items():
        if assigned.get(attr) == 1:
            from_init.setdefault(attr, (("self",), code, module))
    _CACHE[cls] = _Declared(frozenset(names), {k: tuple(dict.fromkeys(v)) for k, v in initializers.items()},
                            from_init)
    return _CACHE[cls]


class _Reads(dict):
    """``__init__``'s parameters and ``self``, as the object's attributes of the same names; a parameter
    the object does not hold (``held``) is its default in ``__init__``'s signature, where it has one; any
    other name is the defining module's global (a stand-in is no answer)."""

    def __init__(self, instance: Any, params: tuple[str, ...], defaults: dict[str, Any], held, module: str):
        super().__init__()
        self.instance, self.params, self.defaults, self.held, self.module = instance, params, defaults, held, module

    def __missing__(self, key: str) -> Any:
        if key == "self":
            return self.instance
        if key not in self.params:  # a module global of the tree (a class, a function, an env reader)
            found = getattr(sys.modules.get(self.module), "__dict__", {}).get(key, ABSENT)
            if found is ABSENT or is_stand_in(found):
                raise KeyError(key)
            return found
        if key in self.defaults and not self.held(key):
            return self.defaults[key]
        return getattr(self.instance, key)


def _init_defaults(cls: type) -> dict[str, Any]:
    """The defaults of ``cls.__init__``'s parameters, as the tree's module evaluated them."""
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not p.empty}


_EVALUATING: set[tuple[int, str]] = set()  # (object, attribute) being answered: a read of it again is none


def init_value(cls: type, name: str, instance: Any, held=lambda key: True) -> Any:
    """``name`` as the tree's ``__init__`` computes it from its parameters, read as ``instance``'s
    attributes of the same names (``self.dcp_size = server_args.dcp_size``; calls of what the module names
    run: ``self.quant_method = q if q is not None else UnquantizedKVCacheMethod()``), or a parameter's default
    where ``held(parameter)`` says the object was not handed it (``self.logit_cap = logit_cap``);
    ``ABSENT`` when ``__init__`` does not assign it by such an expression, or the expression fails here."""
    hit = _declared(cls).from_init.get(name)
    key = (id(instance), name)
    if hit is None or key in _EVALUATING:  # (``self.ps = ps`` read while ``ps`` is being answered)
        return ABSENT
    params, code, module = hit
    _EVALUATING.add(key)
    try:
        reads = _Reads(instance, params, _init_defaults(cls), held, module)
        value = eval(code, {"__builtins__": _BUILTINS}, reads)  # noqa: S307 - the tree's own expression
    except Exception:  # noqa: BLE001 - it needs what this object was not handed
        return ABSENT
    finally:
        _EVALUATING.discard(key)
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
