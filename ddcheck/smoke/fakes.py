"""Fakes for the objects the backend is handed: model runner, forward batch, KV pool, layer and
verify input. Each is a :class:`~ddcheck.smoke.loader.Recording`, so the report lists exactly
which attributes a release reads, and a read of something not faked fails with its name rather
than returning a guess.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch

from ddcheck.smoke.batch import Shape, VerifyBatch
from ddcheck.smoke.loader import Trace, Recording, smoke_model_config, tree_class
from ddcheck.tree import names
from ddcheck.tree.models import ModelConfig
from ddcheck.tree.names import FP4_KV_CACHE_MODULE, MODEL_CONFIG_MODULE, RADIX_ATTENTION_MODULE, WIDTH_FIELDS


def kv_pool(batch: VerifyBatch, trace: Trace) -> Recording:
    """One-layer MHA token-to-KV pool over the batch's buffers."""
    k_buf, v_buf = batch.k_buffer, batch.v_buffer

    def set_kv_buffer(layer, loc, k, v, k_scale=None, v_scale=None, **_):
        # the tree's KVWriteLoc (0.5.16+) carries the per-token location as ``loc``; a stand-in's record
        # carries it first
        loc = getattr(loc, "loc", None) if not isinstance(loc, torch.Tensor) and hasattr(loc, "loc") else \
            getattr(loc, "args", (loc,))[0]
        k_buf[loc] = k.reshape((-1,) + k_buf.shape[1:]).to(k_buf.dtype)
        v_buf[loc] = v.reshape((-1,) + v_buf.shape[1:]).to(v_buf.dtype)

    return Recording(
        "token_to_kv_pool", trace,
        get_key_buffer=lambda layer_id: k_buf, get_value_buffer=lambda layer_id: v_buf,
        get_kv_buffer=lambda layer_id: (k_buf, v_buf), get_v_head_dim=lambda: v_buf.shape[-1],
        set_kv_buffer=set_kv_buffer, start_layer=0, dtype=k_buf.dtype, store_dtype=k_buf.dtype,
        page_size=1, layer_num=1, size=k_buf.shape[0],
        # an unquantized cache: attention reads it as stored (0.5.16+ flashinfer-based backends ask)
        get_kv_cache_quant_method=lambda: Recording(
            "kv_cache_quant_method", trace, name="none", describe_attention_accesses=lambda *a: "plain",
            resolve_attention_access=lambda *a, **k: Recording("kv access", trace, kind=_plain_access(),
                                                               scale_recipe=None)),
    )


