"""Wrap attention backends' verify-metadata entry points as sglang imports their modules.

After the backend computed its target-verify metadata -- ``init_forward_metadata`` (eager), the
replay entry point (``init_forward_metadata_replay_cuda_graph`` before 0.5.14,
``init_forward_metadata_out_graph(in_capture=False)`` after) -- and before any kernel reads it, the
metadata is checked against the batch with the verify contract. Nothing is checked while a graph
is captured (no host sync inside a capture): the capture's metadata is remembered, and what a replay
runs (the captured scalars, the tensors replay refilled) is checked when replay fills it.
"""

from __future__ import annotations

import atexit
import copy
import functools
import importlib.abc
import json
import os
import sys
import threading
import time
from typing import Any

from ddcheck.contract import backends
from ddcheck.contract import Violation, check
from ddcheck.guard import GuardViolation, layout_of
from ddcheck.tree.names import (ATTENTION_PACKAGE, CAPTURE_CUDA_GRAPH as OLD_CAPTURE, INIT_FORWARD_METADATA as EAGER,
                                  OUT_GRAPH, REPLAY_CUDA_GRAPH as OLD_REPLAY)
from ddcheck.tree.names import SPECULATIVE_NUM_DRAFT_TOKENS

PREFIX = ATTENTION_PACKAGE + "."
# Check the first FIRST verify steps of each (backend, path), then every EVERY-th. One check costs
# 0.08-0.19 ms on an H200 (docs/guard-overhead-h200.txt, bench/guard_overhead.py), 0.1-0.8% of a
# 32-layer attention-only verify step: every 16th keeps it near 0.05% at worst while a bad path is
# still seen within 16 steps.
FIRST, EVERY = 16, 16


def _is_verify(mode: Any) -> bool:
    test = getattr(mode, "is_target_verify", None)
    try:
        return bool(test()) if callable(test) else False
    except Exception:  # noqa: BLE001 - a mode we cannot read is not judged
        return False


class _Replayed:
    """The backend as a replayed graph sees it: the captured metadata object (scalars as captured,
    tensors refilled in place by replay); everything else is the backend's."""

    def __init__(self, backend: Any, metadata: Any):
        self._backend, self.forward_metadata = backend, metadata

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


class Guard:
    def __init__(self, mode: str = "raise", every: int = EVERY, first: int = FIRST, log_path: str | None = None,
                 stream=None):
        if mode not in ("raise", "warn"):
            raise ValueError(f"guard mode must be raise or warn, not {mode!r}")
        self.mode, self.every, self.first = mode, max(1, every), max(0, first)
        self.log_path, self.stream = log_path, stream
        self.steps: dict[tuple[str, str], int] = {}
        self.checked = 0
        self.counts: dict[tuple[str, str, str], int] = {}
        self.captured: dict[tuple[int, int], Any] = {}
        self.logged = False
        self._local = threading.local()

    # -- sampling and reporting
    def _sampled(self, cls: str, path: str) -> bool:
        n = self.steps[(cls, path)] = self.steps.get((cls, path), 0) + 1
        return n <= self.first or n % self.every == 0

    def judge(self, backend: Any, path: str, owner: Any, layout, graph: bool) -> list[Violation]:
        spec = backends.of_object(backend)
        if spec is None or layout is None:
            return []
        self.checked += 1
        violations = check(owner, spec.contract_fields(graph), layout).violations
        if violations:
            self._report(backend, path, layout, violations)
        return violations

    def _report(self, backend: Any, path: str, layout, violations: list[Violation]) -> None:
        name = type(backend).__name__
        c = next((getattr(backend, a) for a in (SPECULATIVE_NUM_DRAFT_TOKENS, "num_draft_tokens")
                  if isinstance(getattr(backend, a, None), int)), None)
        if not self.logged and self.log_path:
            self.logged = True
            record = {"backend": name, "path": path, "W": layout.width, "C": c, "seq_lens": list(layout.seq_lens),
                      "violations": [v.to_dict() for v in violations], "pid": os.getpid(), "time": time.time()}
            with open(self.log_path, "a", encoding="utf-8") as fh:  # one line per process's first violation
                fh.write(json.dumps(record) + "\n")
        for v in violations:
            key = (name, path, v.field)
            if key not in self.counts and self.mode == "warn":
                print(f"ddcheck guard (warn): {name} {path}: {v}; W = {layout.width}, C = {c}",
                      file=self.stream or sys.stderr, flush=True)
            self.counts[key] = self.counts.get(key, 0) + 1
        if self.mode == "raise":
            raise GuardViolation(explain(name, path, layout.width, c, violations))

    def summary(self) -> str:
        if not self.counts:
            return f"ddcheck guard: {self.checked} verify step(s) checked, no violation"
        lines = [f"ddcheck guard: {sum(self.counts.values())} violation(s) in {self.checked} checked verify step(s):"]
        lines += [f"  {n} x {b} {p} {f}" for (b, p, f), n in sorted(self.counts.items())]
        return "\n".join(lines)

    # -- the wrapped entry points
    def _outermost(self, backend: Any) -> bool:
        """A subclass's entry point calling its base's: only the outermost call checks."""
        active = self._local.__dict__.setdefault("active", set())
        if id(backend) in active:
            return False
        active.add(id(backend))
        return True

    def _done(self, backend: Any) -> None:
        self._local.__dict__.setdefault("active", set()).discard(id(backend))

    def wrap(self, cls: type) -> None:
        """Wrap ``cls``'s own metadata entry points (inherited ones are wrapped on their class)."""
        for name, after in ((EAGER, self._after_eager), (OLD_CAPTURE, self._after_old_capture),
                            (OLD_REPLAY, self._after_old_replay), (OUT_GRAPH, self._after_out_graph)):
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "__ddcheck_guard__", False):
                setattr(cls, name, self._wrapped(fn, after))

    def _wrapped(self, fn, after):
        guard = self

        @functools.wraps(fn)
        def entry(backend, *args, **kwargs):
            outer = guard._outermost(backend)
            try:
                result = fn(backend, *args, **kwargs)
                if outer:
                    after(backend, fn, args, kwargs)
                return result
            finally:
                if outer:
                    guard._done(backend)

        entry.__ddcheck_guard__ = True
        return entry

    def _after_eager(self, backend, fn, args, kwargs) -> None:
        fb = _arg(fn, args, kwargs, "forward_batch")
        if fb is None or not _is_verify(getattr(fb, "forward_mode", None)) or \
                not self._sampled(type(backend).__name__, "eager"):
            return
        self.judge(backend, "eager", backend, layout_of(backend, fb), graph=False)

    def _after_old_capture(self, backend, fn, args, kwargs) -> None:
        if _is_verify(_arg(fn, args, kwargs, "forward_mode")):
            self.captured[(id(backend), int(_arg(fn, args, kwargs, "bs")))] = copy.copy(backend.forward_metadata)

    def _after_old_replay(self, backend, fn, args, kwargs) -> None:
        if not _is_verify(_arg(fn, args, kwargs, "forward_mode")) or \
                not self._sampled(type(backend).__name__, "replay"):
            return
        bs = int(_arg(fn, args, kwargs, "bs"))
        md = self.captured.get((id(backend), bs), backend.forward_metadata)
        layout = layout_of(backend, seq_lens=_arg(fn, args, kwargs, "seq_lens"), bs=bs,
                           req_pool_indices=_arg(fn, args, kwargs, "req_pool_indices"),
                           spec_info=_arg(fn, args, kwargs, "spec_info"))
        self.judge(backend, "replay", _Replayed(backend, md), layout, graph=True)

    def _after_out_graph(self, backend, fn, args, kwargs) -> None:
        fb = _arg(fn, args, kwargs, "forward_batch")
        if fb is None or not _is_verify(getattr(fb, "forward_mode", None)):
            return
        key = (id(backend), int(getattr(fb, "batch_size", 0) or len(fb.seq_lens)))
        if _arg(fn, args, kwargs, "in_capture"):
            self.captured[key] = copy.copy(backend.forward_metadata)
            return
        if self._sampled(type(backend).__name__, "replay"):
            md = self.captured.get(key, backend.forward_metadata)
            self.judge(backend, "replay", _Replayed(backend, md), layout_of(backend, fb), graph=True)


