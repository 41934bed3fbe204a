"""What the tree's start-up leaves behind besides its objects: the environment it propagates.

SGLang's ``ServerArgs.__post_init__`` copies some settings into the environment for the modules
imported later (``os.environ["SGLANG_ENABLE_TORCH_COMPILE"] = "1" if self.enable_torch_compile
else "0"``, 0.4.10 server_args.py:620), and some modules read them at import with
``os.environ[...]``. Where ``__post_init__`` cannot run here, those assignments are found in the
tree's source and their expressions evaluated, as the tree's own code, against the server args.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Any

from ddcheck.tree.sources import SourceTree
from ddcheck.tree.modules import TreeModules


@dataclass(frozen=True)
class EnvAssignment:
    name: str
    expr: str  # the right-hand side, as the tree writes it
    line: int


def env_assignments(tree: SourceTree, module: str) -> list[EnvAssignment]:
    """``os.environ["NAME"] = expr`` statements of a tree module, in source order."""
    hit = TreeModules.of(tree).module(module)
    if hit is None:
        return []
    out = []
    for node in ast.walk(hit[1]):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            if ast.unparse(target.value) in ("os.environ", "environ") and isinstance(target.slice, ast.Constant) \
                    and isinstance(target.slice.value, str):
                out.append(EnvAssignment(target.slice.value, ast.unparse(node.value), node.lineno))
    return sorted(out, key=lambda a: a.line)


def propagate_env(assignments: list[EnvAssignment], namespace: dict[str, Any], server_args: Any) -> dict[str, str]:
    """Evaluate each assignment's expression with ``self`` = ``server_args`` in ``namespace`` (the
    module's globals) and set the variable where the environment does not already hold it; returns
    what was set. An expression that needs more than that is skipped."""
    done: dict[str, str] = {}
    for a in assignments:
        if a.name in os.environ or a.name in done:
            continue
        try:
            value = eval(a.expr, dict(namespace), {"self": server_args, "server_args": server_args})  # noqa: S307
        except Exception:  # noqa: BLE001 - this statement needs what only the real start-up has
            continue
        if isinstance(value, str):
            os.environ[a.name] = done[a.name] = value
    return done
