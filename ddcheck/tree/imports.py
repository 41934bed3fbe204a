"""How Python resolves ``from .x import y`` in a module: one definition, for the scan's module model
(``analysis/module.py``) and the tree model (``tree/modules.py``). Plain string work, importing nothing."""

from __future__ import annotations


def package_of(module: str, is_package: bool) -> str:
    """The module's ``__package__``: itself for a package's ``__init__``, else its parent."""
    return module if is_package else module.rsplit(".", 1)[0] if "." in module else ""


def absolute(package: str, level: int, module: str | None) -> str:
    """The module ``from {'.' * level}{module} import ...`` names when written in ``package``."""
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    up = level - 1  # one dot is the package itself, each further dot one parent up
    parts = parts[: len(parts) - up] if up else parts
    return ".".join(p for p in [*parts, module or ""] if p)
