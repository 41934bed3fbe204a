"""What an instance of one of the tree's classes has, read from the class itself.

The smoke harness hands a backend objects it builds (a model runner, a forward batch, a KV
allocator) holding the values of its batch. For a name it was not handed, the tree's own class
answers, as an instance of it would: a dataclass field's default, a class-level value, its method
or property (bound to the object, so the tree's own code runs on the harness's values), or the
value its own initializer builds (``ModelRunner.init_kv_index_translator``: a method of no other
parameter that assigns ``self.NAME``). A name the class never declares (no field, annotation,
slot, class value or ``self.NAME = ...`` in its methods) is absent, as on a real instance.

Where the class's module stopped while imported before its ``class`` statement ran, there is no
class to ask: :func:`written_class` reads the statement (and its tree bases') from the tree's
source, and answers the same questions from it (:class:`WrittenClass`).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from ddcheck.tree.parse import SourceError, parse_kept
from ddcheck.tree.standins import ABSENT, is_stand_in

if TYPE_CHECKING:
    from ddcheck.tree.modules import TreeModules

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


class WrittenClass:
    """A tree class whose module stopped while imported before its ``class`` statement ran, as its source
    writes it: ``written``, its statement and its unbuilt tree bases' ((statement, module), subclass
    first); ``real``, the classes it derives from that exist here (tree bases that were built, bases
    outside the tree its module's names reach); ``unread``, bases that neither reaches (as written): a name
    it does not declare may be theirs."""

    def __init__(self, name: str, module: str, relpath: str, written: list[tuple[ast.ClassDef, str]],
                 real: list[type], unread: list[str], stopped: str, to_run: str):
        self.name, self.module, self.relpath = name, module, relpath
        self.written, self.real, self.unread = written, real, unread
        self.stopped, self.to_run = stopped, to_run  # why its module stopped, and what would make it run

    @property
    def line(self) -> int:
        return self.written[0][0].lineno

    def __repr__(self) -> str:
        return f"<the tree's class {self.name}, read from {self.relpath}:{self.line}>"


def class_name(cls: Any) -> str:
    return cls.name if isinstance(cls, WrittenClass) else cls.__name__


def written_class(modules: "TreeModules", name: str, module: str, stopped: str, to_run: str) -> WrittenClass | None:
    """The tree class ``name`` as ``module`` (which stopped while imported: ``stopped``, and ``to_run``
    what would make it run) writes it, read through the tree's model ``modules``
    (:class:`~ddcheck.tree.modules.TreeModules`); None where the tree does not define it."""
    chain = modules.class_chain(name, module)
    if not chain:
        return None
    written: list[tuple[ast.ClassDef, str]] = []
    real: list[type] = []
    for _, node, where in chain:
        built = _module_value(where, node.name)
        if isinstance(built, type) and not is_stand_in(built):
            real.append(built)  # a tree base whose module ran: the class itself answers
        else:
            written.append((node, where))
    built_names = {(c.__module__, c.__name__) for c in real}
    unread: list[str] = []
    for where, owner, base in modules.outside_bases(name, module):
        if (where, owner) in built_names:
            continue  # a built class knows its own bases
        value = _dotted_value(where, base) if base else ABSENT
        if value is object:
            continue
        if isinstance(value, type) and not is_stand_in(value):
            real.append(value)
        else:
            unread.append(base or "?")
    return WrittenClass(name, module, chain[0][0], written, real, unread, stopped, to_run)


def _module_value(module: str, name: str) -> Any:
    """The global ``name`` of the tree module ``module`` as far as it ran, else a builtin; ``ABSENT`` for
    neither (a stand-in is no value)."""
    found = getattr(sys.modules.get(module), "__dict__", {}).get(name, ABSENT)
    if found is ABSENT:
        found = getattr(builtins, name, ABSENT)
    return ABSENT if is_stand_in(found) else found


def _dotted_value(module: str, dotted: str) -> Any:
    """``a.b.C`` read from ``module``'s globals; ``ABSENT`` where a part is missing or a stand-in."""
    head, *rest = dotted.split(".")
    value = _module_value(module, head)
    for part in rest:
        value = getattr(value, part, ABSENT) if value is not ABSENT else ABSENT
    return ABSENT if is_stand_in(value) else value


def _statements(cls: Any) -> list[tuple[ast.ClassDef, str, str]]:
    """(class statement, class name, module) of ``cls`` and of each base with a source, subclass first."""
    if isinstance(cls, WrittenClass):
        out = [(node, node.name, where) for node, where in cls.written]
        for klass in cls.real:  # a class two bases share is read once (its statements counted once)
            seen = {(name, where) for _, name, where in out}
            out += [s for s in _statements(klass) if (s[1], s[2]) not in seen]
        return out
    out = []
    for klass in cls.__mro__:
        if klass.__module__ in ("builtins", "abc", "typing"):
            continue
        node = _class_statement(klass)
        if node is not None:
            out.append((node, klass.__name__, klass.__module__))
    return out


def _class_statement(klass: type) -> ast.ClassDef | None:
    """The ``class`` statement of ``klass`` in its module's source (what ``inspect.getsource`` finds),
    from the module's syntax tree kept by its text (:func:`ddcheck.tree.parse.parse_kept`); None where it
    has no source."""
    import linecache

    try:
        filename = inspect.getsourcefile(klass)
    except TypeError:
        return None
    lines = linecache.getlines(filename, sys.modules.get(klass.__module__).__dict__
                               if klass.__module__ in sys.modules else None) if filename else []
    if not lines:
        return _by_inspect(klass)
    try:  # inspect.getsource would parse the whole module again for each class of it
        tree = parse_kept("".join(lines), filename)
    except SourceError:
        return None
    classes = tree.__dict__.get("_ddcheck_classes")
    if classes is None:
        classes = tree.__dict__["_ddcheck_classes"] = {}
        _collect_classes(tree.body, (), classes)
    found = classes.get(klass.__qualname__)
    if not found:
        return _by_inspect(klass)
    # Python 3.13+ records where the class statement that made it starts (decorators included), as
    # inspect.getsource then reads it; before, inspect takes the first in source order
    first = getattr(klass, "__firstlineno__", None)
    return next((n for n in found if min([n.lineno, *(d.lineno for d in n.decorator_list)]) == first), found[0])


def _collect_classes(body: list[ast.stmt], scope: tuple[str, ...], out: dict[str, list[ast.ClassDef]]) -> None:
    """The class statements by qualified name, in source order (depth first, as ``inspect.getsource``
    looks for them): under ``if``/``try`` too; a function's classes under ``<locals>``."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            out.setdefault(".".join((*scope, stmt.name)), []).append(stmt)
            _collect_classes(stmt.body, (*scope, stmt.name), out)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collect_classes(stmt.body, (*scope, stmt.name, "<locals>"), out)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    for item in inner:
                        if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                            _collect_classes(item.body, scope, out)
                        elif isinstance(item, ast.stmt):
                            _collect_classes([item], scope, out)


def _by_inspect(klass: type) -> ast.ClassDef | None:
    try:
        parsed = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError, ValueError, RecursionError):
        return None
    return parsed.body[0] if parsed.body and isinstance(parsed.body[0], ast.ClassDef) else None


def _annotated(cls: Any) -> set[str]:
    """The names ``cls`` and its bases annotate or list in ``__slots__``."""
    if not isinstance(cls, WrittenClass):
        names: set[str] = set()
        for klass in cls.__mro__:
            names |= set(getattr(klass, "__annotations__", {})) | set(getattr(klass, "__slots__", ()))
        return names
    names = set().union(*(_annotated(klass) for klass in cls.real))
    for node, _ in cls.written:
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names.add(stmt.target.id)
            elif _body_names(stmt) == ["__slots__"]:
                try:
                    slots = ast.literal_eval(stmt.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                names |= {slots} if isinstance(slots, str) else set(slots)
    return names


def _body_names(stmt: ast.stmt) -> list[str]:
    """The names a statement of a class body binds (an assignment's plain names, a ``def``, a ``class``)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


_CACHE: dict[Any, _Declared] = {}


def _declared(cls: Any) -> _Declared:
    hit = _CACHE.get(cls)
    if hit is not None:
        return hit
    names: set[str] = _annotated(cls)
    initializers: dict[str, list[str]] = {}
    from_init: dict[str, tuple[tuple[str, ...], Any, str]] = {}
    assigned: dict[str, int] = {}  # attribute -> how many statements of the class's methods assign it
    sole: dict[str, tuple[Any, str]] = {}  # attribute -> (the first plain ``self.X = expr`` of it, module)
    for statement, klass_name, klass_module in _statements(cls):
        for fn in statement.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = fn.args
            only_self = len(a.args) == 1 and not a.posonlyargs and not a.vararg and not a.kwonlyargs
            if fn.name == "__init__":
                params = tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))
                for stmt in fn.body:
                    attr = _assigned_attr(stmt)
                    if attr is not None:
                        code = compile(ast.Expression(stmt.value), f"<{klass_name}.__init__>", "eval")
                        from_init.setdefault(attr, (params, code, klass_module))
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
                attr = _assigned_attr(node)
                if attr is not None and attr not in sole:
                    sole[attr] = (compile(ast.Expression(node.value), f"<{klass_name}.{fn.name}>", "eval"),
                                  klass_module)
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