def model_runner(batch: VerifyBatch, shape: Shape, num_draft_tokens: int, device: str, trace: Trace,
                 pool: Recording, server_args: Any = None, tree: Any = None, spec_algorithm: Any = None) -> Recording:
    """A target-model runner configured with ``speculative_num_draft_tokens = C``; ``server_args``:
    the tree's own ServerArgs for this launch (:meth:`SglangImporter.server_args`); ``spec_algorithm``:
    the tree's own algorithm member of the launch (else one that answers as EAGLE)."""
    attn_arch = _attr_of_stand_in(MODEL_CONFIG_MODULE, "AttentionArch", "MHA")
    server_args = server_args if server_args is not None else Recording(
        "model_runner.server_args", trace,
        speculative_num_draft_tokens=num_draft_tokens, speculative_num_steps=max(1, num_draft_tokens - 1),
        speculative_eagle_topk=1, speculative_algorithm="EAGLE", triton_attention_num_kv_splits=8,
        triton_attention_split_tile_size=None, disable_cuda_graph=False, chunked_prefill_size=8192,
        enable_deterministic_inference=False, page_size=1, kv_cache_dtype="auto",
        enable_dp_attention=False, attention_backend="triton", disable_chunked_prefix_cache=True,
        is_embedding=False, disable_radix_cache=False, enable_prefill_cp=False,
        multi_item_scoring_delimiter=None, disable_piecewise_cuda_graph=True, dllm_algorithm=None,
        enable_mis=False, enable_two_batch_overlap=False,
        get_attention_backends=lambda: ("triton", "triton"),
    )
    # the smoke model's config.json, as the tree's readers see a model's config (absent keys are absent)
    hf_config = ModelConfig("model_runner.model_config.hf_config", smoke_model_config(shape), "the smoke model")
    model_config = Recording(
        "model_runner.model_config", trace, tree_class(None, names.MODEL_CONFIG_CLASS, tree),
        attention_arch=attn_arch, num_attention_heads=shape.num_q_heads,
        get_num_kv_heads=lambda *a: shape.num_kv_heads,
        get_max_num_attention_heads=lambda: shape.num_q_heads,
        context_len=shape.max_context_len, is_encoder_decoder=False, head_dim=shape.head_dim, dtype=shape.dtype,
        v_head_dim=shape.head_dim, swa_v_head_dim=shape.head_dim,
        num_key_value_heads=shape.num_kv_heads, is_hybrid_swa=False, is_local_attention_model=False,
        hidden_size=shape.num_q_heads * shape.head_dim, is_multimodal=False,
        # MLA backends' dimensions (their metadata does not depend on them)
        kv_lora_rank=shape.head_dim * 2, qk_nope_head_dim=shape.head_dim, qk_rope_head_dim=shape.head_dim // 2,
        scaling=shape.head_dim ** -0.5,
        hf_config=hf_config, hf_text_config=hf_config,
    )
    req_to_token_pool = Recording("req_to_token_pool", trace, size=shape.max_bs, req_to_token=batch.req_to_token)
    return Recording(
        "model_runner", trace, tree_class(None, names.MODEL_RUNNER_CLASS, tree),
        # 0.5.19+: kv_index_translator is built by the tree's own ModelRunner.init_kv_index_translator
        req_to_token_pool=req_to_token_pool, token_to_kv_pool=pool,
        token_to_kv_pool_allocator=Recording(
            "token_to_kv_pool_allocator", trace, tree_class(None, names.TOKEN_ALLOCATOR_CLASS, tree),
            get_kvcache=lambda: pool, page_size=1, size=pool.size),
        server_args=server_args, model_config=model_config, sliding_window_size=None,
        hybrid_gdn_config=None, kimi_linear_config=None, device=device,
        gpu_id=torch.device(device).index or 0, is_draft_worker=False, page_size=1,
        dtype=shape.dtype, kv_cache_dtype=shape.dtype, linear_attn_model_spec=None,
        decode_num_tokens_per_req=lambda: num_draft_tokens,
        spec_algorithm=spec_algorithm if spec_algorithm is not None else Recording(
            "model_runner.spec_algorithm", trace, is_dspark=lambda: False, is_eagle=lambda: True,
            is_ddtree=lambda: False, is_frozen_kv_mtp=lambda: False),
        attn_cp_size=1, attention_chunk_size=None, kv_cache_dtype_str="auto", prefill_aware_swa=False,
        prefill_attention_backend_str="triton", decode_attention_backend_str="triton",
        model=Recording("model_runner.model", trace, modules=lambda: []),
        max_running_requests=shape.max_bs, tp_size=1,
        ps=Recording("model_runner.ps", trace, attn_cp_size=1, tp_size=1),
    )


def layer(shape: Shape, trace: Trace) -> Recording:
    """A RadixAttention-like decoder self-attention layer (no soft-cap, no window, no sinks)."""
    attn_type = _attr_of_stand_in(RADIX_ATTENTION_MODULE, "AttentionType", "DECODER")
    return Recording(
        "layer", trace,
        layer_id=0, tp_q_head_num=shape.num_q_heads, tp_k_head_num=shape.num_kv_heads,
        tp_v_head_num=shape.num_kv_heads, qk_head_dim=shape.head_dim, v_head_dim=shape.head_dim,
        head_dim=shape.head_dim, scaling=1.0 / math.sqrt(shape.head_dim), logit_cap=0.0,
        logit_capping_method="tanh", is_cross_attention=False, attn_type=attn_type,
        k_scale=None, v_scale=None, k_scale_float=None, v_scale_float=None,
        sliding_window_size=-1, xai_temperature_len=-1, use_irope=False,
    )


def verify_input(width: int, custom_mask: torch.Tensor | None, trace: Trace, label: str,
                 fields: list[str] | None = None) -> Recording:
    """An EagleVerifyInput-like spec_info: per-step width under both its old and new names.

    With ``fields`` (a tree's own verify-input class), it carries exactly that class's fields: the
    width, mask and topk where the class has them, None for the others (what the backend reads of
    those is listed in the report), so a backend that dispatches on ``hasattr(spec_info, ...)``
    takes the path it takes for that class."""
    known = dict(draft_token_num=width, num_tokens_per_req=width, custom_mask=custom_mask, topk=1,
                 spec_steps=max(1, width - 1), kv_indptr=None, kv_indices=None, capture_hidden_mode=None,
                 positions=None, ragged_verify_layout=None)
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
    import dataclasses
    import inspect

    known = dict(draft_token_num=width, num_tokens_per_req=width, custom_mask=custom_mask, topk=1,
                 spec_steps=max(1, width - 1), tree_budget=width - 1, budget=width - 1)
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

    class Recorded(cls):  # noqa: D401 - the tree's class, reads recorded once built
        def __getattribute__(self, name: str):
            if not name.startswith("__") and object.__getattribute__(self, "__dict__").get("_ddcheck_armed"):
                trace.reads.setdefault(label, set()).add(name)
            return super().__getattribute__(name)

        def __getattr__(self, name: str):
            if not name.startswith("__"):
                trace.missing.setdefault(label, set()).add(name)
            raise AttributeError(f"{label} has no attribute {name!r}")

    Recorded.__name__ = Recorded.__qualname__ = cls.__name__
    obj = Recorded(**kwargs)
    obj.__dict__["_ddcheck_armed"] = True
    return obj


