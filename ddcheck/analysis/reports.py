"""What the analysis keeps of a read of C before it is a finding (reports, the origins of tainted
parameters, the tree's uses of a method, W threaded into a helper), and the statement helpers its
parts share."""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field

from ddcheck.base.findings import Edit, FixPlan
from ddcheck.tree.parse import statement_lines
from ddcheck.analysis.module import ModuleModel
from ddcheck.tree.hierarchy import Outline
from ddcheck.analysis.verify_path import FunctionPass


# A hint as the analysis knows it: the rule's case (a key of its [hints]) and the facts it is filled with.
Hint = tuple[str, dict[str, object]]


@dataclass(frozen=True, eq=False)
class Origin:
    """Where a tainted parameter's C came from."""

    model: ModuleModel
    node: ast.expr


@dataclass
class ParamUse:
    """How a helper uses one of its parameters when handed C (a hazard kind, where it happens)."""

    kind: str
    what: str
    where: str  # "helper() at file:line"


@dataclass
class Reported:
    """A finding before it becomes a :class:`Finding`, kept with what the fixer needs."""

    kind: str
    what: str
    fp: FunctionPass
    node: ast.expr
    anchor: ast.stmt | None
    c_expr: str  # how C is spelled here, for the fallback (``self.num_draft_tokens``)
    exact: bool  # the read is C itself, not a value derived from it: W may take its place
    # the hint's case and facts, set where the hazard is not a read of C (a C-sized buffer filled per step)
    hint: Hint | None = None
    buffer_line: int = 0  # the read is of a buffer laid out with C at start-up (that line)
    plan: FixPlan | None = None  # a fix planned where the finding is made (a capacity at its allocation)
    replacement: str | None = None
    case: str = ""  # the rule's [what] case that ``what`` says
    by_inputs: bool = False  # a read of C itself (not through a local): judged by the tree's verify inputs at the end
    rule: str = ""  # the rule that claimed the read; "" for the rule of its kind


@dataclass
class MethodUses:
    """Where the tree uses a method name: modules calling ``self.<name>(`` and modules defining a
    ``<name>`` (outlined: only those with a class deriving from the helper's are parsed), modules
    calling it on another object (test code aside; named, parsed one by one as they are checked)."""

    callers: list[Outline] = field(default_factory=list)
    definers: list[Outline] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # dotted module names, in the order to check them


@dataclass
class Thread:
    """W threaded into a helper: the edits, the calls that hand W in, and the calls that need not
    (each passes a forward mode other than TARGET_VERIFY)."""

    edits: list[Edit]
    where: list[str]
    exempt: list[str]


def is_test_module(relpath: str) -> bool:
    """Test code (``sglang/test/...``, ``tests/``, ``test_*.py``): its calls are not on a serving path."""
    parts = relpath.replace("\\", "/").split("/")
    name = parts[-1]
    return bool({"test", "tests"} & set(parts[:-1])) or name.startswith("test_") or name.endswith("_test.py")


def _statement_of(model: ModuleModel, node: ast.AST) -> ast.stmt | None:
    while node is not None and not isinstance(node, ast.stmt):
        node = model.parent(node)
    return node


def _per_statement(model: ModuleModel, what: str, stmt: ast.stmt, make):
    """``make()``, once per statement: a statement holding a thousand reads of C (a 2,900-term sum) is
    walked once, not once per read."""
    known = model.__dict__.setdefault("_per_statement", {})
    key = (what, id(stmt))
    if key not in known:
        known[key] = make()
    return known[key]


def _top_level_span(model, line: int) -> tuple[int, int]:
    """(first, last) line of the module-level statement holding ``line``, decorators included."""
    body = model.tree.body
    i = bisect.bisect_right([s.lineno for s in body], line) - 1  # statements are in line order
    for stmt in body[max(0, i - 1): i + 2]:  # a decorated def starts before its `def` line
        first, last = statement_lines(stmt)
        if first <= line <= last:
            return first, last
    return 0, 0
