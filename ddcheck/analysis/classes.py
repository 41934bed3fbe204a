"""Which function a call on the verify path runs: a method of the class or of a class the tree derives
from it, a module function, or one imported from another module of the tree."""

from __future__ import annotations

import ast

from .module import FunctionInfo, ModuleModel, Outline
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

    def _deriving(self, outlines: list[Outline], base_module: Outline, base: str) -> list[ModuleModel]:
        """The modules, parsed, of those ``outlines`` other than ``base_module`` that have a class
        deriving from ``base``: only there can ``self.<name>(...)`` resolve to ``base``'s method."""
        out = []
        for o in outlines:
            if o.relpath != base_module.relpath and any(self._derives(o, c, base_module, base) for c in o.class_bases):
                m = self.load_module(o.module)
                if m is not None and m.source.relpath == o.relpath:
                    out.append(m)
        return out

    def _outline(self, module: str) -> Outline | None:
        if self.outline_of is not None:
            return self.outline_of(module)
        m = self.load_module(module)
        return m.outline if m is not None else None

    def _derives(self, module: Outline, cls: str, base_module: Outline, base: str, depth: int = 0) -> bool:
        """``cls`` (of ``module``) has ``base`` (of ``base_module``) among its ancestors, within the
        depth :meth:`method_of` looks."""
        if depth > 8:
            return False
        for b in module.class_bases.get(cls, []):
            if b in module.class_bases:
                if (module.relpath == base_module.relpath and b == base) \
                        or self._derives(module, b, base_module, base, depth + 1):
                    return True
                continue
            imp = module.imports.get(b)
            other = self._outline(imp[0]) if imp and imp[1] else None
            if other is not None and ((other.relpath == base_module.relpath and imp[1] == base)
                                      or self._derives(other, imp[1], base_module, base, depth + 1)):
                return True
        return False

    def method_of(self, model: ModuleModel, cls: str, name: str, needs_c: bool = False,
                  depth: int = 0) -> tuple[ModuleModel, FunctionInfo] | None:
        """``cls.name`` as Python finds it: the class, then its bases in order, those imported from
        other modules of the tree included (mixins)."""
        f = model.functions.get(f"{cls}.{name}")
        if f is not None:
            return model, f
        if depth > 8:
            return None
        for base in model.class_bases.get(cls, []):
            if base in model.class_bases:
                hit = self.method_of(model, base, name, needs_c, depth + 1)
            else:
                imp = model.imports.get(base)
                other = self.load_module(imp[0], needs_c) if imp and imp[1] else None
                hit = self.method_of(other, imp[1], name, needs_c, depth + 1) if other is not None else None
            if hit is not None:
                return hit
        return None
