"""Does a launch reach a scan finding? The backend's own code, followed from its entry points.

``ddcheck scan`` reports every read of C on *a* verify path. A launch takes one of them: eager
metadata (``init_forward_metadata``), and CUDA-graph capture/replay only when graphs are on; inside,
branches on ``self.topk``, on the algorithm (``spec_algorithm.is_ddtree()``), on the verify input
(``hasattr(spec_info, "tree_budget")``) decide the rest. Here the backend class's methods are followed
from the entry points the launch uses through ``self.method(...)`` calls, and every ``if`` on the
way to a finding is evaluated for the launch: the forward mode is TARGET_VERIFY, ``self.X`` is what
the class's ``__init__`` makes of the launch's ``server_args``, the verify input is the class the
tree's worker builds. A finding is then *reached* (every test holds), *conditional* (some test
cannot be decided here: a model property, a runtime flag) or *not reached* (a test is false).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from ddcheck.tree.modes import ModeTable
from ddcheck.base.findings import Finding
from ddcheck.config.inputs import input_value, reading_input
from ddcheck.tree.sources import SourceTree
from ddcheck.tree.evaluate import UNKNOWN, Evaluator, guards_to, statements_before
from ddcheck.tree.modules import TreeModules, tree_class
from ddcheck.tree.names import (EAGER_ENTRY_POINTS as EAGER, FORWARD_BATCH_CLASS, FORWARD_BATCH_FILE,
                                  FORWARD_METHODS as FORWARD, GRAPH_ENTRY_POINTS as GRAPH,
                                  NEW_EAGER_ENTRY_POINTS as NEW_EAGER)

RANK = {"never": 0, "conditional": 1, "reached": 2}


@dataclass
class Launch:
    values: dict[str, Any]
    algorithm: str | None
    input_cls: str | None
    input_fields: set[str]
    graphs: bool
    input_type: str | None = None  # the SpecInputType member the input class sets
    world: Any = None  # an evaluate.World: calls the backend's __init__ makes are followed into the tree
    modes: ModeTable = field(default_factory=ModeTable)
    batch_fields: set[str] = field(default_factory=set)  # the tree's ForwardBatch fields
    input_kinds: frozenset[str] = frozenset()  # the input class and its bases, by name


@dataclass
class Reach:
    status: str  # "reached" | "conditional" | "never"
    why: str = ""  # the undecided test (conditional) or the false one (never)


class _LaunchEval(Evaluator):
    """Evaluator that also decides forward-mode, algorithm and verify-input tests for the launch."""

    def __init__(self, launch: Launch, helpers: dict[str, ast.FunctionDef] | None = None):
        super().__init__(launch.values)
        self.launch = launch
        self.helpers: dict[str, ast.FunctionDef] = helpers or {}  # the backend class's methods
        if launch.input_cls:  # the verify input the launch's worker builds, read as the object it is
            reading_input(self, input_value(launch.input_cls, launch.input_fields, launch.input_type,
                                            launch.input_kinds), self.helpers)
        else:
            self.hooks.methods = self.helpers.get

    def _child(self, module: str) -> Evaluator:
        inner = _LaunchEval(self.launch, self.helpers)
        inner.world, inner.module, inner.depth, inner.environ = self.world, module, self.depth + 1, self.environ
        return inner

    def _e(self, n: ast.expr) -> Any:
        cover = self.launch.modes.cover(n) if _mentions(n, "mode") else None
        if cover is not None:
            return cover
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("is_") \
                and not n.args and "spec_algorithm" in ast.unparse(n.func.value) and self.launch.algorithm:
            return n.func.attr == f"is_{self.launch.algorithm.lower()}"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "hasattr" and len(n.args) == 2 \
                and isinstance(n.args[0], ast.Name) and n.args[0].id == "forward_batch" \
                and isinstance(n.args[1], ast.Constant) and self.launch.batch_fields:
            return n.args[1].value in self.launch.batch_fields
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.left, ast.Attribute) \
                and n.left.attr == "spec_algorithm" and isinstance(n.comparators[0], ast.Constant) \
                and n.comparators[0].value is None and self.launch.algorithm:
            return isinstance(n.ops[0], ast.IsNot)  # a speculative launch's batch carries its algorithm
        return super()._e(n)


def batch_fields(tree: SourceTree) -> set[str]:
    """The fields of the tree's ``ForwardBatch`` (for ``hasattr(forward_batch, ...)`` tests)."""
    cls = tree_class(tree, FORWARD_BATCH_FILE, FORWARD_BATCH_CLASS)
    return {i.target.id for i in (cls.body if cls else []) if isinstance(i, ast.AnnAssign)
            and isinstance(i.target, ast.Name)}


def _mentions(n: ast.AST, word: str) -> bool:
    return any(isinstance(x, ast.Attribute) and word in x.attr.lower() or isinstance(x, ast.Name)
               and word in x.id.lower() for x in ast.walk(n))