def explain(backend: str, path: str, width: int, c, violations: list[Violation]) -> str:
    more = f" (and {len(violations) - 1} more field(s))" if len(violations) > 1 else ""
    budget = f" (DDTree budget {c - 1})" if isinstance(c, int) else ""
    return (f"ddcheck guard: {backend} target-verify metadata ({path}) is not laid out for this batch's "
            f"width W = {width} (C = {c}): {violations[0]}{more}. What to do: run `ddcheck fix` on this "
            f"sglang, or use an attention backend whose verify path is per step, or choose the budget that "
            f"makes W == C{budget}.")


def _arg(fn, args, kwargs, name: str) -> Any:
    """The argument ``name`` of a call of ``fn`` (a method; ``args`` without self)."""
    if name in kwargs:
        return kwargs[name]
    params = _positional(fn)
    i = params.index(name) if name in params else -1
    return args[i] if 0 <= i < len(args) else None


@functools.lru_cache(maxsize=None)
def _positional(fn) -> tuple[str, ...]:
    """Parameter names after self, read once per entry point (the wrappers run on every step)."""
    import inspect

    try:
        return tuple(inspect.signature(fn).parameters)[1:]
    except (TypeError, ValueError):
        return ()


def instrument(module: Any, guard: Guard) -> int:
    """Wrap every backend class ``module`` defines that ddcheck has a table for; returns how many."""
    n = 0
    for value in list(vars(module).values()):
        spec = backends.of_class(value) if isinstance(value, type) and value.__module__ == module.__name__ else None
        if spec is not None and spec.live:
            guard.wrap(value)
            n += 1
    return n


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, guard: Guard):
        self._inner, self._guard = inner, guard

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        instrument(module, self._guard)

    def __getattr__(self, name):  # get_source, get_filename... for inspect and tracebacks
        return getattr(self._inner, name)


class Finder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: finds sglang's attention modules with the other finders and
    instruments them once executed."""

    ddcheck_first = True  # ddcheck.tree.isolation keeps it ahead of the finders it installs

    def __init__(self, guard: Guard):
        self.guard = guard

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(PREFIX):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, self.guard)
                return spec
        return None


_ACTIVE: Guard | None = None


def install(mode: str = "raise", every: int = EVERY, log_path: str | None = None, at_exit: bool = True) -> Guard:
    """Turn the guard on in this process (idempotent); returns it."""
    global _ACTIVE
    if _ACTIVE is not None:
        return _ACTIVE
    guard = _ACTIVE = Guard(mode, every, log_path=log_path)
    sys.meta_path.insert(0, Finder(guard))
    for name, module in list(sys.modules.items()):
        if name.startswith(PREFIX) and module is not None:
            instrument(module, guard)
    if at_exit:
        atexit.register(lambda: guard.checked and print(guard.summary(), file=sys.stderr, flush=True))
    return guard


def uninstall() -> None:
    """Stop instrumenting new imports (classes already wrapped stay wrapped)."""
    global _ACTIVE
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, Finder)]
    _ACTIVE = None


def active() -> Guard | None:
    return _ACTIVE


