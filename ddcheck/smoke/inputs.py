"""The verify input a backend is handed (``forward_batch.spec_info``) at a batch's width: an instance of the
tree's own class, built at the site the launch's worker reaches, or nothing (the path is then not judged:
a stand-in without the tree's class would take other branches of a backend that asks what it is)."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ddcheck.smoke.handed import recorded_instance
from ddcheck.smoke.loader import Trace
from ddcheck.tree.names import WIDTH_FIELDS


class InputUnavailable(Exception):
    """The tree has no class for the verify input this path's backend gets, or it does not build here (why)."""


@dataclass
class TreeInput:
    """The verify input of one case (a width at a C): the tree's class and where the launch builds it."""

    cls: str = ""  # the class's name ("": the tree has none for this case, ``why`` says so)
    module: str = ""  # the module defining it
    fields: list[str] = field(default_factory=list)
    where: str = ""  # the worker's call (path:line); for a probe, the class (path:line)
    mask_from: Any = None  # the tree's mask builder the worker passes ``custom_mask`` from (worker.MaskSource)
    site: Any = None  # the worker's call (verify_call.WorkerCall), its keywords evaluated per batch
    launch: dict[str, Any] = field(default_factory=dict)  # the case's speculative values, the backend's launch
    chain: bool = False  # the worker sets no mask of its own: its draft is a chain (the batch is one)
    # the tree's graph runner for this case: {"width", "at", "gate_at"} (worker.CaptureFacts), "source"
    capture: dict[str, Any] = field(default_factory=dict)
    probe: bool = False  # no drafter of the tree builds this width: --budget's probe
    why: str = ""  # why there is no class, when ``cls`` is empty


def tree_verify_input(cls: type, width: int, custom_mask: torch.Tensor | None, trace: Trace, label: str,
                      given: dict[str, Any] | None = None, batch: dict[str, Callable[[], Any]] | None = None,
                      unevaluated: frozenset[str] = frozenset()) -> Any:
    """An instance of the tree's own verify-input class (its ``__init__``/``__post_init__`` run, so
    ``spec_input_type`` and its methods are the tree's), holding this batch's width and ``custom_mask``.
    A keyword the tree's worker passes is its value, evaluated for this batch (``given``); one it passes
    that could not be evaluated (``unevaluated``), and a parameter without a default, is the batch's own
    value under the parameter's name (``batch``: positions, seq_lens, ...), else the class's default, else
    None; one the worker does not pass keeps the class's default. Attribute reads after construction are
    recorded."""
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        required = {f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
    else:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        required = {p.name for p in params if p.default is inspect.Parameter.empty and p.name in names}
    # what the batch is, where the class has no default or the worker's value could not be had here
    plain = {"topk": 1, "spec_steps": max(1, width - 1), "tree_budget": width - 1, "budget": width - 1}
    own = {**{k: (lambda v=v: v) for k, v in plain.items()}, **(batch or {})}
    kwargs = {n: own[n]() if n in own else None for n in names if n in required or n in unevaluated and n in own}
    kwargs.update({n: v for n, v in (given or {}).items() if n in names})
    kwargs.update({n: width for n in WIDTH_FIELDS if n in names})  # the batch's width, whatever the worker's
    if "custom_mask" in names and not ("custom_mask" in (given or {}) and given["custom_mask"] is None):
        # the batch's mask laid out as the worker's (its builder's, or filled before verify as a class's
        # prepare step does); one the worker passes as None stays None
        kwargs["custom_mask"] = custom_mask
    return recorded_instance(cls, kwargs, trace, label)