def _init_defaults(cls: Any) -> dict[str, Any]:
    """The defaults of ``cls.__init__``'s parameters, as the tree's module evaluated them (a class read from
    its source: each default its module's names evaluate)."""
    if isinstance(cls, WrittenClass):
        fn, module = _written_init(cls)
        if fn is None:
            return {}
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + \
            [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        values = {p.arg: _evaluated(d, module) for p, d in pairs}
        return {k: v for k, v in values.items() if v is not ABSENT}
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not p.empty}


def _written_init(cls: WrittenClass) -> tuple[ast.FunctionDef | None, str]:
    """The ``__init__`` an instance of ``cls`` runs, where its statement or an unbuilt base writes it."""
    for node, module in cls.written:
        fn = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if fn is not None:
            return fn, module
    return None, ""


def init_parameters(cls: Any) -> list[str]:
    """The names of ``cls.__init__``'s parameters, ``self`` first (none where there is no class)."""
    if isinstance(cls, WrittenClass):
        fn, _ = _written_init(cls)
        if fn is None:
            return init_parameters(cls.real[0]) if cls.real else []
        a = fn.args
        return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    try:
        return list(inspect.signature(cls.__init__).parameters) if cls is not None else []
    except (TypeError, ValueError):
        return []


def _evaluated(expr: ast.expr, module: str) -> Any:
    """A plain expression of the tree (a default, a class-level value) over its module's names as far as
    the module ran; ``ABSENT`` where it cannot be evaluated here or gives a stand-in."""
    try:
        return ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        pass
    if not _plain(expr):
        return ABSENT
    try:
        code = compile(ast.Expression(expr), f"<{module}>", "eval")
        value = eval(code, {"__builtins__": _BUILTINS}, _Reads(None, (), {}, lambda key: True, module))  # noqa: S307
    except Exception:  # noqa: BLE001 - it needs what did not run here
        return ABSENT
    return ABSENT if is_stand_in(value) else value


