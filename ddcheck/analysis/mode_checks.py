"""The tree's forward modes as the engine asks them: its ForwardMode table, and which helpers test the
forward mode themselves (and so decide their own verify path)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from ddcheck.tree.modes import ModeTable
from ddcheck.tree.names import FORWARD_BATCH_MODULE as FORWARD_MODE_MODULE
from ddcheck.analysis.exprs import is_mode_check
from ddcheck.analysis.module import FunctionInfo, ModuleModel


class Modes:
    """The facts of forward modes. ``mode_table``: the tree model's table (None, or it answering None: read
    from the tree's forward-batch module through ``load_module``, else upstream's)."""

    def __init__(self, load_module: Callable[..., ModuleModel | None],
                 mode_table: Callable[[], ModeTable | None] | None = None) -> None:
        self._load, self._mode_table = load_module, mode_table
        self._checked: dict[int, bool] = {}  # function node id -> it tests the forward mode

    @cached_property
    def table(self) -> ModeTable:
        """The target's own ForwardMode predicates (parsed on first use), else upstream's."""
        table = self._mode_table() if self._mode_table is not None else None
        if table is None:
            model = self._load(FORWARD_MODE_MODULE)
            table = ModeTable.from_module(model.tree, model.source.display) if model is not None else None
        return table or ModeTable()

    def checked(self, model: ModuleModel, func: FunctionInfo) -> bool:
        """A helper that tests the forward mode itself decides its own verify path."""
        hit = self._checked.get(id(func.node))
        if hit is None:
            # a mode test names a mode (`forward_mode.is_*()`, `ForwardMode.X`): most helpers' text does not
            hit = self._checked[id(func.node)] = model.spans(func.node, "mode", fold=True) \
                and is_mode_check(func.node.body)
        return hit
