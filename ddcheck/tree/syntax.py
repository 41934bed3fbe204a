"""Small readers of Python syntax shared by every floor that reads the tree's code."""

from __future__ import annotations

import ast


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for Name/Attribute chains, with calls rendered as ``f()``; else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Call):
        base = dotted(node.func)
        return None if base is None else f"{base}()"
    return None
