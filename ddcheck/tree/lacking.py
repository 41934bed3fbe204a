"""Names a tree's import asks of an installed package that this machine's version of it lacks.

``from triton.runtime.cache import default_cache_dir`` in a tree written for an older Triton stops the
whole module here (``ImportError: cannot import name``), and every module that imports it: the
name-level twin of a module that cannot be imported here, which a stand-in module answers
(:class:`ddcheck.tree.runtime._StandInFinder`). The tree's modules import through
:func:`tree_import`: where such an import is not one the tree guards (``try: ... except
ImportError:``, a probe of what the package has, which sees the truth), the names the package lacks
are recorded stand-ins for that statement alone; the package itself is untouched, so ``hasattr``
and ``getattr(x, n, default)`` on it still see what it has.
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from typing import Any, Callable

from ddcheck.tree.standins import StandInModule, stand_in

TREE_IMPORT, LACKING_FILE = "__import__", __file__  # the frame of :func:`tree_import`'s wrapper
_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(
        (k.id if isinstance(k, ast.Name) else k.attr if isinstance(k, ast.Attribute) else None)
        in _CATCHES_IMPORT_ERROR for k in kinds)


def guarded_lines(module: ast.Module) -> set[int]:
    """The lines of import statements that a ``try`` of their own scope guards against ImportError."""
    out: set[int] = set()

    def visit(node: ast.AST, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                visit(child, False)  # its body runs when called, outside the try that defined it
            elif isinstance(child, ast.Try | getattr(ast, "TryStar", ast.Try)):
                catches = any(_catches_import_error(h) for h in child.handlers)
                for stmt in child.body:
                    visit_stmt(stmt, guarded or catches)
                for part in (*child.handlers, *child.orelse, *child.finalbody):
                    visit_stmt(part, guarded)
            else:
                visit_stmt(child, guarded)

    def visit_stmt(node: ast.AST, guarded: bool) -> None:
        if guarded and isinstance(node, (ast.Import, ast.ImportFrom)):
            out.add(node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            visit(node, False)
        else:
            visit(node, guarded)

    visit(module, False)
    return out


class Lacking(types.ModuleType):
    """What one ``from package import ...`` statement of the tree is handed: the package's names as
    they are, and a recorded stand-in for each it asked for and lacks."""

    def __init__(self, real: types.ModuleType, missing: dict[str, Any]):
        super().__init__(real.__name__)
        self.__dict__.update(missing)
        self.__dict__["_ddcheck_real"] = real

    def __getattr__(self, attr: str):
        return getattr(self.__dict__["_ddcheck_real"], attr)


def tree_import(in_tree: Callable[[str], bool], guarded: Callable[[str, int], bool], package: str,
                usage, lacked: list[str], where: Callable[[types.FrameType], str]):
    """The ``__import__`` of the tree's modules (see the module docstring); ``lacked`` gets a line per
    name stood in for."""
    real_import = builtins.__import__

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        named = getattr(module, "__name__", None) if isinstance(module, types.ModuleType) else None
        if not fromlist or level or not isinstance(named, str) or isinstance(module, (StandInModule, Lacking)) \
                or named.split(".")[0] == package:
            return module  # not an installed package's module (sys.modules may hold any object): as it is
        missing = [n for n in fromlist if isinstance(n, str) and n != "*" and not _has(module, n)
                   and f"{named}.{n}" not in sys.modules]
        if not missing:
            return module
        frame = sys._getframe(1)
        if not in_tree(frame.f_code.co_filename) or guarded(frame.f_code.co_filename, frame.f_lineno):
            return module  # Python says it as it is: ImportError, which the tree expects here
        for n in missing:
            lacked.append(f"{named}.{n} ({_version(module)} has no such name; imported at {where(frame)})")
        return Lacking(module, {n: stand_in(f"{named}.{n}", usage) for n in missing})

    return __import__


def _has(module: types.ModuleType, name: str) -> bool:
    """``hasattr``, where a lazy module's own ``__getattr__`` may raise anything: then the import statement
    finds out as Python would (the name counts as there)."""
    try:
        return hasattr(module, name)
    except Exception:  # noqa: BLE001 - the module's own error, met again by the import statement
        return True


def _version(module: types.ModuleType) -> str:
    top = module.__name__.split(".")[0]
    try:
        from importlib.metadata import version

        return f"the {top} {version(top)} installed here"
    except Exception:  # noqa: BLE001 - a package with no distribution of its name
        return f"the {top} installed here"