def forward_batch(batch: VerifyBatch, mode: Any, spec_info: Recording, pool: Recording, trace: Trace,
                  label: str = "forward_batch", spec_algorithm: Any = None) -> Recording:
    """A TARGET_VERIFY ForwardBatch: seq_lens are the prefix lengths, extend_* are unset; ``spec_algorithm``:
    the launch's algorithm, the tree's own member (else the class's default answers)."""
    launch = {} if spec_algorithm is None else {"spec_algorithm": spec_algorithm}
    return Recording(
        label, trace, tree_class(names.FORWARD_BATCH_MODULE, names.FORWARD_BATCH_CLASS), **launch,
        batch_size=batch.bs, forward_mode=mode, spec_info=spec_info,
        req_pool_indices=batch.req_pool_indices, seq_lens=batch.seq_lens,
        seq_lens_sum=int(batch.seq_lens.sum()), seq_lens_cpu=batch.seq_lens.cpu(),
        out_cache_loc=batch.out_cache_loc, token_to_kv_pool=pool, encoder_lens=None,
        extend_seq_lens=None, extend_prefix_lens=None, extend_start_loc=None,
        extend_seq_lens_cpu=None, extend_prefix_lens_cpu=None, extend_num_tokens=None,
        positions=_positions(batch), num_token_non_padded=None, dcp_kv_mask=None,
        kv_loc_plan=Recording(f"{label}.kv_loc_plan", trace, req_pool_indices=batch.req_pool_indices),
        out_cache_loc_is_physical=False,
        mha_one_shot=False, attn_attend_prefix_cache=False,
        req_to_token_pool=Recording(f"{label}.req_to_token_pool", trace, req_to_token=batch.req_to_token),
        input_ids=torch.zeros(batch.out_cache_loc.numel(), dtype=torch.int64, device=batch.seq_lens.device),
    )


def _plain_access():
    """``KVCacheAttentionAccessKind.PLAIN`` as the loaded tree sees it (the backend compares with it)."""
    return _attr_of_stand_in(FP4_KV_CACHE_MODULE,
                             "KVCacheAttentionAccessKind", "PLAIN")


def _positions(batch) -> torch.Tensor:
    """Each draft token's position: its request's prefix length plus its index in the request."""
    width = batch.out_cache_loc.numel() // max(1, batch.bs)
    steps = torch.arange(width, device=batch.seq_lens.device)
    return (batch.seq_lens.to(torch.int64)[:, None] + steps[None, :]).flatten()


def _attr_of_stand_in(module: str, cls: str, member: str) -> Any:
    """``module.cls.member`` as the loaded tree sees it (a stand-in unless provided)."""
    import importlib

    return getattr(getattr(importlib.import_module(module), cls), member)


def planned_views(backend: Any, fields) -> None:
    """flashinfer's wrappers are stand-ins here (its kernels cannot run): for a contract field read
    through ``...wrapper.planned``, give that wrapper the arguments of its last ``plan`` (or
    ``begin_forward``) call, by flashinfer's parameter names: what its kernels would have run on."""
    from ddcheck.backends import PLAN_PARAMETERS
    from ddcheck.contract import read_field
    from ddcheck.tree.standins import is_stand_in, last_call

    for path in fields:
        head, sep, _ = path.partition(".planned.")
        if not sep:
            continue
        wrapper = read_field(backend, head)
        if not is_stand_in(wrapper):
            continue
        kind = type.__getattribute__(wrapper, "__dict__")["_ddcheck_name"].removesuffix("()").rsplit(".", 1)[-1]
        for method in ("plan", "begin_forward"):
            call = last_call(getattr(wrapper, method))
            if call is not None:
                args, kwargs = call
                planned = SimpleNamespace(**dict(zip(PLAN_PARAMETERS.get(kind, ()), args)), **kwargs)
                type.__setattr__(wrapper, "planned", planned)
                break
