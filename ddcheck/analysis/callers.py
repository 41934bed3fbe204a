"""Who calls a helper on the verify path: the calls of it as a method of its own class (or a class
deriving from it) and on other objects, across the tree's modules, each with the forward mode it hands."""

from __future__ import annotations

import ast
from collections.abc import Callable

from ddcheck.analysis.c_attrs import ClassAttrs
from ddcheck.analysis.classes import Classes
from ddcheck.analysis.exprs import dotted, every_node, walk
from ddcheck.tree.modes import VERIFY_MEMBER
from ddcheck.tree.parse import statement_lines
from ddcheck.analysis.mode_checks import Modes
from ddcheck.analysis.module import FunctionInfo, ModuleModel
from ddcheck.analysis.reports import MethodUses
from ddcheck.analysis.verify_path import FunctionPass
from ddcheck.analysis.vocabulary import Vocabulary


class Callers:
    """The fact of who calls a helper: its calls as a method of its own class, found across the tree's
    modules (``method_uses``: a method name -> where the tree uses it) and resolved through ``classes``;
    a caller is judged by a pass over it as an entry point (``attrs``, ``modes``: what that pass needs)."""

    def __init__(self, vocab: Vocabulary, load_module: Callable[..., ModuleModel | None],
                 method_uses: Callable[[str], MethodUses | None], classes: Classes, attrs: ClassAttrs,
                 modes: Modes) -> None:
        self._vocab, self._load, self._uses = vocab, load_module, method_uses
        self._classes, self._attrs, self._modes = classes, attrs, modes
        # helper function node id -> the verify-branch calls of it as a method of its own class
        self._recorded: dict[int, dict[int, tuple[FunctionPass, ast.Call]]] = {}
        self._method_calls: dict[tuple, dict] = {}  # (module id, name) -> _self_calls' table
        self._caller_passes: dict[int, tuple] = {}  # function node id -> _caller_pass
        # function node id -> its pass as an entry point with nothing tainted: what _caller_pass would run
        self._entry_passes: dict[int, FunctionPass] = {}
        self._other_calls_memo: dict[tuple, list[ast.Call]] = {}  # (module id, name) -> calls

    def verify_call(self, func: FunctionInfo, fp: FunctionPass, call: ast.Call) -> None:
        """``call`` in ``fp``, on a verify branch, runs ``func`` as a method of the caller's class."""
        self._recorded.setdefault(id(func.node), {})[id(call)] = (fp, call)

    def entry_pass(self, func: FunctionInfo, fp: FunctionPass) -> None:
        """``fp`` is the pass over ``func`` as an entry point with nothing tainted (a caller's pass reuses it)."""
        self._entry_passes[id(func.node)] = fp

    def callers_of(self, model: ModuleModel, func: FunctionInfo) -> \
            tuple[list[tuple[FunctionPass, ast.Call, bool]], list[str]] | None:
        """Every ``self.<func>(...)`` call in the tree that resolves to ``func`` (from its class, its
        subclasses, classes mixing it in), with a pass over the caller and whether the call is on a
        verify path; and the calls that hand ``func`` a forward mode other than TARGET_VERIFY (which
        need no W), as ``file:line``. None when a subclass overrides ``func``, or the tree calls the
        name on another object without such a mode (that caller could not be handed W)."""
        recorded = self._recorded.get(id(func.node), {})
        found, exempt, seen = [], [], set()
        uses = self._uses(func.name)
        if uses is None:
            return None
        here = model.outline
        # An override would not take the new parameter.
        for other in model.functions.values():
            if other.name == func.name and other.cls and other.node is not func.node \
                    and self._classes.derives(here, other.cls, here, func.cls):
                return None
        for o in uses.definers:
            if o.relpath != here.relpath and any(self._classes.derives(o, cls, here, func.cls) for cls in o.methods.get(func.name, ())):
                return None
        mode = _mode_parameter(func)
        for module in uses.foreign:
            m = self._load(module)
            if m is None:  # a caller on another object that cannot be read: cannot be judged
                return None
            for call in self._other_calls(m, func.name):
                if not _hands_other_mode(func, mode, call):
                    return None
                exempt.append(f"{m.source.relpath}:{call.lineno}")
        for m in [model, *self._classes.deriving(uses.callers, here, func.cls)]:
            if id(m) in seen:
                continue
            seen.add(id(m))
            for caller, calls in self._self_calls(m, func.name).values():
                hit = self._classes.method_of(m, caller.cls, func.name)
                if hit is None or hit[1].node is not func.node:
                    continue
                cfp = None
                for c in calls:
                    if _hands_other_mode(func, mode, c):
                        exempt.append(f"{m.source.relpath}:{c.lineno}")
                        continue
                    if cfp is None:
                        cfp, on_verify = self._caller_pass(m, caller)
                    found.append((cfp, c, id(c) in on_verify or id(c) in recorded))
        found.sort(key=lambda t: (t[0].model.source.relpath, t[1].lineno, t[1].col_offset))
        return found, exempt

    def _other_calls(self, model: ModuleModel, name: str) -> list[ast.Call]:
        """The module's calls of method ``name`` on an object other than ``self``. Only statements
        whose lines hold ``name`` are walked (a class's body statement by statement): a call names it."""
        key = (id(model), name)
        calls = self._other_calls_memo.get(key)
        if calls is None:
            calls = self._other_calls_memo[key] = []
            stack = list(model.tree.body)
            while stack:
                stmt = stack.pop()
                if not model.holds(*statement_lines(stmt), name):
                    continue
                if isinstance(stmt, ast.ClassDef):
                    stack.extend(stmt.body)
                    parts = _header(stmt)
                else:
                    parts = [stmt]
                for n in (n for part in parts for n in every_node(part)):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name \
                            and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "self"):
                        calls.append(n)
        return calls

    def _caller_pass(self, model: ModuleModel, caller: FunctionInfo) -> tuple[FunctionPass, set[int]]:
        """A pass over a caller (as its own entry point) and the ids of the calls it makes on a verify path."""
        hit = self._caller_passes.get(id(caller.node))
        if hit is None:
            cfp = self._entry_passes.get(id(caller.node))
            if cfp is None:
                facts, modes = self._attrs.facts(model, caller.cls), self._modes
                cfp = FunctionPass(model, caller, self._vocab.is_verify_function(caller.name), facts.c_attrs,
                                   self._vocab, buffers=facts.buffers, sized=facts.sized, fields=facts.fields,
                                   modes=lambda: modes.table).run()
            hit = self._caller_passes[id(caller.node)] = (cfp, {id(c) for c, _ in cfp.verify_calls})
        return hit

    def _self_calls(self, model: ModuleModel, name: str) -> dict[int, tuple[FunctionInfo, list[ast.Call]]]:
        """The ``self.<name>(...)`` calls of each method of the module's classes (by caller). Only
        methods whose source holds ``name`` are walked: a call names it."""
        key = (id(model), name)
        table = self._method_calls.get(key)
        if table is None:
            table = self._method_calls[key] = {}
            for caller in model.functions.values():
                if not caller.cls or "<locals>" in caller.qualname:
                    continue
                if not model.spans(caller.node, name):
                    continue
                for n in walk(caller.node, keep=lambda stmt: model.spans(stmt, name)):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name \
                            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                        table.setdefault(id(caller.node), (caller, []))[1].append(n)
        return table


