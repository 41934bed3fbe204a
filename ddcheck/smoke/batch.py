"""A DDTree-shaped TARGET_VERIFY batch and its reference attention.

Each request has its own prefix length, its KV at shuffled pool slots, and a random tree of
W = budget + 1 nodes (node 0 is the root, node i's parent is drawn from 0..i-1). The verify input's
custom mask is laid out per request as W x (prefix + W) booleans -- prefix columns all visible,
then the tree's ancestor-or-self relation -- which is the layout SGLang's tree builder writes and
the Triton extend kernel reads through ``mask_indptr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ddcheck.tree.names import OUT_CACHE_LOC


@dataclass
class Shape:
    """Model-ish sizes. Small on CPU (Triton interpreter), realistic on a GPU."""

    num_q_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 32
    dtype: torch.dtype = torch.float32
    # Graph-state buffers are sized from these (mask: max_bs * C * (max_context_len + C) cells), so
    # keep the context long relative to the batch, as in a real deployment.
    max_context_len: int = 1024
    pool_size: int = 1024
    max_bs: int = 8


@dataclass
class VerifyBatch:
    width: int
    prefix_lens: list[int]
    parents: list[list[int]]
    req_pool_indices: torch.Tensor  # [bs] int64
    seq_lens: torch.Tensor  # [bs] int64, prefix lengths (target-verify convention)
    out_cache_loc: torch.Tensor  # [bs*W] int64, pool slots of the draft tokens
    custom_mask: torch.Tensor  # flat bool, sum_r W*(prefix_r + W)
    tree_mask: torch.Tensor  # [bs, W, W] bool, ancestor-or-self
    req_to_token: torch.Tensor  # [max_bs, max_context_len] int32
    k_buffer: torch.Tensor  # [pool, Hkv, D] prefix KV filled, draft slots zero
    v_buffer: torch.Tensor
    q: torch.Tensor  # [bs*W, Hq*D]
    k: torch.Tensor  # [bs*W, Hkv, D]
    v: torch.Tensor
    ref: torch.Tensor | None = None  # [bs*W, Hq, D] float64, see reference()
    # name -> (store, n): the batch's own tensors are views of the first n rows of a store with spare
    # rows after them, so a launch laid out wider than the batch stays in memory the harness owns
    pads: dict[str, tuple[torch.Tensor, int]] = field(default_factory=dict)
    pad_sentinels: dict[str, torch.Tensor] = field(default_factory=dict)  # each store's spare rows as built
    chain: bool = False  # each request's nodes form a chain (see make_batch)

    @property
    def bs(self) -> int:
        return len(self.prefix_lens)

    @property
    def num_tokens(self) -> int:
        return self.bs * self.width

    def pad_writes(self) -> dict[str, int]:
        """{buffer: rows of its spare region changed since the batch was built}, for those written; the
        spare rows are put back, so the next path starts from the same sentinels."""
        out = {}
        for name, (store, n) in self.pads.items():
            before = self.pad_sentinels[name]
            rows = changed_rows(store[n:], before)
            if rows:
                out[name] = rows
                store[n:] = before
        return out


def random_tree(width: int, gen: torch.Generator) -> list[int]:
    """Parent of each node (root's is -1); node i's parent is uniform over 0..i-1."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, width)]


def ancestor_mask(parents: list[int]) -> torch.Tensor:
    """[W, W] bool: row i sees j iff j is i or an ancestor of i."""
    w = len(parents)
    mask = torch.zeros(w, w, dtype=torch.bool)
    for i in range(w):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parents[j]
    return mask


def changed_rows(region: torch.Tensor, before: torch.Tensor) -> int:
    """Rows (entries of the first dimension) of ``region`` that differ from ``before`` (NaN equals NaN)."""
    if region.numel() == 0:
        return 0
    same = region == before
    if region.is_floating_point():
        same |= torch.isnan(region) & torch.isnan(before)
    return int((~same.reshape(region.shape[0], -1).all(dim=1)).sum())


def make_batch(width: int, prefix_lens: list[int], shape: Shape, device: str, seed: int,
               pad_rows: int = 0, pad_mask: int = 0, chain: bool = False) -> VerifyBatch:
    """Build the batch. ``pad_rows`` spare rows back q/k/v and ``out_cache_loc`` (zeros: slot 0 is the
    padding slot), ``pad_mask`` spare entries the mask (False), so a kernel launched with a per-request
    width larger than the batch's reads and writes harness-owned memory, not past the tensors; the
    spare regions are kept as built (``pad_sentinels``) so writes into them can be counted
    (:meth:`VerifyBatch.pad_writes`). The random draws do not depend on the padding. ``chain``: each
    request's nodes form a chain (what a worker that passes no mask verifies, attended causally)."""
    gen = torch.Generator().manual_seed(seed)
    bs = len(prefix_lens)
    if bs > shape.max_bs:
        raise ValueError(f"batch of {bs} exceeds max_bs {shape.max_bs}")
    if max(prefix_lens) + width > shape.max_context_len:
        raise ValueError("prefix + width exceeds max_context_len")
    total = sum(prefix_lens) + bs * width
    if total + 1 > shape.pool_size:
        raise ValueError("pool too small for the batch")

    # Slot 0 is SGLang's padding slot; everything else is handed out in a shuffled order so a
    # kernel that assumes contiguous KV reads the wrong keys.
    slots = (torch.randperm(shape.pool_size - 1, generator=gen) + 1)[:total]
    req_pool_indices = torch.randperm(shape.max_bs, generator=gen)[:bs]
    req_to_token = torch.zeros(shape.max_bs, shape.max_context_len, dtype=torch.int32)
    out_cache_loc, cursor = [], 0
    for r, p in enumerate(prefix_lens):
        row = slots[cursor:cursor + p + width]
        cursor += p + width
        req_to_token[req_pool_indices[r], : p + width] = row.to(torch.int32)
        out_cache_loc.append(row[p:])

    parents = [random_tree(width, gen) for _ in range(bs)]  # drawn either way: the same q/k/v for a chain
    if chain:
        parents = [list(range(-1, width - 1)) for _ in range(bs)]
    tree_mask = torch.stack([ancestor_mask(p) for p in parents])
    custom_mask = torch.cat([
        torch.cat([torch.ones(width, p, dtype=torch.bool), tree_mask[r]], dim=1).flatten()
        for r, p in enumerate(prefix_lens)
    ])

    hq, hkv, d = shape.num_q_heads, shape.num_kv_heads, shape.head_dim

    def rnd(*size):
        return torch.randn(*size, generator=gen, dtype=torch.float32)

    k_buffer = torch.zeros(shape.pool_size, hkv, d)
    v_buffer = torch.zeros(shape.pool_size, hkv, d)
    for r, p in enumerate(prefix_lens):
        prefix_slots = req_to_token[req_pool_indices[r], :p].long()
        k_buffer[prefix_slots] = rnd(p, hkv, d)
        v_buffer[prefix_slots] = rnd(p, hkv, d)

    n = bs * width
    pads: dict[str, tuple[torch.Tensor, int]] = {}

    def padded(name: str, t: torch.Tensor, spare: int, dtype=None) -> torch.Tensor:
        store = torch.cat([t, torch.zeros(spare, *t.shape[1:], dtype=t.dtype)]) if spare else t
        store = store.to(device=device, dtype=dtype or t.dtype)
        if spare:
            pads[name] = (store, t.shape[0])
        return store[: t.shape[0]]

    q, k, v = rnd(n, hq * d), rnd(n, hkv, d), rnd(n, hkv, d)
    batch = VerifyBatch(
        width=width, prefix_lens=list(prefix_lens), parents=parents,
        req_pool_indices=req_pool_indices.to(device), seq_lens=torch.tensor(prefix_lens, device=device),
        out_cache_loc=padded(OUT_CACHE_LOC, torch.cat(out_cache_loc), pad_rows),
        custom_mask=padded("custom_mask", custom_mask, pad_mask), tree_mask=tree_mask,
        req_to_token=req_to_token.to(device),
        k_buffer=k_buffer.to(device=device, dtype=shape.dtype),
        v_buffer=v_buffer.to(device=device, dtype=shape.dtype),
        q=padded("q", q, pad_rows, shape.dtype), k=padded("k", k, pad_rows, shape.dtype),
        v=padded("v", v, pad_rows, shape.dtype), pads=pads, chain=chain,
    )
    batch.pad_sentinels = {name: store[m:].clone() for name, (store, m) in pads.items()}
    return batch


def reference(batch: VerifyBatch, shape: Shape, scaling: float) -> torch.Tensor:
    """Explicit masked softmax in float64, on the batch's device: [bs*W, Hq, D].

    Reads the prefix KV from the pool before the backend writes the draft tokens' KV into it, and
    uses the same (already rounded) q/k/v the kernel sees, so only the kernel's arithmetic differs.
    """
    hq, hkv, d, w = shape.num_q_heads, shape.num_kv_heads, shape.head_dim, batch.width
    q = batch.q.detach().double().view(-1, hq, d)
    k_ext, v_ext = batch.k.double(), batch.v.double()
    kb, vb = batch.k_buffer.double(), batch.v_buffer.double()
    r2t = batch.req_to_token.cpu()
    out = torch.empty(batch.num_tokens, hq, d, dtype=torch.float64, device=q.device)
    group = hq // hkv
    for r, p in enumerate(batch.prefix_lens):
        slots = r2t[int(batch.req_pool_indices[r]), :p].long().to(q.device)
        rows = slice(r * w, (r + 1) * w)
        keys = torch.cat([kb[slots], k_ext[rows]])  # [p+W, Hkv, D]
        vals = torch.cat([vb[slots], v_ext[rows]])
        visible = torch.cat([torch.ones(w, p, dtype=torch.bool), batch.tree_mask[r]], dim=1).to(q.device)
        for h in range(hq):
            scores = q[rows, h] @ keys[:, h // group].T * scaling  # [W, p+W]
            scores = scores.masked_fill(~visible, float("-inf"))
            out[rows, h] = torch.softmax(scores, dim=-1) @ vals[:, h // group]
    return out.cpu()
