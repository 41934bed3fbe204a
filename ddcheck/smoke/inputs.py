"""The verify input a backend is handed (``forward_batch.spec_info``) at a batch's width: an instance of
the tree's own verify-input class where it builds here, else a Recording with that class's fields (or,
where the tree has none, the width under both its names)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

from ddcheck.smoke.handed import recorded_instance
from ddcheck.smoke.loader import Recording, Trace
from ddcheck.tree.names import CAPTURE_HIDDEN_MODE, DRAFT_TOKEN_NUM, NUM_TOKENS_PER_REQ, POSITIONS, WIDTH_FIELDS


def verify_input(width: int, custom_mask: torch.Tensor | None, trace: Trace, label: str,
                 fields: list[str] | None = None) -> Recording:
    """An EagleVerifyInput-like spec_info: per-step width under both its old and new names.

    With ``fields`` (a tree's own verify-input class), it carries exactly that class's fields: the
    width, mask and topk where the class has them, None for the others (what the backend reads of
    those is listed in the report), so a backend that dispatches on ``hasattr(spec_info, ...)``
    takes the path it takes for that class."""
    known = {DRAFT_TOKEN_NUM: width, NUM_TOKENS_PER_REQ: width, "custom_mask": custom_mask, "topk": 1,
             "spec_steps": max(1, width - 1), "kv_indptr": None, "kv_indices": None, CAPTURE_HIDDEN_MODE: None,
             POSITIONS: None, "ragged_verify_layout": None}
    if fields is not None:
        known = {f: known.get(f) for f in fields}
    return Recording(label, trace, **known)


def tree_verify_input(cls: type, width: int, custom_mask: torch.Tensor | None, trace: Trace, label: str,
                      given: dict[str, Any] | None = None) -> Any:
    """An instance of the tree's own verify-input class (its ``__init__``/``__post_init__`` run, so
    ``spec_input_type`` and its methods are the tree's), holding this batch's width and mask; ``given``:
    the keywords the tree's worker passes, evaluated for this batch (they win over the harness's
    values, the width and mask excepted); fields nobody has a value for are None. Attribute reads after
    construction are recorded."""
    known = {DRAFT_TOKEN_NUM: width, NUM_TOKENS_PER_REQ: width, "custom_mask": custom_mask, "topk": 1,
             "spec_steps": max(1, width - 1), "tree_budget": width - 1, "budget": width - 1}
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        required = {f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
    else:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        required = {p.name for p in params if p.default is inspect.Parameter.empty and p.name in names}
    kwargs = {n: known[n] for n in names if n in known}
    kwargs.update({n: v for n, v in (given or {}).items() if n in names and n not in WIDTH_FIELDS})
    kwargs.update({n: None for n in required if n not in kwargs})
    return recorded_instance(cls, kwargs, trace, label)
