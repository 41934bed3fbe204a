"""The tree mask as the target tree's own code builds it, for the harness's batch.

A DDTree worker hands its verify input a mask built by a function of the tree
(``custom_mask = compile_ddtree_tree(...)[2]``, found by :func:`ddcheck.tree.worker.mask_source`).
Running that function on the batch's tree — its parents, depths, visibility and unequal prefix
lengths — gives the mask in the layout the tree really produces, which the backend must read right.
Its parameters are filled by name from what the batch knows; a required parameter of another name
makes the builder unusable here (the caller says so and uses ddcheck's reference layout).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

import torch

from ddcheck.smoke.batch import VerifyBatch
from ddcheck.tree.names import OUT_CACHE_LOC, POSITIONS, REQ_POOL_INDICES, SEQ_LENS, SEQ_LENS_CPU, SEQ_LENS_SUM


class TreeMaskUnavailable(Exception):
    """The tree's mask builder cannot run on the harness's batch (the reason is the message)."""


def _depths(parents: list[int]) -> list[int]:
    d = [0] * len(parents)
    for i in range(1, len(parents)):
        d[i] = d[parents[i]] + 1
    return d


def batch_values(batch: VerifyBatch, device: str) -> dict[str, Callable[[], Any]]:
    """The batch's tree and its own tensors under the names trees give them (their builders' parameters and
    results, a verify input's fields, a forward batch's): each a function that makes the value on ``device``."""
    bs, w, dev = batch.bs, batch.width, torch.device(device)
    prefix = batch.seq_lens.to(dev)
    depths = [_depths(p) for p in batch.parents]

    def long(*shape):
        return torch.zeros(*shape, dtype=torch.long, device=dev)

    made: dict[str, Callable[[], Any]] = {
        "root_token_ids": lambda: long(bs), "bonus_tokens": lambda: long(bs),
        "node_token_ids": lambda: long(bs, w - 1),
        "node_depths": lambda: torch.tensor([d[1:] for d in depths], dtype=torch.long, device=dev),
        "parents": lambda: torch.tensor(batch.parents, dtype=torch.long, device=dev),
        "visibility": lambda: batch.tree_mask.to(dev),
        "tree_budget": lambda: w - 1, "budget": lambda: w - 1,
        "actual_tree_sizes": lambda: torch.full((bs,), w, dtype=torch.long, device=dev),
        "actual_sizes_cpu": lambda: [w] * bs, "past_lens_cpu": lambda: list(batch.prefix_lens),
        "verify_token_num": lambda: w, "max_tree_nodes": lambda: w, "draft_token_num": lambda: w,
        "build_attention_mask": lambda: True, "device": lambda: dev,
        # the batch's own tensors: a node's position is its request's prefix plus its depth in the tree
        POSITIONS: lambda: (prefix[:, None] + torch.tensor(depths, dtype=torch.long, device=dev)).flatten(),
        SEQ_LENS_CPU: lambda: batch.seq_lens.cpu(), SEQ_LENS_SUM: lambda: int(batch.seq_lens.sum()),
        REQ_POOL_INDICES: lambda: batch.req_pool_indices.to(dev), OUT_CACHE_LOC: lambda: batch.out_cache_loc,
    }
    for name in ("start_positions", "past_lengths", SEQ_LENS, "prefix_lens"):
        made[name] = lambda: prefix
    return made


def build_tree_mask(module: str, function: str, index: int | None, constants: dict[str, str],
                    batch: VerifyBatch, device: str) -> torch.Tensor:
    """Call the tree's ``module.function`` for ``batch`` (inside the smoke importer) and return the mask."""
    try:
        fn = getattr(importlib.import_module(module), function)
    except Exception as exc:  # noqa: BLE001 - reported, the harness's own mask is used instead
        raise TreeMaskUnavailable(f"{module} does not load here: {type(exc).__name__}: {exc}") from exc
    made = batch_values(batch, device)
    kwargs: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in constants:
            text = constants[p.name]
            if text.startswith("torch.") and isinstance(getattr(torch, text[6:], None), torch.dtype):
                kwargs[p.name] = getattr(torch, text[6:])
                continue
        if p.name == "dtype":
            kwargs[p.name] = torch.bool
        elif p.name in made:
            kwargs[p.name] = made[p.name]()
        elif p.default is inspect.Parameter.empty:
            raise TreeMaskUnavailable(f"{function}() needs `{p.name}`, which ddcheck cannot make for its batch")
    try:
        out = fn(**kwargs)
    except Exception as exc:  # noqa: BLE001
        raise TreeMaskUnavailable(f"{function}() failed on the batch: {type(exc).__name__}: {exc}") from exc
    mask = out[index] if index is not None else out
    if not isinstance(mask, torch.Tensor):
        raise TreeMaskUnavailable(f"{function}() gave no mask tensor (got {type(mask).__name__})")
    return mask
