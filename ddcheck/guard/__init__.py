"""``ddcheck guard``: the verify contract checked inside a running SGLang process.

:func:`check_verify_metadata` is the public check (a backend that has just computed its verify
metadata, and the batch); :mod:`ddcheck.guard.hook` wraps the backends' metadata entry points as
sglang's attention modules are imported; :mod:`ddcheck.guard.startup` turns it on in every Python
process that starts with ``DDCHECK_GUARD`` set and this package's ``site`` directory on PYTHONPATH
(``ddcheck guard -- CMD`` sets both).
"""

from __future__ import annotations

from typing import Any

from ddcheck.contract import backends
from ddcheck.contract import VerifyLayout, Violation, check
from ddcheck.tree.names import WIDTH_FIELDS
from ddcheck.tree.names import PAGE_SIZE


class GuardViolation(RuntimeError):
    """A verify step whose metadata is not laid out for its width (``--mode raise``)."""


def verify_width(spec_info: Any) -> int | None:
    """W of a verify input (None when it carries none: nothing to judge)."""
    for name in WIDTH_FIELDS:
        value = getattr(spec_info, name, None)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None


def layout_of(backend: Any, forward_batch: Any = None, *, seq_lens=None, req_pool_indices=None, spec_info=None,
              bs: int | None = None) -> VerifyLayout | None:
    """The batch the metadata must describe, from a forward batch or a replay call's arguments."""
    spec_info = spec_info if spec_info is not None else getattr(forward_batch, "spec_info", None)
    width = verify_width(spec_info)
    if width is None:
        return None
    seq_lens = seq_lens if seq_lens is not None else getattr(forward_batch, "seq_lens", None)
    req = req_pool_indices if req_pool_indices is not None else getattr(forward_batch, "req_pool_indices", None)
    if seq_lens is None:
        return None
    bs = bs if bs is not None else getattr(forward_batch, "batch_size", None) or len(seq_lens)
    lens = tuple(int(x) for x in _host(seq_lens)[:bs])
    rows = tuple(int(x) for x in _host(req)[:bs]) if req is not None else ()
    table = getattr(backend, "req_to_token", None)
    if table is None:
        pool = getattr(backend, "req_to_token_pool", None) or getattr(forward_batch, "req_to_token_pool", None)
        table = getattr(pool, "req_to_token", None)
    page_size = getattr(backend, PAGE_SIZE, 1)
    return VerifyLayout(width, lens, rows, table, page_size if isinstance(page_size, int) and page_size > 0 else 1)


def check_verify_metadata(backend: Any, forward_batch: Any, *, graph: bool = False) -> list[Violation]:
    """The contract violations of ``backend``'s current verify metadata for ``forward_batch``.

    Call it right after the backend computed its target-verify metadata. ``graph``: the metadata is
    what a captured CUDA graph replays (fields the graph's kernels never read are not judged).
    Raises ValueError for a backend ddcheck has no table for."""
    spec = backends.of_object(backend)
    if spec is None:
        raise ValueError(f"ddcheck has no verify-contract table for {type(backend).__name__}; "
                         f"known: {', '.join(b.cls for b in backends.BACKENDS.values())}")
    layout = layout_of(backend, forward_batch)
    if layout is None:
        return []
    return check(backend, spec.contract_fields(graph), layout).violations


def _host(value: Any) -> list:
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value)
