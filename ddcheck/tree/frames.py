"""The tree's functions as they run: which function a frame runs, and standing one in everywhere.

Used where the tree's own code cannot go on here: ``ddcheck config`` answers a model's config
reader for a hub id (:mod:`ddcheck.config.treerun`), and the smoke harness stands in for a
function that needs a module which could not be imported on this machine (a JIT kernel's loader
that looks for its C++ sources and compiler), then runs the path again.
"""

from __future__ import annotations

import sys
from typing import Any

from ddcheck.tree.standins import is_stand_in


def function_of(frame) -> tuple[Any, str, Any] | None:
    """(owner, name, function) for the function running in ``frame``: a module's or a class's."""
    code, g = frame.f_code, frame.f_globals
    for name, value in list(g.items()):
        if runs_code(value, code):
            return g, name, value
        if isinstance(value, type) and not is_stand_in(value) and value.__module__ == g.get("__name__"):
            for attr, member in list(vars(value).items()):
                fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                if runs_code(fn, code):
                    return value, attr, member
    return None


def runs_code(fn: Any, code) -> bool:
    """``fn`` is the function of ``code``, or a decorator's wrapper of it (``functools.wraps``)."""
    for _ in range(8):
        if fn is None or is_stand_in(fn):
            return False
        if getattr(fn, "__code__", None) is code:
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def replace_everywhere(package: str, owner: Any, member: Any, replacement: Any) -> list[tuple[Any, str, Any]]:
    """Put ``replacement`` wherever ``member`` is held: in ``owner`` (a class, or a module's
    globals) and in every loaded module of ``package`` (``from x import f`` copies); returns what
    was replaced, as (holder, key, old value), to put back."""
    saved: list[tuple[Any, str, Any]] = []
    holders = [owner] if isinstance(owner, type) else \
        [vars(m) for n, m in list(sys.modules.items()) if n.split(".")[0] == package and m is not None] + [owner]
    for holder in holders:
        items = holder.items() if isinstance(holder, dict) else vars(holder).items()
        for key, value in list(items):
            if value is member and not any(h is holder and k == key for h, k, _ in saved):
                saved.append((holder, key, value))
                if isinstance(holder, dict):
                    holder[key] = replacement
                else:
                    setattr(holder, key, replacement)
    return saved


def put_back(saved: list[tuple[Any, str, Any]]) -> None:
    for holder, key, value in reversed(saved):
        if isinstance(holder, dict):
            holder[key] = value
        else:
            setattr(holder, key, value)
