"""Serving a set of top-level packages from a meta-path finder, for the length of a ``with`` block.

Both ``ddcheck smoke`` and ``ddcheck config`` run selected files of a target tree under the target's
own module names (``sglang.srt...``). While they do, whatever this process already had imported under
those names is set aside, and it is put back, untouched, afterwards.
"""

from __future__ import annotations

import sys
import types


class SwappedImports:
    """Mixin for a ``MetaPathFinder``: ``with finder:`` installs it first on ``sys.meta_path`` and hides
    the modules of ``namespaces`` (top-level names) until the block ends."""

    namespaces: tuple[str, ...] = ()

    def __enter__(self):
        self._swapped: dict[str, types.ModuleType] = {}
        for name in list(sys.modules):
            if name.split(".")[0] in self.namespaces:
                self._swapped[name] = sys.modules.pop(name)
        # First, after any finder that must see every import first (the guard's, ``ddcheck_first``), so
        # a guarded process also instruments the modules served here.
        at = max((i + 1 for i, f in enumerate(sys.meta_path) if getattr(f, "ddcheck_first", False)), default=0)
        sys.meta_path.insert(at, self)
        return self

    def __exit__(self, *exc) -> None:
        sys.meta_path.remove(self)
        for name in list(sys.modules):
            if name.split(".")[0] in self.namespaces:
                del sys.modules[name]
        sys.modules.update(self._swapped)
