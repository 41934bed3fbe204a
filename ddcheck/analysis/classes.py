"""Which function a call on the verify path runs: a method of the class or of a class the tree derives
from it, a module function, or one imported from another module of the tree."""

from __future__ import annotations

import ast

from ..tree.hierarchy import Hierarchy, Outline
from .module import FunctionInfo, ModuleModel
from .verify_path import FunctionPass


class ClassResolution:
    """The part of :class:`~ddcheck.analysis.engine.Engine` that resolves calls and classes."""

    def _resolve(self, fp: FunctionPass, call: ast.Call, needs_c: bool = False) -> tuple[ModuleModel, FunctionInfo, bool] | None:
        model, func = fp.model, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and fp.func.cls:
                hit = self.method_of(model, fp.func.cls, func.attr, needs_c)
                return (hit[0], hit[1], True) if hit else None
            imp = model.imports.get(func.value.id)
            if imp:
                other = self.load_module(imp[0] if imp[1] is None else f"{imp[0]}.{imp[1]}", needs_c)
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
                other = self.load_module(imp[0], needs_c)
                f = other.functions.get(imp[1]) if other else None
                return (other, f, False) if f else None
        return None

    @property
    def classes(self) -> Hierarchy:
        """The tree's classes over the modules' outlines (another process's where it sent them): the
        one resolver, :class:`~ddcheck.tree.hierarchy.Hierarchy`, that config and smoke ask too."""
        if self._classes is None:
            self._classes = Hierarchy(self._outline)
        return self._classes

    def _deriving(self, outlines: list[Outline], base_module: Outline, base: str) -> list[ModuleModel]:
        """The modules, parsed, of those ``outlines`` other than ``base_module`` that have a class
        deriving from ``base``: only there can ``self.<name>(...)`` resolve to ``base``'s method."""
        out, ref = [], self.classes.ref(base_module, base)
        for o in outlines:
            if o.relpath != base_module.relpath and self.classes.subclasses(o, ref):
                m = self.load_module(o.module)
                if m is not None and m.source.relpath == o.relpath:
                    out.append(m)
        return out

    def _outline(self, module: str) -> Outline | None:
        if self.outline_of is not None:
            return self.outline_of(module)
        m = self.load_module(module)
        return m.outline if m is not None else None

    def _derives(self, module: Outline, cls: str, base_module: Outline, base: str) -> bool:
        """``cls`` (of ``module``) has ``base`` (of ``base_module``) among its ancestors."""
        return self.classes.derives(self.classes.ref(module, cls), self.classes.ref(base_module, base))

    def method_of(self, model: ModuleModel, cls: str, name: str,
                  needs_c: bool = False) -> tuple[ModuleModel, FunctionInfo] | None:
        """``cls.name`` as Python finds it: the class, then its bases in method resolution order, those
        imported from other modules of the tree included (mixins). With ``needs_c``, None where the
        method found lies in a module that cannot read C."""
        owner = self.classes.method(self.classes.ref(model.outline, cls), name)
        if owner is None:
            return None
        other = model if owner.relpath == model.source.relpath else self.load_module(owner.module, needs_c)
        f = other.functions.get(f"{owner.name}.{name}") if other is not None and other.source.relpath == owner.relpath else None
        return (other, f) if f is not None else None