class _ClassPaths:
    def __init__(self, chain: list[ast.ClassDef], launch: Launch, module: str = ""):
        """``chain``: the class, then its bases in the tree, subclass first."""
        self.launch = launch
        self.methods: dict[str, ast.FunctionDef] = {}
        for c in reversed(chain):  # base methods first, so the subclass overrides them
            self.methods.update({f.name: f for f in c.body if isinstance(f, ast.FunctionDef)})
        self.ev = _LaunchEval(launch, self.methods)
        self.ev.world, self.ev.module = launch.world, module
        self.ev.bind_init(self.methods.get("__init__"))
        self.reach = self._walk()

    def _entries(self) -> list[tuple[str, dict[str, Any]]]:
        """(entry method, its arguments as the runtime passes them) for this launch: eager metadata
        (through ``out_graph(in_capture=False)`` where the class only has the newer interface), the
        CUDA-graph ones with graphs on (the runner calls ``out_graph`` with ``in_capture`` True at
        capture and False at replay), and the forward methods."""
        eager = [(m, {}) for m in EAGER if m in self.methods] or \
            [(m, {"in_capture": False}) for m in NEW_EAGER if m in self.methods]
        graph = [(m, {"in_capture": flag}) for m in GRAPH if m in self.methods for flag in (True, False)] \
            if self.launch.graphs else []
        return eager + graph + [(m, {}) for m in FORWARD if m in self.methods]

    def guards(self, fn: ast.FunctionDef, node: ast.AST, args: dict[str, Any] | None = None) -> Reach:
        result = Reach("reached")
        self.ev.local = dict(args or {})
        self.ev.run(statements_before(fn.body, node), self.ev.local)  # locals the tests use
        for test, polarity in guards_to(fn.body, node, []):
            value = self.ev.test(test)
            if value is UNKNOWN:
                if result.status == "reached":
                    result = Reach("conditional", ("" if polarity else "not ") + ast.unparse(test))
            elif bool(value) != polarity:
                return Reach("never", ("" if polarity else "not ") + ast.unparse(test))
        return result

    def _walk(self) -> dict[str, Reach]:
        reach: dict[str, Reach] = {}
        todo: list[tuple[str, dict[str, Any]]] = []
        for name, args in self._entries():
            reach[name] = Reach("reached")
            todo.append((name, args))
        self.entry_args = {}
        for name, args in todo:
            self.entry_args.setdefault(name, []).append(args)
        while todo:
            name, args = todo.pop()
            fn = self.methods[name]
            for call in ast.walk(fn):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
                        and call.func.attr in self.methods):
                    continue
                step = self.guards(fn, call, args)
                if step.status == "never":
                    continue
                here = reach[name] if step.status == "reached" else Reach("conditional", step.why or reach[name].why)
                old = reach.get(call.func.attr)
                if old is None or RANK[here.status] > RANK[old.status]:
                    reach[call.func.attr] = here
                    todo.append((call.func.attr, {}))
        return reach


def _paths_of(tree: SourceTree, finding: Finding, launch: Launch, memo: dict) -> "_ClassPaths | None":
    parts = (finding.function or "").split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return None
    key = (finding.relpath, parts[0])
    if key not in memo:
        mods = TreeModules.of(tree)
        f = tree.find(finding.relpath)
        module = mods.dotted(f.relpath) if f is not None else ""
        # the class and its bases across modules, as the model follows them; a file outside the
        # package (a lone fixture) has only its own class
        chain = [node for _, node, _ in mods.class_chain(parts[0], module)] if module else []
        if not chain and f is not None:
            cls = tree_class(tree, f.relpath, parts[0])
            chain = [cls] if cls is not None else []
        memo[key] = _ClassPaths(chain, launch, module) if chain else None
    return memo[key]


def launch_value(tree: SourceTree, finding: Finding, launch: Launch, memo: dict | None = None) -> Any:
    """What a finding's ``self.<attr>`` holds for this launch, as the backend's ``__init__`` sets it
    (followed into the tree: ``resolve_num_tokens_per_req(...)`` gives budget + 1 for a tree drafter
    in trees that size for it); UNKNOWN when it cannot be told."""
    memo = {} if memo is None else memo
    sym = finding.symbol or ""
    if not sym.startswith("self.") or sym.count(".") != 1:
        return UNKNOWN
    paths = _paths_of(tree, finding, launch, memo)
    return paths.ev.self_env.get(sym[5:], UNKNOWN) if paths is not None else UNKNOWN


def finding_reach(tree: SourceTree, finding: Finding, launch: Launch, memo: dict | None = None) -> Reach:
    """Whether ``launch`` reaches ``finding`` (a scan finding in a backend module)."""
    memo = {} if memo is None else memo
    parts = (finding.function or "").split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return Reach("reached")  # a module-level helper or a nested function: taken as reached
    method = parts[1]
    paths = _paths_of(tree, finding, launch, memo)
    if paths is None or method not in paths.methods:
        return Reach("reached")
    to_method = paths.reach.get(method, Reach("never", "no entry point this launch uses calls it"))
    if to_method.status == "never":
        return to_method
    fn = paths.methods[method]
    node = next((n for n in ast.walk(fn) if isinstance(n, ast.expr) and getattr(n, "lineno", 0) == finding.line
                 and n.col_offset == finding.column), None)
    variants = [paths.guards(fn, node, args) for args in paths.entry_args.get(method, [{}])] if node is not None \
        else [Reach("reached")]
    inside = max(variants, key=lambda r: RANK[r.status])
    if inside.status == "never":
        return inside
    if "conditional" in (inside.status, to_method.status):
        return Reach("conditional", inside.why if inside.status == "conditional" else to_method.why)
    return Reach("reached")
