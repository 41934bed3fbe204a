"""Stand-ins for what the target tree imports but cannot run on this machine.

A stand-in is a class (so it can be a base class, an annotation, the second argument of
``isinstance``) whose every attribute is another stand-in. Using one is never silent: each call is
recorded in :class:`Usage` with the tree line that made it, and so is each use as a number. What a
call returns is a fresh stand-in that remembers the arguments it was handed, so a verdict can judge
what a kernel that cannot run here *would have been handed*. Applied as a decorator, a stand-in
returns the function it decorates (its effect, which cannot run here, is skipped and recorded).

Modelled on Sphinx's ``sphinx.ext.autodoc.mock`` (``_MockObject``, ``_MockModule``): stand-ins are
falsy and empty (``len`` 0, nothing to iterate), as Sphinx's mocks are, so a feature probe such as
``if flag:`` takes the path of a feature that is off.
"""

from __future__ import annotations

import abc
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

# An answerer's "no answer": the stand-in answers the call itself.
ABSENT = object()


@dataclass
class Usage:
    """What the tree did with stand-ins: calls (name, tree line), uses as numbers, modules stood in."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    numbers: list[tuple[str, str]] = field(default_factory=list)
    decorators: list[tuple[str, str]] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    where: Callable[[], str] = lambda: "?"
    # "import" while a tree module's own code runs at import, "start-up" while the tree's start-up
    # code runs (its ServerArgs, its process groups): calls then are not the run's
    phase: str = "run"
    import_calls: int = 0
    startup_calls: list[tuple[str, str]] = field(default_factory=list)
    # ``answer(name, args, kwargs)``: a value for a call that ddcheck can answer as the real code would
    # (a local model folder's config: :mod:`ddcheck.tree.models`), else ``ABSENT``; answered calls
    # are kept in ``answers`` (name, tree line).
    answer: Callable[[str, tuple, dict], Any] | None = None
    answers: list[tuple[str, str]] = field(default_factory=list)

    def called(self, name: str) -> None:
        if self.phase == "import":  # a registry filled at import (AutoConfig.register): not the run's
            self.import_calls += 1
            return
        (self.startup_calls if self.phase == "start-up" else self.calls).append((name, self.where()))

    def run_calls(self) -> list[tuple[str, str]]:
        return self.calls

    def as_number(self, name: str) -> None:
        self.numbers.append((name, self.where()))

    def decorated(self, name: str) -> None:
        self.decorators.append((name, self.where()))

    def summary(self) -> list[str]:
        """One line per distinct stand-in used, with the first tree line that used it."""
        out: dict[str, str] = {}
        for what, items in (("called", self.calls), ("used as a number (1, or False when compared)", self.numbers)):
            for name, where in items:
                out.setdefault(f"{name} ({what})", where)
        return [f"{k} at {v}" for k, v in out.items()]


class StandInMeta(abc.ABCMeta):
    """The type of stand-ins. A real class of the tree may derive from a stand-in (``class
    X(StandIn, Base)``): it is built and instantiated as usual; only the stand-in itself, when
    called, records the call and returns another stand-in."""

    def __new__(mcls, name, bases, ns, **kwargs):
        return super().__new__(mcls, name, bases, ns)

    def __init__(cls, name, bases, ns, **kwargs):
        super().__init__(name, bases, ns)

    def _own(cls, key: str, default: Any = None) -> Any:
        return type.__getattribute__(cls, "__dict__").get(key, default)

    def __call__(cls, *args, **kwargs):
        name = cls._own("_ddcheck_name")
        if name is None:  # a real class deriving from a stand-in
            return super().__call__(*args, **kwargs)
        usage: Usage = cls._own("_ddcheck_usage")
        if len(args) == 1 and not kwargs and (isinstance(args[0], (types.FunctionType, type))):
            usage.decorated(name)  # @standin: the function stays as written
            return args[0]
        if usage.answer is not None:
            value = usage.answer(name, args, kwargs)
            if value is not ABSENT:
                usage.answers.append((name, usage.where()))
                return value
        usage.called(name)
        type.__setattr__(cls, "_ddcheck_last", (args, kwargs))
        result = stand_in(f"{name}()", usage)
        type.__setattr__(result, "_ddcheck_args", (args, kwargs))
        return result

    def __getattr__(cls, attr: str):
        if attr.startswith("__") or cls._own("_ddcheck_name") is None:
            raise AttributeError(attr)
        child = stand_in(f"{cls._own('_ddcheck_name')}.{attr}", cls._own("_ddcheck_usage"))
        type.__setattr__(cls, attr, child)
        return child

    def __getitem__(cls, item):
        return cls  # Generic[...]-style subscripts in annotations evaluated at import

    def __setitem__(cls, key, value) -> None:  # a registry the tree fills at import
        pass

    def register(cls, *args, **kwargs):  # ABCMeta's own would shadow a stand-in ``X.register(...)``
        return StandInMeta.__getattr__(cls, "register")(*args, **kwargs)

    def __get_pydantic_core_schema__(cls, source, handler):  # a field typed with a stand-in takes anything
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __bool__(cls) -> bool:
        return cls._own("_ddcheck_name") is None

    def __len__(cls) -> int:
        return 0

    def __iter__(cls):
        return iter(())

    def __contains__(cls, item) -> bool:
        return False

    def __index__(cls) -> int:
        if cls._own("_ddcheck_name") is None:
            raise TypeError(f"{cls.__name__} is a class, not a number")
        cls._own("_ddcheck_usage").as_number(cls._own("_ddcheck_name"))
        return 1

    __int__ = __index__

    def __float__(cls) -> float:
        return float(cls.__index__())

    def _compared(cls, other) -> bool:  # ``standin > 0.5``: recorded, and false, as for a feature that is off
        if cls._own("_ddcheck_name") is None:
            return NotImplemented
        cls._own("_ddcheck_usage").as_number(cls._own("_ddcheck_name"))
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _compared

    def __repr__(cls) -> str:
        name = cls._own("_ddcheck_name")
        return f"<ddcheck stand-in {name}>" if name else type.__repr__(cls)

    def _derived(cls, text: str):
        """A value computed from a stand-in (``KERNEL_PATH / "csrc"``, ``DEFAULT_INCLUDE + [...]``) is
        another stand-in: recorded as a use of the first, never a number ddcheck made up."""
        if cls._own("_ddcheck_name") is None:
            return NotImplemented
        cls._own("_ddcheck_usage").as_number(cls._own("_ddcheck_name"))
        return stand_in(text, cls._own("_ddcheck_usage"))

    def __or__(cls, other):  # ``StandIn | None`` in annotations evaluated at import
        return cls

    __ror__ = __or__


def _operator(symbol: str, reflected: bool):
    def op(cls, other):
        name = type.__getattribute__(cls, "__dict__").get("_ddcheck_name")
        text = f"({other!r} {symbol} {name})" if reflected else f"({name} {symbol} {other!r})"
        return cls._derived(text)

    return op


for _name, _symbol in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"), ("floordiv", "//"),
                       ("mod", "%"), ("pow", "**")):
    setattr(StandInMeta, f"__{_name}__", _operator(_symbol, False))
    setattr(StandInMeta, f"__r{_name}__", _operator(_symbol, True))


def stand_in(name: str, usage: Usage) -> type:
    """A new stand-in called ``name`` (dotted, as the tree spells it)."""
    return StandInMeta(name.rsplit(".", 1)[-1], (), {"_ddcheck_name": name, "_ddcheck_usage": usage,
                                                      "__module__": name.rsplit(".", 1)[0],
                                                      "__init__": _accept_any})


def _accept_any(self, *args, **kwargs) -> None:
    """A stand-in base's constructor: whatever the tree's subclass hands it up."""


def is_stand_in(value: Any) -> bool:
    return isinstance(value, StandInMeta) and type.__getattribute__(value, "__dict__").get("_ddcheck_name") is not None


def last_call(value: Any) -> tuple[tuple, dict] | None:
    """The arguments a stand-in (a method of a stand-in object, say) was last called with."""
    return type.__getattribute__(value, "__dict__").get("_ddcheck_last") if is_stand_in(value) else None


class StandInModule(types.ModuleType):
    """A module that cannot be imported here: every attribute is a stand-in; it is a package, so
    its sub-modules are stand-in modules too."""

    def __init__(self, name: str, usage: Usage):
        super().__init__(name)
        self.__path__ = []
        self.__dict__["_ddcheck_usage"] = usage

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        sub = f"{self.__name__}.{attr}"
        if sub in sys.modules:
            return sys.modules[sub]
        value = stand_in(sub, self.__dict__["_ddcheck_usage"])
        setattr(self, attr, value)
        return value

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<ddcheck stand-in module {self.__name__}>"
