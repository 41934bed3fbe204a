"""Which function a call on the verify path runs: a method of the class or of a class the tree derives
from it, a module function, or one imported from another module of the tree."""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cached_property

from ddcheck.tree.hierarchy import Hierarchy, Outline
from ddcheck.analysis.module import FunctionInfo, ModuleModel
from ddcheck.analysis.verify_path import FunctionPass


class Classes:
    """The fact of which function a call runs, over the tree's classes (:attr:`hierarchy`, built on first
    use). ``load_module``: (dotted module name, needs_c=False) -> its model; ``outline_of``: a module's
    outline, which another process may have parsed (None: from ``load_module``)."""

    def __init__(self, load_module: Callable[..., ModuleModel | None],
                 outline_of: Callable[[str], Outline | None] | None = None) -> None:
        self._load, self._outline_of = load_module, outline_of

    @cached_property
    def hierarchy(self) -> Hierarchy:
        """The tree's classes over the modules' outlines (another process's where it sent them): the
        one resolver, :class:`~ddcheck.tree.hierarchy.Hierarchy`, that config and smoke ask too."""
        return Hierarchy(self._outline)

    def resolve(self, fp: FunctionPass, call: ast.Call, needs_c: bool = False) -> tuple[ModuleModel, FunctionInfo, bool] | None:
        """(model, function, bound as a method of the caller's class) that ``call`` in ``fp`` runs, or None."""
        model, func = fp.model, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and fp.func.cls:
                hit = self.method_of(model, fp.func.cls, func.attr, needs_c)
                return (hit[0], hit[1], True) if hit else None
            imp = model.imports.get(func.value.id)
            if imp:
                other = self._load(imp[0] if imp[1] is None else f"{imp[0]}.{imp[1]}", needs_c)
                f = other.functions.get(func.attr) if other else None
                return (other, f, False) if f else None
            return None
        if isinstance(func, ast.Name):
            local = model.nested(fp.func, func.id)
            if local is not None:
                return (model, local, False)
            if model.functions.get(func.id) is not None:
                return (model, model.functions[func.id], False)
            imp = model.imports.get(func.id)
            if imp and imp[1]:
                other = self._load(imp[0], needs_c)
                f = other.functions.get(imp[1]) if other else None
                return (other, f, False) if f else None
        return None

    def deriving(self, outlines: list[Outline], base_module: Outline, base: str) -> list[ModuleModel]:
        """The modules, parsed, of those ``outlines`` other than ``base_module`` that have a class
        deriving from ``base``: only there can ``self.<name>(...)`` resolve to ``base``'s method."""
        out, ref = [], self.hierarchy.ref(base_module, base)
        for o in outlines:
            if o.relpath != base_module.relpath and self.hierarchy.subclasses(o, ref):
                m = self._load(o.module)
                if m is not None and m.source.relpath == o.relpath:
                    out.append(m)
        return out

    def _outline(self, module: str) -> Outline | None:
        if self._outline_of is not None:
            return self._outline_of(module)
        m = self._load(module)
        return m.outline if m is not None else None

    def derives(self, module: Outline, cls: str, base_module: Outline, base: str) -> bool:
        """``cls`` (of ``module``) has ``base`` (of ``base_module``) among its ancestors."""
        return self.hierarchy.derives(self.hierarchy.ref(module, cls), self.hierarchy.ref(base_module, base))

    def method_of(self, model: ModuleModel, cls: str, name: str,
                  needs_c: bool = False) -> tuple[ModuleModel, FunctionInfo] | None:
        """``cls.name`` as Python finds it: the class, then its bases in method resolution order, those
        imported from other modules of the tree included (mixins). With ``needs_c``, None where the
        method found lies in a module that cannot read C."""
        owner = self.hierarchy.method(self.hierarchy.ref(model.outline, cls), name)
        if owner is None:
            return None
        other = model if owner.relpath == model.source.relpath else self._load(owner.module, needs_c)
        f = other.functions.get(f"{owner.name}.{name}") if other is not None and other.source.relpath == owner.relpath else None
        return (other, f) if f is not None else None