_EVALUATING: set[tuple[int, str]] = set()  # (object, attribute) being answered: a read of it again is none


def init_value(cls: Any, name: str, instance: Any, held=lambda key: True) -> Any:
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


def declared_names(cls: Any) -> frozenset[str]:
    """The instance attributes ``cls`` declares: annotations, slots, and every ``self.NAME = ...`` its
    methods (and its bases') write, read from their source."""
    return _declared(cls).names


def initializers(cls: Any, name: str) -> tuple[str, ...]:
    """The methods of ``cls`` taking only ``self`` that assign ``self.name`` (besides ``__init__``); none of a
    class read from its source (there is no method to run)."""
    return () if isinstance(cls, WrittenClass) else _declared(cls).initializers.get(name, ())


def class_member(cls: Any, name: str, instance: Any) -> Any:
    """What an instance of the tree's class ``cls`` has for ``name`` when it was not handed a value:
    its dataclass field default, a class-level value, or its method or property bound to ``instance``;
    ``ABSENT`` when the class declares it without a value, ``UNDECLARED`` when it does not declare it."""
    if isinstance(cls, WrittenClass):
        return _written_member(cls, name, instance)
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


def _written_member(cls: WrittenClass, name: str, instance: Any) -> Any:
    """:func:`class_member` of a class read from its source: a class-level value its module's names
    evaluate (a dataclass ``field``'s default), ``ABSENT`` for one that cannot be had here (a method: the
    class was never built to bind it); else what a base that exists here answers; else ``ABSENT`` for a
    name it declares as an instance attribute, or where a base could not be read (it may declare it);
    ``UNDECLARED`` when nothing declares it."""
    for node, module in cls.written:
        for stmt in node.body:
            if name not in _body_names(stmt):
                continue
            value = getattr(stmt, "value", None)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and value is not None:
                value = _evaluated(value, module)
                if isinstance(value, dataclasses.Field):
                    value = value.default if value.default is not dataclasses.MISSING else \
                        value.default_factory() if value.default_factory is not dataclasses.MISSING else ABSENT
                return ABSENT if isinstance(value, type) or callable(value) else value  # as class_member's
            return ABSENT
    # a base that exists here answers first (its class-level value, as getattr_static finds it on a class)
    found = next((v for v in (class_member(klass, name, instance) for klass in cls.real) if v is not UNDECLARED),
                 UNDECLARED)
    if found is not UNDECLARED:
        return found
    return ABSENT if name in declared_names(cls) or cls.unread else UNDECLARED


def tuple_fields(cls: Any, attr: str) -> tuple[tuple[str, ...], str] | None:
    """The names the class's own source gives the positions of a plain tuple it keeps in ``self.<attr>``
    (``self.forward_metadata = (attn_logits, max_extend_len, ...)``, ``(_, max_extend_len, ...) =
    self.forward_metadata``: a name, not ``_`` or an expression, names its position), and where the first
    of those statements is (module:line); None where they do not name every position, or name one two ways."""
    names: list[str | None] | None = None
    where = None
    for node, _, module in _statements(cls):
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
                if _self_attr(target, attr) and isinstance(value, ast.Tuple):
                    elts = value.elts
                elif _self_attr(value, attr) and isinstance(target, (ast.Tuple, ast.List)):
                    elts = target.elts
                else:
                    continue
                if any(isinstance(e, ast.Starred) for e in elts):
                    return None  # positions not known
                found = [e.id if isinstance(e, ast.Name) and e.id != "_" else None for e in elts]
                if names is None:
                    names, where = found, f"{module}:{stmt.lineno}"
                elif len(found) != len(names) or any(a and b and a != b for a, b in zip(found, names)):
                    return None
                names = [a or b for a, b in zip(names, found)]
    if not names or None in names or len(set(names)) != len(names):
        return None
    return tuple(names), where


def _self_attr(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
        and node.value.id == "self"