def _header(cls: ast.ClassDef) -> list[ast.AST]:
    """The expressions a class statement evaluates itself (its decorators, then the arguments of its
    ``class`` line), where a call may sit; its bases' meaning is the tree model's to say."""
    decorators = {id(d) for d in cls.decorator_list}
    return [*cls.decorator_list, *(n for n in ast.iter_child_nodes(cls)
                                   if not isinstance(n, ast.stmt) and id(n) not in decorators)]


def _mode_parameter(func: FunctionInfo) -> str | None:
    """The parameter a method tests its forward mode on (``forward_mode.is_target_verify()``), when it
    tests no other mode."""
    a = func.node.args
    tested = {dotted(n.func.value) for n in walk(func.node) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("is_")
              and (dotted(n.func.value) or "").lower().endswith("mode")}
    param = next(iter(tested)) if len(tested) == 1 else None
    return param if param in [p.arg for p in [*a.posonlyargs, *a.args]][1:] else None


def _hands_other_mode(func: FunctionInfo, mode: str | None, call: ast.Call) -> bool:
    """``call`` hands ``func`` (a method) a forward mode other than TARGET_VERIFY
    (``forward_mode=ForwardMode.DECODE``) for ``mode``, the parameter it tests: its verify branch is
    not taken."""
    if mode is None:
        return False
    a = func.node.args
    params = [p.arg for p in [*a.posonlyargs, *a.args]][1:]  # self is the receiver
    bound = []
    for name, value in zip(params, call.args):
        if isinstance(value, ast.Starred):
            break
        bound.append((name, value))
    bound += [(k.arg, k.value) for k in call.keywords if k.arg]
    member = next(((dotted(v) or "") for n, v in bound if n == mode), "")
    return member.startswith("ForwardMode.") and member.count(".") == 1 and member != f"ForwardMode.{VERIFY_MEMBER}"
